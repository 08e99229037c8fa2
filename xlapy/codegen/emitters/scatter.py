"""The scatter emitter: a loop fusion whose root is a scatter (XLA's scatter emitters,
``xla/backends/cpu/codegen/emitters/cpu_scatter_emitter.cc`` and ``xla/backends/gpu/codegen/emitters/scatter.cc``),
for scatters of any dimension numbers (XLA's ``ScatterSimplifier`` form not required) and variadic scatters.

Every element of the result is the same as the reference interpreter's (``xlapy/interpreter/gather_scatter.py``):
updates that reach one element are combined into it in the interpreter's order (the index vectors in row-major
order of the updates' scatter dimensions, and for each the window in row-major order), whatever the split of the
work into blocks (``scatter_plan``):

- ``serial``: one block of one thread applies every update in order: small scatters, and scatters without
  ``unique_indices`` or ``indices_are_sorted`` whose windows are narrow (below 32 bytes) or whose update elements
  outnumber the output's (jax's ``.at[].add`` sets neither flag; XLA:CPU applies such scatters on one thread, a
  vector per window).
- ``operand_rows``: scatters without usable flags whose windows are wide (64 elements), or of 32 bytes or more
  with no more update elements than the output has. Each block (one per core at most) owns a range of the
  operand's most major dimension: it copies those rows of the operand into the output, then walks every index
  vector in order and applies the parts of windows that fall in its rows. Blocks write disjoint elements, so no
  barrier is needed between the copy and the updates, and each element sees its updates in order; the price is
  a pass over the indices per block (``MIN_WINDOW_ELEMENTS_FOR_OPERAND_ROWS``, ``MIN_WINDOW_BYTES_FOR_FEW_UPDATES``).
- ``unique_indices`` (the scatter promises that no two updates reach one element; every output passed in its
  operand's slice): the blocks share out the index vectors, plain loads and stores, no copy.
- ``sorted_indices`` (``indices_are_sorted``, windows of distinct index vectors disjoint, every output in place):
  the blocks share out ranges of index vectors cut where the index changes, so the updates of one element stay
  in one block, in order (XLA's GPU emitter combines a run of equal indices before one write). Each block finds
  its range at run time by binary searches on the sorted indices.

As in XLA, a scatter whose indices break the promise of its flags has an unspecified result.

1. Each output starts as its scatter operand: copied element by element, unless the runtime passes the fused
   parameter the scatter reads as that operand in the output's buffer slice (``xla.slice_index``, see
   ``in_place_outputs``): the operand is then already in place.
2. For each index vector, the start index of every operand dimension comes from the scatter indices (mapped by
   ``scatter_dims_to_operand_dims``) or, on a batching dimension, from the position of the index vector. The
   whole window is skipped when any part of it would fall outside the operand (XLA's semantics of out-of-bounds
   updates).
3. For each element of the window, the combiner computation (a function of scalars, called as a reduce's reducer)
   gets the outputs' current elements and the update elements; its results are stored back.

The operands, indices and updates of the scatter may be computed inside the fusion by ops with elemental rules:
each is the result of a function of a partitioned copy of the fused computation, called at the indices it is
needed at (as XLA's ``ProvideParameter``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

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
    values_at,
)
from xlapy.codegen.launch import Device, LaunchDimensions, host_cores
from xlapy.codegen.partitioner import PartitionedComputation
from xlapy.codegen.types import element_type, tensor_type
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.indexing.affine import AffineExpr
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES, Shape

# One block of one thread: the updates are applied serially.
SCATTER_LAUNCH = LaunchDimensions(threads_per_block=1, blocks=1, vector_size=1)

SERIAL, OPERAND_ROWS, UNIQUE_INDICES, SORTED_INDICES = "serial", "operand_rows", "unique_indices", "sorted_indices"

# The operand-rows split: a block does at least this much work (elements copied plus update elements applied), and
# there are at most as many blocks as cores (``operand_row_blocks``). Every block reads every index vector and
# branches on whether its window is the block's (half the branches mispredicted with two blocks: about as long as
# applying a window of 16 f32), so a block per core walks the indices once per core. The split pays where windows
# are wide (2 blocks on 4096 x 256 f32 rows: each block 0.53x of the serial kernel's time), and on narrower windows
# where the updates are no larger than the output: each core then copies its rows and applies their updates where
# the copy left them, in its own cache, where the serial plan's one thread reaches half of them in the other core's
# (whole programs, against the serial kernel after a copy kernel on the pool, 2 cores: f32[65536,16] with 16,384
# updates 345 -> 266-294 µs; f32[262144,8] with 16,384 updates about even, 462 against 398-475 µs; f32[16384,16]
# with 16,384 updates 175 -> 137-155 µs). With more updates than that, or windows of a few elements, the walk over the
# indices and the update rows both cores fetch cost more (f32[16384,16] with 65,536 updates 374 -> 413 µs;
# f32[65536,4] with 65,536 updates 247 -> 372).
MIN_ELEMENTS_PER_OPERAND_BLOCK = 1 << 16
MIN_WINDOW_ELEMENTS_FOR_OPERAND_ROWS = 64
MIN_WINDOW_BYTES_FOR_FEW_UPDATES = 32
# The splits over index vectors: a block applies at least this many update elements.
MIN_UPDATE_ELEMENTS_PER_BLOCK = 1 << 12


@dataclass(frozen=True)
class ScatterDimensions:
    """A scatter's dimension numbers, with what follows from them: ``update_scatter_dims`` (the update
    dimensions that are not window dimensions, one per index vector dimension of the indices, in order) and
    ``window_operand_dims`` (the operand dimensions the window dimensions of the update run along, in order)."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    input_batching_dims: tuple[int, ...]
    scatter_indices_batching_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    update_scatter_dims: tuple[int, ...]
    window_operand_dims: tuple[int, ...]

    @staticmethod
    def of(scatter: HloInstruction) -> ScatterDimensions:
        count = scatter_operand_count(scatter)
        operand_rank = len(scatter.operands[0].shape.dimensions)
        indices_rank = len(scatter.operands[count].shape.dimensions)
        update_rank = len(scatter.operands[count + 1].shape.dimensions)
        attrs = scatter.attributes
        window = tuple(attrs.get("update_window_dims", ()))
        inserted = tuple(attrs.get("inserted_window_dims", ()))
        batching = tuple(attrs.get("input_batching_dims", ()))
        return ScatterDimensions(
            update_window_dims=window,
            inserted_window_dims=inserted,
            input_batching_dims=batching,
            scatter_indices_batching_dims=tuple(attrs.get("scatter_indices_batching_dims", ())),
            scatter_dims_to_operand_dims=tuple(attrs.get("scatter_dims_to_operand_dims", ())),
            index_vector_dim=attrs.get("index_vector_dim", indices_rank),
            update_scatter_dims=tuple(d for d in range(update_rank) if d not in window),
            window_operand_dims=tuple(d for d in range(operand_rank) if d not in inserted and d not in batching))


def scatter_operand_count(scatter: HloInstruction) -> int:
    """How many arrays a (variadic) scatter updates."""
    return (len(scatter.operands) - 1) // 2


def is_scatter_fusion(fusion: HloInstruction) -> bool:
    """Whether ``fusion`` is a loop fusion whose fused root is a scatter (the scatter emitter's)."""
    if fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None) or len(fusion.called_computations) != 1:
        return False
    root = fusion.called_computations[0].root
    return root is not None and root.opcode == "scatter"


def in_place_outputs(fusion: HloInstruction, slice_indices: Sequence[int] | None) -> set[int]:
    """The outputs of scatter fusion ``fusion`` that are passed in the buffer slice of the fused parameter the
    scatter reads as their operand: those need no initial copy. ``slice_indices`` numbers the kernel's buffers
    (operands, array constants, outputs) by slice. A parameter may share an output's slice only as that output's
    scatter operand, read by nothing else: any other sharing (the indices or updates, or an operand read by other
    fused instructions, in an output's slice) would let the scatter overwrite what it has still to read, and is
    refused with ``UnimplementedError``."""
    if slice_indices is None:
        return set()
    computation = fusion.fused_computation
    scatter = computation.root
    count = scatter_operand_count(scatter)
    first_output = first_output_buffer(fusion)
    if len(slice_indices) != first_output + count:
        raise VerifyError(f"fusion {fusion.name}: {len(slice_indices)} slice indices for the "
                          f"{first_output + count} buffers of its kernel")
    parameters = {p.parameter_number: p for p in computation.parameters}
    in_place = set()
    for position in range(count):
        shared = slice_indices[first_output + position]
        sharers = [k for k, index in enumerate(slice_indices) if index == shared and k != first_output + position]
        if not sharers:
            continue
        operand = scatter.operands[position]
        if (sharers == [operand.parameter_number] and operand.opcode == "parameter"
                and parameters.get(operand.parameter_number) is operand and operand.users == [scatter]
                and [k for k, o in enumerate(scatter.operands) if o is operand] == [position]):
            in_place.add(position)
            continue
        raise UnimplementedError(f"scatter fusion {fusion.name}: its output {position} shares a buffer slice with "
                                 "a buffer other than the operand it starts from")
    return in_place


@dataclass(frozen=True)
class ScatterPlan:
    """How a scatter fusion's kernel splits its work (see the module docstring): ``strategy``, over ``blocks``
    blocks of ``per_block`` operand rows along ``split_dim`` (``operand_rows``) or index vectors (the splits over
    index vectors); ``work`` is the number of elements copied and updated, which the launch covers."""

    strategy: str
    blocks: int
    per_block: int
    work: int
    split_dim: int | None = None

    @property
    def launch(self) -> LaunchDimensions:
        if self.strategy == SERIAL:
            return SCATTER_LAUNCH
        return LaunchDimensions(threads_per_block=1, blocks=self.blocks, vector_size=-(-self.work // self.blocks))


def _major_dimension(shape: Shape) -> int:
    """The most major dimension of ``shape``'s layout."""
    if shape.layout is not None and shape.layout.minor_to_major:
        return shape.layout.minor_to_major[-1]
    return 0


def _physical_order(shape: Shape) -> list[int]:
    """``shape``'s dimensions from the most major to the most minor."""
    rank = len(shape.dimensions)
    if shape.layout is not None and len(shape.layout.minor_to_major) == rank:
        return list(reversed(shape.layout.minor_to_major))
    return list(range(rank))


def _windows_disjoint(dims: ScatterDimensions, update_shape: Sequence[int]) -> bool:
    """Whether the windows of index vectors with different start indices never overlap: one element wide along
    every dimension the indices move them in."""
    window_sizes = dict(zip(dims.window_operand_dims, (update_shape[d] for d in dims.update_window_dims)))
    return all(window_sizes.get(d, 1) == 1 for d in dims.scatter_dims_to_operand_dims)


def scatter_plan(fusion: HloInstruction, slice_indices: Sequence[int] | None) -> ScatterPlan:
    """The split of ``fusion``'s kernel into blocks (``slice_indices`` as for ``in_place_outputs``)."""
    scatter = fusion.fused_computation.root
    count = scatter_operand_count(scatter)
    dims = ScatterDimensions.of(scatter)
    update_shape = scatter.operands[count + 1].shape.dimensions
    vectors = math.prod(update_shape[d] for d in dims.update_scatter_dims)
    window = math.prod(update_shape[d] for d in dims.update_window_dims)
    copied = count - len(in_place_outputs(fusion, slice_indices))
    if not copied and vectors > 1:
        per_block = max(1, -(-MIN_UPDATE_ELEMENTS_PER_BLOCK // max(1, window)))
        blocks = -(-vectors // per_block)
        if blocks > 1:
            if scatter.attributes.get("unique_indices"):
                return ScatterPlan(UNIQUE_INDICES, blocks, per_block, vectors * window)
            if scatter.attributes.get("indices_are_sorted") and _windows_disjoint(dims, update_shape):
                return ScatterPlan(SORTED_INDICES, blocks, per_block, vectors * window)
    output = fusion_output_shapes(fusion)[0]
    split_dim = _major_dimension(output) if output.dimensions else None
    work = copied * math.prod(output.dimensions) + vectors * window
    window_bytes = window * ELEMENT_TYPES[output.element_type].bit_width // 8
    few_updates = window_bytes >= MIN_WINDOW_BYTES_FOR_FEW_UPDATES and vectors * window <= math.prod(output.dimensions)
    if split_dim is not None and (window >= MIN_WINDOW_ELEMENTS_FOR_OPERAND_ROWS or few_updates):
        rows = output.dimensions[split_dim]
        blocks = min(operand_row_blocks(), rows, work // MIN_ELEMENTS_PER_OPERAND_BLOCK)
        if blocks > 1:
            per_block = -(-rows // blocks)
            return ScatterPlan(OPERAND_ROWS, -(-rows // per_block), per_block, work, split_dim)
    return ScatterPlan(SERIAL, 1, vectors, work)


def operand_row_blocks() -> int:
    """The most blocks an operand-rows split makes: one per core, and two on one core (the same kernel as on two,
    whose blocks then run one after the other)."""
    return max(2, host_cores())


def scatter_launch(fusion: HloInstruction, slice_indices: Sequence[int] | None) -> LaunchDimensions:
    """The launch of ``fusion``'s kernel."""
    return scatter_plan(fusion, slice_indices).launch


def emit_scatter_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a scatter fusion: the entry function ``@main`` (the initial copies, then the loop over
    the updates, split into blocks by ``scatter_plan``) and the functions computing the operands, indices and
    updates."""
    if not is_scatter_fusion(fusion):
        raise VerifyError(f"fusion {fusion.name} is not a loop fusion with a scatter root")
    computation = fusion.fused_computation
    scatter = computation.root
    count = scatter_operand_count(scatter)
    in_place = in_place_outputs(fusion, slice_indices)
    plan = scatter_plan(fusion, slice_indices)
    copied = [k for k in range(count) if k not in in_place]
    operands, indices, updates = scatter.operands[:count], scatter.operands[count], scatter.operands[count + 1:]
    initial = None  # every output is its operand already
    if copied:
        initial = derived_partition(computation, "operands", [operands[k] for k in copied], without_root=True)
    index_values = derived_partition(computation, "indices", [indices], without_root=True)
    update_values = derived_partition(computation, "updates", list(updates), without_root=True)
    partitions = [p for p in (initial, index_values, update_values) if p is not None]
    called = CalledFunctions([ENTRY_NAME, *(s.name for p in partitions for s in p.subgraphs)])
    functions = [emit_subgraph_function(p, s, called) for p in partitions for s in p.subgraphs]
    entry = _EntryEmitter(fusion, scatter, called, plan).emit(initial, copied, index_values, update_values)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), plan.launch


def _identity_over(sizes: Sequence[int], names: Sequence[str]) -> IndexingMap:
    """``()[s0, ..., sn] -> (s0, ..., sn)`` with ``si`` in ``[0, sizes[i])``."""
    variables = [Variable(Interval(0, size - 1), name) for size, name in zip(sizes, names)]
    return IndexingMap.from_exprs([affine.sym(i) for i in range(len(sizes))], [], variables)


Body = Callable[[Builder, list[SSAValue], list[SSAValue]], list[SSAValue]]


class _EntryEmitter:
    """Builds the entry function of a scatter fusion."""

    def __init__(self, fusion: HloInstruction, scatter: HloInstruction, called: CalledFunctions, plan: ScatterPlan):
        self.fusion = fusion
        self.scatter = scatter
        self.called = called
        self.plan = plan
        self.dims = ScatterDimensions.of(scatter)
        self.count = scatter_operand_count(scatter)
        update_shape = scatter.operands[self.count + 1].shape.dimensions
        self.scatter_sizes = [update_shape[d] for d in self.dims.update_scatter_dims]
        self.vectors = math.prod(self.scatter_sizes)
        self._constants: dict[int, SSAValue] = {}
        self._block: Block | None = None

    # -- helpers -------------------------------------------------------------------------------------------------
    def index(self, value: int) -> SSAValue:
        """An ``index`` constant at the top of the entry block (it dominates every use)."""
        found = self._constants.get(value)
        if found is None:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            block = self._block
            if block.first_op is None:
                block.add_op(op)
            else:
                block.insert_op_before(op, block.first_op)
            found = self._constants[value] = op.result
        return found

    @staticmethod
    def loop(builder: Builder, sizes: Sequence[int], names: Sequence[str], inits: Sequence[SSAValue],
             body: Body) -> list[SSAValue]:
        """An ``xla.loop`` over ``[0, sizes[0]) x ...`` in row-major order threading ``inits`` (the body inline
        when there is nothing to loop over)."""
        if not sizes:
            return body(builder, [], list(inits))
        return _EntryEmitter.mapped_loop(builder, [], _identity_over(sizes, names), inits, body)

    @staticmethod
    def mapped_loop(builder: Builder, dims: Sequence[SSAValue], indexing_map: IndexingMap,
                    inits: Sequence[SSAValue], body: Body) -> list[SSAValue]:
        """An ``xla.loop`` over ``indexing_map`` of ``dims``; the body gets the map's results."""
        op = builder.insert(LoopOp(list(dims), indexing_map, list(inits)))
        inner = Builder(InsertPoint.at_end(op.body.block))
        inner.insert(YieldOp(body(inner, list(op.index_args), list(op.iter_args))))
        return list(op.results)

    def positions_of(self, builder: Builder, linear: SSAValue) -> list[SSAValue]:
        """The update's scatter-dimension indices of the index vector number ``linear`` (row-major)."""
        if len(self.scatter_sizes) == 1:
            return [linear]
        indexing_map = IndexingMap.from_exprs(_row_major(affine.dim(0), self.scatter_sizes),
                                              [Variable(Interval(0, self.vectors - 1), "vector")], [])
        return list(builder.insert(ApplyIndexingOp([linear], [], indexing_map)).results)

    # -- the entry function --------------------------------------------------------------------------------------
    def emit(self, initial: PartitionedComputation | None, copied: list[int], index_values: PartitionedComputation,
             update_values: PartitionedComputation) -> func.FuncOp:
        fusion, plan = self.fusion, self.plan
        param_types = [tensor_type(p.shape, p.name) for p in buffer_arguments(update_values)]
        output_types = [tensor_type(s, fusion.name) for s in fusion_output_shapes(fusion)]
        block, params, outputs = entry_block(param_types, output_types)
        self._block = block
        builder = Builder(InsertPoint.at_end(block))
        block_id = None
        if plan.strategy != SERIAL:
            _, block_id = launch_ids(builder, 1, plan.blocks)
        owner = None
        if plan.strategy == OPERAND_ROWS:
            low = builder.insert(arith.MuliOp(block_id, self.index(plan.per_block))).result
            high = builder.insert(arith.AddiOp(low, self.index(plan.per_block))).result
            low.name_hint, high.name_hint = "first_row", "end_row"
            owner = (plan.split_dim, low, high)
        tensors = list(outputs)
        if initial is not None:
            tensors = self._copy_operands(builder, initial, params, tensors, copied, block_id)

        def each_index_vector(inner: Builder, positions: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
            return self._apply_updates(inner, index_values, update_values, params, positions, iters, owner)

        if plan.strategy == UNIQUE_INDICES:
            results = self.mapped_loop(builder, [block_id], self._vector_block_map(), tensors, each_index_vector)
        elif plan.strategy == SORTED_INDICES:
            results = self._sorted_runs(builder, index_values, params, block_id, tensors, each_index_vector)
        else:
            names = [f"update{d}" for d in self.dims.update_scatter_dims]
            results = self.loop(builder, self.scatter_sizes, names, tensors, each_index_vector)
        builder.insert(func.ReturnOp(*results))
        return func.FuncOp(ENTRY_NAME, ([*param_types, *output_types], output_types), Region(block))

    def _copy_operands(self, builder: Builder, initial: PartitionedComputation, params: Sequence[SSAValue],
                       tensors: list[SSAValue], copied: list[int], block_id: SSAValue | None) -> list[SSAValue]:
        """The outputs ``copied`` set to the scatter's operands, element by element in the output's physical
        order: all of them, or with the operand-rows split the block's rows only."""
        operands = self.scatter.operands[:self.count]
        output = fusion_output_shapes(self.fusion)[0]
        dims = list(operands[0].shape.dimensions)
        plan = self.plan
        split = plan.split_dim if plan.strategy == OPERAND_ROWS else None
        order = _physical_order(output)
        results: list[AffineExpr] = [affine.const(0)] * len(dims)
        variables = []
        for position, d in enumerate(order):
            size = plan.per_block if d == split else dims[d]
            variables.append(Variable(Interval(0, size - 1), f"operand{d}"))
            results[d] = affine.sym(position)
        constraints = []
        block_dims = []
        if split is not None:
            results[split] = affine.add(affine.mul(affine.dim(0), affine.const(plan.per_block)),
                                        results[split])
            block_dims = [Variable(Interval(0, plan.blocks - 1), "bl_x")]
            if dims[split] % plan.per_block:
                constraints = [(results[split], Interval(0, dims[split] - 1))]
        indexing_map = IndexingMap.from_exprs(results, block_dims, variables, constraints=constraints)

        def copy(inner: Builder, at: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
            values = values_at(inner, initial, params, at, [operands[k] for k in copied])
            return [inner.insert(tensor.InsertOp(v, into, at)).result for v, into in zip(values, iters)]

        inits = [tensors[k] for k in copied]
        if not dims:
            copies = copy(builder, [], inits)
        else:
            copies = self.mapped_loop(builder, [block_id] if split is not None else [], indexing_map, inits, copy)
        tensors = list(tensors)
        for k, value in zip(copied, copies):
            tensors[k] = value
        return tensors

    def _vector_block_map(self) -> IndexingMap:
        """``(bl_x)[vector] -> (update scatter indices)``: block ``bl_x`` takes ``per_block`` consecutive index
        vectors."""
        per_block = self.plan.per_block
        linear = affine.add(affine.mul(affine.dim(0), affine.const(per_block)), affine.sym(0))
        constraints = [] if self.vectors % per_block == 0 else [(linear, Interval(0, self.vectors - 1))]
        return IndexingMap.from_exprs(_row_major(linear, self.scatter_sizes),
                                      [Variable(Interval(0, self.plan.blocks - 1), "bl_x")],
                                      [Variable(Interval(0, per_block - 1), "vector")],
                                      constraints=constraints).simplify()

    def _sorted_runs(self, builder: Builder, index_values: PartitionedComputation, params: Sequence[SSAValue],
                     block_id: SSAValue, tensors: list[SSAValue], apply: Body) -> list[SSAValue]:
        """The sorted-indices split: block ``b`` applies the index vectors from the first that starts a run of
        equal start indices at or after ``b * per_block`` up to the first that does so at or after
        ``(b + 1) * per_block``, in order."""
        per_block = self.index(self.plan.per_block)
        first = builder.insert(arith.MuliOp(block_id, per_block)).result
        last_before = builder.insert(arith.MaxSIOp(builder.insert(arith.SubiOp(first, self.index(1))).result,
                                                   self.index(0))).result
        after_previous = self._run_end(builder, index_values, params, last_before)
        is_first_block = builder.insert(arith.CmpiOp(block_id, self.index(0), "eq")).result
        begin = builder.insert(arith.SelectOp(is_first_block, self.index(0), after_previous)).result
        own_last = builder.insert(arith.MinSIOp(builder.insert(arith.SubiOp(
            builder.insert(arith.AddiOp(first, per_block)).result, self.index(1))).result,
            self.index(self.vectors - 1))).result
        end = self._run_end(builder, index_values, params, own_last)
        begin.name_hint, end.name_hint = "first_vector", "end_vector"
        body = Block(arg_types=[IndexType(), *(t.type for t in tensors)])
        body.args[0].name_hint = "vector"
        inner = Builder(InsertPoint.at_end(body))
        results = apply(inner, self.positions_of(inner, body.args[0]), list(body.args[1:]))
        inner.insert(scf.YieldOp(*results))
        loop = builder.insert(scf.ForOp(begin, end, self.index(1), tensors, Region(body)))
        return list(loop.results)

    def _run_end(self, builder: Builder, index_values: PartitionedComputation, params: Sequence[SSAValue],
                 vector: SSAValue) -> SSAValue:
        """One past the last index vector with the start indices of index vector ``vector``: a binary search
        (sorted indices keep equal ones together), a fixed number of steps."""
        keys = [*self.dims.scatter_dims_to_operand_dims, *self.dims.input_batching_dims]
        wanted = self._starts(builder, index_values, params, self.positions_of(builder, vector))
        wanted = [wanted[d] for d in keys]
        body = Block(arg_types=[IndexType(), IndexType(), IndexType()])
        low, high = body.args[1], body.args[2]
        low.name_hint, high.name_hint = "low", "high"
        inner = Builder(InsertPoint.at_end(body))
        middle = inner.insert(arith.ShRUIOp(inner.insert(arith.AddiOp(low, high)).result, self.index(1))).result
        starts = self._starts(inner, index_values, params, self.positions_of(inner, middle))
        same = None
        for d, expected in zip(keys, wanted):
            equal = inner.insert(arith.CmpiOp(starts[d], expected, "eq")).result
            same = equal if same is None else inner.insert(arith.AndIOp(same, equal)).result
        if same is None:  # no start index moves: every index vector is one run
            same = inner.insert(arith.ConstantOp(IntegerAttr(1, IntegerType(1)))).result
        inner.insert(scf.YieldOp(inner.insert(arith.SelectOp(same, middle, low)).result,
                                 inner.insert(arith.SelectOp(same, high, middle)).result))
        steps = self.index(self.vectors.bit_length())
        search = builder.insert(scf.ForOp(self.index(0), steps, self.index(1), [vector, self.index(self.vectors)],
                                          Region(body)))
        return builder.insert(arith.AddiOp(search.results[0], self.index(1))).result

    def _starts(self, builder: Builder, index_values: PartitionedComputation, params: Sequence[SSAValue],
                positions: list[SSAValue]) -> list[SSAValue]:
        """The start index of the window in every operand dimension, for the index vector at ``positions`` (the
        update's scatter dimensions)."""
        dims, scatter = self.dims, self.scatter
        indices = scatter.operands[self.count]
        operand_rank = len(scatter.operands[0].shape.dimensions)
        starts: list[SSAValue] = [self.index(0)] * operand_rank
        vector_in_indices = dims.index_vector_dim < len(indices.shape.dimensions)
        wanted = []
        for component in range(len(dims.scatter_dims_to_operand_dims)):
            at = list(positions)
            if vector_in_indices:
                at.insert(dims.index_vector_dim, self.index(component))
            wanted.append(at)
        type_name = indices.shape.element_type
        for operand_dim, at in zip(dims.scatter_dims_to_operand_dims, wanted):
            (value,) = values_at(builder, index_values, params, at, [indices])
            starts[operand_dim] = index_value(builder, value, type_name)
        for operand_dim, indices_dim in zip(dims.input_batching_dims, dims.scatter_indices_batching_dims):
            # The position of the index vector along that indices dimension (the vector's dimension left out).
            starts[operand_dim] = positions[indices_dim - (indices_dim > dims.index_vector_dim)]
        return starts

    def _window_in_bounds(self, builder: Builder, starts: list[SSAValue], window_sizes: dict[int, int],
                          owned: tuple[int, SSAValue, SSAValue] | None) -> SSAValue | None:
        """Whether the whole window at ``starts`` is inside the operand, and when ``owned`` (a dimension and the
        block's range of it) is given, whether the window's single row along it is the block's (None: always)."""
        operand_dims = self.scatter.operands[0].shape.dimensions
        checks = []
        # The other dimensions start at 0, or at a batch position inside the operand (one element wide).
        for d in self.dims.scatter_dims_to_operand_dims:
            start = starts[d]
            checks.append(builder.insert(arith.CmpiOp(start, self.index(0), "sge")).result)
            last_start = operand_dims[d] - window_sizes.get(d, 1)
            checks.append(builder.insert(arith.CmpiOp(start, self.index(last_start), "sle")).result)
        if owned is not None:
            d, low, high = owned
            checks.append(builder.insert(arith.CmpiOp(starts[d], low, "sge")).result)
            checks.append(builder.insert(arith.CmpiOp(starts[d], high, "slt")).result)
        if not checks:
            return None
        valid = checks[0]
        for check in checks[1:]:
            valid = builder.insert(arith.AndIOp(valid, check)).result
        valid.name_hint = "in_bounds"
        return valid

    def _apply_updates(self, builder: Builder, index_values: PartitionedComputation,
                       update_values: PartitionedComputation, params: Sequence[SSAValue], positions: list[SSAValue],
                       iters: list[SSAValue], owner: tuple[int, SSAValue, SSAValue] | None = None) \
            -> list[SSAValue]:
        """The outputs after combining the window of the index vector at ``positions`` into them (unchanged
        when the window is out of bounds). With ``owner`` (the operand-rows split: a dimension and the block's
        range of it), only the window's elements in the block's rows."""
        dims, scatter, count = self.dims, self.scatter, self.count
        update_shape = scatter.operands[count + 1].shape.dimensions
        window_sizes = {operand_dim: update_shape[update_dim]
                        for operand_dim, update_dim in zip(dims.window_operand_dims, dims.update_window_dims)}
        starts = self._starts(builder, index_values, params, positions)
        updates = scatter.operands[count + 1:]
        combiner = scatter.called_computations[0]
        combiner_name = self.called.name_of(combiner)
        element_types = [element_type(o.shape.element_type, o.name) for o in scatter.operands[:count]]
        # The block's rows: checked once per window when it is one row wide along the split, else per element.
        per_element = owner is not None and window_sizes.get(owner[0], 1) > 1
        owned_window = None if owner is None or per_element else owner

        def combine_at(inner: Builder, at: list[SSAValue], update_at: list[SSAValue],
                       tensors: list[SSAValue]) -> list[SSAValue]:
            currents = [inner.insert(tensor.ExtractOp(t, at, e)).result for t, e in zip(tensors, element_types)]
            values = values_at(inner, update_values, params, update_at, list(updates))
            combined = inner.insert(func.CallOp(combiner_name, [*currents, *values], element_types)).results
            return [inner.insert(tensor.InsertOp(v, t, at)).result for v, t in zip(combined, tensors)]

        def combine(inner: Builder, window: list[SSAValue], tensors: list[SSAValue]) -> list[SSAValue]:
            at = list(starts)
            for operand_dim, offset in zip(dims.window_operand_dims, window):
                at[operand_dim] = offset if _is_zero(starts[operand_dim]) else \
                    inner.insert(arith.AddiOp(starts[operand_dim], offset)).result
            update_at: list[SSAValue] = [None] * len(update_shape)  # type: ignore[list-item]
            for d, position in zip(dims.update_scatter_dims, positions):
                update_at[d] = position
            for d, offset in zip(dims.update_window_dims, window):
                update_at[d] = offset
            if not per_element:
                return combine_at(inner, at, update_at, tensors)
            d, low, high = owner
            mine = inner.insert(arith.AndIOp(inner.insert(arith.CmpiOp(at[d], low, "sge")).result,
                                             inner.insert(arith.CmpiOp(at[d], high, "slt")).result)).result
            return _if(inner, mine, tensors, lambda b: combine_at(b, at, update_at, tensors))

        window = [update_shape[d] for d in dims.update_window_dims]
        names = [f"window{d}" for d in dims.update_window_dims]
        valid = self._window_in_bounds(builder, starts, window_sizes, owned_window)
        if valid is None:
            return self.loop(builder, window, names, iters, combine)
        return _if(builder, valid, iters, lambda b: self.loop(b, window, names, iters, combine))


def _if(builder: Builder, condition: SSAValue, values: list[SSAValue],
        then: Callable[[Builder], list[SSAValue]]) -> list[SSAValue]:
    """``then``'s values when ``condition`` holds, else ``values``."""
    then_block = Block()
    then_block_builder = Builder(InsertPoint.at_end(then_block))
    then_block_builder.insert(scf.YieldOp(*then(then_block_builder)))
    if_op = builder.insert(scf.IfOp(condition, [v.type for v in values], Region(then_block),
                                    Region(Block([scf.YieldOp(*values)]))))
    return list(if_op.results)


def _row_major(linear: AffineExpr, sizes: Sequence[int]) -> list[AffineExpr]:
    """The indices of element number ``linear`` of an array of ``sizes`` in row-major order (``linear`` is in
    bounds)."""
    results = []
    stride = math.prod(sizes)
    for position, size in enumerate(sizes):
        stride //= size
        part = affine.floordiv(linear, affine.const(stride)) if stride > 1 else linear
        results.append(affine.mod(part, affine.const(size)) if position else part)
    return results


def _is_zero(value: SSAValue) -> bool:
    op = value.owner
    return isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr) and op.value.value.data == 0


__all__ = ["OPERAND_ROWS", "SCATTER_LAUNCH", "SERIAL", "SORTED_INDICES", "UNIQUE_INDICES", "ScatterDimensions",
           "ScatterPlan", "emit_scatter_fusion", "in_place_outputs", "is_scatter_fusion", "scatter_launch",
           "scatter_operand_count", "scatter_plan"]
