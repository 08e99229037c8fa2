"""What the emitters share: the entry function's arguments and launch ids, its ``xla.slice_index`` marks, the
elementwise entry of the loop and transpose emitters, and the partitioned copies of a fused computation that
provide an instruction's values to an emitter that does not write the root (XLA's ``ProvideParameter``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from xdsl.builder import Builder
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IndexType, IntegerAttr, IntegerType, StringAttr
from xdsl.ir import Block, BlockArgument, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import BlockIdOp, LoopOp, PureCallOp, ThreadIdOp, YieldOp
from xlapy.codegen.elemental import FunctionEmitter
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, result_types
from xlapy.codegen.launch import BACKEND_KIND, Device, LaunchDimensions
from xlapy.codegen.partitioner import PartitionedComputation, Subgraph, computation_roots, partition, reached
from xlapy.codegen.passes.lower_tensors import SLICE_INDEX_ATTR
from xlapy.codegen.passes.prefetch_loads import mark_prefetch
from xlapy.codegen.types import element_type, is_unsigned, tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.opcodes import TRANSCENDENTAL_OPCODES
from xlapy.indexing import IndexingMap
from xlapy.shapes import Shape

ENTRY_NAME = "main"

# Opcodes the CPU computes with a math library function: dozens of instructions per element (rsqrt is one
# instruction and a refinement step).
MATH_LIBRARY_OPCODES = TRANSCENDENTAL_OPCODES - {"rsqrt"}
# A kernel calling one for each element spends so many instructions on each 64 bytes it reads that the reads the
# out-of-order window holds reach only a little ahead, and it waits for memory each time the hardware prefetchers
# start over at a new page (``prefetch-loads``). Prefetching this far ahead hides that wait (against the same code
# without it: gelu of f32[6,512,4096] 13.7-13.9 -> 11.1-12.4 ms; a scan writing ``tanh`` of f32[64,16384] rows by
# dynamic-update-slice, from memory, 1.36-1.44 -> 1.24-1.28 ms; 8 KiB ahead gained about half as much). A scan writing
# ``2 * row``, a few instructions per vector, gained nothing.
MATH_PREFETCH_BYTES = 16 << 10


def calls_math_library(computation: HloComputation) -> bool:
    """Whether ``computation`` computes an op of ``MATH_LIBRARY_OPCODES`` on arrays."""
    return any(i.opcode in MATH_LIBRARY_OPCODES and not i.shape.is_scalar for i in computation.instructions)


def prefetch_for_math(entry: func.FuncOp, fusion: HloInstruction, device: Device) -> None:
    """On the CPU, asks ``prefetch-loads`` for prefetches ``MATH_PREFETCH_BYTES`` ahead of the vector loads of
    ``entry`` (the body of the loops over blocks and threads) when ``fusion`` calls a math library function for
    each element."""
    if device.name == "cpu" and calls_math_library(fusion.fused_computation):
        mark_prefetch(entry, MATH_PREFETCH_BYTES)


def fusion_output_shapes(fusion: HloInstruction) -> list[Shape]:
    """The fusion's output shapes (with the fusion's layouts, which may differ from the fused roots')."""
    return list(fusion.shape.tuple_shapes) if fusion.shape.is_tuple else [fusion.shape]


def first_output_buffer(fusion: HloInstruction) -> int:
    """The position of the first output among the kernel's buffers (operands, array constants, outputs)."""
    computation = fusion.fused_computation
    return len(fusion.operands) + sum(1 for i in computation.instructions
                                      if i.opcode == "constant" and i.shape.dimensions)


def entry_block(param_types: Sequence, output_types: Sequence) -> tuple[Block, list[BlockArgument],
                                                                        list[BlockArgument]]:
    """The entry function's block, its parameter arguments and its output arguments (named ``output``, or
    ``output0``, ``output1``, ... when there are several)."""
    block = Block(arg_types=[*param_types, *output_types])
    params, outputs = list(block.args[:len(param_types)]), list(block.args[len(param_types):])
    for i, arg in enumerate(outputs):
        arg.name_hint = "output" if len(outputs) == 1 else f"output{i}"
    return block, params, outputs


def launch_ids(builder: Builder, threads_per_block: int, blocks: int) -> tuple[SSAValue, SSAValue]:
    """The thread and block ids of a launch of ``threads_per_block`` threads in each of ``blocks`` blocks."""
    thread_id = builder.insert(ThreadIdOp("x", threads_per_block - 1)).result
    block_id = builder.insert(BlockIdOp("x", blocks - 1)).result
    thread_id.name_hint, block_id.name_hint = "thread_id_x", "block_id_x"
    return thread_id, block_id


def mark_slices(entry: func.FuncOp, fusion: HloInstruction, slice_indices: Sequence[int]) -> None:
    """Gives each tensor argument of ``entry`` its ``xla.slice_index``."""
    count = len(entry.function_type.inputs.data)
    if len(slice_indices) != count:
        raise VerifyError(f"fusion {fusion.name}: {len(slice_indices)} slice indices for the {count} buffers of its "
                          "kernel")
    entry.arg_attrs = ArrayAttr([DictionaryAttr({SLICE_INDEX_ATTR: IntegerAttr(index, IndexType())})
                                 for index in slice_indices])


def finish_entry(entry: func.FuncOp, fusion: HloInstruction, device: Device,
                 slice_indices: Sequence[int] | None) -> None:
    """Marks the entry's buffer slices (when some are shared, see ``mark_slices``) and the backend it is for."""
    if slice_indices is not None:
        mark_slices(entry, fusion, slice_indices)
    if device.name == "cpu":
        entry.attributes[BACKEND_KIND] = StringAttr(device.name)


def root_result_types(partitioned: PartitionedComputation) -> list:
    """The result types of the root subgraph's function: the elements of the roots, in order."""
    return [t for r in computation_roots(partitioned.computation) for t in result_types(r)]


def root_positions(partitioned: PartitionedComputation) -> dict[str, int]:
    """For each root of ``partitioned`` (by name), the position of its first result in the root function's."""
    positions, first = {}, 0
    for root in computation_roots(partitioned.computation):
        positions[root.name] = first
        first += len(result_types(root))
    return positions


def values_at(builder: Builder, partitioned: PartitionedComputation, params: Sequence[SSAValue],
              at: Sequence[SSAValue], wanted: Sequence[HloInstruction]) -> list[SSAValue]:
    """The values of ``wanted`` (instructions of the fused computation, found by name among the roots of the
    derived ``partitioned``) at indices ``at``, by a call of its root function."""
    call = builder.insert(PureCallOp(partitioned.root_subgraph.name, [*params, *at], root_result_types(partitioned)))
    positions = root_positions(partitioned)
    return [call.results[positions[w.name]] for w in wanted]


def index_value(builder: Builder, value: SSAValue, element_type: str) -> SSAValue:
    """Integer ``value`` of HLO ``element_type`` as an ``index`` (unsigned types below 64 bits zero-extended
    first)."""
    if is_unsigned(element_type) and value.type.width.data < 64:
        value = builder.insert(arith.ExtUIOp(value, IntegerType(64))).result
    return builder.insert(arith.IndexCastOp(value, IndexType())).result


class EntryStart(NamedTuple):
    """The start of a fusion's ``@main``: its block and arguments, a builder at the block's end and the launch ids."""

    block: Block
    params: list[BlockArgument]
    outputs: list[BlockArgument]
    builder: Builder
    thread_id: SSAValue
    block_id: SSAValue


def entry_function(block: Block, outputs: Sequence[BlockArgument]) -> func.FuncOp:
    """``@main`` of ``block`` (begun by ``start_entry``): its arguments in, the ``outputs`` among them returned."""
    return func.FuncOp(ENTRY_NAME, ([a.type for a in block.args], [o.type for o in outputs]), Region(block))


def start_entry(partitioned: PartitionedComputation, fusion: HloInstruction, launch: LaunchDimensions) -> EntryStart:
    """``@main``'s block with the buffers of ``partitioned``'s parameters and of ``fusion``'s outputs as arguments
    (a lone parameter named ``input``), and the thread and block ids of ``launch``."""
    param_types = [tensor_type(p.shape, p.name) for p in buffer_arguments(partitioned)]
    output_types = [tensor_type(s, fusion.name) for s in fusion_output_shapes(fusion)]
    block, params, outputs = entry_block(param_types, output_types)
    if len(params) == 1:
        params[0].name_hint = "input"
    builder = Builder(InsertPoint.at_end(block))
    thread_id, block_id = launch_ids(builder, launch.threads_per_block, launch.blocks)
    return EntryStart(block, params, outputs, builder, thread_id, block_id)


def elementwise_entry_function(partitioned: PartitionedComputation, fusion: HloInstruction,
                               launch: LaunchDimensions, indexing_map: IndexingMap) -> func.FuncOp:
    """The entry function of the loop and transpose emitters: one ``xla.loop`` over ``indexing_map`` (thread and
    block ids to output indices), each iteration calling the root subgraph's function and inserting its results
    into the outputs."""
    computation = partitioned.computation
    output_shapes = fusion_output_shapes(fusion)
    block, params, outputs, builder, thread_id, block_id = start_entry(partitioned, fusion, launch)
    loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, outputs))
    loop.results[0].name_hint = "xla_loop"
    body = loop.body.block
    rank = len(output_shapes[0].dimensions)
    symbols = len(indexing_map.range_vars)
    indices = list(body.args[symbols:symbols + rank])
    iters = body.args[symbols + rank:]
    inner = Builder(InsertPoint.at_end(body))
    call = inner.insert(PureCallOp(partitioned.root_subgraph.name, [*params, *indices],
                                   root_result_types(partitioned)))
    call.results[0].name_hint = "pure_call"
    inserted = []
    for position, into in zip(_output_positions(computation, partitioned), iters):
        op = inner.insert(tensor.InsertOp(call.results[position], into, indices))
        op.result.name_hint = "inserted"
        inserted.append(op.result)
    inner.insert(YieldOp(inserted))
    builder.insert(func.ReturnOp(*loop.results))
    return entry_function(block, outputs)


def _output_positions(computation: HloComputation, partitioned: PartitionedComputation) -> list[int]:
    """For each output of the fusion, its position among the results of the root subgraph's function."""
    firsts = root_positions(partitioned)
    root = computation.root
    if root.opcode == "tuple":
        return [firsts[r.name] for r in root.operands]
    return [firsts[root.name] + k for k in range(len(result_types(root)))]


def derived_partition(computation: HloComputation, suffix: str, results: list[HloInstruction],
                      without_root: bool = False) -> PartitionedComputation:
    """The partition of a copy of ``computation`` (without its root when ``without_root``) returning ``results``
    (their copies, in a root tuple): the same parameters and array constants in the same order, so that its
    functions take the entry's buffers."""
    copy = HloComputation(f"{computation.name}.{suffix}")
    mapping: dict[int, HloInstruction] = {}
    for instr in computation.post_order():  # operands first
        if without_root and instr is computation.root:
            continue
        clone = instr.clone([mapping[id(o)] for o in instr.operands])
        clone.name = instr.name
        mapping[id(instr)] = clone
    for instr in computation.instructions:  # in the original's order: array constants are passed in it
        if id(instr) in mapping:
            copy.add_instruction(mapping[id(instr)])
    values = [mapping[id(r)] for r in dict.fromkeys(results)]
    reached_ids = reached(values)
    outputs = [_returned(copy, v, reached_ids) for v in values]
    root = HloInstruction(f"{computation.name}.{suffix}", "tuple", Shape.make_tuple([o.shape for o in outputs]),
                          outputs)
    copy.root = copy.add_instruction(root)
    copy.fusion_instruction = computation.fusion_instruction
    return partition(copy)


def _returned(copy: HloComputation, value: HloInstruction, reached: set[int]) -> HloInstruction:
    """What the derived computation ``copy`` returns for ``value``: ``value``, or when other instructions computed
    for the results (``reached``) read it too, a copy of it under its name. A value of the root function that a
    function of its own reads would make that function call the root function back, without end."""
    if value.opcode == "parameter" or not any(id(u) in reached for u in value.users):
        return value
    returned = HloInstruction(value.name, "copy", value.shape, [value])
    value.name = f"{value.name}.value"
    return copy.add_instruction(returned)


def symbol_name(name: str) -> str:
    """``name`` with the characters a function symbol cannot hold replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_.$]", "_", name)


def name_arguments(params: Sequence[SSAValue], buffers: Sequence[HloInstruction],
                   indices: Sequence[SSAValue]) -> None:
    """Names a function's buffer arguments after their parameters (when valid names) and its indices ``i0``,
    ``i1``, ..."""
    for arg, p in zip(params, buffers):
        if SSAValue.is_valid_name(p.name.replace(".", "_").replace("-", "_")):
            arg.name_hint = p.name.replace(".", "_").replace("-", "_")
    for i, arg in enumerate(indices):
        arg.name_hint = f"i{i}"


def function_at_indices(name: str, partitioned: PartitionedComputation, roots: Sequence[HloInstruction], rank: int,
                        called: CalledFunctions, bound: HloInstruction | None = None,
                        bound_hint: str = "transposed") -> func.FuncOp:
    """``func.func private @name(buffers..., indices..., [bound value]) -> (values of roots)``: the roots at the
    indices, every instruction computed in the function itself (``bound``, when given, is the last argument, named
    ``bound_hint``): a hero's prologue or epilogue."""
    buffers = buffer_arguments(partitioned)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    extra = [element_type(bound.shape.element_type, bound.name)] if bound is not None else []
    block = Block(arg_types=[*param_types, *([IndexType()] * rank), *extra])
    params, indices = block.args[:len(param_types)], tuple(block.args[len(param_types):len(param_types) + rank])
    name_arguments(params, buffers, indices)
    bound_values = {bound: block.args[-1]} if bound is not None else {}
    if bound is not None:
        block.args[-1].name_hint = bound_hint
    subgraph = Subgraph(name, list(roots))
    whole = PartitionedComputation(partitioned.computation, [subgraph],
                                   {i: subgraph for i in partitioned.computation.instructions})
    emitter = FunctionEmitter(whole, subgraph, block, params, indices, called, bound_values)
    values = [emitter.emit_scalar(r, indices) for r in roots]
    emitter.insert(func.ReturnOp(*values))
    types = [v.type for v in values]
    return func.FuncOp(name, ([*param_types, *([IndexType()] * rank), *extra], types), Region(block),
                       visibility="private")


__all__ = [
    "ENTRY_NAME",
    "MATH_LIBRARY_OPCODES",
    "MATH_PREFETCH_BYTES",
    "calls_math_library",
    "derived_partition",
    "elementwise_entry_function",
    "entry_block",
    "finish_entry",
    "first_output_buffer",
    "function_at_indices",
    "fusion_output_shapes",
    "index_value",
    "launch_ids",
    "mark_slices",
    "prefetch_for_math",
    "root_positions",
    "root_result_types",
    "symbol_name",
    "values_at",
]
