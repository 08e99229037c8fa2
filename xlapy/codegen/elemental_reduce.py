"""Elemental rules of the instructions whose output element combines many input elements, or chooses between
two arrays by a computed window: one entry per opcode in ``ELEMENTAL`` (XLA's ``elemental_hlo_to_mlir.cc``:
``EmitReduce``, ``EmitReduceWindow``, ``EmitDynamicUpdateSlice``).

Reductions loop with ``FunctionEmitter.loop`` (an ``xla.loop``) over the range variables of the operand's
output-to-input indexing map, the accumulators starting at the init values and threaded through the loop, and
combine the accumulators with the input elements by calling the reducer computation's function:

- ``reduce``: the reduced dimensions, in row-major order (the last reduced dimension varies fastest), starting
  from the init value: ``r = init; for each reduced index in row-major order: r = reducer(r, input[...])``.
  A variadic reduce calls its reducer with every accumulator and then every input element, and its value is the
  tuple of the accumulators.
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

from xdsl.dialects import arith
from xdsl.dialects import complex as cplx
from xdsl.ir import SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, Value, complex_rule, elemental_rule
from xlapy.codegen.elemental_arith import convert
from xlapy.codegen.types import element_type, is_complex, is_float, is_narrow_float
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.indexing.ops import op_output_to_input


def _reduction(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> Value:
    """The accumulators after the loop over the range variables of the inputs' map (reduce and reduce-window)."""
    count = len(instr.operands) // 2
    (input_map,) = op_output_to_input(instr)[0]
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
