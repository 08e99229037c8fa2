"""Shardy's sharding rules for HLO instructions: ``op_sharding_rule(instr)``
is the ``#sdy.op_sharding_rule`` Shardy's registry builds for the equivalent
StableHLO op, over the instruction's operands (in order) and results
(``xlapy.sharding.values.op_results``). One module per family of ops, each
registering its rules in ``OP_SHARDING_RULES`` by opcode."""

from __future__ import annotations

import re

from xlapy.hlo import HloInstruction
from xlapy.hlo.attributes import read_string
from xlapy.sharding.op_sharding_rule import OpShardingRule
from xlapy.sharding.rules import (  # noqa: F401  (each module registers its rules)
    collectives,
    control_flow,
    convolution,
    custom_call,
    data_movement,
    dot,
    elementwise,
    linalg,
    misc,
    reduce,
)
from xlapy.sharding.rules.registry import NO_RULE_OPCODES, OP_SHARDING_RULES, has_only_arrays, result_dims
from xlapy.syntax import Cursor

# Where a StableHLO program carries a rule of the user's own (the custom
# call attribute `sdy.sharding_rule`), the frontend stores it here.
USER_RULE_ATTRIBUTE = "sdy.sharding_rule"
# In HLO text, JAX passes such a rule as a frontend attribute.
_FRONTEND_RULE = re.compile(r'xla\.sdy\.sharding_rule\s*=\s*(?=")')


def user_rule(instr: HloInstruction) -> OpShardingRule | None:
    """The rule the user attached to ``instr``: the ``sdy.sharding_rule``
    attribute (a rule, or its text), or in HLO text the frontend attribute
    ``xla.sdy.sharding_rule="#sdy.op_sharding_rule<...>"``."""
    rule = instr.attributes.get(USER_RULE_ATTRIBUTE)
    if isinstance(rule, OpShardingRule):
        return rule
    if isinstance(rule, str):
        return OpShardingRule.parse(rule)
    frontend = instr.attributes.get("frontend_attributes")
    match = _FRONTEND_RULE.search(frontend) if isinstance(frontend, str) else None
    if match is None:
        return None
    return OpShardingRule.parse(read_string(Cursor(frontend, match.end())))


def op_sharding_rule(instr: HloInstruction, conservative: bool = False) -> OpShardingRule | None:
    """The sharding rule of ``instr``, or None if it has none (propagation
    does not go through it). A rule attached to the op by the user wins.
    ``conservative`` is Shardy's conservative propagation: no factors along
    sliced, padded, concatenated, windowed or convolved spatial dimensions."""
    given = user_rule(instr)
    if given is not None:
        return given
    rule = OP_SHARDING_RULES.get(instr.opcode)
    # A rule maps array dimensions of at least one operand and one result.
    if rule is None or not instr.operands or not result_dims(instr) or not has_only_arrays(instr):
        return None
    return rule(instr, conservative)


__all__ = ["NO_RULE_OPCODES", "OP_SHARDING_RULES", "USER_RULE_ATTRIBUTE", "op_sharding_rule", "user_rule"]
