"""Shardy's sharding rules for HLO instructions, one module per family of
ops registering its rules by opcode (``registry.py``); ``lookup.py`` gives an
instruction's rule."""

from xlapy.sharding.rules.lookup import USER_RULE_ATTRIBUTE, op_sharding_rule, user_rule
from xlapy.sharding.rules.registry import NO_RULE_OPCODES, OP_SHARDING_RULES

__all__ = ["NO_RULE_OPCODES", "OP_SHARDING_RULES", "USER_RULE_ATTRIBUTE", "op_sharding_rule", "user_rule"]
