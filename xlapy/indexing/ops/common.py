"""Building blocks shared by the per-op indexing rules: shapes of results,
identity/scalar/permutation maps, XLA's reshape linearisation, and folding of
runtime values that are known when the map is built (constants, iotas)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.ir.affine import AffineConstantExpr, AffineExpr

from xlapy.hlo import HloInstruction
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import Shape


class MalformedOp(ValueError):
    """An instruction whose attributes or operands do not fit its opcode; the
    dispatcher turns it into undefined maps."""


def result_shapes(instr: HloInstruction) -> list[Shape]:
    """The shapes of the instruction's outputs (the elements of a tuple shape)."""
    return list(instr.shape.tuple_shapes) or [instr.shape]


def output_shape(instr: HloInstruction, output_id: int = 0) -> Shape:
    return result_shapes(instr)[output_id]


def dims(shape: Shape) -> tuple[int, ...]:
    return shape.dimensions


def ints(instr: HloInstruction, name: str, default: Sequence[int] | None = None) -> tuple[int, ...]:
    """An integer-list attribute; a missing or malformed one is a ``MalformedOp``."""
    value = instr.attributes.get(name, default)
    if value is None:
        raise MalformedOp(f"{instr.opcode} {instr.name} has no {name}")
    if isinstance(value, int):
        return (value,)
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise MalformedOp(f"{name} of {instr.name} is not a list of integers: {value!r}") from None


def integer(instr: HloInstruction, name: str, default: int | None = None) -> int:
    value = instr.attributes.get(name, default)
    if not isinstance(value, int):
        raise MalformedOp(f"{instr.opcode} {instr.name} has no integer {name}")
    return value


def dim_vars(sizes: Sequence[int]) -> list[Variable]:
    return [Variable.of_size(n) for n in sizes]


def dim_exprs(rank: int) -> list[AffineExpr]:
    return [affine.dim(i) for i in range(rank)]


def identity(sizes: Sequence[int]) -> IndexingMap:
    return IndexingMap.identity(sizes)


def scalar_map(sizes: Sequence[int]) -> IndexingMap:
    """From every index of a tensor of ``sizes`` to the one element of a scalar."""
    return IndexingMap.from_tensor_sizes([], sizes)


def broadcast_from_scalar(sizes: Sequence[int], source: Sequence[int] = ()) -> IndexingMap:
    """From any element of a tensor of ``source`` sizes (a scalar by default)
    to every index of a tensor of ``sizes``: ``(d...)[s0, s1, ...] -> (s0, s1, ...)``."""
    return IndexingMap.from_exprs([affine.sym(i) for i in range(len(sizes))], dim_vars(source), dim_vars(sizes))


def permutation_map(permutation: Sequence[int], sizes: Sequence[int]) -> IndexingMap:
    """``(d...) -> (d_{p[0]}, d_{p[1]}, ...)`` over ``sizes``: from the indices
    of a tensor to those of its transpose by ``p`` (XLA's
    ``ComputeTransposeIndexingMap``)."""
    return IndexingMap.from_tensor_sizes([affine.dim(p) for p in permutation], sizes)


def inverse_permutation(permutation: Sequence[int]) -> list[int]:
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return inverse


def check_permutation(permutation: Sequence[int], rank: int, what: str) -> None:
    if sorted(permutation) != list(range(rank)):
        raise MalformedOp(f"{what} {list(permutation)} is not a permutation of {rank} dimensions")


def one_set_each(*maps: IndexingMap) -> list[set[IndexingMap]]:
    return [{m} for m in maps]


def undefined(count: int) -> list[set[IndexingMap]]:
    return [{IndexingMap.undefined()} for _ in range(count)]


# --- reshapes (XLA's ComputeReshapeIndexingMap) ---


def strides(sizes: Sequence[int]) -> list[int]:
    """Row-major strides."""
    result = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        result[i] = sizes[i + 1] * result[i + 1]
    return result


def linearize(sizes: Sequence[int], exprs: Sequence[AffineExpr]) -> AffineExpr:
    """The row-major linear index of a multi-index of a tensor of ``sizes``,
    built as XLA builds it: ``0 + e0 * stride0 + e1 * stride1 + ...``."""
    linear: AffineExpr = affine.const(0)
    for stride, expr in zip(strides(sizes), exprs):
        linear = affine.add(linear, affine.mul(expr, stride))
    return linear


def delinearize(sizes: Sequence[int], linear: AffineExpr) -> list[AffineExpr]:
    """The multi-index of a row-major linear index: quotient by each stride,
    then the remainder."""
    result = []
    remainder = linear
    for stride in strides(sizes):
        result.append(affine.floordiv(remainder, stride))
        remainder = affine.mod(remainder, stride)
    return result


def _minimal_reshape(in_sizes: list[int], out_sizes: list[int], out_exprs: list[AffineExpr]) -> list[AffineExpr]:
    if len(in_sizes) == 1 and len(out_sizes) == 1:
        return list(out_exprs)
    if len(in_sizes) == 1:  # expand
        return [linearize(out_sizes, out_exprs)]
    if len(out_sizes) == 1:  # collapse
        return delinearize(in_sizes, out_exprs[0])
    return delinearize(in_sizes, linearize(out_sizes, out_exprs))


def reshape_exprs(input_sizes: Sequence[int], output_sizes: Sequence[int]) -> list[AffineExpr]:
    """The indices of the input of a reshape as expressions of the output's
    dimensions. Input and output are cut into consecutive groups with equal
    element counts; each group is copied, expanded, collapsed or linearised
    and delinearised on its own, so that only dimensions that really mix get
    ``floordiv`` and ``mod``."""
    if math.prod(input_sizes) != math.prod(output_sizes):
        raise MalformedOp(f"cannot reshape {list(input_sizes)} to {list(output_sizes)}")
    if math.prod(input_sizes) == 0:
        return [affine.const(0)] * len(input_sizes)
    exprs: list[AffineExpr] = []
    in_count = out_count = 1
    in_group: list[int] = []
    out_group: list[int] = []
    out_group_exprs: list[AffineExpr] = []
    i = o = 0
    while i < len(input_sizes) or o < len(output_sizes) or in_group:
        if i < len(input_sizes) and (not in_group or in_count < out_count):
            in_count *= input_sizes[i]
            in_group.append(input_sizes[i])
            i += 1
        elif o < len(output_sizes) and (not out_group or out_count < in_count):
            out_count *= output_sizes[o]
            out_group.append(output_sizes[o])
            out_group_exprs.append(affine.dim(o))
            o += 1
        else:
            exprs += _minimal_reshape(in_group, out_group, out_group_exprs)
            in_count = out_count = 1
            in_group, out_group, out_group_exprs = [], [], []
    return exprs


def simplify_keeping_point_dims(indexing_map: IndexingMap) -> IndexingMap:
    """``simplify()`` that leaves a dimension of a single value in the results
    (XLA's ``SimplifyPointDimensions::kPreserve``, used for reshapes and
    bitcasts so that ``f32[32] -> f32[1,32]`` reads ``d0 * 32 + d1``): such
    dimensions get one more value while simplifying, which keeps every rewrite
    valid on the real domain."""
    if indexing_map.is_undefined() or indexing_map.is_known_empty() or indexing_map.constraints:
        return indexing_map.simplify()
    original = indexing_map.dim_vars
    widened = [Variable(Interval(v.bounds.lower, v.bounds.upper + v.bounds.is_point()), v.name) for v in original]
    simplified = IndexingMap(indexing_map.affine_map, widened, indexing_map.range_vars, indexing_map.rt_vars).simplify()
    if simplified.is_known_empty() or simplified.constraints:
        return indexing_map.simplify()
    return IndexingMap.from_exprs(simplified.results, original, simplified.range_vars, simplified.rt_vars)


# --- layouts (dense, untiled) ---


def minor_to_major(shape: Shape) -> tuple[int, ...]:
    """The shape's layout order; XLA's default (descending) when it has none."""
    rank = len(shape.dimensions)
    layout = shape.layout
    if layout is None or len(layout.minor_to_major) != rank:
        return tuple(range(rank - 1, -1, -1))
    return tuple(layout.minor_to_major)


def has_tiles(shape: Shape) -> bool:
    return shape.layout is not None and bool(shape.layout.tiles)


def physical_offset(shape: Shape, index: Sequence[int]) -> int:
    offset, scale = 0, 1
    for d in minor_to_major(shape):
        offset += index[d] * scale
        scale *= shape.dimensions[d]
    return offset


def row_major_offset(sizes: Sequence[int], index: Sequence[int]) -> int:
    return sum(i * s for i, s in zip(index, strides(sizes)))


def row_major_index(sizes: Sequence[int], offset: int) -> list[int]:
    return [(offset // s) % n if n else 0 for s, n in zip(strides(sizes), sizes)]


# --- runtime values known at build time ---


def fold_runtime_value(source: HloInstruction, index: Sequence[AffineExpr], bounds: Interval) -> AffineExpr | None:
    """XLA's ``OptimizeRTVar``: the value a runtime variable reads from
    ``source`` at ``index`` as an expression, when ``source`` makes it known:
    a constant read at a constant index (kept as a variable if the value is
    outside ``bounds``), or an iota (the index along its dimension)."""
    if source.opcode == "constant":
        if not all(isinstance(e, AffineConstantExpr) for e in index):
            return None
        try:
            literal = np.asarray(source.literal)
            value = literal[tuple(e.value for e in index)]
        except (IndexError, TypeError, ValueError):
            return None
        if literal.dtype.kind not in "iub":
            return None
        value = int(value)
        return affine.const(value) if bounds.contains(value) else None
    if source.opcode == "iota":
        iota_dimension = source.attributes.get("iota_dimension")
        if isinstance(iota_dimension, int) and 0 <= iota_dimension < len(index):
            return index[iota_dimension]
    return None


class RuntimeVars:
    """Collects runtime variables while the expressions of a map are built:
    each read either folds to an expression or becomes the next ``rt``
    symbol (numbered after ``num_range_vars`` range variables)."""

    def __init__(self, num_range_vars: int = 0):
        self.num_range_vars = num_range_vars
        self.bounds: list[Interval] = []

    def read(self, source: HloInstruction, index: Sequence[AffineExpr], bounds: Interval) -> AffineExpr:
        folded = fold_runtime_value(source, index, bounds)
        if folded is not None:
            return folded
        self.bounds.append(bounds)
        return affine.sym(self.num_range_vars + len(self.bounds) - 1)
