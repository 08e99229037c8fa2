"""Constants sunk into while loops (XLA's ``WhileLoopConstantSinking``,
``xla/service/while_loop_constant_sinking.cc``): cases after XLA's
``while_loop_constant_sinking_test.cc``, and values kept against the
interpreter on random loops."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_control_flow import while_loop_texts
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module, verify
from xlapy.transforms.while_loop_constant_sinking import WhileLoopConstantSinking

SINK = """
HloModule m

body {
  p = (f32[2], f32[2], s32[]) parameter(0)
  x = f32[2] get-tuple-element(p), index=0
  k = f32[2] get-tuple-element(p), index=1
  i = s32[] get-tuple-element(p), index=2
  s = f32[2] add(x, k)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (f32[2], f32[2], s32[]) tuple(s, k, next)
}

cond {
  p = (f32[2], f32[2], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=2
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[2] parameter(0)
  k = f32[2] constant({1, 2})
  zero = s32[] constant(0)
  init = (f32[2], f32[2], s32[]) tuple(x, k, zero)
  ROOT w = (f32[2], f32[2], s32[]) while(init), condition=cond, body=body
}
"""


def _sink(text: str, **options: bool) -> tuple[bool, str]:
    module = parse_module(text)
    changed = WhileLoopConstantSinking(**options).run(module)
    verify(module)
    return changed, module.to_text()


def test_a_constant_element_is_read_from_a_copy_and_still_returned(tmp_path: Path) -> None:
    changed, out = _sink(SINK)
    assert changed
    filecheck(out, """
CHECK: %body.sunk
CHECK-DAG: %[[K:k.*]] = f32[2]{0} constant({1, 2})
CHECK-DAG: %[[READ:k.*]] = f32[2]{0} get-tuple-element(%p{{.*}}), index=1
CHECK-DAG: %s{{.*}} = f32[2]{0} add(%x{{.*}}, %[[K]])
CHECK: ROOT %t{{.*}} tuple(%s{{.*}}, %[[READ]], %next{{.*}})
CHECK: ENTRY
CHECK: while(%init), condition=%cond, body=%body.sunk
""", tmp_path)
    assert "%body {" not in out  # the old body, called no more, is gone
    assert_pass_preserves_values(WhileLoopConstantSinking(), SINK)


def test_an_element_only_returned_is_left_alone() -> None:
    assert not _sink(SINK.replace("s = f32[2] add(x, k)", "s = f32[2] add(x, x)"))[0]


def test_a_constant_the_condition_reads_is_sunk_there(tmp_path: Path) -> None:
    text = SINK.replace("n = s32[] constant(3)", "n = f32[2] get-tuple-element(p), index=1\n"
                        "  first = f32[1] slice(n), slice={[0:1]}\n  r = f32[] reshape(first)\n"
                        "  ri = s32[] convert(r)\n  three = s32[] constant(2)\n  bound = s32[] add(ri, three)").replace(
        "ROOT c = pred[] compare(i, n), direction=LT", "ROOT c = pred[] compare(i, bound), direction=LT")
    changed, out = _sink(text)
    assert changed
    filecheck(out, """
CHECK: %cond.sunk
CHECK-NOT: index=1
CHECK: %[[K:k.*]] = f32[2]{0} constant({1, 2})
CHECK: slice(%[[K]])
CHECK: ENTRY
CHECK: condition=%cond.sunk, body=%body.sunk
""", tmp_path)
    assert_pass_preserves_values(WhileLoopConstantSinking(), text)


def test_a_body_shared_by_two_loops_is_copied_for_the_one_with_a_constant() -> None:
    text = SINK.replace("ROOT w = (f32[2], f32[2], s32[]) while(init), condition=cond, body=body",
                        "w = (f32[2], f32[2], s32[]) while(init), condition=cond, body=body\n"
                        "  other = (f32[2], f32[2], s32[]) tuple(x, x, zero)\n"
                        "  w2 = (f32[2], f32[2], s32[]) while(other), condition=cond, body=body\n"
                        "  ROOT both = ((f32[2], f32[2], s32[]), (f32[2], f32[2], s32[])) tuple(w, w2)")
    changed, out = _sink(text)
    assert changed
    module = parse_module(out)
    bodies = sorted(str(i.attr("body")) for i in module.entry.instructions if i.opcode == "while")
    assert bodies == ["body", "body.sunk"]
    assert_pass_preserves_values(WhileLoopConstantSinking(), text)


def test_broadcasts_of_constants_and_scalars_only_with_the_options() -> None:
    broadcast = SINK.replace("k = f32[2] constant({1, 2})", "c = f32[] constant(3)\n  k = f32[2] broadcast(c), "
                             "dimensions={}")
    assert not _sink(broadcast)[0]
    changed, out = _sink(broadcast, sink_broadcast_of_constants=True)
    assert changed and "broadcast(%c" in out.split("ENTRY")[0]
    assert not _sink(SINK, sink_only_scalar_constants=True)[0]


def test_a_loop_whose_initial_value_is_not_a_tuple_is_left_alone() -> None:
    text = SINK.replace("ROOT w = (f32[2], f32[2], s32[]) while(init)",
                        "init2 = (f32[2], f32[2], s32[]) copy(init)\n"
                        "  ROOT w = (f32[2], f32[2], s32[]) while(init2)")
    assert not _sink(text)[0]


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(while_loop_texts())
def test_random_loops_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(WhileLoopConstantSinking(), text)
