"""Elemental rules of the instructions whose output element combines many input elements, or chooses between
two arrays by a computed window: one entry per opcode in ``ELEMENTAL`` (XLA's ``elemental_hlo_to_mlir.cc``:
``EmitReduce``, ``EmitReduceWindow``, ``EmitDynamicUpdateSlice``).

Reductions loop with ``FunctionEmitter.loop`` (an ``xla.loop``) over the range variables of the operand's
output-to-input indexing map, the accumulators starting at the init values and threaded through the loop, and
combine the accumulators with the input elements by calling the reducer computation's function:

- ``reduce``: the reduced dimensions, in row-major order (the last reduced dimension varies fastest), starting
  from the init value: ``r = init; for each reduced index in row-major order: r = reducer(r, input[...])``.
  A variadic reduce calls its reducer with every accumulator and then every input element, and its value is the
  tuple of the accumulators. (On the CPU, when adjacent output elements read adjacent input elements, the lanes of
  a vector are output elements and this loop carries vector accumulators: the order stays this one.)
- ``reduce`` of a row (XLA:CPU's vectorized reductions, ``ir_emitter.cc`` and ``vector_support_library.cc``): when
  the physically minor input dimension is reduced, by a reducer that is one of add, multiply, maximum, minimum,
  and, or, xor of its two parameters (associative and commutative as XLA treats them; not a variadic reduce), of a
  type other than complex, the 8- and 4-bit floats and sub-byte integers, over ``n`` elements: ``L`` partial
  accumulators, ``L`` = ``V`` = 64 bytes of elements (16 f32, 8 f64, 32 bf16; the same on every host) times the
  largest of 4, 2, 1 that gives at most 64 lanes (or ``V`` itself) and divides ``n`` into 4 chunks or more
  (``partial_accumulator_lanes``: f32 rows of 1024 take 64 lanes, of 128 32, of 64 16; four vectors are four
  independent chains of ops, and a row goes at the speed of its loads): ``p[k] = identity`` for ``k < L`` (-0.0
  for float sums, 1, -inf, +inf, the integer extremes, ...); for each index of the other reduced dimensions in
  row-major order, then each chunk ``c`` of the minor dimension: ``p[k] = reducer(p[k], input[..., c * L + k])``;
  then while ``L' > 1`` lanes are left, ``p[k] = reducer(p[k], p[k + L'/2])`` for ``k < L'/2``; the result is
  ``reducer(init, p[0])``. Other rows (no ``L``: too short, or a length a vector read would straddle) keep the
  order above.
- ``reduce`` of a row by an argmax or argmin reducer (``arg_reducer``, in ``tree_reduction_rewriter.py``: jax's
  ``_argmax`` / ``_argmin``, where the accumulator ``a`` wins over the element ``b`` when it is a NaN, better, or
  equal with a smaller index) together with the row's positions (an iota along the reduced dimension, the
  physically minor one and the only one reduced), over ``n`` elements, a multiple of ``V`` = 64 bytes of values
  with ``n >= 4V``, in ``L`` lanes: ``V`` times the largest of ``ARG_ACCUMULATOR_VECTORS`` = 2 and 1 that the row
  allows (``partial_accumulator_lanes``; two vectors are two independent chains of compares and selects: warm
  f32[4096,1024] rows 13% faster than with one): lane ``k`` starts as (the worst value, ``k``) and folds
  ``k, k + L, k + 2L, ...`` in with the reducer (the first fold yields element ``k`` itself, whatever it is; after
  it the lane's index is always the smaller, so the reducer's tie-break compare is known true and left out); the
  lanes are halved as above, but the two states are ordered by index before the reducer combines them (each step a
  loop over the half's lanes, which becomes vector code: a few dozen instructions a row, where lane-by-lane scalar
  code took some three hundred); the result is ``reducer(init, lanes)``. That is the sequential fold, bit for bit,
  for every input. Order the (value, index) pairs of the row by ``T``: NaNs above numbers and by the smaller index
  among themselves, numbers by the better value, equal numbers (-0 == +0) by the smaller index. Positions are
  distinct, so ``T`` is total, and when ``a``'s index is the smaller the reducer
  returns ``T``'s larger (``a`` a NaN: ``a``; ``b`` a NaN: no compare holds, ``b``; else the better, or the smaller
  index). The sequential fold, the lanes' folds and the ordered halving all call it so: each gives the ``T``-maximum
  of its elements, and the maximum under a total order does not depend on the grouping. The init value comes first
  in the sequential fold and stays until an element wins against it; the maximum ``M`` of the elements is not
  among those that lost to it (it is not below the first winner), so the fold is ``reducer(init, M)``. The value
  output of jax's reducer selects with ``keep`` (NaN or better, no tie-break): of equal values it keeps the later,
  which shows as the sign of a zero. Floats then carry a third vector, the index of the element each lane's value
  is, and the halving orders the lanes by it for the value: the same argument with equal numbers ordered by the
  larger index. (Equal integers are equal bits; reducers of other forms keep the order above.) The fold spends a
  dozen instructions on each vector it reads, too many for the out-of-order window to reach the next page of the
  row before it is needed: its loop asks ``prefetch-loads`` for prefetches ``ARG_PREFETCH_BYTES`` ahead (f32[4096,
  1024] read from memory: 1.4x faster; together with the two vectors and the vector halving, 1.8x, and 1.7x with
  the array in the cache).
- ``reduce-window``: the window positions in row-major order; positions in the padding or in a hole of the base
  dilation are outside the map's domain and skipped (not combined with the init value).
- ``dot`` (XLA's ``EmitDotLoop``): the contracting dimensions in row-major order, ``acc = acc + lhs * rhs``
  starting from zero, both operands converted to the result type first (a multiplication, then an addition, each
  rounded); bf16 and the 8- and 4-bit floats accumulate in f32 and are rounded once at the end; pred ors the
  ands. A dot without a contraction (every contracting dimension of size 1) is the product alone, as XLA
  rewrites it into a multiplication.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, scf, vector
from xdsl.dialects import complex as cplx
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerType,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineSymExpr

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.codegen.elemental import FunctionEmitter, Indices, Value, complex_rule, elemental_rule
from xlapy.codegen.elemental_arith import convert
from xlapy.codegen.passes.prefetch_loads import mark_prefetch
from xlapy.codegen.types import element_type, is_complex, is_float, is_narrow_float, is_unsigned
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops import op_output_to_input
from xlapy.shapes import ELEMENT_TYPES
from xlapy.transforms.tree_reduction_rewriter import arg_reducer, compare_direction, is_position_iota


def _reduction(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> Value:
    """The accumulators after the loop over the range variables of the inputs' map (reduce and reduce-window)."""
    count = len(instr.operands) // 2
    (input_map,) = op_output_to_input(instr)[0]
    if instr.opcode == "reduce" and (row := _row_reduction(instr, input_map)) is not None:
        return _emit_row_reduction(em, instr, indices, input_map, row)
    if instr.opcode == "reduce" and (arg := _arg_row_reduction(instr, input_map)) is not None:
        return _emit_arg_row_reduction(em, instr, indices, input_map, arg)
    inits = [em.operand(instr, count + k, ()) for k in range(count)]
    reducer = instr.called_computations[0]

    def combine(input_indices: Indices, accumulators: Indices) -> list[SSAValue]:
        elements = [em.operand(instr, k, input_indices) for k in range(count)]
        return list(em.call(reducer, [*accumulators, *elements]))

    results = tuple(em.loop(indices, input_map, inits, combine))
    return results if instr.shape.is_tuple else results[0]


elemental_rule("reduce")(_reduction)
elemental_rule("reduce-window")(_reduction)


@elemental_rule("dynamic-update-slice")
def _dynamic_update_slice(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """The update's element where the index is inside the update's window, else the operand's. Start indices
    are clamped so that the window stays inside the operand, as XLA does."""
    operand_dims = instr.operands[0].shape.dimensions
    update_dims = instr.operands[1].shape.dimensions
    in_update, update_indices = None, []
    for d, index in enumerate(indices):
        start_instr = instr.operands[2 + d]
        start = em.to_index(em.emit_scalar(start_instr, ()), start_instr.shape.element_type)
        start = em.insert(arith.MaxSIOp(start, em.index(0))).result
        start = em.insert(arith.MinSIOp(start, em.index(operand_dims[d] - update_dims[d]))).result
        shifted = em.insert(arith.SubiOp(index, start)).result
        update_indices.append(shifted)
        for check in (arith.CmpiOp(shifted, em.index(0), "sge"),
                      arith.CmpiOp(shifted, em.index(update_dims[d]), "slt")):
            value = em.insert(check).result
            in_update = value if in_update is None else em.insert(arith.AndIOp(in_update, value)).result
    if in_update is None:  # rank 0: the update replaces the whole operand
        return em.operand(instr, 1, ())
    result_type = element_type(instr.shape.element_type, instr.name)
    return em.if_else(in_update, result_type, lambda: em.operand(instr, 1, tuple(update_indices)),
                      lambda: em.operand(instr, 0, indices))


@elemental_rule("dot")
@complex_rule("dot")
def _dot(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    (lhs_map,), (rhs_map,) = op_output_to_input(instr)
    result = instr.shape.element_type
    operand_types = [o.shape.element_type for o in instr.operands]
    if is_complex(result) and any(t != result for t in operand_types):
        raise UnimplementedError(f"dot ({instr.name}) of {'/'.join(operand_types)} into {result}")
    accumulate_in = "f32" if result == "bf16" or is_narrow_float(result) else result

    def product(lhs_indices: Indices, rhs_indices: Indices) -> tuple[SSAValue, SSAValue]:
        lhs = convert(em, em.operand(instr, 0, lhs_indices), operand_types[0], accumulate_in)
        rhs = convert(em, em.operand(instr, 1, rhs_indices), operand_types[1], accumulate_in)
        return lhs, rhs

    def multiply(lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        op = (cplx.MulOp if is_complex(result) else arith.MulfOp if is_float(accumulate_in)
              else arith.AndIOp if result == "pred" else arith.MuliOp)
        return em.insert(op(lhs, rhs)).results[0]

    def multiply_add(operand_indices: Indices, accumulators: Indices) -> list[SSAValue]:
        lhs, rhs = product(operand_indices[:len(lhs_map.results)], operand_indices[len(lhs_map.results):])
        op = (cplx.AddOp if is_complex(result) else arith.AddfOp if is_float(accumulate_in)
              else arith.OrIOp if result == "pred" else arith.AddiOp)
        return [em.insert(op(accumulators[0], multiply(lhs, rhs))).results[0]]

    if math.prod(v.bounds.upper - v.bounds.lower + 1 for v in lhs_map.range_vars) == 1:
        lhs_indices = em.apply_map(_at_first_symbols(lhs_map), indices)
        rhs_indices = em.apply_map(_at_first_symbols(rhs_map), indices)
        value = multiply(*product(lhs_indices, rhs_indices))
    else:
        # One map giving both operands' indices: the contracting dimensions are the same range variables in both.
        both = IndexingMap.from_exprs([*lhs_map.results, *rhs_map.results], lhs_map.dim_vars, lhs_map.range_vars)
        (value,) = em.loop(indices, both, [em.constant(0, accumulate_in)], multiply_add)
    return convert(em, value, accumulate_in, result)


def _at_first_symbols(indexing_map: IndexingMap) -> IndexingMap:
    """``indexing_map`` with every range variable at its lower bound, as a map of the dimensions alone."""
    dims = [affine.dim(i) for i in range(indexing_map.num_dims)]
    symbols = [affine.const(v.bounds.lower) for v in indexing_map.range_vars]
    exprs = [affine.replace(e, dims, symbols) for e in indexing_map.results]
    return IndexingMap.from_exprs(exprs, indexing_map.dim_vars)


# -- row reductions: partial accumulators over the minor dimension --------------------------------------------

# Reducer opcodes that XLA treats as associative and commutative (one value, both parameters once), by the element
# kind, with the identity element the partial accumulators start from: combining it leaves every value as it is
# (-0.0 for a float sum: -0.0 + x is x for every x, +0.0 and -0.0 included).
_INF = float("inf")
_IDENTITIES: dict[str, dict[str, object]] = {
    "add": {"float": -0.0, "signed": 0, "unsigned": 0, "pred": 0},
    "multiply": {"float": 1.0, "signed": 1, "unsigned": 1, "pred": 1},
    "maximum": {"float": -_INF, "signed": "min", "unsigned": 0, "pred": 0},
    "minimum": {"float": _INF, "signed": "max", "unsigned": "max", "pred": 1},
    "and": {"signed": -1, "unsigned": "max", "pred": 1},
    "or": {"signed": 0, "unsigned": 0, "pred": 0},
    "xor": {"signed": 0, "unsigned": 0, "pred": 0},
}
# A vector of partial accumulators is one 512-bit register's worth of elements (16 f32, 8 f64, 32 bf16), whatever
# the host's SIMD width: the order of the sums is the same on every machine.
PARTIAL_ACCUMULATOR_BYTES = 64
# A row whose length allows it is read into this many such vectors at once: independent chains of vector ops, so
# that a row goes at the speed of the loads rather than that of one chain's latency (a float maximum waits about
# four cycles for the previous one: f32[4096,1024] rows 1.7x faster with 4 than with 1) ...
ACCUMULATOR_VECTORS = 4
# ... up to this many lanes (vectorize-loads-stores reads at most 64 lanes at once).
MAX_ACCUMULATOR_LANES = 64
# Fewer chunks than this per row: the single accumulator's loop, whose order the interpreter's tests know best.
MIN_CHUNKS = 4


def partial_accumulator_lanes(size: int, byte_width: int, vectors: int = ACCUMULATOR_VECTORS) -> int | None:
    """The partial accumulators of a row of ``size`` elements of ``byte_width`` bytes: ``V`` = 64 bytes of elements
    times the largest of ``vectors``, ..., 2, 1 (powers of two) for which there are at most 64 lanes and the row is
    a whole number, at least ``MIN_CHUNKS``, of such chunks; None when even ``V`` does not fit. A function of the
    shape alone: f32 rows of 1024 get 64 lanes, of 128 32 lanes, of 64 16 lanes; f64 and bf16 rows up to 32 and 64
    lanes, 8-bit integers 64 lanes."""
    while vectors >= 1:
        lanes = vectors * PARTIAL_ACCUMULATOR_BYTES // max(1, byte_width)
        if lanes <= max(MAX_ACCUMULATOR_LANES, PARTIAL_ACCUMULATOR_BYTES // max(1, byte_width)) and \
                size % lanes == 0 and size >= MIN_CHUNKS * lanes:
            return lanes
        vectors //= 2
    return None


@dataclass(frozen=True)
class _RowReduction:
    """A reduce over the physically minor dimension of its input: the range variable ``symbol`` of the input map
    runs over it (``size`` elements), read ``lanes`` consecutive elements at a time."""

    reducer: str
    identity: object
    symbol: int
    size: int
    lanes: int


def _row_reduction(instr: HloInstruction, input_map: IndexingMap) -> _RowReduction | None:
    """How ``instr`` reduces with partial accumulators, or None when its reducer is not one associative and
    commutative op of one value or the minor dimension of its input is not reduced."""
    if len(instr.operands) != 2 or input_map.constraints:
        return None
    reducer = instr.called_computations[0]
    root = reducer.root
    if (len(reducer.instructions) != 3 or root.opcode not in _IDENTITIES
            or {o.opcode for o in root.operands} != {"parameter"} or len(set(root.operands)) != 2):
        return None
    name = instr.shape.element_type
    info = ELEMENT_TYPES[name]
    kind = ("pred" if name == "pred" else "float" if is_float(name) and not is_narrow_float(name)
            else "signed" if info.is_integral and not is_unsigned(name) else "unsigned" if info.is_integral else None)
    if kind is None or (kind != "pred" and info.bit_width < 8):
        return None  # complex, 8- and 4-bit floats (some have no infinity), sub-byte integers
    identity = _IDENTITIES[root.opcode].get(kind)
    if identity is None:
        return None
    if identity in ("min", "max"):
        bits = info.bit_width
        identity = {"min": -(1 << (bits - 1)), "max": (1 << (bits - (kind == "signed"))) - 1}[identity]
    operand = instr.operands[0].shape
    layout = operand.layout_or_default
    if not operand.dimensions or layout.tiles:
        return None
    minor = input_map.results[layout.minor_to_major[0]]
    if not isinstance(minor, AffineSymExpr):
        return None  # the minor dimension is not reduced
    size = operand.dimensions[layout.minor_to_major[0]]
    lanes = partial_accumulator_lanes(size, info.byte_width)
    if lanes is None:
        return None  # a vector read starts at a multiple of its width (vectorize-loads-stores): no remainder
    return _RowReduction(root.opcode, identity, minor.position, size, lanes)


def _emit_row_reduction(em: FunctionEmitter, instr: HloInstruction, indices: Indices, input_map: IndexingMap,
                        row: _RowReduction) -> SSAValue:
    """``lanes`` partial accumulators over the minor dimension, each combining every ``lanes``-th element, then a
    horizontal combination in a fixed order and the init value (see the module docstring)."""
    name = instr.shape.element_type
    scalar_type = element_type(name, instr.name)
    vector_type = VectorType(scalar_type, [row.lanes])
    chunks = row.size // row.lanes
    # The loop over the other reduced dimensions (row-major) and the chunks of the minor one.
    others = [v for i, v in enumerate(input_map.range_vars) if i != row.symbol]
    outer = IndexingMap.from_exprs([affine.sym(i) for i in range(len(others) + 1)], [],
                                   [*others, Variable(Interval(0, chunks - 1))])
    # The input's indices at the output's, the other reduced dimensions, the chunk and the lane.
    symbols = [affine.sym(i) for i in range(len(others))]
    minor = affine.add(affine.mul(affine.sym(len(others)), row.lanes), affine.sym(len(others) + 1))
    symbols.insert(row.symbol, minor)
    dims = [affine.dim(i) for i in range(input_map.num_dims)]
    element_map = IndexingMap.from_exprs(
        [affine.replace(e, dims, symbols) for e in input_map.results], input_map.dim_vars,
        [*others, Variable(Interval(0, chunks - 1)), Variable(Interval(0, row.lanes - 1))])
    identity = _splat(em, vector_type, row.identity)
    zero = _splat(em, vector_type, 0)
    reducer = instr.called_computations[0]

    def chunk(outer_indices: Indices, accumulators: Indices) -> list[SSAValue]:
        # A loop over the lanes, which vectorize-loads-stores and vectorize-lanes turn into vector ops.
        block = Block(arg_types=[IndexType(), vector_type])
        lane, partials = block.args
        loop = em.insert(scf.ForOp(em.index(0), em.index(row.lanes), em.index(1), [zero], Region(block)))
        with em._region(block):  # values computed in the loop do not dominate what follows it
            partial = em.insert(vector.ExtractOp(accumulators[0], [lane], scalar_type)).result
            input_indices = em.insert(ApplyIndexingOp(list(indices), [*outer_indices, lane], element_map)).results
            value = apply_reducer(em, reducer, partial, em.operand(instr, 0, tuple(input_indices)))
            em.insert(scf.YieldOp(em.insert(vector.InsertOp(value, partials, [lane])).result))
        return [loop.results[0]]

    (partials,) = em.loop((), outer, [identity], chunk)
    lanes = [em.insert(vector.ExtractOp(partials, [k], scalar_type)).result for k in range(row.lanes)]
    while len(lanes) > 1:
        half = len(lanes) // 2
        lanes = [apply_reducer(em, reducer, lanes[k], lanes[k + half]) for k in range(half)]
    return apply_reducer(em, reducer, em.operand(instr, 1, ()), lanes[0])


def _splat(em: FunctionEmitter, vector_type: VectorType, value: object) -> SSAValue:
    element = vector_type.element_type
    if isinstance(element, IntegerType):
        width = element.width.data
        value = int(value) & ((1 << width) - 1)  # type: ignore[call-overload]
        if width > 1 and value >= 1 << (width - 1):
            value -= 1 << width
    dense = DenseIntOrFPElementsAttr.from_list(vector_type, [value])  # type: ignore[list-item]
    return em._constant(dense)


def apply_reducer(em: FunctionEmitter, reducer: HloComputation, accumulator: SSAValue,
                   element: SSAValue) -> SSAValue:
    """The reducer's one op on two scalars, emitted in place (not a call: the loop's vector form needs its op)."""
    first, second = reducer.parameters
    inline = FunctionEmitter(em.partitioned, em.subgraph, em._function_block, em.params, (),
                             em.called, bound={first: accumulator, second: element})
    inline.builder = em.builder
    return inline.emit_scalar(reducer.root, ())


# -- argmax / argmin rows: per-lane (value, index) accumulators ---------------------------------------------------

# Vectors of 64 bytes of (value, index) states a row takes when its length allows (``partial_accumulator_lanes``):
# f32[4096,1024] with two, against one, 20% faster from the cache, even from memory, and 77% against 72% of the
# speed of a copy of its bytes in benchmarks/programs_vs_xla.py (medians of five runs of each, alternating).
ARG_ACCUMULATOR_VECTORS = 2
# How far ahead of its reads the fold prefetches (``prefetch-loads``), in bytes: two rows of 1024 f32 (4 and 16 KiB
# measured within 5% of it).
ARG_PREFETCH_BYTES = 8192


@dataclass(frozen=True)
class _ArgRowReduction:
    """A variadic reduce of a row and its positions by an argmax or argmin reducer: ``size`` elements read
    ``lanes`` at a time; ``value_keeps_last`` when the reducer's value output takes the later of two equal values
    (its index output always takes the smaller index)."""

    size: int
    lanes: int
    value_keeps_last: bool
    worst: float | int  # the value no element is worse than (-inf for an argmax of floats)


def _arg_row_reduction(instr: HloInstruction, input_map: IndexingMap) -> _ArgRowReduction | None:
    """How ``instr`` reduces with per-lane (value, index) accumulators, or None: it must reduce the physically minor
    dimension of its values alone, together with the positions along it (an iota), by an argmax or argmin reducer
    (``arg_reducer``), the row a multiple of 64 bytes of values and at least ``MIN_CHUNKS`` of them."""
    if len(instr.operands) != 4 or input_map.constraints or len(input_map.range_vars) != 1:
        return None
    values, positions = instr.operands[:2]
    value_name, index_name = values.shape.element_type, positions.shape.element_type
    value_info, index_info = ELEMENT_TYPES[value_name], ELEMENT_TYPES[index_name]
    float_value = is_float(value_name) and not is_narrow_float(value_name) and not is_complex(value_name)
    if not (float_value or (value_info.is_integral and value_name != "pred" and value_info.bit_width >= 8)):
        return None
    if not index_info.is_integral or index_name == "pred" or index_info.bit_width < 8:
        return None
    layout = values.shape.layout_or_default
    if not values.shape.dimensions or layout.tiles:
        return None
    minor = layout.minor_to_major[0]
    if not isinstance(input_map.results[minor], AffineSymExpr) or not is_position_iota(positions, minor):
        return None
    size = values.shape.dimensions[minor]
    if size - 1 > (1 << (index_info.bit_width - (not is_unsigned(index_name)))) - 1:
        return None  # the positions would wrap around
    form = arg_reducer(instr.called_computations[0], float_value)
    if form is None:
        return None
    value_keeps_last = form.value_keeps_last
    lanes = partial_accumulator_lanes(size, value_info.byte_width, vectors=ARG_ACCUMULATOR_VECTORS)
    if lanes is None:
        return None
    # Equal integers are the same bits: which of them the value keeps does not show.
    if float_value:
        worst: float | int = -math.inf if form.better == "max" else math.inf
    else:
        bits = value_info.bit_width
        signed = not is_unsigned(value_name)
        worst = (-(1 << (bits - 1)) if signed else 0) if form.better == "max" else (1 << (bits - signed)) - 1
    return _ArgRowReduction(size, lanes, value_keeps_last and float_value, worst)


def _emit_arg_row_reduction(em: FunctionEmitter, instr: HloInstruction, indices: Indices, input_map: IndexingMap,
                            arg: _ArgRowReduction) -> tuple[SSAValue, SSAValue]:
    """Lane ``k`` folds elements ``k, k + L, k + 2L, ...`` with the reducer (starting as (the worst value, ``k``),
    which element ``k`` replaces), the lanes are combined by halving with the operands ordered by index, then the
    init values: the result of the sequential fold (see the module docstring for why)."""
    value_type = element_type(instr.operands[0].shape.element_type, instr.name)
    index_type = element_type(instr.operands[1].shape.element_type, instr.name)
    # Per lane: the value, the index of the reducer's result and, when the value keeps the last of equal values,
    # the index of the element whose value it holds.
    types = [value_type, index_type, index_type][:3 if arg.value_keeps_last else 2]
    vector_types = [VectorType(t, [arg.lanes]) for t in types]
    chunks = arg.size // arg.lanes
    dims = [affine.dim(i) for i in range(input_map.num_dims)]
    minor = affine.add(affine.mul(affine.sym(0), arg.lanes), affine.sym(1))
    element_map = IndexingMap.from_exprs(
        [affine.replace(e, dims, [minor]) for e in input_map.results], input_map.dim_vars,
        [Variable(Interval(0, chunks - 1)), Variable(Interval(0, arg.lanes - 1))])
    reducer = instr.called_computations[0]
    value_select, index_select = reducer.root.operands
    index_a, index_b = reducer.parameters[1], reducer.parameters[3]
    tie_breaks = [i for i in reducer.instructions if compare_direction(i, index_a, index_b, ("LT",))]
    true = em.constant(1, "pred")

    def fold_chunk(chunk: SSAValue, accumulators: Indices) -> list[SSAValue]:
        # A loop over the lanes, which vectorize-loads-stores and vectorize-lanes turn into vector ops.
        block = Block(arg_types=[IndexType(), *vector_types])
        lane, *partials = block.args
        zeros = [_splat(em, t, 0) for t in vector_types]
        loop = em.insert(scf.ForOp(em.index(0), em.index(arg.lanes), em.index(1), zeros, Region(block)))
        with em._region(block):  # values computed in the loop do not dominate what follows it
            input_indices = tuple(em.insert(ApplyIndexingOp(list(indices), [chunk, lane], element_map)).results)
            value = em.operand(instr, 0, input_indices)
            # The positions are an iota along the row: the element's index in it, chunk * L + lane, added in the
            # index type (not a call of the iota's subgraph, which would keep the lane loop from becoming vector
            # code, and not 64-bit vector arithmetic: the chunk's part is the same in every lane).
            first = em.insert(arith.MuliOp(chunk, em.index(arg.lanes))).result
            position = em.insert(arith.AddiOp(em.insert(arith.IndexCastOp(first, index_type)).result,
                                              em.insert(arith.IndexCastOp(lane, index_type)).result)).result
            old = [em.insert(vector.ExtractOp(a, [lane], t)).result for a, t in zip(accumulators, types)]
            # A lane's state comes from an earlier element than the one it folds in: the reducer's tie-break (the
            # accumulator's index the smaller) holds, and is not computed.
            earlier = {c: true for c in tie_breaks}
            step = _inline_reducer(em, reducer, [old[0], old[1], value, position], earlier)
            folded = [step.emit_scalar(value_select, ()), step.emit_scalar(index_select, ())]
            if arg.value_keeps_last:
                kept = step.emit_scalar(value_select.operands[0], ())
                folded.append(em.insert(arith.SelectOp(kept, old[2], position)).result)
            inserted = [em.insert(vector.InsertOp(v, p, [lane])).result for v, p in zip(folded, partials)]
            em.insert(scf.YieldOp(*inserted))
        return list(loop.results)

    # Lane k starts as (the worst value, k): folding element k in yields element k itself, whatever it is (a
    # worse value than every other, or equal to the worst value and at the same position, or a NaN), so one loop
    # over every chunk reads the values in one place (one call of their function, which the inliner inlines).
    positions = em._constant(DenseIntOrFPElementsAttr.from_list(vector_types[1], list(range(arg.lanes))))
    start = [_splat(em, vector_types[0], arg.worst), positions, positions][:len(types)]
    block = Block(arg_types=[IndexType(), *vector_types])
    chunk, *accumulators = block.args
    chunk.name_hint = "chunk"
    loop = em.insert(scf.ForOp(em.index(0), em.index(chunks), em.index(1), start, Region(block)))
    # The fold spends a dozen instructions on each vector it reads: the lines ahead are prefetched (prefetch-loads).
    mark_prefetch(loop, ARG_PREFETCH_BYTES)
    with em._region(block):
        em.insert(scf.YieldOp(*fold_chunk(chunk, accumulators)))
    partials = list(loop.results)
    while partials[0].type.get_shape()[0] > 2:
        partials = _halved(em, reducer, partials, types)
    lanes = [[em.insert(vector.ExtractOp(p, [k], t)).result for p, t in zip(partials, types)] for k in range(2)]
    value, index = _combine_lanes(em, reducer, lanes[0], lanes[1])[:2]
    inits = [em.operand(instr, 2, ()), em.operand(instr, 3, ())]
    final = _inline_reducer(em, reducer, [*inits, value, index])
    return final.emit_scalar(value_select, ()), final.emit_scalar(index_select, ())


def _halved(em: FunctionEmitter, reducer: HloComputation, partials: list[SSAValue], types: list[Attribute]) \
        -> list[SSAValue]:
    """One step of the lanes' halving: lane ``k`` of the states ``partials`` (vectors of ``L`` lanes) combined
    with lane ``k + L/2`` (``_combine_lanes``) for ``k < L/2``, as a loop over the ``L/2`` lanes of the two halves,
    which ``vectorize-lanes`` turns into vector ops (a few vector instructions a step, not a few per lane)."""
    half = partials[0].type.get_shape()[0] // 2
    half_types = [VectorType(t, [half]) for t in types]
    low, high = ([em.insert(vector.ShuffleOp(p, p, DenseArrayBase.from_list(i64, list(range(first, first + half))),
                                             result_type=h)).result for p, h in zip(partials, half_types)]
                 for first in (0, half))
    block = Block(arg_types=[IndexType(), *half_types])
    lane, *combined = block.args
    lane.name_hint = "lane"
    zeros = [_splat(em, t, 0) for t in half_types]
    loop = em.insert(scf.ForOp(em.index(0), em.index(half), em.index(1), zeros, Region(block)))
    with em._region(block):  # values computed in the loop do not dominate what follows it
        a = [em.insert(vector.ExtractOp(v, [lane], t)).result for v, t in zip(low, types)]
        b = [em.insert(vector.ExtractOp(v, [lane], t)).result for v, t in zip(high, types)]
        states = _combine_lanes(em, reducer, a, b)
        em.insert(scf.YieldOp(*(em.insert(vector.InsertOp(v, c, [lane])).result for v, c in zip(states, combined))))
    return list(loop.results)


def _ordered(em: FunctionEmitter, a: list[SSAValue], b: list[SSAValue], key: int) -> tuple[list, list]:
    """``a`` and ``b`` (lanes' states), the one with the smaller index at ``key`` first (indices are positions in
    the row: non-negative)."""
    swap = em.insert(arith.CmpiOp(b[key], a[key], "ult")).result
    first = [em.insert(arith.SelectOp(swap, y, x)).result for x, y in zip(a, b)]
    second = [em.insert(arith.SelectOp(swap, x, y)).result for x, y in zip(a, b)]
    return first, second


def _combine_lanes(em: FunctionEmitter, reducer: HloComputation, a: list[SSAValue], b: list[SSAValue]) \
        -> list[SSAValue]:
    """Two lanes' states combined by the reducer, the earlier (smaller index) first: for the index, by the index of
    the reducer's result; for the value when it keeps the last of equal values, by the index of its element."""
    value_select, index_select = reducer.root.operands
    lo, hi = _ordered(em, a, b, 1)
    by_index = _inline_reducer(em, reducer, [lo[0], lo[1], hi[0], hi[1]])
    index = by_index.emit_scalar(index_select, ())
    if len(a) == 2:
        return [by_index.emit_scalar(value_select, ()), index]
    lo, hi = _ordered(em, a, b, 2)
    by_last = _inline_reducer(em, reducer, [lo[0], lo[2], hi[0], hi[2]])
    kept = by_last.emit_scalar(value_select.operands[0], ())
    return [by_last.emit_scalar(value_select, ()), index, em.insert(arith.SelectOp(kept, lo[2], hi[2])).result]


def _inline_reducer(em: FunctionEmitter, reducer: HloComputation, args: list[SSAValue],
                    known: dict[HloInstruction, SSAValue] | None = None) -> FunctionEmitter:
    """An emitter of ``reducer``'s instructions in place, its parameters bound to ``args`` (and the instructions
    of ``known`` to those values)."""
    inline = FunctionEmitter(em.partitioned, em.subgraph, em._function_block, em.params, (), em.called,
                             bound={**dict(zip(reducer.parameters, args)), **(known or {})})
    inline.builder = em.builder
    return inline
