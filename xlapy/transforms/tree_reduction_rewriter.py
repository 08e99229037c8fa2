"""Tree reductions: a large reduced dimension split in two, as XLA:GPU's ``TreeReductionRewriter``
(``xla/service/gpu/transforms/tree_reduction_rewriter.cc``), for the CPU's thread pool.

The reduction emitter (``xlapy/codegen/emitters/reduction.py``) computes each output element on one thread. A
reduction with few outputs and many reduced elements (``jnp.sum`` of a whole array, a column sum of four columns)
would run on one core. This pass splits the largest reduced dimension ``n`` (the minor-most of the largest) into
``[k1, k2]``, as XLA does on the GPU when a reduced dimension is too large for one block::

    r = reduce(x, init), dimensions={..., d, ...}            # x: [..., n, ...]

becomes::

    inner = reduce(reshape(x), init)                         # [..., k1, k2, ...]: k2 and the other reduced dims
    r = reduce(inner, init), dimensions={position of k1}

The inner reduction has ``k1`` times as many output elements, each reducing ``k2`` elements: independent work
for the thread pool, and rows long enough to run at the speed of memory. The outer one combines the ``k1``
partial results of each output. Both are fused separately (instruction fusion keeps a reduce from fusing into a
reduce, as XLA:GPU does) and emitted by the reduction emitter, each in its own fixed order
(``xlapy/codegen/elemental_reduce.py``): ``k1`` and ``k2`` depend on the shapes only, so the results are the same
from run to run and for any number of cores.

When ``k1`` does not divide ``n``, XLA pads ``x`` with the init value to ``k1 * k2``. A pad fused into the inner
reduction makes every read a bounds check, which the CPU's vector reads cannot take (a scalar loop, several
times slower);
here the rows take the first ``k1 * k2`` elements (``k2`` a multiple of ``ROW_ALIGNMENT``, ``k1 * k2 <= n``), the
remaining ``n - k1 * k2`` (fewer than ``k1 * (ROW_ALIGNMENT + 1)``) are reduced apart by a small reduction of a
slice, and its result is concatenated after the rows' as the outer reduction's last partial result.

Which reductions are split (the split is what XLA's GPU pass does; when and how far is the CPU's measure):

- the input has at least ``MIN_SPLIT_ELEMENTS`` elements and the output fewer than ``TARGET_ROWS``: ``k1`` is the
  largest power of two with ``k1 * outputs <= TARGET_ROWS`` and ``n / k1 >= MIN_INNER_ELEMENTS``, and at least 2;
- or the input has at least ``MIN_SPLIT_ELEMENTS`` elements and its minor dimension is kept (a column reduction,
  whatever its output's size): the emitter's column-tile form gives a block the whole rows of its kept minor
  dimensions (up to 4 KiB), so the pieces of parallel work are the indices of the kept dimensions before them,
  ``K``. When ``K`` is below ``COLUMN_PIECES``, ``k1`` is the largest power of two with ``k1 * K <=
  COLUMN_PIECES`` and ``n / k1 >= COLUMN_MIN_INNER_ROWS``, and at least 2 (f32[4096,1024] summed over its rows:
  8 pieces of 512 rows);
- ``k2 = n / k1`` when ``k1`` divides ``n``, else ``floor(n / k1)`` rounded down to a multiple of
  ``ROW_ALIGNMENT`` (whole vectors of partial accumulators);
- the input is in the default (major-to-minor) layout, so that the reshape moves no data;
- the reducer is one associative and commutative op of its two parameters (add, multiply, maximum, minimum, and,
  or, xor) and the init value a constant that is its identity (0, 1, -inf, +inf, the integer extremes, all
  bits): the init value, combined once per partial result, changes nothing, and integer, min and max results are
  bit for bit the reduction's. A float sum or product is another order of the same terms: each term goes through
  its row's order, then the outer order's (for a sum, the error bound of ``elemental_reduce.py``'s order of ``k2``
  terms, or of the remainder's, plus that of ``k1`` or ``k1 + 1`` terms);
- or the reducer is an argmax or argmin of the values and their positions (jax's, ``arg_reducer``), reducing one
  dimension, the positions an iota along it, the init values the worst value (-inf, +inf, the integer extremes)
  and position 0. The inner reduction takes the positions within its rows (an iota along ``k2``: the emitter's
  vector form applies), the outer one the positions in the whole dimension, ``k2 * row + position``, and the
  remainder's its own. Each piece yields its first NaN, else its first best value (with the value of its last
  equal one where the reducer keeps the last; a piece of worst values yields position 0, which only matters when
  every value is the worst, and then position 0 is the answer), so the outer fold over the pieces in order yields
  the sequential result, bit for bit.

Results are within the documented bound of the interpreter's (``xlapy.evaluate`` runs the module unsplit); see
``tests/transforms/test_tree_reduction_rewriter.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import non_fusion_non_composite_computations, replace_instruction

# Inputs smaller than this many elements are reduced quickly enough by one thread (4 MiB of f32: about 150 us).
MIN_SPLIT_ELEMENTS = 1 << 20
# The inner reduction's output elements aimed at: units of parallel work for the thread pool, many more than
# cores so that they balance, few enough that each is long.
TARGET_ROWS = 64
# An inner row has at least this many elements: its horizontal combination and start are amortized.
MIN_INNER_ELEMENTS = 1 << 12
# When the rows do not divide the dimension, a row is a multiple of this many elements (the largest vector of
# partial accumulators).
ROW_ALIGNMENT = 64
# A column reduction (the input's minor dimension kept) is split into at least this many pieces of whole rows of
# its kept minor dimensions (units of parallel work that read their rows contiguously), each of at least
# ``COLUMN_MIN_INNER_ROWS`` rows.
COLUMN_PIECES = 8
COLUMN_MIN_INNER_ROWS = 64

_SINGLE_OPS = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


# -- reducers ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArgReducer:
    """An argmax (``better`` "max") or argmin ("min") reducer of ``(value_a, index_a, value_b, index_b)``;
    ``value_keeps_last`` when its value output takes the later of two equal values (its index output always
    takes the smaller index)."""

    better: str
    value_keeps_last: bool


_BETTER = {"GT": ("max", True), "GE": ("max", False), "LT": ("min", True), "LE": ("min", False)}


def compare_direction(instr: HloInstruction, lhs: HloInstruction, rhs: HloInstruction,
                      directions: Sequence[str]) -> str | None:
    """The direction of ``instr`` when it is a compare of ``lhs`` with ``rhs`` in one of ``directions`` (IEEE
    order for floats: a total-order compare orders -0 before +0 and the NaNs)."""
    if (instr.opcode == "compare" and tuple(instr.operands) == (lhs, rhs) and instr.attr("direction") in directions
            and instr.attr("type") != "TOTALORDER"):
        return instr.attr("direction")
    return None


def _pair(instr: HloInstruction, opcode: str) -> tuple[HloInstruction, HloInstruction] | None:
    if instr.opcode == opcode and len(instr.operands) == 2:
        return instr.operands[0], instr.operands[1]
    return None


def arg_reducer(reducer: HloComputation, is_float_value: bool) -> ArgReducer | None:
    """``reducer`` as an argmax or argmin reducer, or None when it is not one. It must read (``a`` the
    accumulator, ``b`` the element; jax's ``_argmax``/``_argmin``)::

        better = compare(value_a, value_b), direction=GT (or GE; LT or LE for argmin)
        keep = or(better, compare(value_a, value_a), direction=NE)     // the NaN test: required for floats
        take_a = or(keep, and(compare(value_a, value_b), direction=EQ, compare(index_a, index_b), direction=LT))
        tuple(select(keep or take_a, value_a, value_b), select(take_a, index_a, index_b))

    (``take_a`` may be ``keep`` itself when ``better`` is GE or LE, the operands of ``or`` and ``and`` in either
    order). So ``b`` wins unless ``a`` is a NaN, better, or equal with a smaller index: the index is that of the
    first NaN, else of the first best value; the value is the same element's, or with ``select(keep, ...)`` and a
    strict comparison the last of the values equal to the best (-0 and +0 are equal)."""
    if len(reducer.parameters) != 4 or reducer.root.opcode != "tuple" or len(reducer.root.operands) != 2:
        return None
    value_a, index_a, value_b, index_b = reducer.parameters
    value_select, index_select = reducer.root.operands
    if (value_select.opcode != "select" or tuple(value_select.operands[1:]) != (value_a, value_b)
            or index_select.opcode != "select" or tuple(index_select.operands[1:]) != (index_a, index_b)):
        return None

    def keep_of(instr: HloInstruction) -> tuple[HloInstruction, str] | None:
        """(keep, the direction of ``better``) when ``instr`` is ``keep``."""
        if (direction := compare_direction(instr, value_a, value_b, tuple(_BETTER))) is not None:
            return (instr, direction) if not is_float_value else None  # a float reducer must test for NaN
        if (operands := _pair(instr, "or")) is None:
            return None
        for better, nan in (operands, operands[::-1]):
            direction = compare_direction(better, value_a, value_b, tuple(_BETTER))
            if direction is not None and compare_direction(nan, value_a, value_a, ("NE",)) is not None:
                return instr, direction
        return None

    take_a = index_select.operands[0]
    found = keep_of(take_a)
    has_tie_break = False
    if found is None and (operands := _pair(take_a, "or")) is not None:
        for keep, tie in (operands, operands[::-1]):
            if (found := keep_of(keep)) is not None and (tie_operands := _pair(tie, "and")) is not None:
                has_tie_break = any(
                    compare_direction(equal, value_a, value_b, ("EQ",))
                    and compare_direction(smaller, index_a, index_b, ("LT",))
                    for equal, smaller in (tie_operands, tie_operands[::-1]))
                if has_tie_break:
                    break
            found = None
    if found is None:
        return None
    keep, direction = found
    better, strict = _BETTER[direction]
    if strict and not has_tie_break:
        return None  # equal values would take the later index
    if value_select.operands[0] is take_a:
        return ArgReducer(better, False)
    if value_select.operands[0] is keep:
        return ArgReducer(better, strict)  # a non-strict `better` keeps the first of equal values, as the index does
    return None


def is_position_iota(instr: HloInstruction, dimension: int) -> bool:
    """Whether ``instr`` is an iota along ``dimension`` (or a broadcast of one onto it): element ``k`` of the row
    is ``k``."""
    if instr.opcode == "iota":
        return instr.attr("iota_dimension") == dimension
    if instr.opcode == "broadcast" and instr.operands[0].opcode == "iota":
        iota = instr.operands[0]
        mapped = list(instr.attr("dimensions") or ())
        return (iota.shape.element_type == instr.shape.element_type
                and mapped[iota.attr("iota_dimension")] == dimension)
    return False


def _scalar(instr: HloInstruction) -> object | None:
    """The value of a scalar constant, else None."""
    if instr.opcode != "constant" or instr.shape.dimensions or not isinstance(instr.literal, np.ndarray):
        return None
    return instr.literal.reshape(()).item()


def _extreme(element_type: str, which: str) -> float | int | bool:
    """The least (``"min"``) or greatest value of ``element_type``: an infinity for floats."""
    info = ELEMENT_TYPES[element_type]
    if element_type == "pred":
        return which == "max"
    if not info.is_integral:
        return math.inf if which == "max" else -math.inf
    bits = info.bit_width
    signed = not element_type.startswith("u")
    if which == "max":
        return (1 << (bits - signed)) - 1
    return -(1 << (bits - 1)) if signed else 0


def _is_identity(op: str, element_type: str, value: object) -> bool:
    info = ELEMENT_TYPES[element_type]
    if element_type == "pred":
        return bool(value) == (op in ("multiply", "minimum", "and"))
    if not info.is_integral and op in ("and", "or", "xor"):
        return False
    if op == "add" or op in ("or", "xor"):
        return value == 0
    if op == "multiply":
        return value == 1
    if op == "maximum":
        return value == _extreme(element_type, "min")
    if op == "minimum":
        return value == _extreme(element_type, "max")
    # and: every bit set
    return value == (-1 if not element_type.startswith("u") else _extreme(element_type, "max"))


def _is_real(element_type: str) -> bool:
    return element_type in ELEMENT_TYPES and not element_type.startswith("c") and element_type not in (
        "token", "tuple", "opaque")


def _single_op_reducer(reduce: HloInstruction) -> bool:
    """A reduce of one input by one associative and commutative op, from its identity."""
    if len(reduce.operands) != 2:
        return False
    reducer = reduce.called_computations[0]
    root = reducer.root
    element_type = reduce.operands[0].shape.element_type
    if (len(reducer.instructions) != 3 or root.opcode not in _SINGLE_OPS or len(root.operands) != 2
            or set(root.operands) != set(reducer.parameters) or not _is_real(element_type)):
        return False
    init = _scalar(reduce.operands[1])
    return init is not None and _is_identity(root.opcode, element_type, init)


def _arg_reduction(reduce: HloInstruction) -> ArgReducer | None:
    """An argmax or argmin of one dimension with its positions, from the worst value and position 0."""
    if len(reduce.operands) != 4 or len(reduce.attr("dimensions") or ()) != 1:
        return None
    values, positions, value_init, index_init = reduce.operands
    (dimension,) = reduce.attr("dimensions")
    value_type, index_type = values.shape.element_type, positions.shape.element_type
    if not _is_real(value_type) or value_type == "pred" or not ELEMENT_TYPES[index_type].is_integral:
        return None
    if index_type == "pred" or not is_position_iota(positions, dimension):
        return None
    form = arg_reducer(reduce.called_computations[0], not ELEMENT_TYPES[value_type].is_integral)
    if form is None or _scalar(index_init) != 0:
        return None
    worst = _extreme(value_type, "min" if form.better == "max" else "max")
    return form if _scalar(value_init) == worst else None


# -- the split ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeSplit:
    """Dimension ``dimension`` of the reduce's input (``size`` elements): its first ``outer * inner`` elements read
    as ``[outer, inner]``, the ``remainder`` after them reduced apart."""

    dimension: int
    size: int
    outer: int
    inner: int

    @property
    def remainder(self) -> int:
        return self.size - self.outer * self.inner


def _has_default_layout(shape: Shape) -> bool:
    layout = shape.layout
    return layout is None or (tuple(layout.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))
                              and not layout.tiles)


def tree_split(reduce: HloInstruction, min_split_elements: int = MIN_SPLIT_ELEMENTS, target_rows: int = TARGET_ROWS,
               min_inner_elements: int = MIN_INNER_ELEMENTS) -> TreeSplit | None:
    """How ``reduce`` is split (see the module docstring; the thresholds may be given, for small examples), or
    None when it is left alone."""
    if reduce.opcode != "reduce" or not reduce.operands:
        return None
    operand = reduce.operands[0].shape
    dims = tuple(reduce.attr("dimensions") or ())
    if not dims or not operand.is_array or any(operand.dynamic_dimensions):
        return None
    inputs = reduce.operands[:len(reduce.operands) // 2]
    if not all(_has_default_layout(i.shape) for i in inputs):
        return None
    outputs = operand.element_count // math.prod(operand.dimensions[d] for d in dims)
    if operand.element_count < min_split_elements:
        return None
    dimension = max(dims, key=lambda d: (operand.dimensions[d], d))
    size = operand.dimensions[dimension]
    if outputs < target_rows:
        limit = min(target_rows // outputs, size // min_inner_elements)
    elif operand.rank - 1 not in dims:
        # A column reduction: whole rows of the kept minor dimensions per block (the emitter's column-tile form).
        minor_run = math.prod(operand.dimensions[max(dims) + 1:])
        limit = min(COLUMN_PIECES // (outputs // minor_run), size // COLUMN_MIN_INNER_ROWS)
    else:
        return None
    if not _single_op_reducer(reduce) and _arg_reduction(reduce) is None:
        return None
    if limit < 2:
        return None
    outer = 1 << (limit.bit_length() - 1)
    inner = size // outer if size % outer == 0 else size // outer // ROW_ALIGNMENT * ROW_ALIGNMENT
    return TreeSplit(dimension, size, outer, inner)


def _new(computation: HloComputation, before: HloInstruction, opcode: str, shape: Shape,
         operands: list[HloInstruction], attributes: dict | None = None,
         called: list[HloComputation] | None = None) -> HloInstruction:
    metadata = before.attributes.get("metadata")
    attributes = dict(attributes or {})
    if metadata is not None:
        attributes["metadata"] = metadata
    return computation.add_instruction(HloInstruction(opcode, opcode, shape, operands, attributes, called),
                                       before=before)


def _shape(like: Shape, element_type: str, dims: Sequence[int]) -> Shape:
    shape = Shape(element_type, tuple(dims))
    return shape if like.layout is None else shape.with_default_layout()


def _output_shape(like: Shape, element_types: Sequence[str], dims: Sequence[int]) -> Shape:
    shapes = [_shape(like, t, dims) for t in element_types]
    return shapes[0] if len(shapes) == 1 else Shape.make_tuple(shapes)


def split_reduce(reduce: HloInstruction, split: TreeSplit) -> HloInstruction:
    """Replaces ``reduce`` by its inner reduction, the reduction of the remainder if any, and the outer reduction
    of their results (``split``); returns the outer one."""
    computation = reduce.parent
    assert computation is not None
    count = len(reduce.operands) // 2
    inputs, inits = reduce.operands[:count], reduce.operands[count:]
    operand = inputs[0].shape
    element_types = [i.shape.element_type for i in inputs]
    d = split.dimension
    dims = list(operand.dimensions)
    head = split.outer * split.inner
    split_dims = [*dims[:d], split.outer, split.inner, *dims[d + 1:]]
    reduced = sorted(reduce.attr("dimensions"))
    inner_reduced = sorted([r if r < d else r + 1 for r in reduced if r != d] + [d + 1])
    inner_dims = [n for k, n in enumerate(split_dims) if k not in inner_reduced]
    outer_position = sum(1 for k in range(d) if k not in reduced)
    reducer = reduce.called_computations
    applied = {"to_apply": reduce.attributes["to_apply"]} if "to_apply" in reduce.attributes else {}
    is_arg = count == 2

    def new(opcode: str, element_type: str, shape_dims: Sequence[int], operands: list[HloInstruction],
            attributes: dict | None = None) -> HloInstruction:
        return _new(computation, reduce, opcode, _shape(operand, element_type, shape_dims), operands, attributes)

    def part(start: int, limit: int) -> HloInstruction:
        """The values' elements ``[start, limit)`` along the split dimension."""
        if (start, limit) == (0, split.size):
            return inputs[0]
        window = tuple(SliceDimension(start, limit, 1) if k == d else SliceDimension(0, n, 1)
                       for k, n in enumerate(dims))
        return new("slice", element_types[0], [*dims[:d], limit - start, *dims[d + 1:]], [inputs[0]],
                   {"slice": window})

    def reduction(operands: list[HloInstruction], result_dims: Sequence[int], dimensions: Sequence[int]) \
            -> list[HloInstruction]:
        """The reduce of ``operands`` (with the init values) and its results, one per input."""
        result = _new(computation, reduce, "reduce", _output_shape(operand, element_types, result_dims),
                      [*operands, *inits], {"dimensions": tuple(dimensions), **applied}, reducer)
        if not is_arg:
            return [result]
        return [new("get-tuple-element", t, result_dims, [result], {"index": k}) for k, t in enumerate(element_types)]

    def index_constant(value: int, shape_dims: Sequence[int]) -> HloInstruction:
        """``value`` in the positions' type, broadcast to ``shape_dims``."""
        scalar = _new(computation, reduce, "constant", Shape(element_types[1], ()), [])
        scalar.literal = np.asarray(value, dtype=scalar.shape.dtype)
        return new("broadcast", element_types[1], shape_dims, [scalar], {"dimensions": ()})

    # The inner reduction over rows of `inner` elements; for an argmax, of the positions within each row.
    rows = new("reshape", element_types[0], split_dims, [part(0, head)])
    inner_operands = [rows]
    if is_arg:
        inner_operands.append(new("iota", element_types[1], split_dims, [], {"iota_dimension": d + 1}))
    pieces = reduction(inner_operands, inner_dims, inner_reduced)
    if is_arg:
        # The positions of the rows' results in the whole dimension: inner * row + the position in the row.
        row = new("iota", element_types[1], inner_dims, [], {"iota_dimension": outer_position})
        first = new("multiply", element_types[1], inner_dims, [row, index_constant(split.inner, inner_dims)])
        pieces[1] = new("add", element_types[1], inner_dims, [first, pieces[1]])
    if split.remainder:
        # The elements after the rows, reduced apart (positions from `head` on), become one more partial result.
        tail_dims = [*dims[:d], split.remainder, *dims[d + 1:]]
        tail_operands = [part(head, split.size)]
        if is_arg:
            along = new("iota", element_types[1], tail_dims, [], {"iota_dimension": d})
            tail_operands.append(new("add", element_types[1], tail_dims, [along, index_constant(head, tail_dims)]))
        out_dims = [n for k, n in enumerate(inner_dims) if k != outer_position]
        tail = reduction(tail_operands, out_dims, reduced)
        one = [*inner_dims[:outer_position], 1, *inner_dims[outer_position + 1:]]
        concatenated_dims = [*inner_dims[:outer_position], split.outer + 1, *inner_dims[outer_position + 1:]]
        pieces = [new("concatenate", t, concatenated_dims, [piece, new("reshape", t, one, [partial])],
                      {"dimensions": (outer_position,)})
                  for t, piece, partial in zip(element_types, pieces, tail)]
    outer = _new(computation, reduce, "reduce", reduce.shape, [*pieces, *inits],
                 {"dimensions": (outer_position,), **applied}, reducer)
    replaced = replace_instruction(reduce, outer)
    assert replaced, f"could not replace {reduce.name}"
    return outer


class TreeReductionRewriter(HloPass):
    """Splits the reductions of ``tree_split`` into an inner and an outer reduction (with its thresholds)."""

    name = "tree-reduction-rewriter"

    def __init__(self, min_split_elements: int = MIN_SPLIT_ELEMENTS, target_rows: int = TARGET_ROWS,
                 min_inner_elements: int = MIN_INNER_ELEMENTS) -> None:
        self.thresholds = (min_split_elements, target_rows, min_inner_elements)

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in non_fusion_non_composite_computations(module):
            for reduce in [i for i in computation.instructions if i.opcode == "reduce"]:
                if reduce.control_predecessors or reduce.control_successors:
                    continue
                split = tree_split(reduce, *self.thresholds)
                if split is not None:
                    split_reduce(reduce, split)
                    changed = True
        return changed


__all__ = ["COLUMN_MIN_INNER_ROWS", "COLUMN_PIECES", "MIN_INNER_ELEMENTS", "MIN_SPLIT_ELEMENTS", "ROW_ALIGNMENT",
           "TARGET_ROWS", "ArgReducer",
           "TreeReductionRewriter", "TreeSplit", "arg_reducer", "compare_direction", "is_position_iota",
           "split_reduce", "tree_split"]
