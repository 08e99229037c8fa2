"""The scatter emitter: a loop fusion whose root is a scatter (XLA's scatter emitters,
``xla/backends/cpu/codegen/emitters/cpu_scatter_emitter.cc`` and ``xla/backends/gpu/codegen/emitters/scatter.cc``),
for scatters of any dimension numbers (XLA's ``ScatterSimplifier`` form not required) and variadic scatters.

The kernel runs as one block of one thread, so that updates are applied one after another, without races, in
the order of the reference interpreter (``xlapy/interpreter/gather_scatter.py``): the index vectors in row-major
order of the updates' scatter dimensions, and for each the window in row-major order; elements that several
updates reach are combined in that order, which makes the result deterministic.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import LoopOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    derived_partition,
    entry_block,
    finish_entry,
    first_output_buffer,
    fusion_output_shapes,
    index_value,
    values_at,
)
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.partitioner import PartitionedComputation
from xlapy.codegen.types import element_type, tensor_type
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval

# One block of one thread: the updates are applied serially.
SCATTER_LAUNCH = LaunchDimensions(threads_per_block=1, blocks=1, vector_size=1)


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


def emit_scatter_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a scatter fusion: the entry function ``@main`` (the initial copies, then the serial loop
    over the updates) and the functions computing the operands, indices and updates."""
    if not is_scatter_fusion(fusion):
        raise VerifyError(f"fusion {fusion.name} is not a loop fusion with a scatter root")
    computation = fusion.fused_computation
    scatter = computation.root
    count = scatter_operand_count(scatter)
    in_place = in_place_outputs(fusion, slice_indices)
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
    entry = _EntryEmitter(fusion, scatter, called).emit(initial, copied, index_values, update_values)
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions, *called.functions]), SCATTER_LAUNCH


def _identity_over(sizes: Sequence[int], names: Sequence[str]) -> IndexingMap:
    """``()[s0, ..., sn] -> (s0, ..., sn)`` with ``si`` in ``[0, sizes[i])``."""
    variables = [Variable(Interval(0, size - 1), name) for size, name in zip(sizes, names)]
    return IndexingMap.from_exprs([affine.sym(i) for i in range(len(sizes))], [], variables)


Body = Callable[[Builder, list[SSAValue], list[SSAValue]], list[SSAValue]]


class _EntryEmitter:
    """Builds the entry function of a scatter fusion."""

    def __init__(self, fusion: HloInstruction, scatter: HloInstruction, called: CalledFunctions):
        self.fusion = fusion
        self.scatter = scatter
        self.called = called
        self.dims = ScatterDimensions.of(scatter)
        self.count = scatter_operand_count(scatter)
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
        op = builder.insert(LoopOp([], _identity_over(sizes, names), list(inits)))
        inner = Builder(InsertPoint.at_end(op.body.block))
        inner.insert(YieldOp(body(inner, list(op.index_args), list(op.iter_args))))
        return list(op.results)

    # -- the entry function --------------------------------------------------------------------------------------
    def emit(self, initial: PartitionedComputation | None, copied: list[int], index_values: PartitionedComputation,
             update_values: PartitionedComputation) -> func.FuncOp:
        fusion, scatter, count = self.fusion, self.scatter, self.count
        param_types = [tensor_type(p.shape, p.name) for p in buffer_arguments(update_values)]
        output_types = [tensor_type(s, fusion.name) for s in fusion_output_shapes(fusion)]
        block, params, outputs = entry_block(param_types, output_types)
        self._block = block
        builder = Builder(InsertPoint.at_end(block))
        tensors = list(outputs)
        if initial is not None:
            tensors = self._copy_operands(builder, initial, params, tensors, copied)
        update_shape = scatter.operands[count + 1].shape.dimensions
        scatter_sizes = [update_shape[d] for d in self.dims.update_scatter_dims]

        def each_index_vector(inner: Builder, positions: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
            return self._apply_updates(inner, index_values, update_values, params, positions, iters)

        names = [f"update{d}" for d in self.dims.update_scatter_dims]
        results = self.loop(builder, scatter_sizes, names, tensors, each_index_vector)
        builder.insert(func.ReturnOp(*results))
        return func.FuncOp(ENTRY_NAME, ([*param_types, *output_types], output_types), Region(block))

    def _copy_operands(self, builder: Builder, initial: PartitionedComputation, params: Sequence[SSAValue],
                       tensors: list[SSAValue], copied: list[int]) -> list[SSAValue]:
        """The outputs ``copied`` set to the scatter's operands, element by element."""
        operands = self.scatter.operands[:self.count]
        dims = operands[0].shape.dimensions

        def copy(inner: Builder, at: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
            values = values_at(inner, initial, params, at, [operands[k] for k in copied])
            return [inner.insert(tensor.InsertOp(v, into, at)).result for v, into in zip(values, iters)]

        names = [f"operand{d}" for d in range(len(dims))]
        copies = self.loop(builder, list(dims), names, [tensors[k] for k in copied], copy)
        tensors = list(tensors)
        for k, value in zip(copied, copies):
            tensors[k] = value
        return tensors

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

    def _window_in_bounds(self, builder: Builder, starts: list[SSAValue], window_sizes: dict[int, int]) \
            -> SSAValue | None:
        """Whether the whole window at ``starts`` is inside the operand (None: always)."""
        operand_dims = self.scatter.operands[0].shape.dimensions
        checks = []
        # The other dimensions start at 0, or at a batch position inside the operand (one element wide).
        for d in self.dims.scatter_dims_to_operand_dims:
            start = starts[d]
            checks.append(builder.insert(arith.CmpiOp(start, self.index(0), "sge")).result)
            last_start = operand_dims[d] - window_sizes.get(d, 1)
            checks.append(builder.insert(arith.CmpiOp(start, self.index(last_start), "sle")).result)
        if not checks:
            return None
        valid = checks[0]
        for check in checks[1:]:
            valid = builder.insert(arith.AndIOp(valid, check)).result
        valid.name_hint = "in_bounds"
        return valid

    def _apply_updates(self, builder: Builder, index_values: PartitionedComputation,
                       update_values: PartitionedComputation, params: Sequence[SSAValue], positions: list[SSAValue],
                       iters: list[SSAValue]) -> list[SSAValue]:
        """The outputs after combining the window of the index vector at ``positions`` into them (unchanged
        when the window is out of bounds)."""
        dims, scatter, count = self.dims, self.scatter, self.count
        update_shape = scatter.operands[count + 1].shape.dimensions
        window_sizes = {operand_dim: update_shape[update_dim]
                        for operand_dim, update_dim in zip(dims.window_operand_dims, dims.update_window_dims)}
        starts = self._starts(builder, index_values, params, positions)
        updates = scatter.operands[count + 1:]
        combiner = scatter.called_computations[0]
        combiner_name = self.called.name_of(combiner)
        element_types = [element_type(o.shape.element_type, o.name) for o in scatter.operands[:count]]

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
            currents = [inner.insert(tensor.ExtractOp(t, at, e)).result for t, e in zip(tensors, element_types)]
            values = values_at(inner, update_values, params, update_at, list(updates))
            combined = inner.insert(func.CallOp(combiner_name, [*currents, *values], element_types)).results
            return [inner.insert(tensor.InsertOp(v, t, at)).result for v, t in zip(combined, tensors)]

        window = [update_shape[d] for d in dims.update_window_dims]
        names = [f"window{d}" for d in dims.update_window_dims]
        valid = self._window_in_bounds(builder, starts, window_sizes)
        if valid is None:
            return self.loop(builder, window, names, iters, combine)
        then_block = Block()
        then_builder = Builder(InsertPoint.at_end(then_block))
        then_builder.insert(scf.YieldOp(*self.loop(then_builder, window, names, iters, combine)))
        if_op = builder.insert(scf.IfOp(valid, [t.type for t in iters], Region(then_block),
                                        Region(Block([scf.YieldOp(*iters)]))))
        return list(if_op.results)


def _is_zero(value: SSAValue) -> bool:
    op = value.owner
    return isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr) and op.value.value.data == 0


__all__ = ["SCATTER_LAUNCH", "ScatterDimensions", "emit_scatter_fusion", "in_place_outputs", "is_scatter_fusion",
           "scatter_operand_count"]
