"""Shape rules of gather and scatter (XLA's gather/scatter dimension numbers,
batching dimensions included)."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    array_operand,
    array_shape,
    braces,
    callees,
    check_dimension_numbers,
    check_reducer,
    declared_dynamic,
    fail,
    int_attr,
    ints_attr,
    one_or_tuple,
    operand_count,
    same_dims,
    show,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


def _index_batch_dims(indices: Shape, index_vector_dim: int) -> list[int]:
    # The dimensions of the indices that enumerate index vectors.
    return [d for d in range(indices.rank) if d != index_vector_dim]


def _index_vector_size(instr: HloInstruction, indices: Shape, index_vector_dim: int) -> int:
    if not 0 <= index_vector_dim <= indices.rank:
        fail(f"index_vector_dim={index_vector_dim} of {instr.opcode} is out of range for indices {show(indices)}")
    if not indices.type.is_integral:
        fail(f"indices of {instr.opcode} must be integral, got {show(indices)}")
    # index_vector_dim == rank means an implicit trailing dimension of size 1.
    return indices.dimensions[index_vector_dim] if index_vector_dim < indices.rank else 1


def _check_batching_dims(instr: HloInstruction, names: tuple[str, str], operand_dims: Sequence[int],
                         index_dims: Sequence[int], operand: Shape, indices: Shape, index_vector_dim: int) -> None:
    check_dimension_numbers(instr, names[0], operand_dims, operand.rank, show(operand), ordered=True)
    check_dimension_numbers(instr, names[1], index_dims, indices.rank, f"indices {show(indices)}")
    if len(operand_dims) != len(index_dims):
        fail(f"{instr.opcode} needs as many {names[0]} as {names[1]}, got {braces(operand_dims)} and "
              f"{braces(index_dims)}")
    if index_vector_dim in index_dims:
        fail(f"{names[1]}={braces(index_dims)} of {instr.opcode} must not contain index_vector_dim")
    for o, i in zip(operand_dims, index_dims):
        if operand.dimensions[o] != indices.dimensions[i]:
            fail(f"batching dimensions of {instr.opcode} must have equal sizes: operand dimension {o} of "
                  f"{show(operand)} and indices dimension {i} of {show(indices)}")


@shape_rule("gather")
def _gather(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    operand, indices = array_operand(instr, 0), array_operand(instr, 1, "the start indices")
    index_vector_dim = int_attr(instr, "index_vector_dim")
    vector = _index_vector_size(instr, indices, index_vector_dim)
    offset_dims = ints_attr(instr, "offset_dims")
    collapsed = ints_attr(instr, "collapsed_slice_dims", ())
    start_index_map = ints_attr(instr, "start_index_map")
    slice_sizes = ints_attr(instr, "slice_sizes")
    operand_batching = ints_attr(instr, "operand_batching_dims", ())
    indices_batching = ints_attr(instr, "start_indices_batching_dims", ())
    batch_dims = _index_batch_dims(indices, index_vector_dim)
    out_rank = len(offset_dims) + len(batch_dims)
    check_dimension_numbers(instr, "offset_dims", offset_dims, out_rank, "the result", ordered=True)
    check_dimension_numbers(instr, "collapsed_slice_dims", collapsed, operand.rank, show(operand), ordered=True)
    _check_batching_dims(instr, ("operand_batching_dims", "start_indices_batching_dims"), operand_batching,
                         indices_batching, operand, indices, index_vector_dim)
    check_dimension_numbers(instr, "start_index_map", start_index_map, operand.rank, show(operand))
    if len(start_index_map) != vector:
        fail(f"start_index_map={braces(start_index_map)} of gather must have one entry per index vector "
              f"element ({vector} in {show(indices)})")
    if set(collapsed) & set(operand_batching):
        fail("collapsed_slice_dims and operand_batching_dims of gather must not overlap")
    if len(slice_sizes) != operand.rank:
        fail(f"slice_sizes={braces(slice_sizes)} of gather must have one size per dimension of {show(operand)}")
    for d, (size, bound) in enumerate(zip(slice_sizes, operand.dimensions)):
        if not 0 <= size <= bound:
            fail(f"slice_sizes={braces(slice_sizes)} of gather: size {size} of dimension {d} is not within "
                  f"the {bound} of {show(operand)}")
    for d in collapsed + operand_batching:
        if slice_sizes[d] > 1:
            fail(f"gather can only drop dimensions sliced to size 1, but slice_sizes[{d}] is {slice_sizes[d]}")
    if len(offset_dims) + len(collapsed) + len(operand_batching) != operand.rank:
        fail(f"gather: offset_dims ({len(offset_dims)}) + collapsed_slice_dims ({len(collapsed)}) + "
              f"operand_batching_dims ({len(operand_batching)}) must add up to the operand rank {operand.rank}")
    offsets = iter(slice_sizes[d] for d in range(operand.rank) if d not in collapsed + operand_batching)
    batches = iter(batch_dims)
    dims = [next(offsets) if i in offset_dims else indices.dimensions[next(batches)] for i in range(out_rank)]
    return array_shape(operand.element_type, dims, declared_dynamic(instr, out_rank))


@shape_rule("scatter")
def _scatter(instr: HloInstruction) -> Shape:
    count = len(instr.operands)
    if count < 3 or count % 2 == 0:
        fail(f"scatter takes N operands, the indices and N updates, got {count} operands")
    n = (count - 1) // 2
    operands = [array_operand(instr, i, f"operand {i}") for i in range(n)]
    indices = array_operand(instr, n, "the scatter indices")
    updates = [array_operand(instr, n + 1 + i, f"update {i}") for i in range(n)]
    same_dims(instr, operands, "operands")
    same_dims(instr, updates, "updates")
    operand, update = operands[0], updates[0]
    index_vector_dim = int_attr(instr, "index_vector_dim")
    vector = _index_vector_size(instr, indices, index_vector_dim)
    window_dims = ints_attr(instr, "update_window_dims")
    inserted = ints_attr(instr, "inserted_window_dims", ())
    to_operand = ints_attr(instr, "scatter_dims_to_operand_dims")
    input_batching = ints_attr(instr, "input_batching_dims", ())
    indices_batching = ints_attr(instr, "scatter_indices_batching_dims", ())
    check_dimension_numbers(instr, "update_window_dims", window_dims, update.rank, show(update), ordered=True)
    check_dimension_numbers(instr, "inserted_window_dims", inserted, operand.rank, show(operand), ordered=True)
    _check_batching_dims(instr, ("input_batching_dims", "scatter_indices_batching_dims"), input_batching,
                         indices_batching, operand, indices, index_vector_dim)
    if set(inserted) & set(input_batching):
        fail("inserted_window_dims and input_batching_dims of scatter must not overlap")
    if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
        fail(f"scatter: update_window_dims ({len(window_dims)}) + inserted_window_dims ({len(inserted)}) + "
              f"input_batching_dims ({len(input_batching)}) must add up to the operand rank {operand.rank}")
    check_dimension_numbers(instr, "scatter_dims_to_operand_dims", to_operand, operand.rank, show(operand))
    if len(to_operand) != vector:
        fail(f"scatter_dims_to_operand_dims={braces(to_operand)} of scatter must have one entry per index "
              f"vector element ({vector} in {show(indices)})")
    batch_dims = _index_batch_dims(indices, index_vector_dim)
    if update.rank != len(window_dims) + len(batch_dims):
        fail(f"updates of scatter must have rank {len(window_dims) + len(batch_dims)} (update_window_dims plus "
              f"the index batch dimensions of {show(indices)}), got {show(update)}")
    window_operand_dims = [d for d in range(operand.rank) if d not in inserted + input_batching]
    for u, o in zip(window_dims, window_operand_dims):
        if update.dimensions[u] > operand.dimensions[o]:
            fail(f"update window dimension {u} of {show(update)} is larger than operand dimension {o} of "
                  f"{show(operand)}")
    scatter_dims = [d for d in range(update.rank) if d not in window_dims]
    for u, i in zip(scatter_dims, batch_dims):
        if update.dimensions[u] != indices.dimensions[i]:
            fail(f"update dimension {u} of {show(update)} must equal the size {indices.dimensions[i]} of "
                  f"indices dimension {i} of {show(indices)}")
    for i, (o, u) in enumerate(zip(operands, updates)):
        if o.element_type != u.element_type:
            fail(f"update {i} of scatter must have the element type of operand {i}, got {show(u)} for {show(o)}")
    (computation,) = callees(instr, 1, "to_apply")
    check_reducer(instr, computation, [Shape(o.element_type) for o in operands], [u.element_type for u in updates])
    return one_or_tuple(operands)
