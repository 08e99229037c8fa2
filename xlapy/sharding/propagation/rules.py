"""Which sharding rule propagation uses for an op, and the identity rules of
the places that just pass a sharding on (data-flow edges, function results,
propagation barriers)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.elementwise import HLO_ONLY_POINTWISE_OPCODES, POINTWISE_OPCODES
from xlapy.sharding.rules.lookup import op_sharding_rule
from xlapy.sharding.sharding_rule import OpShardingRule, pointwise_rule

# Ops with the MLIR ``Elementwise`` trait (or broadcasting elementwise): the
# aggressive strategy treats them specially and op-priority propagation
# propagates through them first.
ELEMENTWISE_OPCODES = frozenset(POINTWISE_OPCODES) | frozenset(HLO_ONLY_POINTWISE_OPCODES) | {
    "clamp", "select", "sdy.reshard", "sdy.sharding_constraint"}


def dims_of(instr: HloInstruction) -> tuple[int, ...]:
    return tuple(instr.shape.dimensions)


def is_elementwise(instr: HloInstruction) -> bool:
    if instr.opcode in ELEMENTWISE_OPCODES:
        return True
    if instr.opcode == "bitcast-convert":
        # Only when it keeps the shape (same bit width).
        return tuple(instr.operands[0].shape.dimensions) == dims_of(instr)
    return False


def identity_rule(dims: Sequence[int], num_operands: int = 1, num_results: int = 1) -> OpShardingRule:
    """Factor d is dimension d of every operand and result."""
    return _identity_rule(tuple(dims), num_operands, num_results)


# Rules are immutable: every edge, barrier and function result of one shape
# shares one (and so the propagation results cached for it).
@lru_cache(maxsize=1024)
def _identity_rule(dims: tuple[int, ...], num_operands: int, num_results: int) -> OpShardingRule:
    return pointwise_rule([len(dims)] * num_operands, [dims] * num_results)


def rule_of(instr: HloInstruction) -> OpShardingRule | None:
    """The rule propagation goes through ``instr`` with, None for none."""
    if instr.opcode == "sdy.reshard":
        return identity_rule(dims_of(instr))
    return op_sharding_rule(instr)
