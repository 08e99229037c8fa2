"""Normalization fusion: softmax, layer norm and RMS norm as one kernel per row, after XLA's
``SoftmaxRewriterTriton`` (``xla/service/gpu/transforms/softmax_rewriter_triton.cc``), which wraps "normalization
diamonds" in one fusion before its priority fusion runs.

A diamond is a producer ``p`` of row-shaped values, a reduce of ``p`` over the minor dimension(s), a broadcast of
the reduced values back along those dimensions and an elementwise consumer of both::

    p = f32[R,N] ...                     // the producer
    m = f32[R] reduce(p, init), dimensions={1}
    b = f32[R,N] broadcast(m), dimensions={0}
    c = f32[R,N] subtract(p, b)          // the consumer

Softmax is two diamonds in a chain (``max``, then the sum of ``exp(x - max)``), layer norm two (the mean, then the
variance), RMS norm one. Without this pass the fusion passes cut each diamond at its reduce (XLA never fuses an
expensive producer into a broadcast that reads it many times): softmax becomes four kernels that each walk the whole
array. Fused, a thread walks one row a few times while it stays in its core's cache (``xlapy/codegen/emitters/
normalization.py``).

The pass walks each computation that runs as thunks, consumers first. A row-shaped instruction that no region
claimed yet roots a candidate region, which grows backwards over its operands; an operand joins when it is

- an elementwise op (not ``map``, no side effect, no complex numbers) on row-shaped or row-space (the reduced
  shape) values,
- a reduce of a single row-shaped input over the physically minor dimensions of a row-major array by a computation
  of scalars, with a scalar constant as initial value,
- a broadcast of row-space values along the reduced dimensions (dimensions ``{0, ..., m - 1}``), or a broadcast of
  anything else that does not depend on a reduce (``gamma``, ``beta``: its operand stays outside),
- a constant scalar, or broadcasts and reshapes of one (a splat),

and every user of it is already in the region, or it is cheap to copy (a splat, a broadcast, a widening convert):
then the region gets a copy and the original stays for its other users. The row shape is the candidate root's,
its reduced dimensions those of the first reduce or broadcast back met. A region that contains a diamond (a reduce
whose value a broadcast back reads) becomes one ``kind=kLoop`` fusion; ``fusion_hero.fusion_kind_of`` calls it
``"normalization"`` (``is_normalization_computation``), so the code generator emits it with the normalization
emitter.

Rows are limited to ``MAX_ROW_BYTES`` (64 KiB of the widest row-shaped element type, at least 4 bytes): the emitter
walks a row once per reduce and once more for the outputs, and a row of each array it reads must still be in the
core's second-level cache (1 MiB and more on current x86 and Arm cores) at the next walk, with room left for the
next rows the hardware prefetches. Longer rows are left to the reduction emitter and loop fusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.fusible_ops import is_elementwise
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import has_side_effect
from xlapy.transforms.instruction_fusion import fuse_into, make_loop_fusion, thunk_computations

# The longest row (in bytes of the widest row-shaped element type) a normalization fusion walks several times.
MAX_ROW_BYTES = 64 * 1024


def _is_row_major(shape: Shape) -> bool:
    layout = shape.layout
    return layout is None or (tuple(layout.minor_to_major) == tuple(range(len(shape.dimensions) - 1, -1, -1))
                              and not layout.tiles)


def _plain_array(shape: Shape) -> bool:
    """An array of real numbers or integers in row-major order."""
    if shape.is_tuple or shape.element_type not in ELEMENT_TYPES:
        return False
    return not ELEMENT_TYPES[shape.element_type].is_complex and _is_row_major(shape)


def _is_splat(instr: HloInstruction) -> bool:
    """A scalar constant, or broadcasts and reshapes of one: the same value everywhere."""
    while instr.opcode in ("broadcast", "reshape", "bitcast"):
        instr = instr.operands[0]
    return instr.opcode == "constant" and not instr.shape.is_tuple and math.prod(instr.shape.dimensions) == 1


def _scalar_computation(computation: HloComputation) -> bool:
    return all(not i.shape.is_tuple and not i.shape.dimensions and not has_side_effect(i)
               for i in computation.instructions)


@dataclass(frozen=True)
class RowShape:
    """Row-shaped arrays have ``dimensions``; the last ``len(dimensions) - kept`` of them are reduced (a row), the
    first ``kept`` index the rows (the row-space arrays have ``dimensions[:kept]``)."""

    dimensions: tuple[int, ...]
    kept: int

    @property
    def rows(self) -> int:
        return math.prod(self.dimensions[:self.kept])

    @property
    def row_elements(self) -> int:
        return math.prod(self.dimensions[self.kept:])

    def is_row_shaped(self, shape: Shape) -> bool:
        return _plain_array(shape) and tuple(shape.dimensions) == self.dimensions

    def is_row_space(self, shape: Shape) -> bool:
        return _plain_array(shape) and tuple(shape.dimensions) == self.dimensions[:self.kept]


def row_reduce_kept(instr: HloInstruction, dimensions: tuple[int, ...]) -> int | None:
    """How many leading dimensions ``instr`` keeps when it is a reduce of one row-major array of ``dimensions``
    over its minor-most dimensions (more than one element) by a computation of scalars, from a scalar constant
    and into a row-major array; else None."""
    if instr.opcode != "reduce" or len(instr.operands) != 2 or instr.shape.is_tuple:
        return None
    operand, init = instr.operands
    if not _plain_array(operand.shape) or tuple(operand.shape.dimensions) != dimensions:
        return None
    if not _plain_array(instr.shape) or init.opcode != "constant" or init.shape.dimensions:
        return None
    reduced = sorted(instr.attr("dimensions") or ())
    rank = len(dimensions)
    if not reduced or reduced != list(range(rank - len(reduced), rank)):
        return None
    kept = rank - len(reduced)
    if math.prod(dimensions[kept:]) <= 1 or not _scalar_computation(instr.called_computations[0]):
        return None
    return kept


def _broadcast_back_kept(instr: HloInstruction, dimensions: tuple[int, ...]) -> int | None:
    """``m`` when ``instr`` broadcasts an array of ``dimensions[:m]`` along the other dimensions of ``dimensions``."""
    if instr.opcode != "broadcast" or tuple(instr.shape.dimensions) != dimensions:
        return None
    kept = len(instr.operands[0].shape.dimensions)
    if kept >= len(dimensions) or tuple(instr.attr("dimensions") or ()) != tuple(range(kept)):
        return None
    return kept if tuple(instr.operands[0].shape.dimensions) == dimensions[:kept] else None


def _elementwise(instr: HloInstruction) -> bool:
    return (is_elementwise(instr) and instr.opcode not in ("map", "constant") and not has_side_effect(instr)
            and all(_plain_array(o.shape) for o in instr.operands) and _plain_array(instr.shape))


@dataclass
class _Region:
    root: HloInstruction
    dimensions: tuple[int, ...]
    kept: int | None = None

    def __post_init__(self) -> None:
        self.members: set[HloInstruction] = {self.root}
        # Members whose operands stay outside whatever they are (broadcasts of gamma and beta).
        self.opaque: set[HloInstruction] = set()

    def shape(self) -> RowShape | None:
        return RowShape(self.dimensions, self.kept) if self.kept is not None else None


@dataclass(frozen=True)
class _Admission:
    """How an instruction joins a region: ``kept`` is the region's reduced dimensions it implies (None: no
    constraint); an ``opaque`` member's operands stay outside the region."""

    kept: int | None = None
    opaque: bool = False


def _admission(region: _Region, instr: HloInstruction) -> _Admission | None:
    """How ``instr`` may join ``region`` by its own kind (its users are checked apart), or None."""
    if _is_splat(instr):
        return _Admission()
    if not _plain_array(instr.shape) or has_side_effect(instr):
        return None
    dimensions = tuple(instr.shape.dimensions)
    if instr.opcode == "reduce":
        kept = row_reduce_kept(instr, region.dimensions)
    elif instr.opcode == "broadcast":
        kept = _broadcast_back_kept(instr, region.dimensions)
        if kept is None:
            # A broadcast of an input (a row vector, a column of per-row values): its operand stays outside.
            return _Admission(opaque=True) if dimensions == region.dimensions else None
    elif _elementwise(instr):
        row_space = region.kept is not None and dimensions == region.dimensions[:region.kept]
        return _Admission() if dimensions == region.dimensions or row_space else None
    else:
        return None
    if kept is None or (region.kept is not None and kept != region.kept):
        return None
    return _Admission(kept=kept)


def _cheap_to_copy(instr: HloInstruction, admission: _Admission) -> bool:
    """Whether a region may take a copy of ``instr`` while others keep reading the original."""
    if _is_splat(instr) or admission.opaque:
        return True
    return (instr.opcode == "convert" and instr.operands[0].opcode == "parameter"
            and ELEMENT_TYPES[instr.operands[0].shape.element_type].bit_width
            < ELEMENT_TYPES[instr.shape.element_type].bit_width)


def _grow(root: HloInstruction, order: list[HloInstruction], position: dict[HloInstruction, int],
          claimed: set[HloInstruction]) -> _Region:
    """The region ``root`` roots: the instructions before it in ``order`` (a post order) that may join
    (``_admission``) and whose users are all members (or that are cheap to copy), reached from ``root`` through
    members' operands."""
    region = _Region(root, tuple(root.shape.dimensions))
    wanted: set[HloInstruction] = set()

    def want_operands(instr: HloInstruction) -> None:
        if instr not in region.opaque or _is_splat(instr):
            wanted.update(o for o in instr.operands if o not in claimed)

    want_operands(root)
    for k in range(position[root] - 1, -1, -1):
        instr = order[k]
        if instr not in wanted:
            continue
        admission = _admission(region, instr)
        if admission is None:
            continue
        if not (all(u in region.members for u in instr.users) or _cheap_to_copy(instr, admission)):
            continue
        region.members.add(instr)
        if admission.opaque:
            region.opaque.add(instr)
        if admission.kept is not None:
            region.kept = admission.kept
        want_operands(instr)
    return region


def _has_diamond(region: _Region) -> bool:
    """Whether a reduce of the region reaches a broadcast back of the region through row-space members."""
    for instr in region.members:
        if instr.opcode != "broadcast" or instr in region.opaque or _is_splat(instr):
            continue
        pending, seen = [instr.operands[0]], set()
        while pending:
            value = pending.pop()
            if value in seen or value not in region.members:
                continue
            seen.add(value)
            if value.opcode == "reduce":
                return True
            pending.extend(value.operands)
    return False


def _row_fits(region: _Region) -> bool:
    shape = region.shape()
    if shape is None:
        return False
    widest = max(max(4, ELEMENT_TYPES[i.shape.element_type].byte_width) for i in region.members
                 if shape.is_row_shaped(i.shape))
    return shape.row_elements * widest <= MAX_ROW_BYTES


def normalization_regions(computation: HloComputation) -> list[list[HloInstruction]]:
    """The regions the pass fuses in ``computation``, each in post order (its root last)."""
    order = computation.post_order()
    position = {instr: k for k, instr in enumerate(order)}
    claimed: set[HloInstruction] = set()
    regions = []
    for k in range(len(order) - 1, -1, -1):
        root = order[k]
        if root in claimed or not _elementwise(root) or _is_splat(root):
            continue
        region = _grow(root, order, position, claimed)
        if region.kept is None or not region.shape().is_row_shaped(root.shape):  # type: ignore[union-attr]
            continue
        if not _has_diamond(region) or not _row_fits(region):
            continue
        claimed |= region.members
        regions.append(sorted(region.members, key=position.__getitem__))
    return regions


class NormalizationFusion(HloPass):
    """Wraps chains of normalization diamonds in one fusion each (see the module docstring)."""

    name = "normalization-fusion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in thunk_computations(module):
            for region in normalization_regions(computation):
                _fuse(module, region)
                changed = True
        return changed


def _fuse(module: HloModule, region: list[HloInstruction]) -> HloInstruction:
    """One ``kind=kLoop`` fusion of ``region`` (in post order, its root last); members no one else reads are
    removed."""
    root = region[-1]
    computation = root.parent
    fusion = make_loop_fusion(module, root)
    for instr in reversed(region[:-1]):
        if any(o is instr for o in fusion.operands):
            fuse_into(module, fusion, instr)
        if not instr.users and computation is not None:
            computation.remove_instruction(instr)
    return fusion


# -- what the code generator sees ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormalizationComputation:
    """A fused computation the normalization emitter writes: its roots are row-shaped; ``reduces`` are its row
    reduces, each after those it depends on; ``row_values`` maps every instruction computed once per row (the
    row-space values that depend on a reduce) to the reduces it depends on; ``broadcast_back`` are the row values
    broadcasts back read."""

    shape: RowShape
    reduces: tuple[HloInstruction, ...]
    row_values: dict[HloInstruction, frozenset[HloInstruction]]
    broadcast_back: tuple[HloInstruction, ...]


def normalization_computation(computation: HloComputation) -> NormalizationComputation | None:
    """``computation`` as the normalization emitter sees it, or None when it is not one: every root is a row-shaped
    array (one row-major shape, not a reduce's value), it has a row reduce whose value a broadcast back reads
    (through row-space values), every row reduce keeps the same dimensions, and the row-space values that depend on
    a reduce are read only by row-space elementwise ops and broadcasts back (each reader reads them at its own
    row)."""
    root = computation.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    if not roots or any(r.shape.is_tuple for r in roots):
        return None
    dimensions = tuple(roots[0].shape.dimensions)
    if not dimensions:
        return None
    order = computation.post_order()
    reduces = [i for i in order if row_reduce_kept(i, dimensions) is not None]
    kept_counts = {row_reduce_kept(i, dimensions) for i in reduces}
    if len(kept_counts) != 1:
        return None
    shape = RowShape(dimensions, kept_counts.pop())
    if any(not shape.is_row_shaped(r.shape) for r in roots):
        return None
    row_values: dict[HloInstruction, frozenset[HloInstruction]] = {}
    for instr in order:
        if instr in reduces:
            row_values[instr] = frozenset({instr})
        elif any(o in row_values for o in instr.operands):
            if instr.opcode == "broadcast" and _broadcast_back_kept(instr, dimensions) == shape.kept:
                continue
            if not (_elementwise(instr) and shape.is_row_space(instr.shape)):
                return None
            row_values[instr] = frozenset().union(*(row_values.get(o, frozenset()) for o in instr.operands))
    if any(r in row_values for r in roots):
        return None
    broadcast_back = tuple(dict.fromkeys(
        i.operands[0] for i in order
        if i.opcode == "broadcast" and i.operands[0] in row_values))
    if not broadcast_back:
        return None
    return NormalizationComputation(shape, tuple(reduces), row_values, broadcast_back)


def is_normalization_computation(computation: HloComputation) -> bool:
    """Whether the normalization emitter writes a fusion of ``computation`` (``normalization_computation``)."""
    return normalization_computation(computation) is not None


__all__ = ["MAX_ROW_BYTES", "NormalizationComputation", "NormalizationFusion", "RowShape",
           "is_normalization_computation", "normalization_computation", "normalization_regions", "row_reduce_kept"]
