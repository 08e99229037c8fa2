"""The in-place dynamic-update-slice emitter (XLA's ``in_place_dynamic_update_slice`` emitter of the GPU backend
and ``EmitFusedDynamicUpdateSliceInPlace`` of ``xla/service/llvm_ir/dynamic_update_slice_util.cc``).

A loop fusion whose outputs are dynamic-update-slices (or bitcasts of them) writes each over the fused
parameter it updates when the runtime passes that parameter and the output as one buffer slice: the elements
outside the update's window are already in place, so the kernel iterates the update's elements only. Its
launch covers the update's shape; each update's start indices are computed and clamped once, before the loop
(clamped as the op's semantics say, so that the window stays inside the operand); each iteration computes
the updates at its indices and inserts them at ``start + index`` into the outputs.

Other fused instructions may read the updated parameter only through dynamic-slices at the update's start
indices whose elements reach the update through elementwise ops (a scatter's combiner): each element of the
window is then read before the same iteration writes it, and by no other iteration.

The update values and the start indices are computed by the functions of two partitioned copies of the fused
computation, one returning the updates and one the start indices (XLA's ``ProvideParameter`` calls)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.buffers.sharing import reads_update_window
from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    derived_partition,
    entry_block,
    finish_entry,
    first_output_buffer,
    fusion_output_shapes,
    index_value,
    launch_ids,
    prefetch_for_math,
    values_at,
)
from xlapy.codegen.launch import Device, LaunchDimensions, loop_launch_dimensions, thread_id_to_output_map
from xlapy.codegen.partitioner import PartitionedComputation
from xlapy.codegen.types import tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing.hlo_indexing import input_to_output_indexing
from xlapy.shapes import Shape

UPDATE_OPERAND = 1
FIRST_START_OPERAND = 2


@dataclass(frozen=True)
class InPlaceUpdate:
    """One output of an in-place fusion: dynamic-update-slice ``update`` writes over fused ``parameter``;
    ``root`` is the fused value the output holds (``update`` or a bitcast of it), of ``output_shape``."""

    update: HloInstruction
    root: HloInstruction
    parameter: HloInstruction
    output_shape: Shape

    @property
    def update_value(self) -> HloInstruction:
        return self.update.operands[UPDATE_OPERAND]

    @property
    def start_indices(self) -> list[HloInstruction]:
        return self.update.operands[FIRST_START_OPERAND:]


def in_place_updates(fusion: HloInstruction, slice_indices: Sequence[int] | None) -> list[InPlaceUpdate] | None:
    """The updates of ``fusion`` when its kernel can write them in place (XLA's
    ``CanEmitFusedDynamicUpdateSliceInPlaceForGpu``), else None. ``slice_indices`` numbers the kernel's buffers
    (operands, array constants, outputs) by the slice they are passed in: each updated parameter must be passed
    in its output's slice, shared with no other buffer. Every output must be a dynamic-update-slice (or a
    bitcast of one) reached by no other fused instruction, updating a parameter read by nothing else but
    dynamic-slices of its window feeding the update (see the module docstring), all updates of one shape."""
    if slice_indices is None or fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None):
        return None
    computation = fusion.fused_computation
    root = computation.root
    roots = list(root.operands) if root.opcode == "tuple" else [root]
    output_shapes = fusion_output_shapes(fusion)
    if len(set(map(id, roots))) != len(roots) or len(output_shapes) != len(roots):
        return None
    first_output = first_output_buffer(fusion)
    if len(slice_indices) != first_output + len(roots):
        return None
    updates = []
    for position, (value, output_shape) in enumerate(zip(roots, output_shapes)):
        update = value.operands[0] if value.opcode == "bitcast" else value
        if update.opcode != "dynamic-update-slice" or not _reaches_only(update, value, root):
            return None
        parameter = update.operands[0]
        if parameter.opcode != "parameter" or not _read_only_by(parameter, update):
            return None
        shared = slice_indices[parameter.parameter_number]
        if slice_indices[first_output + position] != shared or list(slice_indices).count(shared) != 2:
            return None
        updates.append(InPlaceUpdate(update, value, parameter, output_shape))
    dimensions = updates[0].update_value.shape.dimensions
    if any(u.update_value.shape.dimensions != dimensions for u in updates):
        return None
    return updates


def _reaches_only(update: HloInstruction, value: HloInstruction, root: HloInstruction) -> bool:
    """Whether ``update`` is used only as the output ``value`` (itself, or its bitcast that only the root tuple
    uses): no other fused instruction reads what it writes."""
    if value is not update and update.users != [value]:
        return False
    if value is root:
        return not value.users
    return value.users == [root]


def _read_only_by(parameter: HloInstruction, update: HloInstruction) -> bool:
    """Whether ``update`` reads ``parameter`` only as the array it updates, and every other reader is a
    dynamic-slice of the update's window feeding only its update."""
    if any(o is parameter for o in update.operands[1:]):
        return False
    return all(user is update or reads_update_window(user, parameter) for user in parameter.users)


def iteration_shape(updates: Sequence[InPlaceUpdate]) -> Shape:
    """The shape the kernel iterates: the updates', in the physical order of the first output (the buffer it
    writes), as XLA iterates the update with the layout of the dynamic-update-slice."""
    first = updates[0]
    layout = (first.output_shape if first.root is first.update else first.update.shape).layout
    value = first.update_value.shape
    return Shape.array(value.element_type, value.dimensions).with_layout(layout)


def emit_in_place_dynamic_update_slice_fusion(fusion: HloInstruction, device: Device,
                                              slice_indices: Sequence[int] | None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of an in-place fusion (``in_place_updates`` must accept it): the entry function ``@main``
    looping over the update's elements, and the functions computing the updates and the start indices."""
    updates = in_place_updates(fusion, slice_indices)
    if updates is None:
        raise VerifyError(f"fusion {fusion.name} cannot update its operands in place")
    computation = fusion.fused_computation
    shape = iteration_shape(updates)
    launch = loop_launch_dimensions(shape, device, within_rows=device.rows_hold_vectors)
    values = derived_partition(computation, "update", [u.update_value for u in updates])
    starts = [s for u in updates for s in u.start_indices]
    indices = derived_partition(computation, "start_indices", starts) if starts else None
    partitions = [p for p in (values, indices) if p is not None]
    called = CalledFunctions([ENTRY_NAME, *(s.name for p in partitions for s in p.subgraphs)])
    functions = [emit_subgraph_function(p, s, called) for p in partitions for s in p.subgraphs]
    entry = _entry_function(fusion, updates, values, indices, shape, launch)
    finish_entry(entry, fusion, device, slice_indices)
    prefetch_for_math(entry, fusion, device)
    return ModuleOp([entry, *functions, *called.functions]), launch


def _entry_function(fusion: HloInstruction, updates: list[InPlaceUpdate], values: PartitionedComputation,
                    indices: PartitionedComputation | None, shape: Shape, launch: LaunchDimensions) -> func.FuncOp:
    buffers = buffer_arguments(values)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    output_types = [tensor_type(u.output_shape, fusion.name) for u in updates]
    block, params, outputs = entry_block(param_types, output_types)
    builder = Builder(InsertPoint.at_end(block))
    thread_id, block_id = launch_ids(builder, launch.threads_per_block, launch.blocks)
    starts = _clamped_starts(builder, updates, indices, params)
    indexing_map = thread_id_to_output_map(launch, shape)
    loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, outputs))
    body = loop.body.block
    rank = len(shape.dimensions)
    symbols = len(indexing_map.range_vars)
    update_indices = list(body.args[symbols:symbols + rank])
    iters = body.args[symbols + rank:]
    inner = Builder(InsertPoint.at_end(body))
    update_values = values_at(inner, values, params, update_indices, [u.update_value for u in updates])
    inserted = []
    for update, value, start, into in zip(updates, update_values, starts, iters):
        at = [inner.insert(arith.AddiOp(i, s)).result for i, s in zip(update_indices, start)]
        if update.root is not update.update:  # written through a bitcast: the output's indices of the element
            (bitcast_map,) = input_to_output_indexing(update.root, 0)[0]
            at = list(inner.insert(ApplyIndexingOp(at, [], bitcast_map)).results)
        op = inner.insert(tensor.InsertOp(value, into, at))
        op.result.name_hint = "updated"
        inserted.append(op.result)
    inner.insert(YieldOp(inserted))
    builder.insert(func.ReturnOp(*loop.results))
    return func.FuncOp(ENTRY_NAME, ([*param_types, *output_types], output_types), Region(block))


def _clamped_starts(builder: Builder, updates: list[InPlaceUpdate], indices: PartitionedComputation | None,
                    params: Sequence[SSAValue]) -> list[list[SSAValue]]:
    """Each update's start indices as ``index`` values clamped to ``[0, operand - update]`` per dimension,
    computed once before the loop."""
    if indices is None:
        return [[] for _ in updates]
    raw = values_at(builder, indices, params, [], [s for u in updates for s in u.start_indices])
    constants: dict[int, SSAValue] = {}

    def index(value: int) -> SSAValue:
        if value not in constants:
            constants[value] = builder.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result
        return constants[value]

    clamped = []
    for update in updates:
        values, raw = raw[:len(update.start_indices)], raw[len(update.start_indices):]
        operand_dims = update.update.shape.dimensions
        update_dims = update.update_value.shape.dimensions
        starts = []
        for start_instr, value, dim_size, size in zip(update.start_indices, values, operand_dims, update_dims):
            start = index_value(builder, value, start_instr.shape.element_type)
            start = builder.insert(arith.MaxSIOp(start, index(0))).result
            start = builder.insert(arith.MinSIOp(start, index(dim_size - size))).result
            starts.append(start)
        clamped.append(starts)
    return clamped


def update_elements(fusion: HloInstruction, slice_indices: Sequence[int] | None) -> int | None:
    """How many elements the kernel of ``fusion`` iterates when it updates its operands in place, else None."""
    updates = in_place_updates(fusion, slice_indices)
    return None if updates is None else math.prod(updates[0].update_value.shape.dimensions)


__all__ = ["InPlaceUpdate", "emit_in_place_dynamic_update_slice_fusion", "in_place_updates", "iteration_shape",
           "update_elements"]
