"""The reduction emitter: a fusion whose hero is a reduce (``fusion_kind_of`` says "reduction"; XLA's
``xla/backends/gpu/codegen/emitters/reduction.cc`` and ``reduction_base.cc``), with the reduce's epilogue, the
sibling reductions of the same input and side outputs (elementwise roots of the input's dimensions) in one kernel.

The reduce's input is first seen as XLA's ``GetReductionKindAndContiguousComponents`` sees it: its dimensions in
physical order, unit dimensions dropped and runs of reduced or kept dimensions merged, give a row reduction
``[major reduced, kept, minor reduced]`` when the physically minor dimension is reduced, else a column reduction
``[major kept, reduced, minor kept]`` (``ReductionShape``). XLA picks one of four emitters from it, and so does
this module (``variant``):

======================  ==========================================  ==============================================
variant                 XLA:GPU                                     here (the CPU)
======================  ==========================================  ==============================================
``row``                 a warp (or block) per row; each thread      a thread per row; the row is read as vectors
                        accumulates a strided part of the row,      into up to four vectors of partial accumulators
                        then ``xla_gpu.shuffle_reduce`` (warp       (independent chains), which a horizontal SIMD
                        shuffles) and shared memory combine the     reduction combines at the end (the warp
                        threads' values                             shuffle's butterfly becomes the halving of the
                                                                    vectors, then of one register)
``multi-row``           rows of at most a warp's worth: several     rows shorter than one vector of partial
                        rows per warp, one shuffle per row          accumulators: SIMD lanes are consecutive
                                                                    rows, each lane reducing its row in order
``column``              a tile of columns read coalesced, written   the column-tile form: SIMD lanes are
                        transposed into ``xla.allocate_shared``,    consecutive kept (minor) elements, the block's
                        ``xla.sync_threads``, read back along the   accumulators are a tile of
                        other axis and shuffle-reduced              ``xla.allocate_shared``, and a loop over the
                                                                    rows holds the threads' loop and an
                                                                    ``xla.sync_threads``: whole rows are read, four
                                                                    a step (below)
``small-column``        the minor kept dimension divides the        SIMD lanes are the minor kept elements (a
                        warp: a warp reads several columns' rows    power of two that divides them), each walking
                                                                    its column down the rows with a vector
                                                                    accumulator
======================  ==========================================  ==============================================

**The column-tile form** (``uses_column_tile``: the CPU, a ``column`` reduction by the fusion's only reduce, of
one array, without side outputs; other column reductions walk down the columns as ``small-column`` does). The
GPU transposes a column tile through shared memory so that one thread sees all the values it combines while the
warp's reads stay coalesced. On the CPU a thread's SIMD register already holds a row of its columns, and the
shared tile has another use: it holds the accumulators of the block's threads (up to ``COLUMN_TILE_BYTES`` of
them), so that the loop over the rows can run outside the threads' loop. A thread that kept its accumulators in
registers and walked its columns down rows 4 KiB apart loaded from a new page at every step and ran at about
XLA:CPU's speed on an AMD Zen 3; the block reading whole rows, four at a time, runs at the speed of a row
reduction. The loop holding a barrier is one every thread of the block runs alike: on a GPU the barrier only
orders its steps, on the CPU it makes the backend run the block's threads inside each step (``_emit_loops`` in
``xlapy/codegen/backends/cpu.py``). ``data/reduction/column.hlo`` (f32[100,70] summed over its rows)::

    %accumulators = xla.allocate_shared : tensor<70xf32>
    %0 = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1) in #map
        iter_args(%iter = %accumulators) -> (tensor<70xf32>) {
      %1 = xla.pure_call @fused_computation_init(%input) : (tensor<100x70xf32>) -> f32
      %2 = tensor.insert %1 into %iter[%dim1] : tensor<70xf32>
      xla.yield %2 : tensor<70xf32>
    }
    %3 = xla.sync_threads %0 : tensor<70xf32>
    %7 = scf.for %row = %4 to %5 step %6 iter_args(%8 = %3) -> (tensor<70xf32>) {        // 4 rows a step
      %9 = xla.loop (%thread_id_x, %block_id_x)[%vector_index_1] -> (%dim0_1, %dim1_1) in #map
          iter_args(%iter_1 = %8) -> (tensor<70xf32>) {
        %10 = tensor.extract %8[%dim1_1] : tensor<70xf32>
        %11 = xla.pure_call @fused_computation_fold(%input, %row, %dim0_1, %10)          // rows row..row+3
        %12 = tensor.insert %11 into %iter_1[%dim1_1] : tensor<70xf32>
        xla.yield %12 : tensor<70xf32>
      }
      %13 = xla.sync_threads %9 : tensor<70xf32>
      scf.yield %13 : tensor<70xf32>
    }
    %xla_loop = xla.loop (...)[%vector_index_2] -> (%dim0_2, %dim1_2) in #map iter_args(%iter_2 = %output) ... {
      %14 = tensor.extract %7[%dim1_2] : tensor<70xf32>
      %15 = xla.pure_call @fused_computation__epilogue_(%input, %dim0_2, %14)
      ...

After ``vectorize-lanes`` and ``lower-tensors`` a step is a vector load of the thread's accumulators from the tile
(a stack array), four vector loads of rows, four vector adds and a vector store; the CPU backend's loop nest is
``for bl: {for th: init}; for row: {for th: fold}; for th: write``. A column reduction too large for its kept
dimensions to give the cores enough blocks is first split by ``tree-reduction-rewriter`` into pieces of whole
rows (f32[4096,1024] summed over its rows: eight pieces of 512 rows, then a column reduction of the eight).

and a row reduction's (rows of 1024 f32: 64 partial accumulators, four 512-bit registers)::

    %partials = scf.for %chunk = %c0 to %c16 step %c1 iter_args(%p = %identity) -> (vector<64xf32>) {
      %v = vector.transfer_read %input[...]                                      // 64 consecutive elements
      %s = arith.addf %p, %v : vector<64xf32>
      ...
    %0 = vector.extract %partials[0] ... %63 = vector.extract %partials[63]      // the horizontal reduction
    %64 = arith.addf %0, %32 ...                                                 // lanes k and k + 32, ...

Blocks partition the kept (output) elements and a thread computes each of its outputs alone, so every output is
combined in one order fixed by the shapes, never by the number of blocks, threads or cores: results are bitwise
the same from run to run and on any machine (the partial accumulators are 64 bytes wide whatever the host's
SIMD width). The order, per output element (``xlapy/codegen/elemental_reduce.py`` emits it):

- ``row`` with a reducer that is one associative and commutative op (add, multiply, maximum, minimum, and, or,
  xor) and a row of ``n`` elements, when ``n`` is a whole number, at least 4, of chunks of ``L`` lanes: ``L`` is
  ``V`` = 64 bytes of elements times 4, 2 or 1, the most that gives at most 64 lanes (``V`` itself always) and
  fits (``partial_accumulator_lanes``: f32 rows of 1024 take ``L`` = 64, four independent vector chains, so that
  a maximum's latency does not bound the row: f32[4096,1024] 1.7x faster than with one vector):
  ``p[k] = identity``; for each index of the other reduced dimensions in row-major order and each chunk ``c``:
  ``p[k] = r(p[k], x[c*L + k])``; then ``p[k] = r(p[k], p[k + L'/2])`` while ``L' > 1`` lanes remain; the
  result is ``r(init, p[0])``. For a float sum that is ``L`` sums of ``n/L`` terms and a tree of depth
  ``log2 L``: within ``gamma(n/L + log2 L + 1) * sum|x|`` of the exact sum (Higham, Accuracy and Stability of
  Numerical Algorithms, 4.2; ``gamma(k) = k*u / (1 - k*u)``), and within that plus ``gamma(n) * sum|x|`` of the
  interpreter's, which is what ``tests/codegen/test_reduction_emitter.py`` checks.
- ``row`` with an argmax or argmin reducer of the row and its positions (jax's ``jnp.argmax`` / ``jnp.argmin``),
  rows of a whole number, at least 4, of vectors of ``V`` values: per-lane (value, index) accumulators in ``L``
  lanes (two vectors of ``V`` when the row allows: two independent chains of compares), lane ``k`` folding
  elements ``k, k + L, ...``, then a halving whose two operands are ordered by index, in vector code; the fold's
  loop prefetches 8 KiB ahead of its reads (``prefetch-loads``). ``elemental_reduce.py`` proves that this is bit
  for bit the sequential fold for every input, NaNs, infinities and signed zeros included.
- every other reduction (columns, in either form, short rows, other variadic reducers, reducers of several
  ops): the elemental order, ``acc = init``, then the reduced elements in row-major order (bit for bit the
  interpreter's; the column-tile form folds four rows a step in that order).

A reduction with few outputs and a large reduced dimension (a whole array summed) would leave all but one core
idle: the HLO pass ``xlapy/transforms/tree_reduction_rewriter.py`` (XLA:GPU's ``TreeReductionRewriter``) splits it
beforehand into an inner reduction of many rows and an outer one of their results, each a kernel of this
emitter, both sizes functions of the shape; a float sum then goes through both orders above (its bound is the
sum of the two depths).

Side outputs are written by a second ``xla.loop`` over the same blocks (a block writes the side outputs of the
input elements its outputs reduce), an epilogue is the root function at the output's indices, and sibling
reductions of one input are all computed by that function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp, TensorType
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import AllocateSharedOp, ApplyIndexingOp, LoopOp, PureCallOp, SyncThreadsOp, YieldOp
from xlapy.codegen.elemental import FunctionEmitter
from xlapy.codegen.elemental_reduce import PARTIAL_ACCUMULATOR_BYTES, apply_reducer
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function, result_types
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    derived_partition,
    elementwise_entry_function,
    entry_function,
    finish_entry,
    function_at_indices,
    fusion_output_shapes,
    name_arguments,
    root_positions,
    root_result_types,
    start_entry,
    symbol_name,
)
from xlapy.codegen.launch import (
    Device,
    LaunchDimensions,
    loop_launch_dimensions,
    thread_id_to_output_map,
)
from xlapy.codegen.partitioner import PartitionedComputation, Subgraph, computation_roots, index_shape, partition
from xlapy.codegen.types import element_type, tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.affine import replace as replace_variables
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES
from xlapy.transforms.fusion_hero import find_non_trivial_hero, fusion_kind_of, fusion_roots, is_real_reduction_hero

# Input elements a block of a row reduction reads (at least one row): blocks are the units of parallel work, and
# a block of a few hundred kilobytes amortizes its start while leaving enough blocks to balance the cores.
ROW_BLOCK_ELEMENTS = 1 << 15

# Bytes of each row a thread of a column reduction reads at every step down its columns (on the CPU): four cache
# lines, whose loads the out-of-order core overlaps while it waits at each step for a new 4 KiB page (where the
# hardware prefetchers start over). f32[4096,1024] summed over its rows on an AVX2 host (AMD Zen 3): 32 lanes (one
# register times WIDE_VECTOR_REGISTERS) 1.6-1.7 ms, 64 lanes 0.8-0.95 ms, XLA:CPU 0.76-0.87 ms; wider vectors fall
# back to scalar code. AVX-512 hosts already had 64 lanes.
COLUMN_VECTOR_BYTES = 256

# The column-tile form (CPU): the most bytes of accumulators a block keeps (an eighth of the first-level cache of a
# core, so that the rows it reads stay there too), and the fewest rows it is used for.
COLUMN_TILE_BYTES = 4096
COLUMN_TILE_MIN_ROWS = 8
COLUMN_TILE_ROWS_PER_STEP = 4

VARIANTS = ("row", "multi-row", "column", "small-column")


@dataclass(frozen=True)
class ReductionShape:
    """The reduce's input as XLA's ``ReductionDimensions``: ``dimensions`` is ``[major reduced, kept, minor
    reduced]`` for a row reduction (the physically minor dimension is reduced) and ``[major kept, reduced, minor
    kept]`` for a column reduction, each the product of the input dimensions it stands for."""

    is_row: bool
    dimensions: tuple[int, int, int]


def reduction_shape(hero: HloInstruction) -> ReductionShape:
    """XLA's ``GetReductionKindAndContiguousComponents`` for ``hero`` (a reduce)."""
    operand = hero.operands[0].shape
    reduced = set(hero.attr("dimensions") or ())
    runs: list[list] = []  # [is_reduced, size] from major to minor, unit dimensions left out
    for d in reversed(operand.layout_or_default.minor_to_major):
        size = operand.dimensions[d]
        if size == 1:
            continue
        if runs and runs[-1][0] == (d in reduced):
            runs[-1][1] *= size
        else:
            runs.append([d in reduced, size])
    if not runs or runs[-1][0]:
        minor = runs.pop()[1] if runs else 1
        kept = math.prod(size for is_reduced, size in runs if not is_reduced)
        major = math.prod(size for is_reduced, size in runs if is_reduced)
        return ReductionShape(True, (major, kept, minor))
    minor = runs.pop()[1]
    kept = math.prod(size for is_reduced, size in runs if not is_reduced)
    reduced_size = math.prod(size for is_reduced, size in runs if is_reduced)
    return ReductionShape(False, (kept, reduced_size, minor))


def variant(hero: HloInstruction, device: Device) -> str:
    """Which of XLA's four reduction emitters ``hero`` gets (``CreateReductionFusion``), by the CPU's measures:
    a row reduction is ``multi-row`` when a row is shorter than one vector of partial accumulators
    (``PARTIAL_ACCUMULATOR_BYTES``), a column reduction ``small-column`` when its minor kept dimension has fewer
    elements than one SIMD register of the device holds."""
    shape = reduction_shape(hero)
    bytes_per_element = ELEMENT_TYPES[hero.operands[0].shape.element_type].byte_width
    if shape.is_row:
        return "row" if shape.dimensions[2] * bytes_per_element >= PARTIAL_ACCUMULATOR_BYTES else "multi-row"
    lanes = max(1, device.vector_bytes // max(4, bytes_per_element))
    return "column" if shape.dimensions[2] >= lanes else "small-column"


@dataclass(frozen=True)
class ReductionFusion:
    """What the emitter needs to know of a reduction fusion: its ``hero`` (the first reduce hero), the
    fusion's roots split into ``reduction_roots`` (reduces and their epilogues, at the output's indices) and
    ``side_outputs`` (at the hero's input indices), and for each root the positions of its fusion outputs."""

    hero: HloInstruction
    reduction_roots: tuple[HloInstruction, ...]
    side_outputs: tuple[HloInstruction, ...]
    outputs: dict[str, tuple[int, ...]]


def reduction_fusion(fusion: HloInstruction) -> ReductionFusion | None:
    """The reduction fusion the emitter writes ``fusion`` as, or None when it is not one it handles: XLA would
    emit it with its reduction emitter, the reduction roots all have the hero's output dimensions and the side
    outputs its input's, each in one layout, and no root is returned twice."""
    if fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None):
        return None
    if fusion_kind_of(fusion) != "reduction":
        return None
    roots = fusion_roots(fusion)
    if len(set(map(id, roots))) != len(roots):
        return None
    heroes = [find_non_trivial_hero(r) for r in roots]
    hero = next(h for h in heroes if is_real_reduction_hero(h))
    output, operand = index_shape(hero.shape), hero.operands[0].shape
    shapes = fusion_output_shapes(fusion)
    reduction_roots, side_outputs, outputs, position = [], [], {}, 0
    for root, root_hero in zip(roots, heroes):
        count = len(root.shape.tuple_shapes) if root.shape.is_tuple else 1
        outputs[root.name] = tuple(range(position, position + count))
        fusion_shapes = shapes[position:position + count]
        position += count
        like = output if is_real_reduction_hero(root_hero) else operand
        if any(tuple(s.dimensions) != tuple(like.dimensions) or
               s.layout_or_default.minor_to_major != like.layout_or_default.minor_to_major for s in fusion_shapes):
            return None
        (reduction_roots if like is output else side_outputs).append(root)
    return ReductionFusion(hero, tuple(reduction_roots), tuple(side_outputs), outputs)


def is_reduction_fusion(fusion: HloInstruction) -> bool:
    """Whether the reduction emitter emits ``fusion`` (see ``reduction_fusion``)."""
    return reduction_fusion(fusion) is not None


def reduction_output_elements(info: ReductionFusion) -> int:
    """The output elements the launch covers: the hero's (the side outputs are written along with them)."""
    return math.prod(index_shape(info.hero.shape).dimensions)


def reduction_launch(hero: HloInstruction, device: Device) -> LaunchDimensions:
    """The launch over the hero's output elements: a thread per row for ``row`` (``ROW_BLOCK_ELEMENTS`` input
    elements per block), else SIMD lanes over consecutive output elements, as the loop emitter lays them out,
    with blocks of about ``ROW_BLOCK_ELEMENTS`` input elements too."""
    output = index_shape(hero.shape)
    if variant(hero, device) == "row":
        row = math.prod(hero.operands[0].shape.dimensions) // max(1, math.prod(output.dimensions))
        rows = max(1, min(device.threads_per_block * max(1, device.max_vector), ROW_BLOCK_ELEMENTS // max(1, row)))
        return loop_launch_dimensions(output, replace(device, threads_per_block=rows, max_vector=1))
    # Columns: a thread reads its vector's column all the way down; as many threads per block as keep a block
    # near ROW_BLOCK_ELEMENTS input elements, so that the columns spread over the cores.
    if device.name == "cpu" and variant(hero, device) == "column":
        device = replace(device, vector_bytes=max(device.vector_bytes, COLUMN_VECTOR_BYTES),
                         max_vector=max(device.max_vector, COLUMN_VECTOR_BYTES // 4))
    launch = loop_launch_dimensions(output, device, device.rows_hold_vectors)
    column = math.prod(hero.operands[0].shape.dimensions) // max(1, math.prod(output.dimensions))
    threads = max(1, min(launch.threads_per_block, ROW_BLOCK_ELEMENTS // max(1, column * launch.vector_size)))
    return loop_launch_dimensions(output, replace(device, threads_per_block=threads), device.rows_hold_vectors)


def side_output_map(output_map: IndexingMap, hero: HloInstruction) -> IndexingMap:
    """``(th_x, bl_x)[r0, r1, ..., vector_index] -> (input indices)``: the input elements the outputs of
    ``output_map`` reduce, the reduced dimensions ``r0, r1, ...`` in row-major order. The lanes come last: their
    loop is the innermost, which becomes vector code (with the lanes first, f32[30,64] summed over its rows with a
    side output unrolled into 1,920 scalar stores and took half a minute to compile)."""
    operand = hero.operands[0].shape
    reduced = sorted(hero.attr("dimensions") or ())
    dims = [dim(k) for k in range(len(output_map.dim_vars))]
    lanes = [sym(len(reduced) + k) for k in range(len(output_map.range_vars))]
    kept = iter([replace_variables(r, dims, lanes) for r in output_map.results])
    results = [sym(reduced.index(d)) if d in reduced else next(kept) for d in range(len(operand.dimensions))]
    ranges = [*(Variable(Interval(0, operand.dimensions[d] - 1), f"r{k}") for k, d in enumerate(reduced)),
              *output_map.range_vars]
    constraints = [(replace_variables(e, dims, lanes), interval) for e, interval in output_map.constraints.items()]
    return IndexingMap.from_exprs(results, output_map.dim_vars, ranges, constraints=constraints)


def emit_reduction_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a reduction fusion: ``@main`` with an ``xla.loop`` over the output elements of each
    block (and one over the input elements they reduce, for side outputs), and the subgraphs' functions."""
    info = reduction_fusion(fusion)
    if info is None:
        raise VerifyError(f"fusion {fusion.name} is not a reduction fusion the reduction emitter handles")
    computation = fusion.fused_computation
    for root in computation_roots(computation):
        result_types(root)
    launch = reduction_launch(info.hero, device)
    output_map = thread_id_to_output_map(launch, index_shape(info.hero.shape))
    if uses_column_tile(info, device):
        return _emit_column_tile(fusion, info, device, slice_indices)
    if not info.side_outputs:
        partitioned = partition(computation)
        called = CalledFunctions([ENTRY_NAME, *(s.name for s in partitioned.subgraphs)])
        functions = [emit_subgraph_function(partitioned, s, called) for s in partitioned.subgraphs]
        entry = elementwise_entry_function(partitioned, fusion, launch, output_map)
    else:
        reductions = derived_partition(computation, "reductions", list(info.reduction_roots))
        sides = derived_partition(computation, "side_outputs", list(info.side_outputs))
        partitions = (reductions, sides)
        called = CalledFunctions([ENTRY_NAME, *(s.name for p in partitions for s in p.subgraphs)])
        functions = [emit_subgraph_function(p, s, called) for p in partitions for s in p.subgraphs]
        entry = _entry_with_side_outputs(fusion, info, reductions, sides, launch, output_map)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), launch


def _entry_with_side_outputs(fusion: HloInstruction, info: ReductionFusion, reductions: PartitionedComputation,
                             sides: PartitionedComputation, launch: LaunchDimensions,
                             output_map: IndexingMap) -> func.FuncOp:
    """``@main`` of a fusion with side outputs: a loop writing the reduction roots at the output indices, then a
    loop writing the side outputs at the input indices those outputs reduce."""
    block, params, outputs, builder, thread_id, block_id = start_entry(reductions, fusion, launch)
    current: list[SSAValue] = list(outputs)
    for part, roots, indexing_map in ((reductions, info.reduction_roots, output_map),
                                      (sides, info.side_outputs, side_output_map(output_map, info.hero))):
        written = [p for r in roots for p in info.outputs[r.name]]
        loop = builder.insert(LoopOp([thread_id, block_id], indexing_map, [current[p] for p in written]))
        loop.results[0].name_hint = "xla_loop"
        body = loop.body.block
        symbols = len(indexing_map.range_vars)
        indices = list(body.args[symbols:symbols + len(indexing_map.results)])
        iters = iter(body.args[symbols + len(indexing_map.results):])
        inner = Builder(InsertPoint.at_end(body))
        call = inner.insert(PureCallOp(part.root_subgraph.name, [*params, *indices], root_result_types(part)))
        call.results[0].name_hint = "pure_call"
        positions = root_positions(part)
        inserted = []
        for root in roots:
            for k in range(len(info.outputs[root.name])):
                op = inner.insert(tensor.InsertOp(call.results[positions[root.name] + k], next(iters), indices))
                op.result.name_hint = "inserted"
                inserted.append(op.result)
        inner.insert(YieldOp(inserted))
        for p, result in zip(written, loop.results):
            current[p] = result
    builder.insert(func.ReturnOp(*current))
    return entry_function(block, outputs)


# --- the column-tile form ---


def uses_column_tile(info: ReductionFusion, device: Device) -> bool:
    """Whether the CPU emits the column reduction ``info`` in the column-tile form (see the module's docstring):
    a ``column`` reduction of one array by the fusion's only reduce, without side outputs, whose threads read
    vectors of more than one element and which reduces at least ``COLUMN_TILE_MIN_ROWS`` rows."""
    hero = info.hero
    if device.name != "cpu" or info.side_outputs or hero.shape.is_tuple or variant(hero, device) != "column":
        return False
    if sum(1 for i in hero.parent.instructions if i.opcode == "reduce") != 1:
        return False
    launch = reduction_launch(hero, device)
    return launch.vector_size > 1 and reduction_shape(hero).dimensions[1] >= COLUMN_TILE_MIN_ROWS


def column_tile_launch(hero: HloInstruction, device: Device) -> LaunchDimensions:
    """The column-tile form's launch: the column form's vectors, as many threads per block as fill a tile of
    ``COLUMN_TILE_BYTES`` of accumulators (a function of the shape alone: parallel work comes from the kept major
    dimensions and from the pieces ``tree-reduction-rewriter`` splits a large column reduction into)."""
    output = index_shape(hero.shape)
    vector = reduction_launch(hero, device).vector_size
    width = ELEMENT_TYPES[hero.shape.element_type].byte_width
    vectors = math.prod(output.dimensions) // vector
    threads = max(1, min(COLUMN_TILE_BYTES // (vector * width), vectors))
    return loop_launch_dimensions(output, replace(device, threads_per_block=threads, max_vector=vector,
                                                  vector_bytes=vector * max(4, width)), device.rows_hold_vectors)


def _with_tile_index(output_map: IndexingMap, vector: int) -> IndexingMap:
    """``(th_x, bl_x)[vector_index] -> (output indices, tile index)``: the thread's vector is the tile's
    ``vector`` accumulators from ``th_x * vector``."""
    tile_index = add(mul(dim(0), const(vector)), sym(0))
    return IndexingMap.from_exprs([*output_map.results, tile_index], output_map.dim_vars, output_map.range_vars,
                                  constraints=output_map.constraints)


def _row_to_input_map(hero: HloInstruction) -> IndexingMap:
    """``(row, output indices) -> (input indices)``: ``row`` counts the reduced elements of an output in
    row-major order of the reduced dimensions (the elemental order)."""
    operand = hero.operands[0].shape
    reduced = sorted(hero.attr("dimensions") or ())
    rows = math.prod(operand.dimensions[d] for d in reduced)
    kept = [d for d in range(len(operand.dimensions)) if d not in reduced]
    results, stride = {}, 1
    for d in reversed(reduced):
        part = floordiv(dim(0), const(stride)) if stride > 1 else dim(0)
        results[d] = mod(part, const(operand.dimensions[d])) if stride * operand.dimensions[d] < rows else part
        stride *= operand.dimensions[d]
    for k, d in enumerate(kept):
        results[d] = dim(1 + k)
    dims = [Variable(Interval(0, rows - 1), "row"),
            *(Variable(Interval(0, operand.dimensions[d] - 1), f"d{k}") for k, d in enumerate(kept))]
    return IndexingMap.from_exprs([results[d] for d in range(len(operand.dimensions))], dims, [])


def _fold_function(name: str, partitioned: PartitionedComputation, hero: HloInstruction, rows: int,
                   called: CalledFunctions) -> func.FuncOp:
    """``func.func private @name(buffers..., row, output indices..., accumulator) -> accumulator``: the accumulator
    of the output element at the indices with the elements of rows ``row`` to ``row + rows - 1`` folded in, in
    order; the elements and the reducer are emitted in place (one call: the lanes' loop around it becomes vector
    code once it is inlined)."""
    buffers = buffer_arguments(partitioned)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    value_type = element_type(hero.shape.element_type, hero.name)
    rank = len(index_shape(hero.shape).dimensions)
    block = Block(arg_types=[*param_types, IndexType(), *([IndexType()] * rank), value_type])
    params, (row, *indices, accumulator) = block.args[:len(param_types)], block.args[len(param_types):]
    name_arguments(params, buffers, indices)
    row.name_hint, accumulator.name_hint = "row", "accumulator"
    computation = partitioned.computation
    subgraph = Subgraph(name, [hero.operands[0]])
    whole = PartitionedComputation(computation, [subgraph], {i: subgraph for i in computation.instructions})
    emitter = FunctionEmitter(whole, subgraph, block, params, (), called)
    row_map, reducer = _row_to_input_map(hero), hero.called_computations[0]
    for k in range(rows):
        at_row = emitter.insert(arith.AddiOp(row, emitter.index(k))).result if k else row
        input_indices = emitter.insert(ApplyIndexingOp([at_row, *indices], [], row_map)).results
        element = emitter.emit_scalar(hero.operands[0], tuple(input_indices))
        accumulator = apply_reducer(emitter, reducer, accumulator, element)
    emitter.insert(func.ReturnOp(accumulator))
    return func.FuncOp(name, ([*param_types, IndexType(), *([IndexType()] * rank), value_type], [value_type]),
                       Region(block), visibility="private")


def _emit_column_tile(fusion: HloInstruction, info: ReductionFusion, device: Device,
                      slice_indices: Sequence[int] | None) -> tuple[ModuleOp, LaunchDimensions]:
    """``@main`` of the column-tile form: the block's accumulators in ``xla.allocate_shared``, set to the init
    value, then for each row an ``xla.loop`` of the block's threads folding the row's elements into them and an
    ``xla.sync_threads``, then an ``xla.loop`` writing the epilogue of the accumulators into the outputs."""
    hero, computation = info.hero, fusion.fused_computation
    partitioned = partition(computation)
    launch = column_tile_launch(hero, device)
    output = index_shape(hero.shape)
    tile_map = _with_tile_index(thread_id_to_output_map(launch, output), launch.vector_size)
    rank = len(output.dimensions)
    names = {part: symbol_name(f"{computation.name}_{part}") for part in ("init", "fold", "_epilogue_")}
    called = CalledFunctions([ENTRY_NAME, *names.values()])
    init = function_at_indices(names["init"], partitioned, [hero.operands[1]], 0, called)
    epilogue = function_at_indices(names["_epilogue_"], partitioned, computation_roots(computation), rank, called,
                                   bound=hero, bound_hint="reduced")
    value_type = element_type(hero.shape.element_type, hero.name)

    block, params, outputs, builder, thread_id, block_id = start_entry(partitioned, fusion, launch)
    tile_type = TensorType(value_type, [launch.threads_per_block * launch.vector_size])
    tile = builder.insert(AllocateSharedOp(tile_type)).result
    tile.name_hint = "accumulators"

    def tile_loop(at: Builder, into: Sequence[SSAValue], body) -> LoopOp:
        loop = at.insert(LoopOp([thread_id, block_id], tile_map, list(into)))
        inner = Builder(InsertPoint.at_end(loop.body.block))
        *indices, tile_index = loop.index_args
        inner.insert(YieldOp(body(inner, list(indices), tile_index, list(loop.iter_args))))
        return loop

    def set_init(at: Builder, indices, tile_index, iters):
        value = at.insert(PureCallOp(names["init"], params, [value_type])).results[0]
        return [at.insert(tensor.InsertOp(value, iters[0], [tile_index])).result]

    filled = tile_loop(builder, [tile], set_init)
    synced = builder.insert(SyncThreadsOp([filled.results[0]])).results[0]

    rows = reduction_shape(hero).dimensions[1]
    step = next(k for k in (COLUMN_TILE_ROWS_PER_STEP, 2, 1) if rows % k == 0)
    constants = [builder.insert(arith.ConstantOp.from_int_and_width(v, IndexType())).result for v in (0, rows, step)]
    row_block = Block(arg_types=[IndexType(), tile_type])
    row, accumulators = row_block.args
    row.name_hint = "row"
    row_loop = builder.insert(scf.ForOp(*constants, [synced], Region(row_block)))
    at_row = Builder(InsertPoint.at_end(row_block))

    fold = _fold_function(names["fold"], partitioned, hero, step, called)

    def fold_rows(at: Builder, indices, tile_index, iters):
        # Read from the tile as the row found it: each lane reads and writes its own accumulator only, and the read
        # of a tensor defined before the loop becomes one vector read (vectorize-loads-stores).
        accumulator = at.insert(tensor.ExtractOp(accumulators, [tile_index], value_type)).result
        folded = at.insert(PureCallOp(names["fold"], [*params, row, *indices, accumulator], [value_type])).results[0]
        return [at.insert(tensor.InsertOp(folded, iters[0], [tile_index])).result]

    folded = tile_loop(at_row, [accumulators], fold_rows)
    at_row.insert(scf.YieldOp(at_row.insert(SyncThreadsOp([folded.results[0]])).results[0]))

    def write(at: Builder, indices, tile_index, iters):
        reduced = at.insert(tensor.ExtractOp(row_loop.results[0], [tile_index], value_type)).result
        values = at.insert(PureCallOp(names["_epilogue_"], [*params, *indices, reduced],
                                      epilogue.function_type.outputs.data)).results
        return [at.insert(tensor.InsertOp(v, into, indices)).result for v, into in zip(values, iters)]

    written = tile_loop(builder, outputs, write)
    written.results[0].name_hint = "xla_loop"
    builder.insert(func.ReturnOp(*written.results))
    entry = entry_function(block, outputs)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, init, fold, epilogue, *called.functions]), launch


__all__ = ["ROW_BLOCK_ELEMENTS", "VARIANTS", "ReductionFusion", "ReductionShape", "emit_reduction_fusion",
           "is_reduction_fusion", "reduction_fusion", "reduction_launch", "reduction_output_elements",
           "reduction_shape", "side_output_map", "uses_column_tile", "variant"]
