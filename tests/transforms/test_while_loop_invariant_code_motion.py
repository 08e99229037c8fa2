"""Loop-invariant code motion (XLA's ``WhileLoopInvariantCodeMotion``,
``xla/service/while_loop_invariant_code_motion.cc``): cases after XLA's
``while_loop_invariant_code_motion_test.cc``, and values kept against the
interpreter on random loops."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_control_flow import while_loop_texts
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module, verify
from xlapy.transforms.cpu_pipeline import cpu_hlo_pipeline
from xlapy.transforms.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion


def _loop(body: str, trips: int = 5, state: str = "(s32[], f32[2,2], f32[2,2])", extra_entry: str = "") -> str:
    return f"""
HloModule m

body {{
  p = {state} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  a = f32[2,2] get-tuple-element(p), index=1
  b = f32[2,2] get-tuple-element(p), index=2
  one = s32[] constant(1)
  next = s32[] add(i, one)
{body}
}}

cond {{
  p = {state} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({trips})
  ROOT c = pred[] compare(i, n), direction=LT
}}

ENTRY main {{
  x = f32[2,2] parameter(0)
  y = f32[2,2] parameter(1)
  zero = s32[] constant(0){extra_entry}
  init = {state} tuple(zero, x, y)
  ROOT w = {state} while(init), condition=cond, body=body
}}
"""


def _hoist(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = WhileLoopInvariantCodeMotion().run(module)
    verify(module)
    return changed, module.to_text()


# a and b pass through, so their sum is the same on every trip.
HOIST_ONE = _loop("""  s = f32[2,2] add(a, b)
  ROOT t = (s32[], f32[2,2], f32[2,2], f32[2,2]) tuple(next, a, b, s)""",
                  state="(s32[], f32[2,2], f32[2,2], f32[2,2])").replace("tuple(zero, x, y)", "tuple(zero, x, y, y)")


def test_an_invariant_sum_moves_before_the_loop_as_a_new_state_element(tmp_path: Path) -> None:
    changed, out = _hoist(HOIST_ONE)
    assert changed
    filecheck(out, """
CHECK: %wide.body {{.*}} -> (s32[], f32[2,2], f32[2,2], f32[2,2], f32[2,2]) {
CHECK-NOT: f32[2,2]{1,0} add(
CHECK: %[[HOISTED:.*]] = f32[2,2]{1,0} get-tuple-element(%wide_param{{.*}}), index=4
CHECK-NOT: f32[2,2]{1,0} add(
CHECK: ROOT {{.*}} tuple(%next{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
CHECK: ENTRY
CHECK-DAG: %x{{.*}} = f32[2,2]{1,0} parameter(0)
CHECK-DAG: %y{{.*}} = f32[2,2]{1,0} parameter(1)
CHECK: %[[SUM:s.*]] = f32[2,2]{1,0} add(%x{{.*}}, %y{{.*}})
CHECK: %[[INIT:.*]] = ({{.*}}) tuple(%zero, %x{{.*}}, %y{{.*}}, %y{{.*}}, %[[SUM]])
CHECK: %[[LOOP:.*]] = {{.*}} while(%[[INIT]]), condition=%wide.cond, body=%wide.body
CHECK-DAG: get-tuple-element(%[[LOOP]]), index=0
CHECK-DAG: get-tuple-element(%[[LOOP]]), index=1
CHECK-DAG: get-tuple-element(%[[LOOP]]), index=2
CHECK-DAG: get-tuple-element(%[[LOOP]]), index=3
CHECK: ROOT {{.*}} = (s32[], f32[2,2]{1,0}, f32[2,2]{1,0}, f32[2,2]{1,0}) tuple(
""", tmp_path)
    assert_pass_preserves_values(WhileLoopInvariantCodeMotion(), HOIST_ONE)


def test_a_tree_of_invariant_ops_moves_with_the_constants_it_reads(tmp_path: Path) -> None:
    text = _loop("""  two = f32[] constant(2)
  twos = f32[2,2] broadcast(two), dimensions={}
  s = f32[2,2] multiply(a, twos)
  e = f32[2,2] exponential(s)
  u = f32[2,2] add(b, e)
  ROOT t = (s32[], f32[2,2], f32[2,2]) tuple(next, a, u)""")
    changed, out = _hoist(text)
    assert changed
    filecheck(out, """
CHECK: %wide.body
CHECK-NOT: multiply(
CHECK-NOT: exponential(
CHECK: add(%b{{.*}}, %{{.*}})
CHECK: ENTRY
CHECK-DAG: %two{{.*}} = f32[] constant(2)
CHECK-DAG: %twos{{.*}} = f32[2,2]{1,0} broadcast(%two{{.*}}), dimensions={}
CHECK-DAG: %[[S:s.*]] = f32[2,2]{1,0} multiply(%x{{.*}}, %twos{{.*}})
CHECK-DAG: %e{{.*}} = f32[2,2]{1,0} exponential(%[[S]])
""", tmp_path)
    assert_pass_preserves_values(WhileLoopInvariantCodeMotion(), text)


def test_values_that_vary_stay() -> None:
    # b changes every trip, so a + b does too; a swap of a and b makes both vary.
    varying = _loop("""  s = f32[2,2] add(a, b)
  ROOT t = (s32[], f32[2,2], f32[2,2]) tuple(next, a, s)""")
    alternating = _loop("""  s = f32[2,2] add(a, b)
  ROOT t = (s32[], f32[2,2], f32[2,2]) tuple(next, b, a)""")
    assert not _hoist(varying)[0]
    assert not _hoist(alternating)[0]


def test_ops_not_worth_hoisting_alone_move_only_with_a_user() -> None:
    alone = _loop("""  r = f32[4] reshape(a)
  tr = f32[2,2] transpose(a), dimensions={1,0}
  two = f32[] constant(2)
  bc = f32[2,2] broadcast(two), dimensions={}
  u = f32[2,2] add(b, tr)
  v = f32[2,2] add(u, bc)
  ROOT t = (s32[], f32[2,2], f32[2,2]) tuple(next, a, v)""")
    assert not _hoist(alone)[0]
    with_user = alone.replace("u = f32[2,2] add(b, tr)", "u = f32[2,2] add(a, tr)").replace(
        "v = f32[2,2] add(u, bc)", "v = f32[2,2] add(b, u)")
    changed, out = _hoist(with_user)
    assert changed
    entry = out.split("ENTRY")[1]
    assert "transpose(" in entry and "add(" in entry


def test_side_effects_control_dependencies_and_single_trips_stay() -> None:
    effect = _loop("""  s = f32[2,2] add(a, a)
  c = f32[2,2] custom-call(s), custom_call_target="log", custom_call_has_side_effect=true
  ROOT t = (s32[], f32[2,2], f32[2,2]) tuple(next, a, c)""")
    changed, out = _hoist(effect)
    assert changed and "custom-call" not in out.split("ENTRY")[1]  # the sum moves, the custom call stays
    ordered = _loop("""  s = f32[2,2] add(a, b), control-predecessors={next}
  ROOT t = (s32[], f32[2,2], f32[2,2], f32[2,2]) tuple(next, a, b, s)""",
                    state="(s32[], f32[2,2], f32[2,2], f32[2,2])").replace(
        "tuple(zero, x, y)", "tuple(zero, x, y, y)")
    assert not _hoist(ordered)[0]
    once = HOIST_ONE.replace("n = s32[] constant(5)", "n = s32[] constant(1)")
    assert not _hoist(once)[0]


def test_a_body_without_a_tuple_root_and_a_disabled_loop_stay() -> None:
    disabled = HOIST_ONE.replace("while(init), condition=cond, body=body",
                                 'while(init), condition=cond, body=body, '
                                 'frontend_attributes={_xla_disable_loop_instr_hoisting="true"}')
    assert not _hoist(disabled)[0]
    text = """
HloModule m

body {
  p = f32[3] parameter(0)
  ROOT e = f32[3] exponential(p)
}

cond {
  p = f32[3] parameter(0)
  ROOT c = pred[] constant(false)
}

ENTRY main {
  x = f32[3] parameter(0)
  ROOT w = f32[3] while(x), condition=cond, body=body
}
"""
    assert not _hoist(text)[0]


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(while_loop_texts())
def test_random_loops_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(WhileLoopInvariantCodeMotion(), text)


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(while_loop_texts())
def test_the_cpu_pipeline_keeps_random_loops_values(text: str) -> None:
    assert_pass_preserves_values(cpu_hlo_pipeline(), text)
