"""The registry of sharding rules, keyed by HLO opcode, and the functions the
rule modules share to read an instruction's shapes and attributes (as
``xlapy.hlo.parse_module`` stores them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from xlapy.errors import VerifyError
from xlapy.hlo import HloInstruction
from xlapy.registry import registrar
from xlapy.sharding.sharding_rule import OpShardingRule, OpShardingRuleBuilder

RuleFn = Callable[..., "OpShardingRule | None"]

# opcode -> rule(instr, conservative=False): the rule, or None when the op has none.
OP_SHARDING_RULES: dict[str, RuleFn] = {}

# Opcodes Shardy deliberately gives no rule: they have no data to shard
# (constants, iota, tokens), or propagation goes through them along
# data-flow edges instead (while, conditional, optimization barriers), or
# they hold the shardings themselves (the sdy ops).
NO_RULE_OPCODES: set[str] = set()


rule_for = registrar(OP_SHARDING_RULES, "sharding rules")


def no_rule(*opcodes: str) -> None:
    NO_RULE_OPCODES.update(opcodes)


# Opcodes whose rule depends only on the op's form: its opcode, the
# dimensions of its operands and results, and its attributes. Not on its
# users, on the ops defining its operands, on its regions, or on what the
# frontend recorded of it; ops of one form share one rule (see
# ``op_sharding_rule``).
FORM_ONLY_OPCODES: set[str] = set()


def depends_only_on_form(*opcodes: str) -> None:
    FORM_ONLY_OPCODES.update(opcodes)


# -- shapes -------------------------------------------------------------------------

def operand_dims(instr: HloInstruction) -> list[tuple[int, ...]]:
    return [tuple(o.shape.dimensions) for o in instr.operands]


def result_dims(instr: HloInstruction) -> list[tuple[int, ...]]:
    """The dimensions of each value the op defines: the elements of a tuple
    shape (one per result of a multi-result op), else the shape itself."""
    shape = instr.shape
    if shape.is_tuple:
        return [tuple(s.dimensions) for s in shape.tuple_shapes]
    return [tuple(shape.dimensions)]


def has_only_arrays(instr: HloInstruction) -> bool:
    """Whether every operand and result is an array (rules map array dimensions;
    tokens and nested tuples have none)."""
    results = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    return all(o.shape.is_array for o in instr.operands) and all(s.is_array for s in results)


def builder(instr: HloInstruction) -> OpShardingRuleBuilder:
    return OpShardingRuleBuilder([len(d) for d in operand_dims(instr)], [len(d) for d in result_dims(instr)])


# -- attributes ---------------------------------------------------------------------

_MISSING: Any = object()


def attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> Any:
    if name in instr.attributes:
        return instr.attributes[name]
    if default is _MISSING:
        raise VerifyError(f"{instr.name}: {instr.opcode} needs attribute {name}")
    return default


def ints(instr: HloInstruction, name: str, default: Any = _MISSING) -> tuple[int, ...]:
    value = attr(instr, name, default)
    if isinstance(value, str):  # kept verbatim by the parser
        return tuple(int(v) for v in re.findall(r"-?\d+", value))
    return tuple(int(v) for v in value)


def int_attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> Any:
    value = attr(instr, name, default)
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"-?\d+", text):
            raise VerifyError(f"{instr.name}: attribute {name} of {instr.opcode} must be an integer, got {value}")
        return int(text)
    return int(value)


def bool_attr(instr: HloInstruction, name: str, default: bool = False) -> bool:
    value = attr(instr, name, default)
    return value.strip() == "true" if isinstance(value, str) else bool(value)


def word(instr: HloInstruction, name: str, default: Any = _MISSING) -> str:
    return str(attr(instr, name, default)).strip()
