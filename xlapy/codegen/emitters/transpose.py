"""The transpose emitter: a fusion whose hero is a transpose that moves the minor dimension
(``fusion_kind_of`` says "transpose"; XLA's ``xla/backends/gpu/codegen/emitters/transpose.cc``), emitted tile
by tile so that reads and writes both stay within a few cache lines.

The loop emitter walks the output in physical order: a transposed operand is then read with the stride of a
whole row (or plane), one cache line per element, and every line is evicted long before its neighbours are
read. Here a block handles one tile of the output (``tile_sizes``): a cache line of elements along the
output's minor dimension times ``TILE`` along the output dimension that reads the operand's minor dimension (1
along the others). A thread writes one row of the tile (a loop over the output's minor dimension: one line of
contiguous, vectorized stores) and the threads of the block run over the tile's other dimension: the block
reads ``TILE`` consecutive elements (whole lines) of each of a line's worth of the operand's rows, while they
are in the cache.

XLA's GPU emitter stages the tile through shared memory (``xla.allocate_shared``, a barrier, then the
transposed reads) so that both the global reads and writes are coalesced. On the CPU the first-level cache
plays the part of shared memory: the operand's lines a tile reads stay in it while the block reads across
them (the tile is small enough that lines a power of two apart, which share a cache set, are not evicted), so
the kernel has no scratch buffer (``xla.allocate_shared``) and no ordering point (``xla.sync_threads``), which
``lower-tensors`` and the CPU backend do not lower: it reads the operand at the transposed indices, like the
loop emitter, and only the order of the iterations differs. (f32[64,256,256] on a 2-core AVX-512 host: 021 in
1.8 ms instead of 6.1 ms, 210 in 2.7 ms instead of 19 ms; a copy of the same bytes takes 1.4 ms.)

The fusion's other instructions run as the loop emitter's do: every output element is the root subgraph's
function at its indices (an elementwise prologue on the transposed operand is applied as it is read, operands
read at output indices are read at them, and side outputs of the same dimensions are written alongside).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp

from xlapy.codegen.elemental_rules import CalledFunctions, emit_subgraph_function, result_types
from xlapy.codegen.emitters.common import ENTRY_NAME, elementwise_entry_function, finish_entry, fusion_output_shapes
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.partitioner import computation_roots, partition
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.fusion_hero import find_non_trivial_hero, fusion_kind_of, fusion_roots

# Elements of a tile along the output dimension that reads the operand's minor dimension: as many lines of the
# operand as stay in the first-level cache while the block reads across them (lines a power of two apart fall
# in one cache set). Along the output's minor dimension a tile takes one cache line, a row of SIMD stores.
TILE = 32
CACHE_LINE_BYTES = 64


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


def emit_transpose_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a transpose fusion: the entry function ``@main`` (one ``xla.loop`` over a tile per
    block) and one private function per subgraph of the partitioned fused computation."""
    hero = transpose_hero(fusion)
    if hero is None:
        raise VerifyError(f"fusion {fusion.name} is not a transpose fusion the transpose emitter handles")
    computation = fusion.fused_computation
    for root in computation_roots(computation):
        result_types(root)
    partitioned = partition(computation)
    launch, indexing_map = transpose_launch(hero)
    called = CalledFunctions([ENTRY_NAME, *(s.name for s in partitioned.subgraphs)])
    functions = [emit_subgraph_function(partitioned, s, called) for s in partitioned.subgraphs]
    entry = elementwise_entry_function(partitioned, fusion, launch, indexing_map)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), launch
