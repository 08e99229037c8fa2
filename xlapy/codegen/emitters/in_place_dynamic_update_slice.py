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
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.buffers.sharing import reads_update_window
from xlapy.codegen.dialect import ApplyIndexingOp, BlockIdOp, LoopOp, PureCallOp, ThreadIdOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function, result_types
from xlapy.codegen.emitters.loop import ENTRY_NAME, mark_slices
from xlapy.codegen.launch import (
    BACKEND_KIND,
    Device,
    LaunchDimensions,
    loop_launch_dimensions,
    thread_id_to_output_map,
)
from xlapy.codegen.partitioner import PartitionedComputation, computation_roots, partition
from xlapy.codegen.types import is_unsigned, tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction
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
    output_shapes = list(fusion.shape.tuple_shapes) if fusion.shape.is_tuple else [fusion.shape]
    if len(set(map(id, roots))) != len(roots) or len(output_shapes) != len(roots):
        return None
    constants = sum(1 for i in computation.instructions if i.opcode == "constant" and i.shape.dimensions)
    first_output = len(fusion.operands) + constants
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
    values = _derived_partition(computation, "update", [u.update_value for u in updates])
    starts = [s for u in updates for s in u.start_indices]
    indices = _derived_partition(computation, "start_indices", starts) if starts else None
    partitions = [p for p in (values, indices) if p is not None]
    called = CalledFunctions([ENTRY_NAME, *(s.name for p in partitions for s in p.subgraphs)])
    functions = [emit_subgraph_function(p, s, called) for p in partitions for s in p.subgraphs]
    entry = _entry_function(fusion, updates, values, indices, shape, launch)
    mark_slices(entry, fusion, slice_indices)
    if device.name == "cpu":
        entry.attributes[BACKEND_KIND] = StringAttr(device.name)
    return ModuleOp([entry, *functions, *called.functions]), launch


def _derived_partition(computation: HloComputation, suffix: str, results: list[HloInstruction]) \
        -> PartitionedComputation:
    """The partition of a copy of ``computation`` returning ``results`` (their copies, in a root tuple): the
    same parameters and array constants in the same order, so its functions take the entry's buffers."""
    copy = HloComputation(f"{computation.name}.{suffix}")
    mapping: dict[int, HloInstruction] = {}
    for instr in computation.post_order():  # operands first
        clone = instr.clone([mapping[id(o)] for o in instr.operands])
        clone.name = instr.name
        mapping[id(instr)] = clone
    for instr in computation.instructions:  # in the original's order: array constants are passed in it
        if id(instr) in mapping:
            copy.add_instruction(mapping[id(instr)])
    values = [mapping[id(r)] for r in dict.fromkeys(results)]
    reached = _reached(values)
    outputs = [_returned(copy, v, reached) for v in values]
    root = HloInstruction(f"{computation.name}.{suffix}", "tuple", Shape.make_tuple([o.shape for o in outputs]),
                          outputs)
    copy.root = copy.add_instruction(root)
    copy.fusion_instruction = computation.fusion_instruction
    return partition(copy)


def _reached(values: list[HloInstruction]) -> set[int]:
    """The ids of ``values`` and of every instruction they depend on."""
    reached, pending = {id(v) for v in values}, list(values)
    while pending:
        for operand in pending.pop().operands:
            if id(operand) not in reached:
                reached.add(id(operand))
                pending.append(operand)
    return reached


def _returned(copy: HloComputation, value: HloInstruction, reached: set[int]) -> HloInstruction:
    """What the derived computation ``copy`` returns for ``value``: ``value``, or when other instructions computed
    for the results (``reached``) read it too, a copy of it under its name. A value of the root function that a
    function of its own reads would make that function call the root function back, without end."""
    if value.opcode == "parameter" or not any(id(u) in reached for u in value.users):
        return value
    returned = HloInstruction(value.name, "copy", value.shape, [value])
    value.name = f"{value.name}.value"
    return copy.add_instruction(returned)


def _results(partitioned: PartitionedComputation, call: PureCallOp, wanted: list[HloInstruction]) -> list[SSAValue]:
    """The results of ``call`` (of the root subgraph of ``partitioned``) standing for the instructions
    ``wanted`` of the original computation (found by name in the copy)."""
    roots = computation_roots(partitioned.computation)
    positions, first = {}, 0
    for r in roots:
        positions[r.name] = first
        first += len(result_types(r))
    return [call.results[positions[w.name]] for w in wanted]


def _entry_function(fusion: HloInstruction, updates: list[InPlaceUpdate], values: PartitionedComputation,
                    indices: PartitionedComputation | None, shape: Shape, launch: LaunchDimensions) -> func.FuncOp:
    buffers = buffer_arguments(values)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    output_types = [tensor_type(u.output_shape, fusion.name) for u in updates]
    block = Block(arg_types=[*param_types, *output_types])
    params, outputs = block.args[:len(param_types)], block.args[len(param_types):]
    for i, arg in enumerate(outputs):
        arg.name_hint = "output" if len(outputs) == 1 else f"output{i}"
    builder = Builder(InsertPoint.at_end(block))
    thread_id = builder.insert(ThreadIdOp("x", launch.threads_per_block - 1)).result
    block_id = builder.insert(BlockIdOp("x", launch.blocks - 1)).result
    thread_id.name_hint, block_id.name_hint = "thread_id_x", "block_id_x"
    starts = _clamped_starts(builder, updates, indices, params)
    indexing_map = thread_id_to_output_map(launch, shape)
    loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, list(outputs)))
    body = loop.body.block
    rank = len(shape.dimensions)
    symbols = len(indexing_map.range_vars)
    update_indices = list(body.args[symbols:symbols + rank])
    iters = body.args[symbols + rank:]
    inner = Builder(InsertPoint.at_end(body))
    root_types = [t for r in computation_roots(values.computation) for t in result_types(r)]
    call = inner.insert(PureCallOp(values.root_subgraph.name, [*params, *update_indices], root_types))
    update_values = _results(values, call, [u.update_value for u in updates])
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
    root_types = [t for r in computation_roots(indices.computation) for t in result_types(r)]
    call = builder.insert(PureCallOp(indices.root_subgraph.name, list(params), root_types))
    constants: dict[int, SSAValue] = {}

    def index(value: int) -> SSAValue:
        if value not in constants:
            constants[value] = builder.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result
        return constants[value]

    clamped = []
    for update in updates:
        raw = _results(indices, call, update.start_indices)
        operand_dims = update.update.shape.dimensions
        update_dims = update.update_value.shape.dimensions
        starts = []
        for start_instr, value, dim_size, size in zip(update.start_indices, raw, operand_dims, update_dims):
            type_name = start_instr.shape.element_type
            if is_unsigned(type_name) and value.type.width.data < 64:
                value = builder.insert(arith.ExtUIOp(value, IntegerType(64))).result
            start = builder.insert(arith.IndexCastOp(value, IndexType())).result
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
