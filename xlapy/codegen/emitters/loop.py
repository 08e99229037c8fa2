"""The loop emitter (XLA's loop.h; docs/emitters.md): the default emitter of a
fusion. One ``xla.loop`` over the thread/block/vector map walks the output
linearly; each iteration calls the root subgraph and ``tensor.insert``s its
results into the output tensors (the entry function of XLA's emitters). A tuple-shaped root (a variadic reduce)
writes one output per element, at the indices of its first (``index_shape``). The functions of the computations
the fused instructions apply to scalars (reducers) follow the subgraphs' functions.

When the runtime passes one buffer slice as several of the entry's tensors (an output written over the operand
it replaces), each tensor argument carries ``xla.slice_index``: arguments with the same index are one pointer
after ``lower-tensors``, as XLA's emitters mark them."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IndexType, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Region
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import BlockIdOp, LoopOp, PureCallOp, ThreadIdOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function, result_types
from xlapy.codegen.launch import (
    BACKEND_KIND,
    Device,
    LaunchDimensions,
    loop_launch_dimensions,
    thread_id_to_output_map,
)
from xlapy.codegen.partitioner import PartitionedComputation, computation_roots, index_shape, partition
from xlapy.codegen.passes.lower_tensors import SLICE_INDEX_ATTR
from xlapy.codegen.types import tensor_type
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction

ENTRY_NAME = "main"


def emit_loop_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a loop fusion: the entry function ``@main`` and one
    private function per subgraph of the partitioned fused computation.
    ``slice_indices`` gives each entry tensor (parameters, array constants, outputs) the index of the buffer
    slice it is passed in; None when every tensor has a slice of its own."""
    computation = fusion.fused_computation
    roots = computation_roots(computation)
    output_shape = index_shape(roots[0].shape)
    for root in roots:
        result_types(root)
        for shape in root.shape.tuple_shapes if root.shape.is_tuple else (root.shape,):
            if shape.layout != output_shape.layout and shape.layout is not None and output_shape.layout:
                raise UnimplementedError(f"multi-output fusion {fusion.name} with outputs of different layouts")
    partitioned = partition(computation)
    within_rows = device.rows_hold_vectors and _reads_through_broadcasts(fusion)
    launch = loop_launch_dimensions(output_shape, device, within_rows)
    called = CalledFunctions([ENTRY_NAME, *(s.name for s in partitioned.subgraphs)])
    functions = [emit_subgraph_function(partitioned, s, called) for s in partitioned.subgraphs]
    entry = _entry_function(partitioned, fusion, launch)
    if slice_indices is not None:
        mark_slices(entry, fusion, slice_indices)
    if device.name == "cpu":
        entry.attributes[BACKEND_KIND] = StringAttr(device.name)
    return ModuleOp([entry, *functions, *called.functions]), launch


def _reads_through_broadcasts(fusion: HloInstruction) -> bool:
    """Whether the fused computation broadcasts an array (not a scalar): the elements it reads repeat with the
    output's rows."""
    return any(i.opcode == "broadcast" and i.operands[0].shape.dimensions
               for i in fusion.fused_computation.instructions)


def _entry_function(partitioned: PartitionedComputation, fusion: HloInstruction,
                    launch: LaunchDimensions) -> func.FuncOp:
    computation = partitioned.computation
    roots = computation_roots(computation)
    output_shapes = _output_shapes(fusion)
    param_types = [tensor_type(p.shape, p.name) for p in buffer_arguments(partitioned)]
    output_types = [tensor_type(s, fusion.name) for s in output_shapes]
    block = Block(arg_types=[*param_types, *output_types])
    params, outputs = block.args[:len(param_types)], block.args[len(param_types):]
    if len(params) == 1:
        params[0].name_hint = "input"
    for i, arg in enumerate(outputs):
        arg.name_hint = "output" if len(outputs) == 1 else f"output{i}"
    builder = Builder(InsertPoint.at_end(block))
    thread_id = builder.insert(ThreadIdOp("x", launch.threads_per_block - 1)).result
    block_id = builder.insert(BlockIdOp("x", launch.blocks - 1)).result
    thread_id.name_hint, block_id.name_hint = "thread_id_x", "block_id_x"
    indexing_map = thread_id_to_output_map(launch, output_shapes[0])
    loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, list(outputs)))
    loop.results[0].name_hint = "xla_loop"
    body = loop.body.block
    rank = len(output_shapes[0].dimensions)
    symbols = len(indexing_map.range_vars)
    indices = list(body.args[symbols:symbols + rank])
    iters = body.args[symbols + rank:]
    inner = Builder(InsertPoint.at_end(body))
    call = inner.insert(PureCallOp(partitioned.root_subgraph.name, [*params, *indices],
                                   [t for r in roots for t in result_types(r)]))
    call.results[0].name_hint = "pure_call"
    inserted = []
    for position, into in zip(_output_positions(computation, roots), iters):
        op = inner.insert(tensor.InsertOp(call.results[position], into, indices))
        op.result.name_hint = "inserted"
        inserted.append(op.result)
    inner.insert(YieldOp(inserted))
    builder.insert(func.ReturnOp(*loop.results))
    return func.FuncOp(ENTRY_NAME, ([*param_types, *output_types], output_types), Region(block))


def mark_slices(entry: func.FuncOp, fusion: HloInstruction, slice_indices: Sequence[int]) -> None:
    """Gives each tensor argument of ``entry`` its ``xla.slice_index``."""
    count = len(entry.function_type.inputs.data)
    if len(slice_indices) != count:
        raise VerifyError(f"fusion {fusion.name}: {len(slice_indices)} slice indices for the {count} buffers of its "
                          "kernel")
    entry.arg_attrs = ArrayAttr([DictionaryAttr({SLICE_INDEX_ATTR: IntegerAttr(index, IndexType())})
                                 for index in slice_indices])


def _output_positions(computation: HloComputation, roots: list[HloInstruction]) -> list[int]:
    """For each output of the fusion, its position among the results of the root subgraph's function (the
    elements of the roots, in order)."""
    firsts = {}
    position = 0
    for root in roots:
        firsts[root] = position
        position += len(result_types(root))
    root = computation.root
    if root.opcode == "tuple":
        return [firsts[r] for r in root.operands]
    return [firsts[root] + k for k in range(len(result_types(root)))]


def _output_shapes(fusion: HloInstruction) -> list:
    """The fusion's output shapes (with the fusion's layouts, which may differ
    from the fused roots')."""
    return list(fusion.shape.tuple_shapes) if fusion.shape.tuple_shapes else [fusion.shape]
