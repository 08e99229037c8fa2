"""The transpose emitter: a fusion whose hero is a transpose that moves the minor dimension
(``fusion_kind_of`` says "transpose"; XLA's ``xla/backends/gpu/codegen/emitters/transpose.cc``), emitted tile by
tile so that reads and writes both stay within a few cache lines. It has two forms.

**The shared-tile form** (XLA's two loops, ``EmitReadFromGMemWriteToShMem`` and ``EmitWriteFromShMemToGMem``). A
block handles a square tile of ``shared_tile_side`` elements along the output's minor dimension and along the
output dimension that reads the operand's minor dimension (1 along the others); a block's thread handles one row:

1. ``xla.allocate_shared`` gives the block's tile; the first ``xla.loop`` reads the operand's tile row by row
   along the operand's minor dimension (``s0``, contiguous: vector loads), applies the prologue (the function
   computing the hero's operand, ``@<fusion>_<operand>``) and stores each row into the shared tile;
2. ``xla.sync_threads``: every thread's row is in the tile;
3. the second ``xla.loop`` writes the output's tile row by row along the output's minor dimension (vector
   stores), reading a column of the shared tile, and applies the epilogue on the way out
   (``@<fusion>__epilogue__``, which takes the transposed element and computes every output at the output's
   indices: the hero's elementwise epilogue, and side outputs that read other operands there).

For ``f32[20,160,170] -> abs(transpose {0,2,1})`` (``data/transpose/epilogue.hlo``, in the shared-tile form)::

    %shmem = xla.allocate_shared : tensor<32x32xf32>
    %shmem_with_values = xla.loop (%thread_id_x, %block_id_x)[%s0] -> (%dim0, %dim1, %dim2, %dim3, %dim4)
        in #xla.indexing_map<"(th_x, bl_x)[s0] -> (bl_x floordiv 30, (bl_x mod 5) * 32 + th_x,
        ((bl_x floordiv 5) mod 6) * 32 + s0, th_x, s0), domain: th_x in [0, 31], bl_x in [0, 599],
        s0 in [0, 31], ((bl_x floordiv 5) mod 6) * 32 + s0 in [0, 169]">
        iter_args(%iter = %shmem) -> (tensor<32x32xf32>) {
      %0 = xla.pure_call @fusion_p0(%input, %dim0, %dim1, %dim2) : (...) -> f32
      %1 = tensor.insert %0 into %iter[%dim3, %dim4] : tensor<32x32xf32>
      xla.yield %1 : tensor<32x32xf32>
    }
    %synced = xla.sync_threads %shmem_with_values : tensor<32x32xf32>
    %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%s0_1] -> (%dim0_1, %dim1_1, %dim2_1, %dim3_1, %dim4_1)
        in #xla.indexing_map<"(th_x, bl_x)[s0] -> (bl_x floordiv 30, ((bl_x floordiv 5) mod 6) * 32 + th_x,
        (bl_x mod 5) * 32 + s0, s0, th_x), ...">
        iter_args(%iter_1 = %output) -> (tensor<20x170x160xf32>) {
      %transposed = tensor.extract %synced[%dim3_1, %dim4_1] : tensor<32x32xf32>
      %2 = xla.pure_call @fusion__epilogue__(%input, %dim0_1, %dim1_1, %dim2_1, %transposed) : (...) -> f32
      %3 = tensor.insert %2 into %iter_1[%dim0_1, %dim1_1, %dim2_1] : tensor<20x170x160xf32>
      xla.yield %3 : tensor<20x170x160xf32>
    }

The CPU runs the block's threads one after another: ``lower-tensors`` makes the tile a stack array and the CPU
backend splits the thread loop at the barrier (the GPU model on the CPU is documented in
``xlapy/codegen/passes/lower_tensors.py`` and ``xlapy/codegen/backends/cpu.py``, ``_emit_loops``). Unlike XLA's
GPU tile (32x33), the tile has no padding column: padding avoids shared-memory bank conflicts on a GPU, while on
the CPU it would misalign the tile's rows, which must start at multiples of the row length for the first loop's
stores to be vector stores. The tile is 32x32 elements of 4 bytes or more (4 KiB of f32, 8 KiB of f64: within
the first-level cache) and, for smaller types, a cache line of elements along both dimensions (64x64 of s8 or
pred; XLA widens the tile's minor dimension for packed types alike), so that every row read or written is at
least a whole cache line.

**The direct form** reads the operand at the transposed indices, like the loop emitter, in the order of the
tiles: a block handles one tile of the output (``tile_sizes``): a cache line of elements along the output's minor
dimension times ``TILE`` along the output dimension that reads the operand's minor dimension; a thread writes one
row of the tile (vector stores) and the block's threads read ``TILE`` consecutive elements of each of a line's
worth of the operand's rows while those lines are in the first-level cache, which plays the part of the shared
tile. Measured on a 2-core AVX-512 host (medians of 40 alternating runs of the whole program, f32[64,256,256]):

- 021 (rows of 1 KiB apart): direct 1.75 ms, shared tile 2.06 ms. The rows' lines stay in the cache while the
  threads read across them, and the copy into the tile only adds work: the direct form is kept.
- 210 (rows 256 KiB apart): direct 2.80 ms, shared tile 2.57 ms. Lines a multiple of 4 KiB apart fall in one
  cache set and evict each other before the next thread reads them; the tile reads each row once, whole.

So the shared-tile form is used when the operand's rows a tile reads are ``SHARED_TILE_MIN_ROW_BYTES`` or more
apart (``uses_shared_tile``). A 102 transpose (the minor dimension stays: whole rows move) and a fusion whose
epilogue reads the transposed value at other indices than the output's (the tile would not hold them) always use
the direct form. In the direct form the fusion's other instructions run as the loop emitter's do: every output
element is the root subgraph's function at its indices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import AllocateSharedOp, LoopOp, PureCallOp, SyncThreadsOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, emit_subgraph_function, result_types
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    elementwise_entry_function,
    entry_function,
    finish_entry,
    function_at_indices,
    fusion_output_shapes,
    start_entry,
    symbol_name,
)
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.partitioner import computation_roots, partition
from xlapy.codegen.types import element_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops import op_output_to_input
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.fusion_hero import find_non_trivial_hero, fusion_kind_of, fusion_roots

# Elements of a tile along the output dimension that reads the operand's minor dimension: as many lines of the
# operand as stay in the first-level cache while the block reads across them (lines a power of two apart fall
# in one cache set). Along the output's minor dimension a tile takes one cache line, a row of SIMD stores.
TILE = 32
CACHE_LINE_BYTES = 64
# The shared-tile form is used when the rows of the operand a tile reads are at least this many bytes apart: the
# size of one way of the first-level data cache (48 KiB in 12 ways, 32 KiB in 8), beyond which the rows' lines fall
# in the same few cache sets and the direct form's reads across them evict each other (see the module docstring).
SHARED_TILE_MIN_ROW_BYTES = 4096


def _physical_order(shape: Shape) -> list[int]:
    """Dimensions from major to minor."""
    return list(reversed(shape.layout_or_default.minor_to_major))


def transpose_hero(fusion: HloInstruction) -> HloInstruction | None:
    """The transpose the fusion is tiled for, when the transpose emitter handles ``fusion``: XLA would emit it
    with its transpose emitter, and every output has the dimensions and layout of that transpose (the tile is
    laid over them), so that the roots are the transpose's elementwise epilogue."""
    if fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None):
        return None
    if fusion_kind_of(fusion) != "transpose":
        return None
    hero = find_non_trivial_hero(fusion_roots(fusion)[0])
    layout = hero.shape.layout_or_default.minor_to_major
    for shape in fusion_output_shapes(fusion):
        if shape.is_tuple or tuple(shape.dimensions) != tuple(hero.shape.dimensions) or \
                shape.layout_or_default.minor_to_major != layout:
            return None
    return hero


def is_transpose_fusion(fusion: HloInstruction) -> bool:
    """Whether the transpose emitter emits ``fusion`` (see ``transpose_hero``)."""
    return transpose_hero(fusion) is not None


def tile_sizes(hero: HloInstruction) -> list[int]:
    """The tile along each output dimension of transpose ``hero``: a cache line of elements
    (``CACHE_LINE_BYTES``) along the output's minor dimension, ``TILE`` elements along the output dimension read
    from the operand's minor dimension, and 1 along the others (at most each dimension). When both are the same
    dimension (a minor dimension of a few bytes that stays in place), the tile takes the whole of it and ``TILE``
    elements along the next dimension of the output and of the operand."""
    output, operand = hero.shape, hero.operands[0].shape
    permutation = list(hero.attr("dimensions"))
    output_order = [d for d in _physical_order(output) if output.dimensions[d] != 1]
    operand_order = [d for d in _physical_order(operand) if operand.dimensions[d] != 1]
    sizes = [1] * len(output.dimensions)
    if not output_order or not operand_order:
        return sizes
    reads = {p: d for d, p in enumerate(permutation)}  # operand dimension -> the output dimension reading it
    minor, read_minor = output_order[-1], reads[operand_order[-1]]
    if minor == read_minor:
        if len(output_order) < 2 or len(operand_order) < 2:
            return sizes
        sizes[minor] = output.dimensions[minor]
        for d in (output_order[-2], reads[operand_order[-2]]):
            sizes[d] = min(TILE, output.dimensions[d])
        return sizes
    line = max(1, CACHE_LINE_BYTES // ELEMENT_TYPES[output.element_type].byte_width)
    sizes[minor] = min(line, output.dimensions[minor])
    sizes[read_minor] = min(TILE, output.dimensions[read_minor])
    return sizes


def transpose_launch(hero: HloInstruction) -> tuple[LaunchDimensions, IndexingMap]:
    """The launch of the transpose emitter and its ``(th_x, bl_x)[s0] -> (output indices)`` map: a block per
    tile (tiles in the output's physical order), a thread per row of the tile (every dimension but the
    output's minor one) and ``s0`` along the output's minor dimension within the tile."""
    shape = hero.shape
    sizes = tile_sizes(hero)
    dims = list(shape.dimensions)
    order = _physical_order(shape)
    minor = order[-1]
    tiles = [-(-d // t) for d, t in zip(dims, sizes)]
    threads = math.prod(t for d, t in enumerate(sizes) if d != minor)
    blocks = math.prod(tiles)
    results = [const(0)] * len(dims)
    constraints = []
    block_stride, thread_stride = 1, 1
    for d in reversed(order):
        tile = floordiv(dim(1), const(block_stride)) if block_stride > 1 else dim(1)
        if block_stride * tiles[d] < blocks:
            tile = mod(tile, const(tiles[d]))
        block_stride *= tiles[d]
        if d == minor:
            local = sym(0)
        else:
            local = floordiv(dim(0), const(thread_stride)) if thread_stride > 1 else dim(0)
            if thread_stride * sizes[d] < threads:
                local = mod(local, const(sizes[d]))
            thread_stride *= sizes[d]
        index = add(mul(tile, const(sizes[d])), local) if tiles[d] > 1 else local
        results[d] = index
        if tiles[d] * sizes[d] != dims[d]:
            constraints.append((index, Interval(0, dims[d] - 1)))
    indexing_map = IndexingMap.from_exprs(
        results,
        [Variable(Interval(0, threads - 1), "th_x"), Variable(Interval(0, blocks - 1), "bl_x")],
        [Variable(Interval(0, sizes[minor] - 1), "s0")],
        constraints=constraints,
    )
    return LaunchDimensions(threads, blocks, sizes[minor]), indexing_map.simplify().sort_summands()


def emit_transpose_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None,
                          shared_tile: bool | None = None) -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a transpose fusion: the entry function ``@main`` and the private functions it calls. In
    the shared-tile form (``uses_shared_tile``, or ``shared_tile`` when given and the form applies) two
    ``xla.loop`` around an ``xla.sync_threads`` (see the module's docstring); in the direct form one ``xla.loop``
    over a tile per block, calling the root subgraph's function."""
    hero = transpose_hero(fusion)
    if hero is None:
        raise VerifyError(f"fusion {fusion.name} is not a transpose fusion the transpose emitter handles")
    computation = fusion.fused_computation
    for root in computation_roots(computation):
        result_types(root)
    applies = _shared_tile_dims(hero) is not None and \
        _reads_hero_elementwise(hero, _fusion_outputs(computation))
    if applies and (shared_tile if shared_tile is not None else uses_shared_tile(fusion)):
        return _emit_shared_tile(fusion, hero, device, slice_indices)
    partitioned = partition(computation)
    launch, indexing_map = transpose_launch(hero)
    called = CalledFunctions([ENTRY_NAME, *(s.name for s in partitioned.subgraphs)])
    functions = [emit_subgraph_function(partitioned, s, called) for s in partitioned.subgraphs]
    entry = elementwise_entry_function(partitioned, fusion, launch, indexing_map)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), launch


# --- the shared-tile form ---


def _fusion_outputs(computation: HloComputation) -> list[HloInstruction]:
    root = computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _reads_hero_elementwise(hero: HloInstruction, outputs: Sequence[HloInstruction]) -> bool:
    """Whether every instruction between ``hero`` and the outputs reads the value that depends on it at its own
    indices: the epilogue then needs the hero's element at the output's indices only (the one the shared tile
    gives)."""
    depends: dict[int, bool] = {}

    def on_path(instr: HloInstruction) -> bool:
        if id(instr) not in depends:
            depends[id(instr)] = instr is hero or any(on_path(o) for o in instr.operands)
        return depends[id(instr)]

    seen: set[int] = set()
    stack = [o for o in outputs if on_path(o)]
    while stack:
        instr = stack.pop()
        if instr is hero or id(instr) in seen:
            continue
        seen.add(id(instr))
        if tuple(instr.shape.dimensions) != tuple(hero.shape.dimensions) or instr.shape.is_tuple:
            return False
        for operand, maps in zip(instr.operands, op_output_to_input(instr)):
            if not on_path(operand):
                continue
            if any(m.is_undefined() or m.range_vars or not m.reads_its_own_indices() for m in maps):
                return False
            stack.append(operand)
    return True


def uses_shared_tile(fusion: HloInstruction) -> bool:
    """Whether the transpose fusion ``fusion`` is emitted in the shared-tile form: its hero moves the minor
    dimension (a 102 transpose, whose rows stay whole, is a copy of rows: the direct form reads and writes them
    contiguously already), the rows of the operand a tile reads are ``SHARED_TILE_MIN_ROW_BYTES`` or more apart
    (closer rows stay in the first-level cache in the direct form, see the module's docstring), and every output
    is an elementwise epilogue of the hero (or does not read it)."""
    hero = transpose_hero(fusion)
    if hero is None or (dims := _shared_tile_dims(hero)) is None:
        return False
    if _operand_row_bytes(hero, dims[0]) < SHARED_TILE_MIN_ROW_BYTES:
        return False
    return _reads_hero_elementwise(hero, _fusion_outputs(fusion.fused_computation))


def _operand_row_bytes(hero: HloInstruction, minor: int) -> int:
    """The distance in memory between the rows of the operand that a tile reads: the stride of the operand's
    dimension that the output's minor dimension ``minor`` reads."""
    operand = hero.operands[0].shape
    read = hero.attr("dimensions")[minor]
    order = list(operand.layout_or_default.minor_to_major)
    elements = math.prod(operand.dimensions[d] for d in order[:order.index(read)])
    return elements * ELEMENT_TYPES[operand.element_type].byte_width


def _shared_tile_dims(hero: HloInstruction) -> tuple[int, int] | None:
    """The output's minor dimension and the output dimension that reads the operand's minor dimension, when they
    differ (dimensions of size 1 do not count); None otherwise."""
    output, operand = hero.shape, hero.operands[0].shape
    permutation = list(hero.attr("dimensions"))
    output_order = [d for d in _physical_order(output) if output.dimensions[d] != 1]
    operand_order = [d for d in _physical_order(operand) if operand.dimensions[d] != 1]
    if not output_order or not operand_order:
        return None
    reads = {p: d for d, p in enumerate(permutation)}
    minor, read_minor = output_order[-1], reads[operand_order[-1]]
    return None if minor == read_minor else (minor, read_minor)


def shared_tile_sizes(hero: HloInstruction) -> list[int]:
    """The tile along each output dimension in the shared-tile form: ``shared_tile_side`` elements along the
    output's minor dimension and along the one read from the operand's minor dimension (at most the dimension),
    1 along the others."""
    dims = _shared_tile_dims(hero)
    assert dims is not None
    side = shared_tile_side(hero.shape.element_type)
    sizes = [1] * len(hero.shape.dimensions)
    for d in dims:
        sizes[d] = min(side, hero.shape.dimensions[d])
    return sizes


def shared_tile_side(element_type: str) -> int:
    """The side of the square shared tile: ``TILE`` elements, or a cache line of elements when that is more (XLA
    widens the tile's minor dimension for packed small types alike): every row read or written is then at least a
    whole cache line."""
    return max(TILE, CACHE_LINE_BYTES // ELEMENT_TYPES[element_type].byte_width)


def _tile_origins(shape: Shape, sizes: Sequence[int]) -> tuple[list, int]:
    """For each dimension the index where the block's tile starts (an expression of ``bl_x`` = ``d1``), tiles in
    the output's physical order; and the number of blocks."""
    dims = list(shape.dimensions)
    tiles = [-(-d // t) for d, t in zip(dims, sizes)]
    blocks = math.prod(tiles)
    origins = [const(0)] * len(dims)
    stride = 1
    for d in reversed(_physical_order(shape)):
        tile = floordiv(dim(1), const(stride)) if stride > 1 else dim(1)
        if stride * tiles[d] < blocks:
            tile = mod(tile, const(tiles[d]))
        stride *= tiles[d]
        origins[d] = mul(tile, const(sizes[d])) if tiles[d] > 1 else const(0)
    return origins, blocks


def shared_tile_maps(hero: HloInstruction) -> tuple[LaunchDimensions, IndexingMap, IndexingMap]:
    """The launch of the shared-tile form and the maps of its two loops, ``(th_x, bl_x)[s0] -> (indices, tile
    indices)``: the read of the operand (``s0`` along the operand's minor dimension, the thread along the
    output's minor one) into ``tile[th_x, s0]``, and the write of the output (``s0`` along the output's minor
    dimension, the thread along the one read from the operand's minor dimension) from ``tile[s0, th_x]``."""
    dims = _shared_tile_dims(hero)
    assert dims is not None
    minor, read_minor = dims
    shape = hero.shape
    sizes = shared_tile_sizes(hero)
    origins, blocks = _tile_origins(shape, sizes)
    threads = max(sizes[minor], sizes[read_minor])
    permutation = list(hero.attr("dimensions"))

    def loop_map(thread_dim: int, lane_dim: int, results_of) -> IndexingMap:
        local = {d: const(0) for d in range(len(sizes))}
        local[thread_dim], local[lane_dim] = dim(0), sym(0)
        output_index = [add(origins[d], local[d]) for d in range(len(sizes))]
        constraints = []
        if sizes[thread_dim] < threads:
            constraints.append((dim(0), Interval(0, sizes[thread_dim] - 1)))
        for d in (thread_dim, lane_dim):
            if shape.dimensions[d] % sizes[d]:
                constraints.append((output_index[d], Interval(0, shape.dimensions[d] - 1)))
        indexing_map = IndexingMap.from_exprs(
            results_of(output_index),
            [Variable(Interval(0, threads - 1), "th_x"), Variable(Interval(0, blocks - 1), "bl_x")],
            [Variable(Interval(0, sizes[lane_dim] - 1), "s0")],
            constraints=constraints,
        )
        return indexing_map.simplify().sort_summands()

    # The operand's dimension k is read by the output's dimension d where permutation[d] = k.
    read = loop_map(minor, read_minor,
                    lambda out: [out[permutation.index(k)] for k in range(len(sizes))] + [dim(0), sym(0)])
    write = loop_map(read_minor, minor, lambda out: [*out, sym(0), dim(0)])
    return LaunchDimensions(threads, blocks, sizes[minor]), read, write


def _emit_shared_tile(fusion: HloInstruction, hero: HloInstruction, device: Device,
                      slice_indices: Sequence[int] | None) -> tuple[ModuleOp, LaunchDimensions]:
    computation = fusion.fused_computation
    partitioned = partition(computation)
    outputs = _fusion_outputs(computation)
    operand = hero.operands[0]
    launch, read_map, write_map = shared_tile_maps(hero)
    prologue_name = symbol_name(f"{computation.name}_{operand.name}")
    epilogue_name = symbol_name(f"{computation.name}__epilogue__")
    called = CalledFunctions([ENTRY_NAME, prologue_name, epilogue_name])
    rank = len(hero.shape.dimensions)
    prologue = function_at_indices(prologue_name, partitioned, [operand], rank, called)
    epilogue = function_at_indices(epilogue_name, partitioned, outputs, rank, called, bound=hero)

    block, params, output_args, builder, thread_id, block_id = start_entry(partitioned, fusion, launch)
    sizes = shared_tile_sizes(hero)
    minor, read_minor = _shared_tile_dims(hero)  # type: ignore[misc]
    tile_type = TensorType(element_type(operand.shape.element_type, operand.name), [sizes[minor], sizes[read_minor]])
    shmem = builder.insert(AllocateSharedOp(tile_type)).result
    shmem.name_hint = "shmem"

    # Read: a row of the operand's tile (along its minor dimension) into a row of the shared tile.
    read = builder.insert(LoopOp([thread_id, block_id], read_map, [shmem]))
    read.results[0].name_hint = "shmem_with_values"
    body = Builder(InsertPoint.at_end(read.body.block))
    *operand_indices, row, column = read.index_args
    value = body.insert(PureCallOp(prologue_name, [*params, *operand_indices], prologue.function_type.outputs.data))
    inserted = body.insert(tensor.InsertOp(value.results[0], read.iter_args[0], [row, column]))
    body.insert(YieldOp([inserted.result]))
    synced = builder.insert(SyncThreadsOp([read.results[0]])).results[0]
    synced.name_hint = "synced"

    # Write: a row of the output's tile (along its minor dimension) from a column of the shared tile.
    write = builder.insert(LoopOp([thread_id, block_id], write_map, output_args))
    write.results[0].name_hint = "xla_loop"
    body = Builder(InsertPoint.at_end(write.body.block))
    *output_indices, row, column = write.index_args
    transposed = body.insert(tensor.ExtractOp(synced, [row, column], tile_type.element_type)).result
    transposed.name_hint = "transposed"
    values = body.insert(PureCallOp(epilogue_name, [*params, *output_indices, transposed],
                                    epilogue.function_type.outputs.data))
    stored = [body.insert(tensor.InsertOp(v, into, output_indices)).result
              for v, into in zip(values.results, write.iter_args)]
    body.insert(YieldOp(stored))
    builder.insert(func.ReturnOp(*write.results))
    entry = entry_function(block, output_args)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, prologue, epilogue, *called.functions]), launch
