"""AlgebraicSimplifier against the behaviour of XLA's
(``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`` and its tests),
and against the interpreter on random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tests.transforms import algsimp_cases
from tests.transforms.algsimp_cases import assert_simplifier_preserves_values
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import hlo_texts, reduce_relies_on_its_initial_value
from xlapy.hlo import parse_module, verify
from xlapy.transforms.algebraic.conversion import cast_preserves_values
from xlapy.transforms.algebraic_simplifier import AlgebraicSimplifier
from xlapy.transforms.hlo_pass import HloPassFix

_SUM = """sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}"""


def simplify(body: str, parameters: str = "p = f32[2,3] parameter(0)") -> tuple[bool, str]:
    return algsimp_cases.simplify(parameters, body, computations=_SUM)


def root_is(out: str, expected: str, tmp_path) -> None:
    """The entry's root is ``expected`` and no dead instruction is left after it."""
    filecheck(out, f"CHECK: ENTRY %e\nCHECK: ROOT {expected}\nCHECK-NEXT: }}\n", tmp_path)


@pytest.mark.parametrize("body", [
    "z = f32[] constant(0)\n  b = f32[2,3] broadcast(z), dimensions={}\n  ROOT r = f32[2,3] add(p, b)",
    "z = f32[] constant(0)\n  b = f32[2,3] broadcast(z), dimensions={}\n  ROOT r = f32[2,3] add(b, p)",
    "z = f32[2,3] constant({{0,0,0},{0,0,0}})\n  ROOT r = f32[2,3] subtract(p, z)",
    "o = f32[] constant(1)\n  b = f32[2,3] broadcast(o), dimensions={}\n  ROOT r = f32[2,3] multiply(b, p)",
    "o = f32[] constant(1)\n  b = f32[2,3] broadcast(o), dimensions={}\n  ROOT r = f32[2,3] multiply(p, b)",
    "o = f32[] constant(1)\n  b = f32[2,3] broadcast(o), dimensions={}\n  ROOT r = f32[2,3] divide(p, b)",
    "n = f32[2,3] negate(p)\n  ROOT r = f32[2,3] negate(n)",
    "ROOT r = f32[2,3] reshape(p)",
    "ROOT r = f32[2,3] transpose(p), dimensions={0,1}",
    "t = f32[3,2] transpose(p), dimensions={1,0}\n  ROOT r = f32[2,3] transpose(t), dimensions={1,0}",
    "ROOT r = f32[2,3] convert(p)",
    "c = f64[2,3] convert(p)\n  ROOT r = f32[2,3] convert(c)",
    "ROOT r = f32[2,3] slice(p), slice={[0:2], [0:3]}",
    "ROOT r = f32[2,3] concatenate(p), dimensions={1}",
    "z = f32[] constant(0)\n  ROOT r = f32[2,3] pad(p, z), padding=0_0x0_0",
    "c = f32[2,3] copy(p)\n  ROOT r = f32[2,3] copy(c)",
    "z = f32[] constant(0)\n  ROOT r = f32[2,3] reduce(p, z), dimensions={}, to_apply=sum",
    "e = f32[2,0] slice(p), slice={[0:2], [0:0]}\n  ROOT r = f32[2,3] concatenate(e, p, e), dimensions={1}",
    "r1 = f32[3,2] reshape(p)\n  ROOT r = f32[2,3] reshape(r1)",
    "b = f32[1,2,3] broadcast(p), dimensions={1,2}\n  ROOT r = f32[2,3] reshape(b)",
])
def test_operations_that_change_nothing_leave_the_parameter(body, tmp_path):
    changed, out = simplify(body)
    assert changed
    filecheck(out, "CHECK: ENTRY %e\nCHECK-NEXT: ROOT %p = f32[2,3]{1,0} parameter(0)\nCHECK-NEXT: }\n", tmp_path)


@pytest.mark.parametrize("body", [
    # -0.0 is not an identity of add in XLA's test (bits differ from +0).
    "z = f32[] constant(-0.0)\n  b = f32[2,3] broadcast(z), dimensions={}\n  ROOT r = f32[2,3] add(p, b)",
    # A * 0 is not 0 for floats (NaN, infinity).
    "z = f32[] constant(0)\n  b = f32[2,3] broadcast(z), dimensions={}\n  ROOT r = f32[2,3] multiply(p, b)",
    # f32 -> f16 -> f32 rounds.
    "c = f16[2,3] convert(p)\n  ROOT r = f32[2,3] convert(c)",
    # A - A is not 0 for floats.
    "ROOT r = f32[2,3] subtract(p, p)",
    # A reduce that combines elements stays.
    "z = f32[] constant(0)\n  ROOT r = f32[2] reduce(p, z), dimensions={1}, to_apply=sum",
])
def test_rewrites_that_would_change_values_are_not_made(body):
    changed, _ = simplify(body)
    assert not changed


def test_integer_multiply_by_zero_and_subtract_of_itself_are_zero(tmp_path):
    changed, out = simplify("z = s32[] constant(0)\n  b = s32[4] broadcast(z), dimensions={}\n"
                            "  m = s32[4] multiply(q, b)\n  d = s32[4] subtract(q, q)\n"
                            "  ROOT r = (s32[4], s32[4]) tuple(m, d)", "q = s32[4] parameter(0)")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK: %[[Z:.*]] = s32[] constant(0)
CHECK: %[[B:.*]] = s32[4]{0} broadcast(%[[Z]]), dimensions={}
CHECK: %[[Z2:.*]] = s32[] constant(0)
CHECK: %[[B2:.*]] = s32[4]{0} broadcast(%[[Z2]]), dimensions={}
CHECK: ROOT %r = (s32[4]{0}, s32[4]{0}) tuple(%[[B]], %[[B2]])
""", tmp_path)


def test_constant_goes_to_the_right_of_add(tmp_path):
    changed, out = simplify("c = f32[2,3] constant({{1,2,3},{4,5,6}})\n  ROOT r = f32[2,3] add(c, p)")
    assert changed
    root_is(out, "%r = f32[2,3]{1,0} add(%p, %c)", tmp_path)


def test_subtract_of_a_constant_becomes_add_of_its_negation(tmp_path):
    changed, out = simplify("c = f32[] constant(2)\n  b = f32[2,3] broadcast(c), dimensions={}\n"
                            "  ROOT r = f32[2,3] subtract(p, b)")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK: %[[N:.*]] = f32[] negate(%c)
CHECK: %[[B:.*]] = f32[2,3]{1,0} broadcast(%[[N]]), dimensions={}
CHECK: ROOT %{{.*}} = f32[2,3]{1,0} add(%p, %[[B]])
""", tmp_path)


def test_broadcast_of_broadcast_is_one_broadcast(tmp_path):
    changed, out = simplify("b = f32[2,4,3] broadcast(p), dimensions={0,2}\n"
                            "  ROOT r = f32[5,2,4,3] broadcast(b), dimensions={1,2,3}")
    assert changed
    root_is(out, "%r = f32[5,2,4,3]{3,2,1,0} broadcast(%p), dimensions={1,3}", tmp_path)


def test_broadcast_that_only_reorders_is_a_transpose(tmp_path):
    changed, out = simplify("ROOT r = f32[3,2] broadcast(p), dimensions={1,0}")
    assert changed
    root_is(out, "%{{.*}} = f32[3,2]{1,0} transpose(%p), dimensions={1,0}", tmp_path)


def test_reshape_of_reshape_is_one_reshape(tmp_path):
    changed, out = simplify("r1 = f32[6] reshape(p)\n  ROOT r = f32[3,2] reshape(r1)")
    assert changed
    root_is(out, "%r = f32[3,2]{1,0} reshape(%p)", tmp_path)


def test_transposes_compose(tmp_path):
    changed, out = simplify("t = f32[3,4,2] transpose(q), dimensions={1,2,0}\n"
                            "  ROOT r = f32[4,2,3] transpose(t), dimensions={1,2,0}", "q = f32[2,3,4] parameter(0)")
    assert changed
    root_is(out, "%r = f32[4,2,3]{2,1,0} transpose(%q), dimensions={2,0,1}", tmp_path)


def test_slice_of_slice_is_one_slice(tmp_path):
    changed, out = simplify("s = f32[4] slice(q), slice={[1:9:2]}\n  ROOT r = f32[2] slice(s), slice={[1:4:2]}",
                            "q = f32[10] parameter(0)")
    assert changed
    root_is(out, "%r = f32[2]{0} slice(%q), slice={[3:8:4]}", tmp_path)


def test_nested_concatenates_flatten(tmp_path):
    changed, out = simplify("c = f32[2,6] concatenate(p, p), dimensions={1}\n"
                            "  ROOT r = f32[2,9] concatenate(p, c), dimensions={1}")
    assert changed
    root_is(out, "%r = f32[2,9]{1,0} concatenate(%p, %p, %p), dimensions={1}", tmp_path)


def test_exact_convert_round_trip_goes_but_one_that_changes_type_stays(tmp_path):
    changed, out = simplify("c = s64[4] convert(q)\n  ROOT r = f32[4] convert(c)", "q = s32[4] parameter(0)")
    assert not changed
    changed, out = simplify("c = f32[4] convert(q)\n  ROOT r = bf16[4] convert(c)", "q = bf16[4] parameter(0)")
    assert changed
    root_is(out, "%q = bf16[4]{0} parameter(0)", tmp_path)


def test_cast_preserves_values_as_xla():
    assert cast_preserves_values("bf16", "f32") and cast_preserves_values("s16", "f32")
    assert cast_preserves_values("u8", "s16") and cast_preserves_values("pred", "s8")
    assert not cast_preserves_values("s32", "f32") and not cast_preserves_values("f32", "bf16")
    assert not cast_preserves_values("bf16", "f16") and not cast_preserves_values("s8", "u32")


def test_reduce_of_no_elements_is_its_initial_value(tmp_path):
    changed, out = simplify("z = f32[] constant(0)\n  ROOT r = f32[2] reduce(q, z), dimensions={1}, to_apply=sum",
                            "q = f32[2,0] parameter(0)")
    assert changed
    root_is(out, "%{{.*}} = f32[2]{0} broadcast(%z), dimensions={}", tmp_path)


def test_reduce_over_dimensions_of_size_one_is_a_reshape(tmp_path):
    changed, out = simplify("z = f32[] constant(0)\n  ROOT r = f32[2,3] reduce(q, z), dimensions={1}, to_apply=sum",
                            "q = f32[2,1,3] parameter(0)")
    assert changed
    root_is(out, "%{{.*}} = f32[2,3]{1,0} reshape(%q)", tmp_path)


def test_replacement_keeps_a_sharding_and_the_name_of_a_same_opcode_instruction(tmp_path):
    # XLA's ReplaceInstruction: the new instruction takes the old one's
    # sharding, and its name when the opcode is the same.
    changed, out = simplify("b = f32[1,2,3] broadcast(p), dimensions={1,2}, sharding={replicated}\n"
                            "  n = f32[1,2,3] negate(b)\n  r1 = f32[6] reshape(n)\n  ROOT r = f32[3,2] reshape(r1)")
    assert changed
    filecheck(out, """
CHECK: %[[R:reshape[.0-9]*]] = f32[1,2,3]{2,1,0} reshape(%p), sharding={replicated}
CHECK: %n = f32[1,2,3]{2,1,0} negate(%[[R]])
CHECK: ROOT %r = f32[3,2]{1,0} reshape(%n)
""", tmp_path)


def test_different_shardings_block_a_replacement():
    changed, _ = simplify("n = f32[2,3] negate(p)\n  ROOT r = f32[2,3] negate(n), sharding={maximal device=1}",
                          "p = f32[2,3] parameter(0), sharding={maximal device=0}")
    assert not changed


def test_instruction_with_control_predecessors_stays():
    changed, _ = simplify("o = f32[] constant(1)\n  b = f32[2,3] broadcast(o), dimensions={}\n"
                          "  ROOT r = f32[2,3] multiply(p, b), control-predecessors={o}")
    assert not changed


def test_sharded_copy_at_the_entry_root_stays():
    changed, _ = simplify("ROOT r = f32[2,3] copy(p), sharding={replicated}")
    assert not changed


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hlo_texts())
def test_preserves_values_of_random_programs(text: str) -> None:
    assume(not reduce_relies_on_its_initial_value(parse_module(text)))
    assert_simplifier_preserves_values(text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_simplifier_preserves_values(text, seeds=(0,))
    else:
        HloPassFix(AlgebraicSimplifier()).run(module)
        verify(module)


@pytest.mark.parametrize("direction, expected", [
    ("EQ", "true"), ("GE", "true"), ("LE", "true"), ("NE", "false"), ("GT", "false"), ("LT", "false")])
def test_integer_compared_with_itself_is_a_constant(direction, expected, tmp_path):
    changed, out = simplify(f"ROOT r = pred[4] compare(q, q), direction={direction}", "q = s32[4] parameter(0)")
    assert changed
    filecheck(out, f"CHECK: %[[C:.*]] = pred[] constant({expected})\n"
                   "CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[C]]), dimensions={}\n", tmp_path)


def test_float_compared_with_itself_stays():
    # NaN is not equal to itself.
    changed, _ = simplify("ROOT r = pred[2,3] compare(p, p), direction=EQ")
    assert not changed


@pytest.mark.parametrize("operands, direction, expected", [
    ("q, b", "LT", "false"), ("q, b", "GE", "true"), ("b, q", "GT", "false"), ("b, q", "LE", "true")])
def test_unsigned_compared_with_zero_is_a_constant(operands, direction, expected, tmp_path):
    changed, out = simplify(f"z = u32[] constant(0)\n  b = u32[4] broadcast(z), dimensions={{}}\n"
                            f"  ROOT r = pred[4] compare({operands}), direction={direction}", "q = u32[4] parameter(0)")
    assert changed
    filecheck(out, f"CHECK: %[[C:.*]] = pred[] constant({expected})\n"
                   "CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[C]]), dimensions={}\n", tmp_path)


@pytest.mark.parametrize("body", [
    # A signed value may be negative.
    "z = s32[] constant(0)\n  b = s32[4] broadcast(z), dimensions={}\n  ROOT r = pred[4] compare(q, b), direction=LT",
    # Unsigned, but the zero is on the side where the outcome depends on q.
    "z = s32[] constant(0)\n  b = s32[4] broadcast(z), dimensions={}\n  ROOT r = pred[4] compare(b, q), direction=LT",
])
def test_compares_that_depend_on_the_value_stay(body):
    changed, _ = simplify(body, "q = s32[4] parameter(0)")
    assert not changed


def test_iota_compared_with_zero_is_a_constant(tmp_path):
    changed, out = simplify("i = s32[4] iota(), iota_dimension=0\n  z = s32[] constant(0)\n"
                            "  b = s32[4] broadcast(z), dimensions={}\n  ROOT r = pred[4] compare(i, b), direction=GE")
    assert changed
    filecheck(out, "CHECK: %[[C:.*]] = pred[] constant(true)\n"
                   "CHECK: ROOT %{{.*}} = pred[4]{0} broadcast(%[[C]]), dimensions={}\n", tmp_path)


@pytest.mark.parametrize("body", [
    "t = pred[] constant(true)\n  ROOT r = f32[2,3] select(t, p, n)",
    "f = pred[] constant(false)\n  ROOT r = f32[2,3] select(f, n, p)",
    "f = pred[] constant(false)\n  b = pred[2,3] broadcast(f), dimensions={}\n  ROOT r = f32[2,3] select(b, n, p)",
    "ROOT r = f32[2,3] select(k, p, p)",
    "ROOT r = f32[2,3] maximum(p, p)",
    "ROOT r = f32[2,3] minimum(p, p)",
    "i = f32[] constant(-inf)\n  b = f32[2,3] broadcast(i), dimensions={}\n  ROOT r = f32[2,3] maximum(b, p)",
    "i = f32[] constant(inf)\n  b = f32[2,3] broadcast(i), dimensions={}\n  ROOT r = f32[2,3] minimum(p, b)",
])
def test_selects_and_min_max_that_choose_one_operand_leave_it(body, tmp_path):
    changed, out = simplify("n = f32[2,3] negate(p)\n  " + body,
                            "p = f32[2,3] parameter(0)\n  k = pred[2,3] parameter(1)")
    assert changed
    root_is(out, "%p = f32[2,3]{1,0} parameter(0)", tmp_path)


def test_integer_max_with_the_lowest_value_and_nested_max_min(tmp_path):
    changed, out = simplify("l = s32[] constant(-2147483648)\n  b = s32[4] broadcast(l), dimensions={}\n"
                            "  m = s32[4] maximum(q, b)\n  n = s32[4] minimum(m, t)\n  ROOT r = s32[4] minimum(n, t)",
                            "q = s32[4] parameter(0)\n  t = s32[4] parameter(1)")
    assert changed
    root_is(out, "%{{.*}} = s32[4]{0} minimum(%q, %t)", tmp_path)


def test_max_with_a_value_that_is_not_the_lowest_stays():
    changed, _ = simplify("l = f32[] constant(-3.4028235e+38)\n  b = f32[2,3] broadcast(l), dimensions={}\n"
                          "  ROOT r = f32[2,3] maximum(p, b)")
    assert not changed


@pytest.mark.parametrize("body, expected", [
    ("t = pred[] constant(true)\n  b = pred[4] broadcast(t), dimensions={}\n  ROOT r = pred[4] and(q, b)", "%q"),
    ("t = pred[] constant(true)\n  b = pred[4] broadcast(t), dimensions={}\n  ROOT r = pred[4] and(b, q)", "%q"),
    ("f = pred[] constant(false)\n  b = pred[4] broadcast(f), dimensions={}\n  ROOT r = pred[4] and(q, b)", "%b"),
    ("f = pred[] constant(false)\n  b = pred[4] broadcast(f), dimensions={}\n  ROOT r = pred[4] and(b, q)", "%b"),
    ("t = pred[] constant(true)\n  b = pred[4] broadcast(t), dimensions={}\n  ROOT r = pred[4] or(q, b)", "%b"),
    ("t = pred[] constant(true)\n  b = pred[4] broadcast(t), dimensions={}\n  ROOT r = pred[4] or(b, q)", "%b"),
    ("f = pred[] constant(false)\n  b = pred[4] broadcast(f), dimensions={}\n  ROOT r = pred[4] or(q, b)", "%q"),
    ("f = pred[] constant(false)\n  b = pred[4] broadcast(f), dimensions={}\n  ROOT r = pred[4] or(b, q)", "%q"),
])
def test_and_or_with_constant_predicates(body, expected, tmp_path):
    changed, out = simplify(body, "q = pred[4] parameter(0)")
    assert changed
    kept = {"%q": "%q = pred[4]{0} parameter(0)", "%b": "%{{.*}} = pred[4]{0} broadcast(%{{[tf]}}), dimensions={}"}
    root_is(out, kept[expected], tmp_path)


def test_integer_and_with_zero_and_or_with_zero(tmp_path):
    changed, out = simplify("z = s32[] constant(0)\n  b = s32[4] broadcast(z), dimensions={}\n"
                            "  a = s32[4] and(q, b)\n  o = s32[4] or(b, q)\n  ROOT r = (s32[4], s32[4]) tuple(a, o)",
                            "q = s32[4] parameter(0)")
    assert changed
    root_is(out, "%r = (s32[4]{0}, s32[4]{0}) tuple(%{{b.*}}, %q)", tmp_path)
    # For integers, all ones is not an identity of and: only predicates have one.
    changed, _ = simplify("c = s32[] constant(1)\n  b = s32[4] broadcast(c), dimensions={}\n"
                          "  ROOT r = s32[4] and(q, b)", "q = s32[4] parameter(0)")
    assert not changed


def test_integer_constants_reassociate(tmp_path):
    changed, out = simplify("c1 = s32[] constant(3)\n  b1 = s32[4] broadcast(c1), dimensions={}\n"
                            "  c2 = s32[] constant(4)\n  b2 = s32[4] broadcast(c2), dimensions={}\n"
                            "  a = s32[4] add(q, b1)\n  ROOT r = s32[4] add(a, b2)", "q = s32[4] parameter(0)")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK: %[[S:.*]] = s32[] add(%c1, %c2)
CHECK: %[[B:.*]] = s32[4]{0} broadcast(%[[S]]), dimensions={}
CHECK: ROOT %r = s32[4]{0} add(%q, %[[B]])
""", tmp_path)
    changed, out = simplify("c1 = s32[4] constant({1,2,3,4})\n  c2 = s32[4] constant({5,6,7,8})\n"
                            "  a = s32[4] subtract(c1, q)\n  ROOT r = s32[4] add(a, c2)", "q = s32[4] parameter(0)")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK: %[[S:.*]] = s32[4]{0} add(%c1, %c2)
CHECK: ROOT %{{.*}} = s32[4]{0} subtract(%[[S]], %q)
""", tmp_path)


def test_float_constants_do_not_reassociate():
    changed, _ = simplify("c1 = f32[2,3] constant({{1,2,3},{4,5,6}})\n  a = f32[2,3] add(p, c1)\n"
                          "  ROOT r = f32[2,3] add(a, c1)")
    assert not changed


@pytest.mark.parametrize("exponent, expected", [
    ("1", "CHECK: ROOT %p = f32[2,3]{1,0} parameter(0)"),
    ("0", "CHECK: %[[O:.*]] = f32[] constant(1)\nCHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%[[O]]), dimensions={}"),
    ("2", "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} multiply(%p, %p)"),
    ("3", "CHECK: %[[S:.*]] = f32[2,3]{1,0} multiply(%p, %p)\n"
          "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} multiply(%p, %[[S]])"),
    ("-1", "CHECK: %[[O:.*]] = f32[] constant(1)\nCHECK: %[[B:.*]] = f32[2,3]{1,0} broadcast(%[[O]]), dimensions={}\n"
           "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} divide(%[[B]], %p)"),
])
def test_power_with_a_small_integer_exponent(exponent, expected, tmp_path):
    changed, out = simplify(f"c = f32[] constant({exponent})\n  b = f32[2,3] broadcast(c), dimensions={{}}\n"
                            "  ROOT r = f32[2,3] power(p, b)")
    assert changed
    filecheck(out, "CHECK: ENTRY %e\n" + expected + "\nCHECK-NEXT: }\n", tmp_path)


def test_power_with_another_exponent_stays():
    changed, _ = simplify("c = f32[] constant(0.5)\n  b = f32[2,3] broadcast(c), dimensions={}\n"
                          "  ROOT r = f32[2,3] power(p, b)")
    assert not changed


def test_broadcasts_sink_below_elementwise_ops(tmp_path):
    # XLA's TryToSinkBroadcastAfterElementwiseOps: the add works on the
    # broadcasts' operands, a scalar operand is broadcast to their shape.
    changed, out = simplify("a = f32[2,4] broadcast(q), dimensions={1}\n  b = f32[2,4] broadcast(t), dimensions={1}\n"
                            "  c = f32[] constant(2)\n  d = f32[2,4] broadcast(c), dimensions={}\n"
                            "  s = f32[2,4] add(a, b)\n  ROOT r = pred[2,4] compare(s, d), direction=LT",
                            "q = f32[4] parameter(0)\n  t = f32[4] parameter(1)")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-DAG: %[[S:.*]] = f32[4]{0} add(%q, %t)
CHECK-DAG: %[[C:.*]] = f32[4]{0} broadcast(%c), dimensions={}
CHECK: %[[L:.*]] = pred[4]{0} compare(%[[S]], %[[C]]), direction=LT
CHECK: ROOT %{{.*}} = pred[2,4]{1,0} broadcast(%[[L]]), dimensions={1}
""", tmp_path)


@pytest.mark.parametrize("body", [
    # Different broadcast dimensions.
    "a = f32[4,4] broadcast(q), dimensions={0}\n  b = f32[4,4] broadcast(q), dimensions={1}\n"
    "  ROOT r = f32[4,4] add(a, b)",
    # An operand that is not a broadcast.
    "a = f32[4,4] broadcast(q), dimensions={0}\n  ROOT r = f32[4,4] add(a, k)",
    # Not an elementwise user.
    "a = f32[4,4] broadcast(q), dimensions={0}\n  ROOT r = f32[4,4] transpose(a), dimensions={1,0}",
])
def test_broadcasts_that_do_not_line_up_stay(body):
    changed, _ = simplify(body, "q = f32[4] parameter(0)\n  k = f32[4,4] parameter(1)")
    assert not changed
