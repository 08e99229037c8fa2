"""The sharding rule of an instruction: ``op_sharding_rule(instr)`` is the
``#sdy.op_sharding_rule`` Shardy's registry builds for the equivalent
StableHLO op, over the instruction's operands (in order) and results
(``xlapy.hlo.mlir_structure.op_results``). The rules are registered by
opcode in ``registry.py`` by one module per family of ops, all imported here."""

from __future__ import annotations

import re

from xlapy.hlo import HloInstruction
from xlapy.hlo.attributes import read_string
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
from xlapy.sharding.rules.registry import (
    FORM_ONLY_OPCODES,
    NO_RULE_OPCODES,
    OP_SHARDING_RULES,
    RuleFn,
    has_only_arrays,
    result_dims,
)
from xlapy.sharding.sharding_rule import OpShardingRule
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
    if rule is None:
        return None
    if instr.opcode not in FORM_ONLY_OPCODES:
        return _built(instr, rule, conservative)
    # Programs repeat ops of one form (layers of a model): build its rule once.
    form = _form(instr, rule, conservative)
    try:
        found = _RULES_BY_FORM.get(form, _NOT_BUILT)
    except TypeError:  # e.g. an attribute is a frozen dataclass holding a list
        found = form = None
    if form is None:
        return _built(instr, rule, conservative)
    if found is _NOT_BUILT:
        if len(_RULES_BY_FORM) >= _MAX_FORMS:
            _RULES_BY_FORM.clear()
        found = _RULES_BY_FORM[form] = _built(instr, rule, conservative)
    return found


def _built(instr: HloInstruction, rule: RuleFn, conservative: bool) -> OpShardingRule | None:
    # A rule maps array dimensions of at least one operand and one result.
    if not instr.operands or not result_dims(instr) or not has_only_arrays(instr):
        return None
    return rule(instr, conservative)


# (rule function, conservative, opcode, shapes, attributes) -> rule (or None);
# rules are immutable values, so ops of one form can share one.
_RULES_BY_FORM: dict[tuple, OpShardingRule | None] = {}
_MAX_FORMS = 4096
_NOT_BUILT = object()


class _Unhashable(Exception):
    pass


def _frozen(value: object) -> object:
    """A hashable copy of an attribute value, typed so that equal keys mean
    equal values (``1``, ``1.0`` and ``True`` stay apart)."""
    if isinstance(value, (list, tuple)):
        if all(type(v) is int for v in value):  # the common case, e.g. dimension numbers
            return type(value), int, tuple(value)
        return type(value), tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return dict, tuple((k, _frozen(v)) for k, v in value.items())
    if value is None or isinstance(value, (str, int, float, bytes)):
        return type(value), value
    if type(value).__hash__ in (None, object.__hash__):
        # Unhashable, or hashed by identity (maybe mutable): not a key.
        raise _Unhashable
    return type(value), value


def _shape_key(operand: HloInstruction) -> tuple:
    shape = operand.shape
    return shape.element_type, shape.dimensions, shape.tuple_shapes


def _form(instr: HloInstruction, rule: RuleFn, conservative: bool) -> tuple | None:
    """What a form-only rule depends on; None if an attribute cannot be a key."""
    try:
        attributes = _frozen(instr.attributes)
    except _Unhashable:
        return None
    shape = instr.shape
    return (rule, conservative, instr.opcode, tuple(map(_shape_key, instr.operands)), shape.element_type,
            shape.dimensions, shape.tuple_shapes, attributes)


__all__ = ["NO_RULE_OPCODES", "OP_SHARDING_RULES", "USER_RULE_ATTRIBUTE", "op_sharding_rule", "user_rule"]
