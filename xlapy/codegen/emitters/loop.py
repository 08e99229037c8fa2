"""The loop emitter (XLA's loop.h; docs/emitters.md): the default emitter of a
fusion. One ``xla.loop`` over the thread/block/vector map walks the output
linearly; each iteration calls the root subgraph and ``tensor.insert``s its
results into the output tensors (the entry function of XLA's emitters)."""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import BlockIdOp, LoopOp, PureCallOp, ThreadIdOp, YieldOp
from xlapy.codegen.elemental_rules import buffer_arguments, emit_subgraph_function
from xlapy.codegen.launch import (
    BACKEND_KIND,
    Device,
    LaunchDimensions,
    loop_launch_dimensions,
    thread_id_to_output_map,
)
from xlapy.codegen.partitioner import PartitionedComputation, computation_roots, partition
from xlapy.codegen.types import element_type, tensor_type
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction

ENTRY_NAME = "main"


def emit_loop_fusion(fusion: HloInstruction, device: Device) -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a loop fusion: the entry function ``@main`` and one
    private function per subgraph of the partitioned fused computation."""
    computation = fusion.fused_computation
    roots = computation_roots(computation)
    output_shape = roots[0].shape
    for root in roots:
        element_type(root.shape.element_type, root.name)
        if root.shape.layout != output_shape.layout and root.shape.layout is not None and output_shape.layout:
            raise UnimplementedError(f"multi-output fusion {fusion.name} with outputs of different layouts")
    partitioned = partition(computation)
    within_rows = device.rows_hold_vectors and _reads_through_broadcasts(fusion)
    launch = loop_launch_dimensions(output_shape, device, within_rows)
    functions = [emit_subgraph_function(partitioned, s) for s in partitioned.subgraphs]
    entry = _entry_function(partitioned, fusion, launch)
    if device.name == "cpu":
        entry.attributes[BACKEND_KIND] = StringAttr(device.name)
    return ModuleOp([entry, *functions]), launch


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
                                   [element_type(r.shape.element_type, r.name) for r in roots]))
    call.results[0].name_hint = "pure_call"
    outputs_roots = computation.root.operands if computation.root.opcode == "tuple" else [computation.root]
    inserted = []
    for root, into in zip(outputs_roots, iters):
        op = inner.insert(tensor.InsertOp(call.results[roots.index(root)], into, indices))
        op.result.name_hint = "inserted"
        inserted.append(op.result)
    inner.insert(YieldOp(inserted))
    builder.insert(func.ReturnOp(*loop.results))
    return func.FuncOp(ENTRY_NAME, ([*param_types, *output_types], output_types), Region(block))


def _output_shapes(fusion: HloInstruction) -> list:
    """The fusion's output shapes (with the fusion's layouts, which may differ
    from the fused roots')."""
    return list(fusion.shape.tuple_shapes) if fusion.shape.tuple_shapes else [fusion.shape]
