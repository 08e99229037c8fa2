"""Op-priority propagation: aggressive propagation run five times, each
time through more kinds of ops, as Shardy's op-priority propagation does:

1. through ops that pass shardings through unchanged (elementwise ops,
   reshapes, transposes, data-flow edges; dynamic slices forward only) whose
   operands have no other use;
2. through those ops whatever the uses of their operands;
3. along the pass-through factors of every op (broadcasts only backward);
4. along every factor (broadcasts still only backward);
5. everywhere.

Each time, the ops allowed before are allowed again (the directions are
the union of the stages so far)."""

from __future__ import annotations

from xlapy.sharding.propagation.aggressive import aggressive_propagate
from xlapy.sharding.propagation.directions import Direction, DirectionFn, intersection, propagate_any, union
from xlapy.sharding.propagation.graph import ProgramGraph, Unit
from xlapy.sharding.propagation.groups import ShardingGroups

# StableHLO's broadcast_in_dim, whether or not it stretches a dimension.
BROADCAST_OPCODES = ("broadcast", "stablehlo.broadcast_in_dim")


def pass_through_ops(unit: Unit, factor: int) -> Direction:
    if unit.kind == "edge":
        return Direction.BOTH
    if unit.kind == "op":
        if unit.elementwise or unit.instr.opcode in ("reshape", "transpose"):
            return Direction.BOTH
        if unit.instr.opcode in ("dynamic-slice", "dynamic-update-slice"):
            return Direction.FORWARD
    return Direction.NONE


def single_use_pass_through_ops(unit: Unit, factor: int) -> Direction:
    """Pass-through ops whose operands have no other use."""
    direction = pass_through_ops(unit, factor)
    if direction != Direction.NONE and not unit.graph.operands_single_use(unit):
        return Direction.NONE
    return direction


def pass_through_factors_broadcast_backward(unit: Unit, factor: int) -> Direction:
    # Units without a rule (edges) are identities: every factor passes through.
    if unit.rule is not None and not unit.rule.is_pass_through_factor(factor):
        return Direction.NONE
    if unit.kind == "op" and unit.instr.opcode in BROADCAST_OPCODES:
        return Direction.BACKWARD
    return Direction.BOTH


def any_but_broadcast_forward(unit: Unit, factor: int) -> Direction:
    if unit.kind == "op" and unit.instr.opcode in BROADCAST_OPCODES:
        return Direction.BACKWARD
    return Direction.BOTH


SCHEDULE = (single_use_pass_through_ops, pass_through_ops, pass_through_factors_broadcast_backward,
            any_but_broadcast_forward, propagate_any)


def op_based_directions(priority: int, outer: DirectionFn) -> DirectionFn:
    """The union of the schedule up to ``priority``, within ``outer``."""
    # Later stages allow more: looking at them first mostly ends the loop at once.
    schedule = SCHEDULE[priority::-1]

    def directions(unit: Unit, factor: int) -> Direction:
        op_based = Direction.NONE
        for fn in schedule:
            op_based = union(op_based, fn(unit, factor))
            if op_based is Direction.BOTH:
                break
        return intersection(op_based, outer(unit, factor))
    # Only the first round looks at the uses of operands.
    directions.depends_on_uses = priority == 0 or getattr(outer, "depends_on_uses", False)
    # The schedule's functions look at the unit's form (and uses) only.
    directions.by_form = getattr(outer, "by_form", False)
    return directions


def op_priority_propagate(graph: ProgramGraph, groups: ShardingGroups, outer: DirectionFn = propagate_any,
                          factor_strategy: str = "aggressive") -> None:
    for priority in range(len(SCHEDULE)):
        aggressive_propagate(graph, groups, op_based_directions(priority, outer), factor_strategy)
