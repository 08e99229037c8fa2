"""The loop emitter (XLA's loop.h; docs/emitters.md): the default emitter of a
fusion. One ``xla.loop`` over the thread/block/vector map walks the output
linearly; each iteration calls the root subgraph and ``tensor.insert``s its
results into the output tensors (the entry function of XLA's emitters). A tuple-shaped root (a variadic reduce)
writes one output per element, at the indices of its first (``index_shape``). The functions of the computations
the fused instructions apply to scalars (reducers) follow the subgraphs' functions.

When the runtime passes one buffer slice as several of the entry's tensors (an output written over the operand
it replaces), each tensor argument carries ``xla.slice_index``: arguments with the same index are one pointer
after ``lower-tensors``, as XLA's emitters mark them.

On the CPU, a fusion that only moves the elements of a large operand (a copy, a transpose that its layouts make a
copy, a reshape; ``moves_large_operand``) asks `prefetch-loads` to prefetch its reads ``COPY_PREFETCH_BYTES``
ahead into the second-level cache: the threads of a block and the blocks of a core read one stream through the
operand, which the hardware prefetchers give up on at every 4 KiB page."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp

from xlapy.codegen.elemental_rules import CalledFunctions, emit_subgraph_function, result_types
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    elementwise_entry_function,
    finish_entry,
    fusion_output_shapes,
    prefetch_for_math,
)
from xlapy.codegen.launch import Device, LaunchDimensions, loop_launch_dimensions, thread_id_to_output_map
from xlapy.codegen.partitioner import computation_roots, index_shape, partition
from xlapy.codegen.passes.prefetch_loads import mark_prefetch
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import physical_byte_size

# Opcodes that only move elements: each output element is one element of the operand.
_MOVING_OPCODES = frozenset({"parameter", "copy", "transpose", "bitcast", "reshape"})
# A copy of this many bytes or more prefetches its reads (f32[64,256,256], 16 MiB: 11% faster from memory, 3% from
# the third-level cache; 8 MiB and 4 MiB: 0-7% faster from memory; 1 MiB: 6-10% slower from the cache) ...
COPY_PREFETCH_MIN_BYTES = 16 << 20
# ... this far ahead (8 to 32 KiB measured within a few percent of each other) ...
COPY_PREFETCH_BYTES = 16 << 10
# ... into the second-level cache (prefetcht1): into the first level (prefetcht0) gained nothing, and prefetchnta
# made the copy twice as slow.
COPY_PREFETCH_LOCALITY = 2


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
    indexing_map = thread_id_to_output_map(launch, fusion_output_shapes(fusion)[0])
    entry = elementwise_entry_function(partitioned, fusion, launch, indexing_map)
    finish_entry(entry, fusion, device, slice_indices)
    if device.name == "cpu" and moves_large_operand(fusion):
        mark_prefetch(entry, COPY_PREFETCH_BYTES, COPY_PREFETCH_LOCALITY)
    else:
        prefetch_for_math(entry, fusion, device)
    return ModuleOp([entry, *functions, *called.functions]), launch


def moves_large_operand(fusion: HloInstruction) -> bool:
    """Whether ``fusion`` only moves elements (``_MOVING_OPCODES``) of an operand of ``COPY_PREFETCH_MIN_BYTES`` or
    more."""
    computation = fusion.fused_computation
    return all(i.opcode in _MOVING_OPCODES for i in computation.instructions) and \
        any(physical_byte_size(p.shape) >= COPY_PREFETCH_MIN_BYTES for p in computation.parameters)


def _reads_through_broadcasts(fusion: HloInstruction) -> bool:
    """Whether the fused computation broadcasts an array (not a scalar): the elements it reads repeat with the
    output's rows."""
    return any(i.opcode == "broadcast" and i.operands[0].shape.dimensions
               for i in fusion.fused_computation.instructions)
