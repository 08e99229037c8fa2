"""User-priority propagation: dimension shardings marked ``p0``, ``p1``, ...
propagate in rounds, lowest number first (no mark means ``p0``). In the first
round every dimension sharding of a higher priority is hidden: its dimension
is closed and empty and its axes count as replicated, so nothing else can
take them. Before each later round the dimensions of that priority get their
axes back. Each round is a full op-priority propagation; priorities are
dropped from the program."""

from __future__ import annotations

from xlapy.sharding.propagation.directions import DirectionFn, propagate_any
from xlapy.sharding.propagation.graph import ProgramGraph, Value
from xlapy.sharding.propagation.groups import ShardingGroups
from xlapy.sharding.propagation.op_priority import op_priority_propagate
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding


def initialized_sharding(original: TensorSharding, graph: ProgramGraph) -> TensorSharding:
    """The first round's sharding: ``p0`` dimensions as they are (priority
    dropped), the others closed and empty with their axes replicated."""
    dims = []
    replicated = list(original.replicated_axes)
    for dim in original.dim_shardings:
        if dim.priority_or_default == 0:
            dims.append(dim.without_priority())
        else:
            replicated.extend(dim.axes)
            dims.append(DimensionSharding((), True))
    mesh = graph.mesh_of(original)
    replicated.sort(key=lambda axis: axis.sort_key(mesh))
    return TensorSharding(original.mesh, tuple(dims), tuple(replicated), original.unreduced_axes)


def sharding_for_priority(current: TensorSharding, original: TensorSharding, priority: int) -> TensorSharding:
    """``current`` with the dimensions of ``priority`` given their original axes back."""
    dims = list(current.dim_shardings)
    seen = set()
    for index, dim in enumerate(original.dim_shardings):
        if dim.priority_or_default == priority:
            dims[index] = dim.without_priority()
            seen.update(dim.axes)
    replicated = tuple(axis for axis in current.replicated_axes if axis not in seen)
    return TensorSharding(current.mesh, tuple(dims), replicated, current.unreduced_axes)


def user_priority_propagate(graph: ProgramGraph, groups: ShardingGroups, outer: DirectionFn = propagate_any,
                            factor_strategy: str = "aggressive") -> None:
    references: dict[int, list[tuple[Value, TensorSharding]]] = {}
    for slot in graph.sharding_slots():
        original = graph.get(slot)
        if original is None:
            continue
        for priority in sorted({d.priority for d in original.dim_shardings if d.priority}):
            references.setdefault(priority, []).append((slot, original))
        graph.set(slot, initialized_sharding(original, graph))
    op_priority_propagate(graph, groups, outer, factor_strategy)
    for priority in sorted(references):
        for slot, original in references[priority]:
            current = graph.get(slot)
            if current is not None:
                graph.set(slot, sharding_for_priority(current, original, priority))
        op_priority_propagate(graph, groups, outer, factor_strategy)
