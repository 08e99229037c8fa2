"""The input-slices emitter (XLA's input-slices fusion, ``xla/service/gpu/fusions/input_slices_mlir.cc`` in XLA
before the emitters moved to ``xla/backends/gpu/codegen/emitters/``): a multi-output fusion whose roots are slices
(unit strides) of arrays of one shape, such as the pieces of a split.

The kernel walks that shape, the slices' input, with the loop emitter's launch: at each index it computes the
inputs once (the function of a partitioned copy of the fused computation returning them, XLA's
``ProvideParameter``) and writes them into every slice whose window holds the index, at the index minus the
slice's start (an ``scf.if`` per slice; a slice that spans a whole dimension needs no check along it). Indices that
no slice holds are computed and not written, as XLA does.

Slices of equal dimensions keep the loop emitter (``is_input_slices_fusion``): it walks the common output shape and
reads each slice's input at the output index plus the slice's start, so every input element is read once as well,
and its vectors stay whole. xlapy's multi-output fusion only merges outputs of equal dimensions, so fusions of
slices of different dimensions come from HLO written or optimized elsewhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import LoopOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, emit_subgraph_function
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    derived_partition,
    entry_function,
    finish_entry,
    fusion_output_shapes,
    start_entry,
    values_at,
)
from xlapy.codegen.launch import Device, LaunchDimensions, loop_launch_dimensions, thread_id_to_output_map
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import Shape


def root_slices(fusion: HloInstruction) -> list[HloInstruction] | None:
    """The slices a multi-output loop fusion returns, in output order, when every output is a slice with unit
    strides of an array of one shape (the slices' input), else None."""
    if fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None) or len(fusion.called_computations) != 1:
        return None
    root = fusion.fused_computation.root
    if root is None or root.opcode != "tuple" or len(root.operands) < 2:
        return None
    slices = list(root.operands)
    if any(s.opcode != "slice" or any(d.stride != 1 for d in s.attr("slice")) for s in slices):
        return None
    if len({tuple(s.operands[0].shape.dimensions) for s in slices}) != 1:
        return None
    return slices


def is_input_slices_fusion(fusion: HloInstruction) -> bool:
    """Whether the input-slices emitter writes ``fusion``: its outputs are slices of one shape's arrays, not all of
    the same dimensions (those the loop emitter writes, see the module docstring)."""
    slices = root_slices(fusion)
    return slices is not None and len({tuple(s.shape.dimensions) for s in slices}) > 1


def input_shape(fusion: HloInstruction, slices: Sequence[HloInstruction]) -> Shape:
    """The shape the kernel walks: the slices' input, in the physical order of the first output."""
    value = slices[0].operands[0].shape
    return Shape.array(value.element_type, value.dimensions).with_layout(fusion_output_shapes(fusion)[0].layout)


def emit_input_slices_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of an input-slices fusion: ``@main`` looping over the slices' input and writing each slice,
    and the functions computing the inputs."""
    slices = root_slices(fusion)
    if slices is None:
        raise VerifyError(f"fusion {fusion.name} does not return slices of arrays of one shape")
    computation = fusion.fused_computation
    shape = input_shape(fusion, slices)
    launch = loop_launch_dimensions(shape, device, within_rows=device.rows_hold_vectors)
    inputs = list(dict.fromkeys(s.operands[0] for s in slices))
    values = derived_partition(computation, "inputs", inputs)
    called = CalledFunctions([ENTRY_NAME, *(s.name for s in values.subgraphs)])
    functions = [emit_subgraph_function(values, s, called) for s in values.subgraphs]

    block, params, outputs, builder, thread_id, block_id = start_entry(values, fusion, launch)
    constants: dict[int, SSAValue] = {}

    def index(value: int) -> SSAValue:
        if value not in constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            block.insert_op_before(op, block.first_op)
            constants[value] = op.result
        return constants[value]

    indexing_map = thread_id_to_output_map(launch, shape)
    loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, outputs))
    loop.results[0].name_hint = "xla_loop"
    inner = Builder(InsertPoint.at_end(loop.body.block))
    at = list(loop.index_args)
    computed = values_at(inner, values, params, at, inputs)
    value_of = {id(i): v for i, v in zip(inputs, computed)}
    written = []
    for piece, into in zip(slices, loop.iter_args):
        written.append(_write_slice(inner, piece, value_of[id(piece.operands[0])], into, at, index))
    inner.insert(YieldOp(written))
    builder.insert(func.ReturnOp(*loop.results))
    entry = entry_function(block, outputs)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), launch


def _write_slice(builder: Builder, piece: HloInstruction, value: SSAValue, into: SSAValue, at: list[SSAValue],
                 index: Callable[[int], SSAValue]) -> SSAValue:
    """``into`` with ``value`` (the input at ``at``) written at ``at - start`` when the slice holds ``at``
    (``index`` makes ``index`` constants)."""
    dimensions = piece.operands[0].shape.dimensions
    checks, offsets = [], []
    for position, (bounds, size) in enumerate(zip(piece.attr("slice"), dimensions)):
        if bounds.start > 0:
            checks.append(builder.insert(arith.CmpiOp(at[position], index(bounds.start), "sge")).result)
            offsets.append(builder.insert(arith.SubiOp(at[position], index(bounds.start))).result)
        else:
            offsets.append(at[position])
        if bounds.limit < size:
            checks.append(builder.insert(arith.CmpiOp(at[position], index(bounds.limit), "slt")).result)
    if not checks:
        return builder.insert(tensor.InsertOp(value, into, offsets)).result
    inside = checks[0]
    for check in checks[1:]:
        inside = builder.insert(arith.AndIOp(inside, check)).result
    inside.name_hint = f"in_{piece.name}" if SSAValue.is_valid_name(f"in_{piece.name}") else "in_slice"
    then_block = Block()
    then_builder = Builder(InsertPoint.at_end(then_block))
    inserted = then_builder.insert(tensor.InsertOp(value, into, offsets)).result
    inserted.name_hint = "inserted"
    then_builder.insert(scf.YieldOp(inserted))
    if_op = builder.insert(scf.IfOp(inside, [into.type], Region(then_block), Region(Block([scf.YieldOp(into)]))))
    return if_op.results[0]


__all__ = ["emit_input_slices_fusion", "input_shape", "is_input_slices_fusion", "root_slices"]
