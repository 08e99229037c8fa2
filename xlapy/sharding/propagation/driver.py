"""Basic propagation: push shardings through every unit of the program
(ops with a sharding rule, data-flow edges, propagation barriers), the way
Shardy's rewrite driver does.

Everything is visited from a stack that starts with every op in program
order; when a value's sharding changes, the unit that defines it and the
units that use it are pushed (if not already waiting), so they are
revisited next. Like Shardy, the program is swept once: a unit that no
change reaches again (e.g. the body of a while loop whose result got a
sharding from a later op, when the loop has no data-flow edges) is not
revisited. An op whose results are unused and that has no side effects is
removed when it is visited, as MLIR's driver does, and the ops defining its
operands are looked at again. Function results exchange shardings with the
values they return before and after the sweep. Members of a sharding group
take every sharding another member gets.

What propagating through a unit changes depends only on its rule, the
directions of its factors, the factor strategy and the shardings it sees; a
program repeats those (the layers of a model), so each outcome is worked out
once per graph and looked up after that (``PropagationContext``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from xlapy.hlo import HloInstruction
from xlapy.hlo.mlir_structure import region_results
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation import dce
from xlapy.sharding.propagation.basic_factor import BasicFactorPropagation
from xlapy.sharding.propagation.directions import Direction, DirectionFn, propagate_any
from xlapy.sharding.propagation.graph import (
    BarrierUnit,
    FuncResult,
    OpUnit,
    ProgramGraph,
    Unit,
    Value,
    is_static_array,
)
from xlapy.sharding.propagation.groups import ShardingGroups
from xlapy.sharding.propagation.projection import ShardingProjection
from xlapy.sharding.propagation.rules import dims_of, identity_rule
from xlapy.sharding.sharding_rule import OpShardingRule
from xlapy.sharding.tensor_sharding import TensorSharding

# As MLIR's greedy driver: sweeps over the whole program before giving up.
MAX_SWEEPS = 1


# What propagating through a unit changes: (index among its operands then
# results, new sharding), only for shardings that really change.
Changes = tuple[tuple[int, TensorSharding], ...]


class PropagationContext:
    """A rule, the direction of each of its factors, whether the op is
    elementwise and a factor strategy: everything but the shardings that
    decides what propagation through a unit does. One per graph for each
    such combination (see ``ProgramGraph.propagation_contexts``), holding the
    changes worked out so far per tuple of shardings seen."""

    __slots__ = ("directions", "elementwise", "factor_propagation", "outcomes", "rule")

    def __init__(self, rule: OpShardingRule, directions: tuple[Direction, ...], elementwise: bool,
                 factor_propagation: BasicFactorPropagation):
        self.rule, self.directions, self.elementwise = rule, directions, elementwise
        self.factor_propagation = factor_propagation
        self.outcomes: dict[tuple[TensorSharding | None, ...], Changes] = {}

    def changes(self, shardings: tuple[TensorSharding | None, ...], num_operands: int,
                meshes: dict[str, Mesh]) -> Changes:
        """What propagating through a unit whose tensors have ``shardings`` changes."""
        found = self.outcomes.get(shardings)
        if found is None:
            if len(self.outcomes) >= _MAX_OUTCOMES:
                self.outcomes.clear()
            found = self.outcomes[shardings] = factor_changes(
                self.factor_propagation, shardings, num_operands, self.rule, self.directions.__getitem__,
                self.elementwise, meshes)
        return found


# Bounds the memory of a context (a program rarely shows one op this many
# different shardings).
_MAX_OUTCOMES = 1 << 14


def factor_changes(factor_propagation: BasicFactorPropagation, shardings: Sequence[TensorSharding | None],
                   num_operands: int, rule: OpShardingRule, directions: Callable[[int], Direction],
                   elementwise: bool, meshes: dict[str, Mesh]) -> Changes:
    """Propagate between tensors with ``shardings`` (operands first) along the
    factors of ``rule``; the shardings that change."""
    found = common_mesh(shardings, meshes)
    if found is None or found[1].is_maximal:
        # Shardy leaves ops alone whose shardings are on different meshes or
        # on a maximal mesh (the op runs on one device; nothing to shard).
        return ()
    mesh_ref, mesh = found
    projection = ShardingProjection.build(list(shardings[:num_operands]), list(shardings[num_operands:]), rule, mesh)
    updated_operands, updated_results = factor_propagation.propagate(
        projection, directions, rule.factor_sizes, mesh, elementwise)
    changes = []
    for offset, tensors, mappings, updated in (
            (0, projection.operands, rule.operand_mappings, updated_operands),
            (num_operands, projection.results, rule.result_mappings, updated_results)):
        for index, is_updated in enumerate(updated):
            if not is_updated:
                continue
            new = tensors[index].to_tensor_sharding(mappings[index], rule.factor_sizes, mesh_ref, mesh)
            old = shardings[offset + index]
            # Nothing changes if the sharding is the same, or if a tensor
            # without one would get an empty one (e.g. a strided view would
            # be needed).
            if not ((old is None and new.empty_axes) or new == old):
                changes.append((offset + index, new))
    return tuple(changes)


class Worklist:
    """A stack of units (and ops without one) without duplicates: pushing a
    waiting item keeps its place."""

    def __init__(self, items: Sequence[Any]):
        self._items = list(reversed(items))
        self._waiting = {id(u) for u in items}

    def push(self, item: Any) -> None:
        if id(item) not in self._waiting:
            self._waiting.add(id(item))
            self._items.append(item)

    def pop(self) -> Any:
        item = self._items.pop()
        self._waiting.discard(id(item))
        return item

    def __bool__(self) -> bool:
        return bool(self._items)


def common_mesh(shardings: Iterable[TensorSharding | None], meshes: dict[str, Mesh]
                ) -> tuple[str | Mesh, Mesh] | None:
    """The mesh all shardings are bound to (empty meshes go with any), as
    (symbol name or inline mesh, mesh); None if there is none."""
    ref: str | Mesh | None = None
    mesh: Mesh | None = None
    for sharding in shardings:
        if sharding is None:
            continue
        other = sharding.mesh_of(meshes)
        if mesh is None or mesh.is_empty:
            ref, mesh = sharding.mesh, other
        elif other.is_empty:
            continue
        elif other != mesh:
            return None
    return None if mesh is None else (ref, mesh)


class BasicPropagation:
    def __init__(self, graph: ProgramGraph, groups: ShardingGroups,
                 factor_propagation: BasicFactorPropagation | None = None, directions: DirectionFn = propagate_any):
        self.graph = graph
        self.groups = groups
        self.factor_propagation = factor_propagation or BasicFactorPropagation()
        self.directions = directions
        self.worklist: Worklist | None = None
        self.current: Unit | None = None
        # Per unit, or per form when the directions depend on nothing else
        # (and whether the operands have other uses, when they depend on that
        # too): its context for this run.
        self._contexts: dict[Any, PropagationContext] = {}
        self._by_form = getattr(directions, "by_form", False)
        self._depends_on_uses = getattr(directions, "depends_on_uses", False)

    # -- driver -------------------------------------------------------------------
    def run(self) -> None:
        self.propagate_func_results()
        for _ in range(MAX_SWEEPS):
            self.worklist = Worklist(self.graph.order)
            changed = False
            while self.worklist:
                item = self.worklist.pop()
                instr = item if isinstance(item, HloInstruction) else item.instr
                if instr is not None:
                    if instr.parent is None:
                        continue
                    # (An op with users is alive unless it has several results.)
                    if (not instr.users or instr.shape.is_tuple) and dce.is_trivially_dead(instr):
                        self._erase(instr)
                        changed = True
                        continue
                elif item.kind == "edge" and item.edge.op.parent is None:
                    continue
                if isinstance(item, HloInstruction):
                    continue
                self.current = item
                changed |= self.propagate_unit(item)
            self.worklist = self.current = None
            if not changed:
                break
        self.propagate_func_results()

    def _erase(self, instr: HloInstruction) -> None:
        """Remove a dead op, as MLIR's rewrite driver does; the ops defining its
        operands are looked at again."""
        for definer in dce.erase(instr, self.graph.module):
            self.worklist.push(self.graph.unit_of.get(id(definer)) or definer)

    def propagate_unit(self, unit: Unit) -> bool:
        """Propagate through ``unit``; whether any sharding changed."""
        graph = self.graph
        key = unit.form if self._by_form and unit.form is not None else unit
        if self._depends_on_uses:
            # The uses change as dead ops go away.
            key = (key, graph.operands_single_use(unit))
        context = self._contexts.get(key)
        if context is None:
            context = self._contexts[key] = self._context(unit)
        shardings = graph.unit_shardings(unit)
        changes = context.changes(shardings, unit.num_operands, graph.meshes)
        for index, new in changes:
            graph.set_unit_tensor(unit, index, new)
            self._notify(graph.tensor_key(unit, index), new, True)
        return bool(changes)

    def _context(self, unit: Unit) -> PropagationContext:
        """The context of ``unit``: its rule, the direction of each of its
        factors, whether it is elementwise."""
        if isinstance(unit, BarrierUnit):
            rule = identity_rule(dims_of(unit.instr))
            allowed = unit.instr.attributes.get("allowed_direction", "BOTH")
            allowed = allowed if isinstance(allowed, Direction) else Direction.parse(str(allowed))
            return self._shared_context(rule, (allowed,) * rule.num_factors, unit.elementwise)
        rule = unit.rule if isinstance(unit, OpUnit) else self.graph.edge_rule(unit.edge)
        blocked = set(rule.blocked_propagation_factors) if isinstance(unit, OpUnit) else ()
        directions = tuple(Direction.NONE if f in blocked else self.directions(unit, f)
                           for f in range(rule.num_factors))
        return self._shared_context(rule, directions, unit.elementwise)

    def _shared_context(self, rule: OpShardingRule, directions: tuple[Direction, ...],
                        elementwise: bool) -> PropagationContext:
        key = (type(self.factor_propagation), rule, directions, elementwise)
        contexts = self.graph.propagation_contexts
        context = contexts.get(key)
        if context is None:
            context = contexts[key] = PropagationContext(rule, directions, elementwise, self.factor_propagation)
        return context

    def propagate_func_results(self) -> None:
        """Between each function result and the value returned for it, both
        ways, without revisiting anything."""
        graph = self.graph
        for func in graph.funcs:
            if not graph.is_func_with_results(func):
                continue
            for index, value in enumerate(region_results(func)):
                if not is_static_array(value):
                    continue
                key, result = graph.resolve(value), FuncResult(func, index)
                changes = factor_changes(self.factor_propagation, (graph.get(key), graph.get(result)), 1,
                                         identity_rule(dims_of(value)), lambda f: Direction.BOTH, False, graph.meshes)
                for position, new in changes:
                    graph.set(key if position == 0 else result, new)
                    self._notify(key if position == 0 else result, new, False)

    # -- one change ---------------------------------------------------------------------
    def _notify(self, key: Value, new: TensorSharding, notify: bool) -> None:
        """``key`` just got the sharding ``new``: the other members of its
        sharding group get it too; with ``notify``, what may propagate
        further is revisited."""
        notify = notify and self.worklist is not None
        if notify:
            self.revisit(key)
        for member in self.groups.members(key):
            if member is key:
                continue
            self.graph.set(member, new)
            if notify:
                self.revisit(member)

    # -- revisiting ---------------------------------------------------------------------
    def _push(self, unit: Unit | None) -> None:
        if unit is not None and unit is not self.current:
            self.worklist.push(unit)

    def _push_users(self, value: Value) -> None:
        for unit in self.graph.users_to_notify(value):
            self._push(unit)

    def revisit(self, value: Value) -> None:
        """Push what may propagate further now that ``value``'s sharding changed."""
        if isinstance(value, FuncResult):
            return
        edge = self.graph.edge_of_store.get(id(value))
        if edge is not None:
            for target in edge.non_owner_targets:
                self._push_users(target)
        self._push(self.graph.definer(value))
        self._push_users(value)
