"""Rules of ``gather`` and ``scatter``, with XLA's full dimension numbers
(batching dimensions included), vectorised over all index vectors at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.interpreter.numerics import widen
from xlapy.interpreter.registry import Value, rule

if TYPE_CHECKING:
    from xlapy.hlo import HloComputation, HloInstruction
    from xlapy.interpreter.evaluator import Evaluator

_INT64_MAX = np.iinfo(np.int64).max


def index_array(value: np.ndarray) -> np.ndarray:
    """Integer index values as int64. Unsigned values beyond int64 saturate,
    so they stay out of bounds instead of wrapping to negative."""
    value = widen(np.asarray(value))
    if value.dtype == np.bool_:
        return value.astype(np.int64)
    if value.dtype.kind == "u" and value.dtype.itemsize == 8:
        value = np.minimum(value, np.uint64(_INT64_MAX))
    return value.astype(np.int64)


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The index vectors with the vector dimension last: shape batch + (K,).
    ``index_vector_dim == rank`` means each index is a vector of one element."""
    indices = index_array(indices)
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _batch_coordinate(batch_shape: tuple[int, ...], indices_dim: int, index_vector_dim: int) -> np.ndarray:
    """For each index vector, its position along indices dimension ``indices_dim``
    (a batching dimension), shaped to broadcast over ``batch_shape``."""
    axis = indices_dim - (indices_dim > index_vector_dim)
    shape = [1] * len(batch_shape)
    shape[axis] = batch_shape[axis]
    return np.arange(batch_shape[axis], dtype=np.int64).reshape(shape)


def _starts(vectors: np.ndarray, rank: int, index_map: Sequence[int], batching_dims: Sequence[int],
            indices_batching_dims: Sequence[int], index_vector_dim: int) -> list[np.ndarray]:
    """The start index in each operand dimension, per index vector (arrays
    broadcastable to the batch shape): components of the index vector mapped
    by ``index_map``, batch positions on batching dimensions, 0 elsewhere."""
    batch_shape = vectors.shape[:-1]
    starts: list[np.ndarray] = [np.zeros((1,) * len(batch_shape), np.int64) for _ in range(rank)]
    for k, dim in enumerate(index_map):
        starts[dim] = vectors[..., k]
    for dim, indices_dim in zip(batching_dims, indices_batching_dims):
        starts[dim] = _batch_coordinate(batch_shape, indices_dim, index_vector_dim)
    return starts


def _along(axis: int, ndim: int, size: int) -> np.ndarray:
    """``arange(size)`` laid along ``axis`` of an ``ndim``-dimensional array."""
    shape = [1] * ndim
    shape[axis] = size
    return np.arange(size, dtype=np.int64).reshape(shape)


@rule("gather")
def gather(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    operand, indices = operands
    attrs = instr.attributes
    offset_dims = tuple(attrs.get("offset_dims", ()))
    collapsed = set(attrs.get("collapsed_slice_dims", ()))
    batching = tuple(attrs.get("operand_batching_dims", ()))
    slice_sizes = tuple(attrs["slice_sizes"])
    index_vector_dim = attrs.get("index_vector_dim", np.ndim(indices))
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    starts = _starts(vectors, operand.ndim, attrs.get("start_index_map", ()), batching,
                     attrs.get("start_indices_batching_dims", ()), index_vector_dim)
    offset_operand_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in batching]
    nb, no = len(batch_shape), len(offset_operand_dims)
    # Index arrays over batch + offset axes, one per operand dimension.
    index = []
    for dim in range(operand.ndim):
        # Start indices are clamped so the whole slice is in bounds.
        start = np.clip(starts[dim], 0, operand.shape[dim] - slice_sizes[dim])
        start = start.reshape(start.shape + (1,) * no)
        if dim in offset_operand_dims:
            start = start + _along(nb + offset_operand_dims.index(dim), nb + no, slice_sizes[dim])
        index.append(start)
    offset_shape = tuple(slice_sizes[d] for d in offset_operand_dims)
    result = np.broadcast_to(operand[tuple(index)], batch_shape + offset_shape)
    # Offset axes go to offset_dims; batch axes fill the other output dimensions in order.
    batch_axes = iter(range(nb))
    perm = [nb + offset_dims.index(p) if p in offset_dims else next(batch_axes) for p in range(nb + no)]
    return np.transpose(result, perm)


def combine_in_order(ev: Evaluator, computation: HloComputation, targets: list[np.ndarray],
                     positions: np.ndarray, values: list[np.ndarray]) -> None:
    """``targets[i][positions[j]] = computation(targets..., values...)[i]`` for
    each j in order. Positions that repeat are combined one after another in
    the order given; all first occurrences are done at once, then all second
    ones, and so on. ``targets`` are flat arrays, updated in place."""
    if positions.size == 0:
        return
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    counter = np.arange(ordered.size)
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    occurrence = np.empty_like(counter)
    occurrence[order] = counter - np.maximum.accumulate(np.where(first, counter, 0))
    for round_ in range(int(occurrence.max()) + 1):
        chosen = np.flatnonzero(occurrence == round_)
        where = positions[chosen]
        result = ev.call(computation, *[t[where] for t in targets], *[v[chosen] for v in values])
        for target, new in zip(targets, result if len(targets) > 1 else (result,)):
            target[where] = new


@rule("scatter")
def scatter(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    count = (len(operands) - 1) // 2
    inputs, indices, updates = operands[:count], operands[count], operands[count + 1:]
    attrs = instr.attributes
    window_dims = tuple(attrs.get("update_window_dims", ()))
    inserted = set(attrs.get("inserted_window_dims", ()))
    batching = tuple(attrs.get("input_batching_dims", ()))
    index_vector_dim = attrs.get("index_vector_dim", np.ndim(indices))
    operand_shape, update_shape = inputs[0].shape, updates[0].shape
    rank = len(operand_shape)
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    starts = _starts(vectors, rank, attrs.get("scatter_dims_to_operand_dims", ()), batching,
                     attrs.get("scatter_indices_batching_dims", ()), index_vector_dim)
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in batching]
    window_shape = tuple(update_shape[d] for d in window_dims)
    nb, nw = len(batch_shape), len(window_dims)
    # An update window is applied only if all of it lands in bounds.
    valid = np.ones(batch_shape, bool)
    position = np.zeros((1,) * (nb + nw), np.int64)
    stride = 1
    for dim in reversed(range(rank)):
        start = starts[dim]
        size = window_shape[window_operand_dims.index(dim)] if dim in window_operand_dims else 1
        valid &= (start >= 0) & (start <= operand_shape[dim] - size)
        index = start.reshape(start.shape + (1,) * nw)
        if dim in window_operand_dims:
            index = index + _along(nb + window_operand_dims.index(dim), nb + nw, size)
        position = position + index * stride
        stride *= operand_shape[dim]
    # Update elements in the evaluator's order: index vectors outer, window inner.
    scatter_dims = [d for d in range(len(update_shape)) if d not in window_dims]
    ordered = [np.transpose(u, scatter_dims + list(window_dims)).reshape(-1) for u in updates]
    full = batch_shape + window_shape
    keep = np.broadcast_to(valid.reshape(batch_shape + (1,) * nw), full).reshape(-1)
    positions = np.broadcast_to(position, full).reshape(-1)[keep]
    results = [np.array(x, copy=True).reshape(-1) for x in inputs]
    combine_in_order(ev, instr.called_computations[0], results, positions, [u[keep] for u in ordered])
    results = [r.reshape(operand_shape) for r in results]
    return tuple(results) if count > 1 else results[0]
