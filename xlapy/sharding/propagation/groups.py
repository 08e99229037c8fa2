"""Sharding groups: values that must all end with the same sharding.

Groups that share a value are one group (Shardy unifies them on import);
whenever propagation changes the sharding of a member, every other member
gets the same sharding."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.propagation import ir_edits
from xlapy.sharding.propagation.basic_factor import BasicFactorPropagation
from xlapy.sharding.propagation.directions import Direction
from xlapy.sharding.propagation.graph import ProgramGraph, Value
from xlapy.sharding.propagation.projection import ShardingProjection
from xlapy.sharding.propagation.rules import identity_rule
from xlapy.sharding.tensor_sharding import TensorSharding


def _open_and_empty(sharding: TensorSharding) -> bool:
    return sharding.is_fully_replicated and sharding.is_fully_open


def _merged(graph: ProgramGraph, members: list[Value]) -> list[TensorSharding | None] | None:
    """The members' shardings after basic propagation between them (as the
    operands of an op that passes each dimension through); None if they
    still disagree (or live on different meshes)."""
    shardings = [graph.get(m) for m in members]
    present = [s for s in shardings if s is not None and not _open_and_empty(s)]
    # Members without a sharding (or with a fully open empty one) take the
    # first real one as it is.
    shardings = [present[0] if s is None or _open_and_empty(s) else s for s in shardings]
    meshes = {id(graph.mesh_of(s)) for s in present}
    if len(meshes) > 1:
        return None
    mesh_ref, mesh = present[0].mesh, graph.mesh_of(present[0])
    dims = tuple(members[0].shape.dimensions)
    rule = identity_rule(dims, len(members), 1)
    projection = ShardingProjection.build(shardings, [None], rule, mesh)
    updated, _ = BasicFactorPropagation().propagate(projection, lambda f: Direction.BOTH, rule.factor_sizes,
                                                     mesh, False)
    merged = []
    for index, sharding in enumerate(shardings):
        if updated[index]:
            new = projection.operands[index].to_tensor_sharding(rule.operand_mappings[index],
                                                                rule.factor_sizes, mesh_ref, mesh)
            if not (new.empty_axes and sharding is None):
                sharding = new
        merged.append(sharding)
    axes = {tuple(d.axes for d in s.dim_shardings) for s in merged if s is not None}
    return merged if len(axes) <= 1 else None


def sharding_group_ops(graph: ProgramGraph) -> list[HloInstruction]:
    return [instr for computation in graph.module.computations for instr in computation.instructions
            if instr.opcode == "sdy.sharding_group"]


def unified_group_ids(ops: list[HloInstruction], graph: ProgramGraph) -> dict[int, int]:
    """Group id of each sharding_group op after merging groups that share a
    value, renumbered 0, 1, ... in the order of the smallest original id."""
    parent: dict[int, int] = {}

    def find(group: int) -> int:
        parent.setdefault(group, group)
        while parent[group] != group:
            parent[group] = parent[parent[group]]
            group = parent[group]
        return group

    def union(a: int, b: int) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    first_group_of_value: dict[int, int] = {}
    for op in ops:
        group = int(op.attributes["group_id"])
        find(group)
        key = id(graph.resolve(op.operands[0]))
        if key in first_group_of_value:
            union(first_group_of_value[key], group)
        else:
            first_group_of_value[key] = group
    leaders = sorted({find(g) for g in parent})
    renumbered = {leader: i for i, leader in enumerate(leaders)}
    return {id(op): renumbered[find(int(op.attributes["group_id"]))] for op in ops}


class ShardingGroups:
    def __init__(self, graph: ProgramGraph):
        ops = sharding_group_ops(graph)
        ids = unified_group_ids(ops, graph)
        self._group_of: dict[int, int] = {}
        self._members: dict[int, list[Value]] = {}
        for op in ops:
            value = graph.resolve(op.operands[0])
            group = ids[id(op)]
            if id(value) in self._group_of:
                continue
            self._group_of[id(value)] = group
            self._members.setdefault(group, []).append(value)

    def sync(self, graph: ProgramGraph, merge: bool = False) -> bool:
        """Before propagating, give every member of a group the sharding some
        members already have (ignoring fully open replicated ones); with
        ``merge`` (propagation on its own, without the pipeline's import
        steps) the members' shardings are instead combined as an op through
        which they all pass unchanged would combine them. If members disagree,
        each is replaced by an open sharding constraint of it (which becomes
        the member), and the module's structure changed: returns True."""
        restructured = False
        for members in self._members.values():
            sharding, conflict = self._common_sharding(graph, members)
            if sharding is None:
                continue
            merged = None
            if merge and not conflict:
                merged = _merged(graph, members)
                conflict = merged is None
            if not conflict:
                for index, member in enumerate(members):
                    new = sharding if merged is None else merged[index]
                    if new is not None:
                        graph.set(member, new)
                continue
            for member in members:
                constraint = ir_edits.new_constraint_after(member, sharding.fully_open_like())
                ir_edits.replace_uses_except(member, constraint, constraint)
            restructured = True
        return restructured

    @staticmethod
    def _common_sharding(graph: ProgramGraph, members: list[Value]) -> tuple[TensorSharding | None, bool]:
        if len(members) == 1:
            return graph.get(members[0]), False
        common = None
        for member in members:
            sharding = graph.get(member)
            if sharding is None or (sharding.is_fully_replicated and sharding.is_fully_open):
                continue
            if common is None:
                common = sharding
            elif sharding != common:
                return common, True
        return common, False

    def members(self, value: Value) -> list[Value]:
        group = self._group_of.get(id(value))
        return [] if group is None else self._members[group]

    def __bool__(self) -> bool:
        return bool(self._members)
