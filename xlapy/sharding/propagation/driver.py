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
take every sharding another member gets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from xlapy.hlo import HloInstruction
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.op_sharding_rule import OpShardingRule
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
from xlapy.sharding.tensor_sharding import TensorSharding
from xlapy.sharding.values import op_results, returned_values

# As MLIR's greedy driver: sweeps over the whole program before giving up.
MAX_SWEEPS = 1


@dataclass
class Tensor:
    """One operand or result of a unit: its sharding now, how to set it, and
    the value that holds it (for sharding groups and revisiting users)."""

    key: Value
    sharding: TensorSharding | None
    setter: Callable[[TensorSharding], None]


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
        self._rules: dict[Any, tuple[OpShardingRule, tuple[Direction, ...]]] = {}
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
                    if dce.is_trivially_dead(instr):
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
        """Propagate through ``unit``; whether any sharding changed. A unit that
        changed nothing when it last saw the same shardings, strategy and
        directions would change nothing now: it is skipped."""
        operands, results = self._tensors(unit)
        # Directions may depend on whether the unit's operands have other uses,
        # which changes as dead ops go away.
        key = (id(unit), self.graph.operands_single_use(unit)) if self._depends_on_uses else id(unit)
        cached = self._rules.get(key)
        if cached is None:
            cached = self._rules[key] = self._rule_and_directions(unit)
        rule, per_factor = cached
        seen = (type(self.factor_propagation), per_factor, tuple(t.sharding for t in operands),
                tuple(t.sharding for t in results))
        if unit.unchanged_with == seen:
            return False
        changed = self.propagate_tensors(operands, results, rule, per_factor.__getitem__, unit.elementwise)
        unit.unchanged_with = None if changed else seen
        return changed

    def _rule_and_directions(self, unit: Unit) -> tuple[OpShardingRule, tuple[Direction, ...]]:
        """The unit's rule and the direction of each of its factors (fixed for a run)."""
        if isinstance(unit, OpUnit):
            rule = unit.rule
            blocked = set(rule.blocked_propagation_factors)
            return rule, tuple(Direction.NONE if f in blocked else self.directions(unit, f)
                               for f in range(rule.num_factors))
        if isinstance(unit, BarrierUnit):
            rule = identity_rule(dims_of(unit.instr))
            allowed = unit.instr.attributes.get("allowed_direction", "BOTH")
            allowed = allowed if isinstance(allowed, Direction) else Direction.parse(str(allowed))
            return rule, (allowed,) * rule.num_factors
        rule = self.graph.edge_rule(unit.edge)
        return rule, tuple(self.directions(unit, f) for f in range(rule.num_factors))

    def _tensors(self, unit: Unit) -> tuple[list[Tensor], list[Tensor]]:
        if isinstance(unit, OpUnit):
            return ([self.value_tensor(v) for v in unit.instr.operands],
                    [self.value_tensor(v) for v in op_results(unit.instr)])
        if isinstance(unit, BarrierUnit):
            return [self.value_tensor(unit.instr.operands[0])], [self.value_tensor(unit.instr)]
        edge = unit.edge
        graph = self.graph
        target = Tensor(edge.store, graph.edge_target_view(edge), lambda s: graph.set_edge_target(edge, s))
        return [self.value_tensor(v) for v in edge.sources], [target]

    def propagate_func_results(self) -> None:
        """Between each function result and the value returned for it, both
        ways, without revisiting anything."""
        graph = self.graph
        for func in graph.funcs:
            if not graph.is_func_with_results(func):
                continue
            for index, value in enumerate(returned_values(func)):
                if not is_static_array(value):
                    continue
                result = FuncResult(func, index)
                self.propagate_tensors(
                    [self.value_tensor(value)],
                    [Tensor(result, graph.get(result), lambda s, r=result: graph.set(r, s))],
                    identity_rule(dims_of(value)), lambda f: Direction.BOTH, notify=False)

    # -- one unit ---------------------------------------------------------------------
    def value_tensor(self, value: Value) -> Tensor:
        key = self.graph.resolve(value)
        return Tensor(key, self.graph.get(key), lambda s: self.graph.set(key, s))

    def propagate_tensors(self, operands: list[Tensor], results: list[Tensor], rule: OpShardingRule,
                          directions: Callable[[int], Direction], elementwise: bool = False,
                          notify: bool = True) -> bool:
        found = common_mesh([t.sharding for t in operands + results], self.graph.meshes)
        if found is None:
            return False
        mesh_ref, mesh = found
        projection = ShardingProjection.build([t.sharding for t in operands], [t.sharding for t in results],
                                              rule, mesh)
        updated_operands, updated_results = self.factor_propagation.propagate(
            projection, directions, rule.factor_sizes, mesh, elementwise)
        changed = False
        for tensors, factor_shardings, mappings, updated in (
                (operands, projection.operands, rule.operand_mappings, updated_operands),
                (results, projection.results, rule.result_mappings, updated_results)):
            for index, is_updated in enumerate(updated):
                if is_updated and self._update(tensors[index], factor_shardings[index].to_tensor_sharding(
                        mappings[index], rule.factor_sizes, mesh_ref, mesh), notify):
                    changed = True
        return changed

    def _update(self, tensor: Tensor, new: TensorSharding, notify: bool) -> bool:
        old = tensor.sharding
        if (old is None and new.empty_axes) or new == old:
            # Nothing could change (e.g. a strided view would be needed).
            return False
        tensor.setter(new)
        notify = notify and self.worklist is not None
        if notify:
            self.revisit(tensor.key)
        for member in self.groups.members(tensor.key):
            if member is tensor.key:
                continue
            self.graph.set(member, new)
            if notify:
                self.revisit(member)
        return True

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
