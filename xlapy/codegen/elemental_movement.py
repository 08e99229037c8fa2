"""Elemental rules of the instructions that move elements or compute them from indices alone: one entry per
opcode in ``ELEMENTAL``. Index-only ops (transpose, broadcast, reshape, bitcast, slice, reverse, copy) apply their
output-to-input indexing map with ``xla.apply_indexing`` and emit the operand at the indices it gives; pad and
concatenate choose an operand with ``scf.if``; dynamic-slice and gather clamp their start indices as XLA does;
constant and iota compute the element from the indices.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, IntegerType
from xdsl.ir import SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, elemental_rule
from xlapy.codegen.types import element_type, is_narrow_float
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing.ops import op_output_to_input


def _through_map(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    (indexing_map,) = op_output_to_input(instr)[0]
    return em.operand(instr, 0, em.apply_map(indexing_map, indices))


for _opcode in ("broadcast", "transpose", "reshape", "bitcast", "slice", "reverse", "copy"):
    elemental_rule(_opcode)(_through_map)


@elemental_rule("constant")
def _constant_rule(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    literal = np.asarray(instr.literal)
    if instr.literal is None or literal.dtype.kind in "OUS":
        raise UnimplementedError(f"constant {instr.name} has no value in the text")
    return em.constant(literal.item() if literal.dtype.kind != "V" else float(literal), instr.shape.element_type)


@elemental_rule("iota")
def _iota(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    position = indices[instr.attr("iota_dimension")]
    name = instr.shape.element_type
    mlir_type = element_type(name, instr.name)
    if isinstance(mlir_type, IntegerType):
        if name == "pred":
            return em.insert(arith.CmpiOp(position, em.index(0), "ne")).result
        return em.insert(arith.IndexCastOp(position, mlir_type)).result
    as_int = em.insert(arith.IndexCastOp(position, IntegerType(64))).result
    if is_narrow_float(name):  # through f32, as the ops on these types compute
        return em.insert(arith.TruncFOp(em.insert(arith.SIToFPOp(as_int, Float32Type())).result, mlir_type)).result
    return em.insert(arith.SIToFPOp(as_int, mlir_type)).result


@elemental_rule("pad")
def _pad(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """The operand where the output index lands on one of its elements, else the padding value."""
    operand_dims = instr.operands[0].shape.dimensions
    in_bounds, source = None, []
    for d, (index, pad) in enumerate(zip(indices, instr.attr("padding"))):
        step = pad.interior + 1
        shifted = em.insert(arith.SubiOp(index, em.index(pad.low))).result
        position = em.insert(arith.DivSIOp(shifted, em.index(step))).result if step > 1 else shifted
        checks = [arith.CmpiOp(shifted, em.index(0), "sge"),
                  arith.CmpiOp(shifted, em.index((operand_dims[d] - 1) * step), "sle")]
        if step > 1:
            remainder = em.insert(arith.RemSIOp(shifted, em.index(step))).result
            checks.append(arith.CmpiOp(remainder, em.index(0), "eq"))
        for check in checks:
            value = em.insert(check).result
            in_bounds = value if in_bounds is None else em.insert(arith.AndIOp(in_bounds, value)).result
        source.append(position)
    result_type = element_type(instr.shape.element_type, instr.name)
    if in_bounds is None:
        return em.operand(instr, 0, ())
    return em.if_else(in_bounds, result_type, lambda: em.operand(instr, 0, tuple(source)),
                      lambda: em.operand(instr, 1, ()))


@elemental_rule("concatenate")
def _concatenate(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """Nested ``scf.if``s choose the operand whose slice holds the index; the operand is read through its
    output-to-input map (the index shifted along the concatenated dimension), which the vectorizer sees through."""
    dim = instr.attr("dimensions")[0]
    result_type = element_type(instr.shape.element_type, instr.name)
    offsets = [0]
    for operand in instr.operands:
        offsets.append(offsets[-1] + operand.shape.dimensions[dim])
    maps = op_output_to_input(instr)

    def from_operand(k: int) -> SSAValue:
        (indexing_map,) = maps[k]
        return em.operand(instr, k, em.apply_map(indexing_map, indices))

    def choose(k: int) -> SSAValue:
        if k == len(instr.operands) - 1:
            return from_operand(k)
        below = em.insert(arith.CmpiOp(indices[dim], em.index(offsets[k + 1]), "slt")).result
        return em.if_else(below, result_type, lambda: from_operand(k), lambda: choose(k + 1))

    return choose(0)


@elemental_rule("dynamic-slice")
def _dynamic_slice(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """Start offsets are clamped so the slice stays inside the operand, as XLA does."""
    operand_dims = instr.operands[0].shape.dimensions
    sizes = instr.attr("dynamic_slice_sizes")
    source = []
    for d, index in enumerate(indices):
        start = em.to_index(em.emit(instr.operands[1 + d], ()), instr.operands[1 + d].shape.element_type)
        start = em.insert(arith.MaxSIOp(start, em.index(0))).result
        start = em.insert(arith.MinSIOp(start, em.index(operand_dims[d] - sizes[d]))).result
        source.append(em.insert(arith.AddiOp(index, start)).result)
    return em.operand(instr, 0, tuple(source))


@elemental_rule("gather")
def _gather(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """Any gather, by its dimension numbers (XLA's operation semantics): the output dimensions outside
    ``offset_dims`` are the batch dimensions, which with the index vector dimension put back index the start
    indices; the offset dimensions index the slice along the operand dimensions neither collapsed nor batching.
    Starts of ``start_index_map`` are clamped so the slice stays inside the operand, as XLA does; an operand
    batching dimension starts at the position along its start-indices batching dimension. The canonical form
    ``gather_simplifier`` leaves (XLA's docs/emitters.md) is the case of one batch dimension and
    ``index_vector_dim`` 1."""
    operand, starts = instr.operands
    operand_dims = operand.shape.dimensions
    offset_dims = tuple(instr.attr("offset_dims") or ())
    collapsed = tuple(instr.attr("collapsed_slice_dims") or ())
    start_index_map = tuple(instr.attr("start_index_map") or ())
    operand_batching = tuple(instr.attr("operand_batching_dims") or ())
    indices_batching = tuple(instr.attr("start_indices_batching_dims") or ())
    index_vector_dim = instr.attr("index_vector_dim")
    sizes = instr.attr("slice_sizes")
    batch = [index for d, index in enumerate(indices) if d not in offset_dims]
    # Start-indices dimension -> its index: the batch indices in order, skipping the index vector dimension.
    starts_rank = len(starts.shape.dimensions)
    batch_of = [d for d in range(starts_rank) if d != index_vector_dim]
    position_of = dict(zip(batch_of, batch))
    window = iter(indices[d] for d in offset_dims)
    source = []
    for d, size in enumerate(sizes):
        if d in operand_batching:
            source.append(position_of[indices_batching[operand_batching.index(d)]])
            continue
        in_window = em.index(0) if d in collapsed else next(window)
        if d not in start_index_map:
            source.append(in_window)
            continue
        k = start_index_map.index(d)
        at = tuple(em.index(k) if i == index_vector_dim else position_of[i] for i in range(starts_rank))
        start = em.to_index(em.emit(starts, at), starts.shape.element_type)
        start = em.insert(arith.MaxSIOp(start, em.index(0))).result
        start = em.insert(arith.MinSIOp(start, em.index(operand_dims[d] - size))).result
        source.append(start if d in collapsed else em.insert(arith.AddiOp(in_window, start)).result)
    return em.operand(instr, 0, tuple(source))
