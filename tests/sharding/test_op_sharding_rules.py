"""Sharding rules (``#sdy.op_sharding_rule``): printing and parsing as Shardy
does, and the rule of each HLO instruction compared with the rule Shardy's
registry builds for the equivalent StableHLO op. The expected rules are
Shardy's (``tools/regenerate_shardy_goldens.py`` makes them, and
``test_shardy_goldens.py`` checks them); the tests that run Shardy here need
jax, and only ``XLAPY_NO_JAX=1`` skips them (``shardy_oracle.py``)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

import xlapy
from tests.sharding.shardy_oracle import needs_shardy
from tools.shardy import populated_rule
from xlapy.errors import ParseError, VerifyError
from xlapy.frontends.stablehlo import parse_module as parse_stablehlo
from xlapy.hlo import HloInstruction
from xlapy.hlo.mlir_structure import op_results
from xlapy.hlo.opcodes import OPCODES
from xlapy.sharding.rules import NO_RULE_OPCODES, OP_SHARDING_RULES, USER_RULE_ATTRIBUTE, op_sharding_rule
from xlapy.sharding.sharding_rule import (
    NULL_DIM,
    FactorType,
    OpShardingRule,
    OpShardingRuleBuilder,
    factor_symbol,
    parse_op_sharding_rule,
    pointwise_rule,
)
from xlapy.syntax import Cursor

DATA = pathlib.Path(__file__).parent / "data" / "op_sharding_rules.txt"
# The same, for Shardy's conservative propagation.
CONSERVATIVE_DATA = DATA.with_name("op_sharding_rules_conservative.txt")


@dataclass(frozen=True)
class Case:
    name: str
    rule: str  # as Shardy prints it, or "none"
    hlo: str
    stablehlo: str


def load_cases(path: pathlib.Path = DATA) -> list[Case]:
    """The cases of the data file: `=== name`, the rule line, then the
    `--- hlo` and `--- stablehlo` sections (the hlo one empty for StableHLO's
    forms of ops, which HLO text cannot write)."""
    cases = []
    for chunk in path.read_text().split("\n=== ")[1:]:
        head, rest = chunk.split("\n--- hlo\n")
        name, rule = head.strip().split("\n")
        hlo, stablehlo = rest.split("\n--- stablehlo\n")
        cases.append(Case(name.strip(), rule.strip(), hlo.strip() + "\n", stablehlo.strip() + "\n"))
    return cases


def instruction(hlo: str, name: str = "op") -> HloInstruction:
    module = xlapy.parse_hlo(hlo)
    return next(i for i in module.instructions if i.name == name)


def case_instruction(case: Case) -> HloInstruction:
    """The case's op: from its HLO text, else its StableHLO program read by
    xlapy's frontend (the op marked `xlapy.op`)."""
    if case.hlo.strip():
        return instruction(case.hlo)
    module = parse_stablehlo(case.stablehlo)
    return next(i for i in module.instructions if "xlapy.op" in getattr(i.mlir, "attributes", {}))


def rule_text(rule: OpShardingRule | None) -> str:
    return str(rule) if rule is not None else "none"


def parse(text: str) -> OpShardingRule:
    return OpShardingRule.parse(text)


# -- rules of instructions, compared with Shardy's ------------------------------------

CASES = load_cases()
CONSERVATIVE_CASES = load_cases(CONSERVATIVE_DATA)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule_matches_shardy(case: Case) -> None:
    assert rule_text(op_sharding_rule(case_instruction(case))) == case.rule


@pytest.mark.parametrize("case", CONSERVATIVE_CASES, ids=[c.name for c in CONSERVATIVE_CASES])
def test_conservative_rule_matches_shardy(case: Case) -> None:
    assert rule_text(op_sharding_rule(case_instruction(case), conservative=True)) == case.rule


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule_of_op_read_by_the_stablehlo_frontend(case: Case) -> None:
    # The same op read from its StableHLO form: the frontend gives it the
    # attributes the HLO parser would.
    from xlapy.frontends.stablehlo import parse_module

    (op,) = [i for i in parse_module(case.stablehlo).instructions
             if "xlapy.op" in getattr(i.mlir, "attributes", {})]
    assert rule_text(op_sharding_rule(op)) == case.rule


def test_rule_wraps_the_values_of_a_multi_result_op() -> None:
    # With the frontend's encoding (a tuple-shaped op and one
    # get-tuple-element per result), the results are those values, in order.
    module = xlapy.parse_hlo("""
HloModule m
ENTRY e {
  p = f32[8,5,3] parameter(0)
  op = (f32[8,5,3], f32[8,3]) custom-call(p), custom_call_target="Qr"
  r1 = f32[8,3] get-tuple-element(op), index=1
  r0 = f32[8,5,3] get-tuple-element(op), index=0
  ROOT t = (f32[8,5,3], f32[8,3]) tuple(r0, r1)
}""")
    op = next(i for i in module.instructions if i.name == "op")

    for user in op.users:
        user.encodes_mlir_structure = True
    rule = op_sharding_rule(op)
    assert [r.name for r in op_results(op)] == ["r0", "r1"]
    assert rule.result_mappings == (((0,), (1,), (2,)), ((0,), (3,)))
    assert [len(r.shape.dimensions) for r in op_results(op)] == [len(m) for m in rule.result_mappings]


# -- ops without a StableHLO form --------------------------------------------------

@pytest.mark.parametrize(("hlo", "expected"), [
    # Elementwise HLO ops: pointwise, like the StableHLO ones.
    ("ROOT op = f32[4,6] copy(p)", "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=6}>"),
    ("ROOT op = f32[4,6] erf(p)", "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=6}>"),
    # HLO's top-k: as the mhlo.topk custom call.
    ("ROOT op = (f32[4,2], s32[4,2]) topk(p), k=2, largest=true",
     "#sdy.op_sharding_rule<([i, j])->([i, j], [i, j]) {i=4, j=6} need_replication={j} blocked_propagation={j}>"),
    # HLO's all-to-all of a tuple of buffers has no dimension to follow.
    ("ROOT op = (f32[4,6], f32[4,6]) all-to-all(p, p), replica_groups={{0,1}}", "none"),
    # The asynchronous halves of an op, tokens and bitcasts have no rule.
    ("ROOT op = f32[4,6] bitcast(p)", "none"),
    ("t = token[] after-all()\n  ROOT op = token[] outfeed(p, t)", "none"),
    # A rule needs an operand and a result.
    ('ROOT op = () custom-call(p), custom_call_target="MoveToHost"', "none"),
])
def test_rules_of_hlo_only_ops(hlo: str, expected: str) -> None:
    module = f"HloModule m\nENTRY e {{\n  p = f32[4,6] parameter(0)\n  {hlo}\n}}"
    assert rule_text(op_sharding_rule(instruction(module))) == expected


def test_all_to_all_read_by_the_frontend() -> None:
    # StableHLO's all_to_all concatenating another dimension than it splits
    # is read as stablehlo.all_to_all, whose rule resizes both dimensions.
    all_to_all = next(c for c in CASES if c.name == "all_to_all")
    op = case_instruction(all_to_all)
    assert op.opcode == "stablehlo.all_to_all"
    assert str(op_sharding_rule(op)) == all_to_all.rule


def test_sdy_ops() -> None:
    # The frontend keeps the names of Shardy's ops: a sharding constraint is
    # pointwise, the others hold or route shardings and have no rule.
    op = instruction("HloModule m\nENTRY e {\n  p = f32[8,4] parameter(0)\n  ROOT op = f32[8,4] copy(p)\n}")
    op.opcode = "sdy.sharding_constraint"
    assert str(op_sharding_rule(op)) == "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=4}>"
    for opcode in ("sdy.data_flow_edge", "sdy.propagation_barrier", "sdy.manual_computation", "sdy.sharding_group"):
        op.opcode = opcode
        assert op_sharding_rule(op) is None


def test_a_rule_given_by_the_user_wins() -> None:
    op = instruction("""HloModule m
ENTRY e {
  p = f32[4,2] parameter(0)
  ROOT op = f32[2,4] custom-call(p), custom_call_target="foo"
}""")
    assert op_sharding_rule(op) is None
    user_rule = parse("#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}, custom>")
    op.attributes[USER_RULE_ATTRIBUTE] = user_rule
    assert op_sharding_rule(op) is user_rule
    # Also over the registry's own rule for the op.
    add = instruction("HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT op = f32[8] add(p, p)\n}")
    add.attributes[USER_RULE_ATTRIBUTE] = parse("<([i], [j])->([i]) {i=8, j=8}>")
    assert str(op_sharding_rule(add)) == "#sdy.op_sharding_rule<([i], [j])->([i]) {i=8, j=8}>"
    # Given as text, it is parsed.
    add.attributes[USER_RULE_ATTRIBUTE] = "#sdy.op_sharding_rule<([i], [i])->([i]) {i=8}, custom>"
    assert op_sharding_rule(add) == parse("<([i], [i])->([i]) {i=8}, custom>")


def test_a_rule_given_in_hlo_frontend_attributes() -> None:
    rule = "#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}, custom>"
    op = instruction(f"""HloModule m
ENTRY e {{
  p = f32[4,2] parameter(0)
  ROOT op = f32[2,4] custom-call(p), custom_call_target="foo", frontend_attributes={{xla.sdy.sharding_rule="{rule}"}}
}}""")
    assert str(op_sharding_rule(op)) == rule


def test_every_opcode_has_a_rule_or_is_known_to_have_none() -> None:
    # (An async `X-start`/`-update`/`-done` has none: it is not X itself.)
    unclassified = [o for o in OPCODES if o not in OP_SHARDING_RULES and o not in NO_RULE_OPCODES
                    and not o.endswith(("-start", "-update", "-done"))]
    assert unclassified == []
    assert not set(OP_SHARDING_RULES) & NO_RULE_OPCODES
    for opcode in ("sdy.sharding_constraint", "sdy.manual_computation", "while", "conditional", "call", "iota"):
        assert opcode in OP_SHARDING_RULES or opcode in NO_RULE_OPCODES


# -- printing and parsing ------------------------------------------------------------

# Rules as Shardy prints them (its parse/print tests and registry tests).
SHARDY_PRINTED = [
    "#sdy.op_sharding_rule<([], [])->([])>",
    "#sdy.op_sharding_rule<([i, j])->([ij]) {i=2, j=4}>",
    "#sdy.op_sharding_rule<([i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, z_1, z_2])->([i, j, k, l, m, n, "
    "o, p, q, r, s, t, u, v, w, x, y, zz_1, z_2]) {i=2, j=2, k=2, l=2, m=2, n=2, o=2, p=2, q=2, r=2, s=2, t=2, u=2, "
    "v=2, w=2, x=2, y=2, z=2, z_1=2, z_2=2}>",
    "#sdy.op_sharding_rule<([i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, z_1, z_2, z_3, z_4, z_5, z_6, z_7, "
    "z_8, z_9, z_10])->([i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z, z_1, z_2, z_3, z_4, z_5, z_6, z_7, "
    "z_8z_9z_10]) {i=2, j=2, k=2, l=2, m=2, n=2, o=2, p=2, q=2, r=2, s=2, t=2, u=2, v=2, w=2, x=2, y=2, z=2, z_1=2, "
    "z_2=2, z_3=2, z_4=2, z_5=2, z_6=2, z_7=2, z_8=2, z_9=2, z_10=2}>",
    "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=16, j=32}, custom>",
    "#sdy.op_sharding_rule<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={j} need_replication={i, l} "
    "permutation={k}, custom>",
    "#sdy.op_sharding_rule<([i, j, k])->([i, j, k]) {i=8, j=8, k=8} need_replication={j, k} blocked_propagation={i, k}"
    ", custom>",
    "#sdy.op_sharding_rule<([i])->([i]) {i=8589934592}, custom>",
] + [c.rule for c in CASES if c.rule != "none"]


@pytest.mark.parametrize("text", SHARDY_PRINTED)
def test_print_parse_round_trip(text: str) -> None:
    assert str(parse(text)) == text


def test_parsed_fields() -> None:
    rule = parse("#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}>")
    assert rule == OpShardingRule(factor_sizes=(8, 16, 32), operand_mappings=(((0,), (2,)), ((2,), (1,))),
                                  result_mappings=(((0,), (1,)),), reduction_factors=(2,))
    assert parse("<([ij])->([i, j]) {i=2, j=4}>") == OpShardingRule((2, 4), ((((0, 1),)),), (((0,), (1,)),))
    rule = parse("#sdy.op_sharding_rule<([i, zz_1, z_2])->([]) {} need_replication={z_1} permutation={z_2}, custom>")
    assert rule.operand_mappings == (((0,), (17, 18), (19,)),)
    assert rule.need_replication_factors == (18,) and rule.permutation_factors == (19,) and rule.is_custom
    assert rule.factor_sizes == ()


def test_parse_allows_space_and_empty_sets() -> None:
    text = "#sdy.op_sharding_rule< ( [i, j] ,\n [i,j] ) -> ( [i, j] ) { i = 2 , j = 8 } reduction = { } >"
    assert str(parse(text)) == "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=2, j=8}>"
    # As in MLIR, a dimension may have no factor (which the verifier rejects).
    assert parse("<([i, ])->([i]) {i=2}>").operand_mappings == (((0,), ()),)


def test_parse_from_a_cursor_stops_after_the_rule() -> None:
    cursor = Cursor("{sdy.sharding_rule = #sdy.op_sharding_rule<([i])->([i]) {i=4}>} : tensor<4xf32>", pos=21)
    rule = parse_op_sharding_rule(cursor)
    assert str(rule) == "#sdy.op_sharding_rule<([i])->([i]) {i=4}>"
    assert cursor.text[cursor.pos:] == "} : tensor<4xf32>"


def test_factor_symbols() -> None:
    assert [factor_symbol(i) for i in (0, 1, 17, 18, 19, 27, 117)] == ["i", "j", "z", "z_1", "z_2", "z_10", "z_100"]


@pytest.mark.parametrize(("text", "message", "column"), [
    # From Shardy's parsing failure tests (our own messages where Shardy's
    # name MLIR internals).
    ("<([i, j])->([i, j]) {i=16, j=32},>", "expected 'custom', got '>'", 34),
    ("<([i, j])->([i, j]) {i=16, j=32}, custom_rule>", "expected 'custom', got 'custom_rule'", 35),
    ("<([i, j])->([i j]) {i=2, j=4}>", "expected ',' or ']' in an result mapping, got 'j'", 16),
    ("<([i, j])->([ij]) {j=4, i=2}>", "expecting factor indices to be ordered like an iota ([0,1,2,...], e.g. "
     "{i=#, j=#, ...}). Expecting factor index symbol 'i', received: 'j'", 20),
    ("<([i, k])->([ik]) {i=2, k=4}>", "Expecting factor index symbol 'j', received: 'k'", 25),
    ("<([z_, j])->([i]) {z_=2, j=4}>", "expecting integer after 'z_'. Received: 'z_'", 4),
    ("<([i_1, j])->([i]) {i_1=2, j=4}>", "expecting symbol from 'i' to 'z'. Received: '_'", 5),
    ("<([z_z_1, j])->([i]) {z_1=2, j=4}>", "expecting integer after 'z_'. Received: 'z_z_1'", 4),
    ("<([z_0z_, j])->([i]) {z_0=2, j=4}>", "expecting positive integer without leading zeros. Received: '0'", 6),
    ("<([a, j])->([j]) {a=2, j=4}>", "expecting symbol from 'i' to 'z'. Received: 'a'", 4),
    ("<([z_-1, j])->([i]) {i=2, j=4}>", "expecting integer after 'z_'. Received: 'z_'", 4),
    ("<([j, z_9223372036854775808])->([j]) {i=4}>",
     "expecting symbol index <=2^63-1. Received: '9223372036854775808'", 9),
    ("<([j, z_2_i])->([j]) {i=4}>", "expecting symbol from 'i' to 'z'. Received: '_'", 10),
    ("<()->([i, j]) {i=2, j=8}, custom>", "expected '[' to start an operand mapping, got ')'", 3),
    ("<([i, j])->() {i=2, j=8}, custom>", "expected '[' to start an result mapping, got ')'", 13),
    ("<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction: {j}>", "expected '=' after 'reduction'", 60),
    ("<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduce={j}>", "expected '>' to end the sharding rule", 51),
    ("<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} need_replication={i} reduction={j}>",
     "expected '>' to end the sharding rule", 72),
    ("<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={a}>",
     "expecting symbol from 'i' to 'z'. Received: 'a'", 62),
    ("<([i, j])->([i, j]) {i=2, j=8} reduction={jk}>", "expecting single factor symbol: k", 44),
    ("<([i, j])->([i, j]) {ij=2}>", "expecting single factor symbol: j", 23),
    ("<([i])->([i]) {i=two}>", "expected a factor size, got 'two'", 18),
    ("<([i])->([i]) {i= 9223372036854775808}>", "factor size 9223372036854775808 does not fit in 64 bits", 19),
    ("#sdy.sharding<@mesh, [{}]>", "expected '#sdy.op_sharding_rule<', got '#'", 1),
    ("<([i])->([i]) {i=2}", "expected '>' to end the sharding rule, got end of text", 20),
    ("<([i])->([i]) {i=2}> extra", "unexpected 'extra' after the sharding rule", 22),
])
def test_parse_errors(text: str, message: str, column: int) -> None:
    with pytest.raises(ParseError) as error:
        parse(text)
    assert message in error.value.message
    assert (error.value.line, error.value.column) == (1, column)


def test_parse_error_reports_the_line() -> None:
    with pytest.raises(ParseError) as error:
        OpShardingRule.parse("#sdy.op_sharding_rule<([i, j],\n  [i, a])->([i, j]) {i=2, j=4}>", source="x.mlir")
    assert str(error.value) == "x.mlir:2:7: expecting symbol from 'i' to 'z'. Received: 'a'"


# -- verification ----------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "operands", "results", "message"), [
    ("<([i, j], [i])->([i, j]) {i=2, j=4}>", [(2, 4), (2, 4)], [(2, 4)], "operand 1 - mapping rank must match: 1 != 2"),
    ("<([i, j], [i, j])->([i]) {i=2, j=4}>", [(2, 4), (2, 4)], [(2, 4)], "result - mapping rank must match: 1 != 2"),
    ("<([i, j], [i, j])->([i, j], [i, j]) {i=2, j=4}>", [(2, 4), (2, 4)], [(2, 4)],
     "number of results and mappings must match: 1 != 2"),
    ("<([i, j])->([i, j]) {i=2, j=4}>", [(2, 4), (2, 4)], [(2, 4)],
     "number of operands and mappings must match: 2 != 1"),
    ("<([i, jk], [i, j])->([i, j]) {i=2, j=8, k=1}>", [(2, 8), (2, 8)], [(2, 8)],
     "operand 0 - dim mapping can't have a factor of size 1 if there are multiple factors"),
    ("<([i,], [i,])->([i, j]) {i=2, j=8}>", [(2, 8), (2, 8)], [(2, 8)],
     "operand 0 - dim mapping must have at least one factor"),
    ("<([i, u], [i, j])->([i, j]) {i=2, j=8}>", [(2, 8), (2, 8)], [(2, 8)],
     "operand 0 - expecting factor indices to be within 0<=...<num_factors; received: 12, num_factors: 2"),
    ("<([i, j], [i, j])->([i, j]) {i=2, j=8, k=2}>", [(2, 8), (2, 8)], [(2, 8)],
     "has factor k=2 that isn't used in operand and result mappings"),
    ("<([ij, k])->([iik]) {i=2, j=2, k=2}>", [(4, 2)], [(8,)],
     "result - cannot reuse factors for the same tensor value"),
    ("<([i, i])->([ij]) {i=2, j=2}>", [(2, 2)], [(4,)], "operand - cannot reuse factors for the same tensor value"),
    ("<([i, j, k])->([i, k]) {i=2, j=4, k=8} need_replication={k, i}>", [(2, 4, 8)], [(2, 8)],
     "indices of special factors must be sorted"),
    ("<([i, j, k])->([i, k]) {i=2, j=4, k=8} need_replication={i, i}>", [(2, 4, 8)], [(2, 8)],
     "indices of special factors must be unique"),
    ("<([i, j, k])->([i, k]) {i=2, j=4, k=8} need_replication={z}>", [(2, 4, 8)], [(2, 8)],
     "index must be less than 3, got: 17"),
    ("<([i, j, k])->([i, k]) {i=2, j=4, k=8} reduction={j} need_replication={j}>", [(2, 4, 8)], [(2, 8)],
     "a factor can only be in one of the reduction, need replication, or permutation factor sets"),
    ("<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={k}>", [(2, 3, 5, 7)], [(2, 5, 7)],
     "reduction factor cannot be in result mappings"),
    ("<([i])->([i]) {i=8}, custom>", [(8,)], [(8,)], "can only define custom sharding rules on custom-call"),
])
def test_verify_errors(rule: str, operands: list, results: list, message: str) -> None:
    with pytest.raises(VerifyError) as error:
        parse(rule).verify(operands, results, where="add.1", is_custom_call=False)
    assert str(error.value) == f"add.1: {message}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rules_of_instructions_verify(case: Case) -> None:
    op = case_instruction(case)
    rule = op_sharding_rule(op)
    if rule is not None:
        dims = [tuple(o.shape.dimensions) for o in op.operands]
        shapes = op.shape.tuple_shapes if op.shape.is_tuple else (op.shape,)
        rule.verify(dims, [tuple(s.dimensions) for s in shapes], op.name, op.opcode == "custom-call")


def test_blocked_factors_may_also_be_special() -> None:
    parse("<([i, j], [i, j])->([i, j]) {i=2, j=8} need_replication={j} blocked_propagation={j}>").verify(
        [(2, 8), (2, 8)], [(2, 8)])


# -- the rule's views and the builder ------------------------------------------------------

def test_factor_kinds_and_views() -> None:
    rule = parse("<([i, j, l], [i, l, k])->([i, j, k]) {i=4, j=8, k=16, l=32} reduction={l} blocked_propagation={k}>")
    assert [rule.factor_type(f) for f in range(4)] == [FactorType.PASS_THROUGH, FactorType.PASS_THROUGH,
                                                       FactorType.PASS_THROUGH, FactorType.REDUCTION]
    assert rule.is_reduction_factor(3) and not rule.is_reduction_factor(0)
    assert rule.is_blocked_propagation_factor(2) and rule.is_pass_through_factor(2)
    assert rule.batching_factors() == [0]  # only i is in all three tensors
    assert rule.tensor_sizes() == [4 * 8 * 32, 4 * 32 * 16, 4 * 8 * 16]
    assert (rule.num_factors, rule.num_operands, rule.num_results) == (4, 2, 1)
    assert not rule.has_dimensions_with_multiple_factors()
    scalar = parse("<([], [i, j], [])->([i, j]) {i=4, j=8}>")
    assert scalar.non_scalar_tensor_indices() == [1, 3]
    assert scalar.batching_factors() == [0, 1]
    assert parse("<([i, j])->([ij]) {i=2, j=4}>").has_dimensions_with_multiple_factors()


def test_builder_gives_unmapped_dimensions_size_one_factors() -> None:
    builder = OpShardingRuleBuilder([2, 0], [3])
    builder.add_factor([1, NULL_DIM], [2], 7, FactorType.REDUCTION, blocked=True)
    builder.add_pointwise_factor(0, 5, FactorType.PERMUTATION)
    rule = builder.build()
    assert str(rule) == ("#sdy.op_sharding_rule<([j, i], [])->([j, k, i]) {i=7, j=5, k=1} reduction={i} "
                         "permutation={j} blocked_propagation={i}>")
    # Building again gives the same rule: the builder itself is unchanged.
    assert builder.build() == rule


def test_pointwise_rule() -> None:
    assert str(pointwise_rule([2, 2], [(3, 5)])) == "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=3, j=5}>"
    assert str(pointwise_rule([0], [()])) == "#sdy.op_sharding_rule<([])->([])>"


# -- fuzzing: printing and parsing are inverse ---------------------------------------------

@st.composite
def rules(draw, max_size: int = 2**63 - 1) -> OpShardingRule:
    sizes = draw(st.lists(st.integers(0, max_size), min_size=1, max_size=30))
    factor = st.integers(0, len(sizes) - 1)
    tensor = st.lists(st.lists(factor, min_size=1, max_size=3).map(tuple), max_size=4).map(tuple)
    operands = draw(st.lists(tensor, min_size=1, max_size=4))
    results = draw(st.lists(tensor, min_size=1, max_size=3))
    special = st.sets(factor).map(lambda s: tuple(sorted(s)))
    return OpShardingRule(tuple(sizes), tuple(operands), tuple(results), draw(special), draw(special),
                          draw(special), draw(special), draw(st.booleans()))


@given(rules())
def test_fuzz_print_parse_round_trip(rule: OpShardingRule) -> None:
    assert parse(str(rule)) == rule
    assert parse(rule.body()) == rule


def _shapes_of(total: int):
    # Shapes with `total` elements: its factors in some order, some split further.
    def split(rest: int, draw) -> list[int]:
        dims = []
        while rest > 1:
            dim = draw(st.sampled_from([d for d in range(2, rest + 1) if rest % d == 0]))
            dims.append(dim)
            rest //= dim
        return dims

    @st.composite
    def shape(draw) -> list[int]:
        dims = split(total, draw)
        for _ in range(draw(st.integers(0, 2))):
            dims.insert(draw(st.integers(0, len(dims))), 1)
        return dims

    return shape()


def _check_reshape_rules(examples: int, derandomize: bool) -> None:
    # The reshape factoring is the subtlest rule: compare it with Shardy's on
    # random shapes of the same size.
    from hypothesis import settings

    def tensor(dims: list[int]) -> str:
        return "tensor<" + "".join(f"{d}x" for d in dims) + "f32>"

    def array(dims: list[int]) -> str:
        return "f32[" + ",".join(map(str, dims)) + "]"

    sizes = st.sampled_from([1, 6, 8, 12, 24, 36, 60, 64, 210])

    @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None)
    @given(sizes.flatmap(lambda n: st.tuples(_shapes_of(n), _shapes_of(n))))
    def check(shapes: tuple[list[int], list[int]]) -> None:
        a, b = shapes
        hlo = f"HloModule m\nENTRY e {{\n  p = {array(a)} parameter(0)\n  ROOT op = {array(b)} reshape(p)\n}}"
        stablehlo = (f"func.func @main(%arg0: {tensor(a)}) -> {tensor(b)} {{\n  %0 = stablehlo.reshape %arg0 "
                     f"{{xlapy.op}} : ({tensor(a)}) -> {tensor(b)}\n  return %0 : {tensor(b)}\n}}")
        assert rule_text(op_sharding_rule(instruction(hlo))) == populated_rule(stablehlo)

    check()


@needs_shardy
def test_reshape_rules_match_shardy() -> None:
    _check_reshape_rules(25, derandomize=True)  # the same shapes every run


@pytest.mark.slow
@needs_shardy
def test_fuzz_reshape_rules_match_shardy() -> None:
    _check_reshape_rules(150, derandomize=False)


def _check_printing(examples: int, derandomize: bool) -> None:
    # Shardy's own parser and printer (in jaxlib) read our text and print it
    # back unchanged. (This Shardy reads factor sizes as 32-bit integers.)
    import jax  # noqa: F401
    from hypothesis import settings
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    with jax_mlir.make_ir_context():
        @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None)
        @given(rules(max_size=2**31 - 1))
        def check(rule: OpShardingRule) -> None:
            assert str(ir.Attribute.parse(str(rule))) == str(rule)

        check()


@needs_shardy
def test_printing_matches_shardy() -> None:
    _check_printing(40, derandomize=True)  # the same rules every run


@pytest.mark.slow
@needs_shardy
def test_fuzz_printing_matches_shardy() -> None:
    _check_printing(300, derandomize=False)
