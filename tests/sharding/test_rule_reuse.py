"""Ops of one form (opcode, shapes, attributes) share one sharding rule,
built once: whatever surrounds an op and in whatever order ops are seen,
its rule is the one Shardy builds for it (the expected rules of
``data/op_sharding_rules*.txt``)."""

from __future__ import annotations

import pytest

from tests.sharding.test_op_sharding_rules import CASES, CONSERVATIVE_CASES, Case, case_instruction, rule_text
from xlapy.hlo import HloInstruction
from xlapy.sharding.rules import OP_SHARDING_RULES, op_sharding_rule
from xlapy.sharding.rules.registry import FORM_ONLY_OPCODES


def _elsewhere(op: HloInstruction) -> HloInstruction:
    """An op of the same form in other surroundings: its operands come from
    fresh parameters, and nothing uses it."""
    operands = [HloInstruction(f"p{i}", "parameter", o.shape) for i, o in enumerate(op.operands)]
    for number, parameter in enumerate(operands):
        parameter.parameter_number = number
    return HloInstruction("elsewhere", op.opcode, op.shape, operands, op.attributes, op.called_computations)


FORM_ONLY_CASES = [(c, conservative) for cases, conservative in ((CASES, False), (CONSERVATIVE_CASES, True))
                   for c in cases if case_instruction(c).opcode in FORM_ONLY_OPCODES]


@pytest.mark.parametrize(("case", "conservative"), FORM_ONLY_CASES,
                         ids=[f"{c.name}{'-conservative' * k}" for c, k in FORM_ONLY_CASES])
def test_rules_shared_by_form_do_not_depend_on_surroundings(case: Case, conservative: bool) -> None:
    op = case_instruction(case)
    assert rule_text(op_sharding_rule(op, conservative)) == case.rule
    moved = _elsewhere(op)
    # Built afresh, and as shared with the op above.
    assert rule_text(OP_SHARDING_RULES[op.opcode](moved, conservative)) == case.rule
    assert rule_text(op_sharding_rule(moved, conservative)) == case.rule


@pytest.mark.parametrize("conservative", [False, True])
def test_rules_do_not_depend_on_the_order_ops_are_seen(conservative: bool) -> None:
    # Among the cases are ops of one form whose rules differ by what
    # surrounds them (a scatter's body, a concatenate of slices, an
    # X64Combine feeding an rng-bit-generator): each keeps its own rule.
    cases = CONSERVATIVE_CASES if conservative else CASES
    expected = {c.name: c.rule for c in cases}
    for order in (cases, cases[::-1]):
        ops = {c.name: case_instruction(c) for c in order}
        assert {name: rule_text(op_sharding_rule(op, conservative)) for name, op in ops.items()} == expected


def test_an_op_edited_after_its_rule_was_built_gets_the_new_rule() -> None:
    dots = [c for c in CASES if case_instruction(c).opcode == "dot"]
    first = dots[0]
    other = next(c for c in dots if c.rule != first.rule)
    op, target = case_instruction(first), case_instruction(other)
    assert rule_text(op_sharding_rule(op)) == first.rule
    # The same op object, edited in place into the other case's op.
    op.attributes.clear()
    op.attributes.update(target.attributes)
    for operand, replacement in zip(op.operands, target.operands, strict=True):
        operand.shape = replacement.shape
    op.shape = target.shape
    assert rule_text(op_sharding_rule(op)) == other.rule
