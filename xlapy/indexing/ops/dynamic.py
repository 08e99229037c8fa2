"""Ops whose indices depend on runtime values (XLA's docs/indexing.md):
dynamic-slice, dynamic-update-slice, and the canonical forms of gather and
scatter. Each runtime offset becomes a runtime variable ``rt`` bounded by the
offsets that keep the slice in bounds (XLA clamps to them), unless it is a
constant or an iota, which XLA folds into the expressions."""

from __future__ import annotations

from xdsl.ir.affine import AffineExpr

from xlapy.hlo import HloInstruction
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops.common import (
    MalformedOp,
    RuntimeVars,
    broadcast_from_scalar,
    dim_exprs,
    dim_vars,
    dims,
    identity,
    ints,
    one_set_each,
    output_shape,
    scalar_map,
    undefined,
)
from xlapy.indexing.ops.registry import input_to_output, output_to_input

# --- dynamic-slice ---


def _slice_sizes(instr: HloInstruction) -> tuple[int, ...]:
    sizes = ints(instr, "dynamic_slice_sizes", dims(instr.shape))
    operand = instr.operand(0).shape.dimensions
    offsets = instr.operands[1:]
    if len(sizes) != len(operand) or len(offsets) != len(operand) or any(o.shape.dimensions for o in offsets):
        # XLA does not support the old form with one vector of offsets either.
        raise MalformedOp(f"dynamic-slice {instr.name} needs one scalar offset per dimension")
    return sizes


@output_to_input("dynamic-slice")
def _dynamic_slice_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """``d_i + rt_i`` with ``rt_i`` in ``[0, operand_i - size_i]``; the offsets
    are read whole by every output element."""
    sizes = _slice_sizes(instr)
    operand = instr.operand(0).shape.dimensions
    rt = RuntimeVars()
    exprs = [
        affine.add(affine.dim(i), rt.read(instr.operand(1 + i), [], Interval(0, operand[i] - size)))
        for i, size in enumerate(sizes)
    ]
    output = dims(instr.shape)
    operand_map = IndexingMap.from_exprs(exprs, dim_vars(output), rt_vars=rt.bounds)
    return [{operand_map}] + [{scalar_map(output)} for _ in sizes]


@input_to_output("dynamic-slice")
def _dynamic_slice_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """The operand element ``d`` is output ``d - rt`` when that is inside the
    slice; an offset may affect every output element."""
    sizes = _slice_sizes(instr)
    output = dims(instr.shape)
    if input_id > 0:
        return one_set_each(broadcast_from_scalar(output))
    operand = instr.operand(0).shape.dimensions
    rt = RuntimeVars()
    exprs, constraints = [], []
    for i, size in enumerate(sizes):
        expr = affine.sub(affine.dim(i), rt.read(instr.operand(1 + i), [], Interval(0, operand[i] - size)))
        exprs.append(expr)
        constraints.append((expr, Interval(0, size - 1)))
    return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(operand), rt_vars=rt.bounds, constraints=constraints))


# --- dynamic-update-slice ---


def _update_sizes(instr: HloInstruction) -> tuple[int, ...]:
    if len(instr.operands) < 2:
        raise MalformedOp(f"dynamic-update-slice {instr.name} needs an operand and an update")
    update = instr.operand(1).shape.dimensions
    offsets = instr.operands[2:]
    if len(update) != len(instr.shape.dimensions) or len(offsets) != len(update):
        raise MalformedOp(f"dynamic-update-slice {instr.name} needs one scalar offset per dimension")
    if any(o.shape.dimensions for o in offsets):
        raise MalformedOp(f"dynamic-update-slice {instr.name} needs scalar offsets")
    return update


@output_to_input("dynamic-update-slice")
def _dynamic_update_slice_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """The operand: the identity (indexing maps cannot exclude the updated
    box). The update: ``d_i - rt_i`` with ``rt_i`` in ``[0, output_i -
    update_i]``. The offsets: read whole."""
    update = _update_sizes(instr)
    output = dims(instr.shape)
    rt = RuntimeVars()
    exprs = [
        affine.sub(affine.dim(i), rt.read(instr.operand(2 + i), [], Interval(0, output[i] - size)))
        for i, size in enumerate(update)
    ]
    update_map = IndexingMap.from_exprs(exprs, dim_vars(output), rt_vars=rt.bounds)
    return [{identity(output)}, {update_map}] + [{scalar_map(output)} for _ in update]


@input_to_output("dynamic-update-slice")
def _dynamic_update_slice_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """The operand: the identity (the dual of the output-to-input map). The
    update element ``d`` lands at ``d + rt``. An offset may affect every
    output element."""
    update = _update_sizes(instr)
    output = dims(instr.shape)
    if input_id == 0:
        return one_set_each(identity(output))
    if input_id > 1:
        return one_set_each(broadcast_from_scalar(output))
    rt = RuntimeVars()
    exprs = [
        affine.add(affine.dim(i), rt.read(instr.operand(2 + i), [], Interval(0, output[i] - size)))
        for i, size in enumerate(update)
    ]
    return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(update), rt_vars=rt.bounds))


# --- gather ---


def _is_identity(values: tuple[int, ...]) -> bool:
    return list(values) == list(range(len(values)))


def _canonical_gather(instr: HloInstruction) -> bool:
    """XLA's ``GatherSimplifier::IsSimplifiedGather``: indices ``[N, K]`` with
    the index vector minor (for the operand dimensions of ``start_index_map``,
    in any order), nothing collapsed, and the output ``[N, slice...]``."""
    attrs = instr.attributes
    offset_dims = ints(instr, "offset_dims", ())
    operand = instr.operand(0).shape.dimensions
    return (
        len(instr.operand(1).shape.dimensions) == 2
        and attrs.get("index_vector_dim") == 1
        and not ints(instr, "collapsed_slice_dims", ())
        and not ints(instr, "operand_batching_dims", ())
        and offset_dims == tuple(range(1, len(operand) + 1))
        and len(ints(instr, "slice_sizes")) == len(operand)
    )


def _gather_operand_exprs(instr: HloInstruction, batch: AffineExpr, rt: RuntimeVars) -> list[AffineExpr | None]:
    """Per operand dimension ``i``: the runtime start index ``indices[batch,
    j]`` if the dimension is ``start_index_map[j]``, else None."""
    operand = instr.operand(0).shape.dimensions
    start_index_map = ints(instr, "start_index_map")
    starts = []
    for i, size in enumerate(ints(instr, "slice_sizes")):
        if i in start_index_map:
            j = start_index_map.index(i)
            starts.append(rt.read(instr.operand(1), [batch, affine.const(j)], Interval(0, operand[i] - size)))
        else:
            starts.append(None)
    return starts


@output_to_input("gather")
def _gather_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """The operand: ``d_{i+1} + rt_i`` where ``rt_i`` is ``indices[d0, i]``.
    The indices: the whole row ``(d0, s0)``."""
    if not _canonical_gather(instr):
        return undefined(2)
    output = dims(instr.shape)
    rt = RuntimeVars()
    starts = _gather_operand_exprs(instr, affine.dim(0), rt)
    exprs = [
        affine.dim(1 + i) if start is None else affine.add(affine.dim(1 + i), start) for i, start in enumerate(starts)
    ]
    operand_map = IndexingMap.from_exprs(exprs, dim_vars(output), rt_vars=rt.bounds)
    index_vector = instr.operand(1).shape.dimensions[1]
    indices_map = IndexingMap.from_exprs([affine.dim(0), affine.sym(0)], dim_vars(output), dim_vars([index_vector]))
    return one_set_each(operand_map, indices_map)


@input_to_output("gather")
def _gather_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """The operand element ``d`` is output ``(s0, d - rt)`` for each row
    ``s0`` whose slice holds it. A row of indices may affect every output
    element of that row."""
    if not _canonical_gather(instr):
        return undefined(1)
    output = dims(instr.shape)
    if input_id == 1:
        exprs = [affine.dim(0)] + [affine.sym(i) for i in range(len(output) - 1)]
        return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(dims(instr.operand(1).shape)), dim_vars(output[1:])))
    rt = RuntimeVars(num_range_vars=1)
    starts = _gather_operand_exprs(instr, affine.sym(0), rt)
    exprs, constraints = [affine.sym(0)], []
    for i, (start, size) in enumerate(zip(starts, ints(instr, "slice_sizes"))):
        expr = affine.dim(i) if start is None else affine.sub(affine.dim(i), start)
        exprs.append(expr)
        constraints.append((expr, Interval(0, size - 1)))
    operand = dims(instr.operand(0).shape)
    return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(operand), dim_vars(output[:1]), rt.bounds, constraints))


# --- scatter ---


def _canonical_scatter(instr: HloInstruction) -> tuple[int, int] | None:
    """``(N, K)`` for a scatter in the form XLA's ``ScatterSimplifier``
    produces (indices ``[N, K]``, index vector minor, start indices for
    operand dimensions ``0..K-1``, nothing inserted, updates ``[N,
    window...]``), else None."""
    count = len(instr.operands) // 2
    if len(instr.operands) != 2 * count + 1 or count == 0:
        return None
    operand = instr.operand(0).shape.dimensions
    indices = instr.operand(count).shape.dimensions
    updates = [instr.operand(count + 1 + i).shape.dimensions for i in range(count)]
    if (
        len(indices) != 2
        or instr.attributes.get("index_vector_dim") != 1
        or not _is_identity(ints(instr, "scatter_dims_to_operand_dims", ()))
        or len(ints(instr, "scatter_dims_to_operand_dims", ())) != indices[1]
        or ints(instr, "inserted_window_dims", ())
        or ints(instr, "input_batching_dims", ())
        or ints(instr, "update_window_dims", ()) != tuple(range(1, len(operand) + 1))
        or any(len(u) != len(operand) + 1 or u[0] != indices[0] for u in updates)
        or any(u != updates[0] for u in updates)
    ):
        return None
    return indices[0], indices[1]


def _scatter_window(instr: HloInstruction) -> tuple[int, ...]:
    count = len(instr.operands) // 2
    return instr.operand(count + 1).shape.dimensions[1:]


@output_to_input("scatter")
def _scatter_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """Each output element combines the operands at its index with the
    updates of every row ``s0`` whose window covers it: the updates at ``(s0,
    d - rt)``, ``rt`` being row ``s0`` of the indices, which are read whole."""
    canonical = _canonical_scatter(instr)
    count = len(instr.operands) // 2
    if canonical is None:
        return undefined(len(instr.operands))
    rows, index_vector = canonical
    output = dims(output_shape(instr, output_id))
    operand = instr.operand(0).shape.dimensions
    rt = RuntimeVars(num_range_vars=1)
    exprs, constraints = [affine.sym(0)], []
    for i, size in enumerate(_scatter_window(instr)):
        expr = affine.dim(i)
        if i < index_vector:
            bounds = Interval(0, operand[i] - size)
            expr = affine.sub(expr, rt.read(instr.operand(count), [affine.sym(0), affine.const(i)], bounds))
        exprs.append(expr)
        constraints.append((expr, Interval(0, size - 1)))
    updates_map = IndexingMap.from_exprs(exprs, dim_vars(output), dim_vars([rows]), rt.bounds, constraints)
    indices_map = IndexingMap.from_exprs(
        [affine.sym(0), affine.sym(1)], dim_vars(output), dim_vars([rows, index_vector])
    )
    return [{identity(output)} for _ in range(count)] + [{indices_map}] + [{updates_map} for _ in range(count)]


@input_to_output("scatter")
def _scatter_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """An operand element stays at its index; the update ``(n, w)`` lands at
    ``w + rt`` (``rt`` = row ``n`` of the indices); a row of indices may
    affect every output element."""
    canonical = _canonical_scatter(instr)
    count = len(instr.operands) // 2
    if canonical is None:
        return undefined(count)
    output = dims(output_shape(instr, 0))
    if input_id < count:
        return [{identity(output)} for _ in range(count)]
    if input_id == count:
        indices = dims(instr.operand(count).shape)
        return [{broadcast_from_scalar(output, indices)} for _ in range(count)]
    _, index_vector = canonical
    window = _scatter_window(instr)
    rt = RuntimeVars()
    exprs = dim_exprs(len(window) + 1)[1:]
    for i, size in enumerate(window[:index_vector]):
        bounds = Interval(0, output[i] - size)
        exprs[i] = affine.add(exprs[i], rt.read(instr.operand(count), [affine.dim(0), affine.const(i)], bounds))
    updates = dims(instr.operand(input_id).shape)
    return [{IndexingMap.from_exprs(exprs, dim_vars(updates), rt_vars=rt.bounds)} for _ in range(count)]
