"""CallInliner: calls replaced by their callees' instructions, as XLA's
``CallInliner`` (``xla/service/call_inliner.cc``; cases after its
``call_inliner_test.cc``), checked against XLA's behaviour and, for values,
against the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter import evaluate
from xlapy.transforms.call_inliner import CallInliner

DATA = Path(__file__).parent / "data"


def inlined(text: str, **options: object) -> tuple[bool, str]:
    module = parse_module(text)
    changed = CallInliner(**options).run(module)
    verify(module)
    return changed, module.to_text()


def test_nested_calls_are_inlined_callees_first_and_callees_removed() -> None:
    changed, text = inlined("""HloModule m
inner {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
outer {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c = f32[4] call(x), to_apply=inner
  ROOT s = f32[4] add(c, y)
}
ENTRY main {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  r = f32[4] call(p, q), to_apply=outer
  ROOT t = f32[4] call(r, p), to_apply=outer
}
""")
    assert changed
    # Copies keep their names, made unique in the module as XLA's name uniquer does.
    assert text == """HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

ENTRY %main (p: f32[4], q: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %n.2 = f32[4]{0} negate(%p)
  %q = f32[4]{0} parameter(1)
  %s.1 = f32[4]{0} add(%n.2, %q)
  %n.3 = f32[4]{0} negate(%s.1)
  ROOT %s.2 = f32[4]{0} add(%n.3, %p)
}

"""


def test_control_dependencies_inside_the_callee_are_carried_to_the_caller() -> None:
    changed, text = inlined("""HloModule m
inner {
  zero = f32[] constant(24)
  ROOT one = f32[] constant(42), control-predecessors={zero}
}
ENTRY outer {
  ROOT c = f32[] call(), to_apply=inner
}
""")
    assert changed
    # The callee's instructions still exist while the copies are named: ".1".
    assert "ROOT %one.1 = f32[] constant(42), control-predecessors={%zero.1}" in text
    assert "%zero.1 = f32[] constant(24)" in text and "call(" not in text


def test_control_edges_of_the_call_move_to_the_inlined_instructions(tmp_path: Path) -> None:
    changed, text = inlined("""HloModule m
callee {
  a = f32[] parameter(0)
  e = f32[] exponential(a)
  ROOT n = f32[] negate(e)
}
ENTRY main {
  p = f32[] parameter(0)
  before = f32[] sine(p)
  c = f32[] call(p), to_apply=callee, control-predecessors={before}
  after = f32[] cosine(p), control-predecessors={c}
  ROOT t = (f32[], f32[], f32[]) tuple(before, c, after)
}
""")
    assert changed
    filecheck(text, """
CHECK: ENTRY %main
CHECK-DAG: %before = f32[]{{.*}} sine(%p)
CHECK-DAG: %[[E:e.1]] = f32[]{{.*}} exponential(%p), control-predecessors={%before}
CHECK-DAG: %[[N:n.1]] = f32[]{{.*}} negate(%[[E]]), control-predecessors={%before}
CHECK-DAG: %after = f32[]{{.*}} cosine(%p), control-predecessors={%[[N]]}
CHECK: ROOT %t = {{.*}} tuple(%before, %[[N]], %after)
""", tmp_path)


def test_calls_within_while_bodies_and_conditions_are_inlined(tmp_path: Path) -> None:
    # One computation is both the body and the condition, as in XLA's test.
    changed, text = inlined("""HloModule m
just_false {
  ROOT f = pred[] constant(false)
}
call_false {
  param = pred[] parameter(0)
  ROOT c = pred[] call(), to_apply=just_false
}
ENTRY outer {
  init = pred[] constant(false)
  ROOT w = pred[] while(init), condition=call_false, body=call_false
}
""")
    assert changed
    filecheck(text, """
CHECK: %call_false (param: pred[]) -> pred[] {
CHECK-NEXT: %param = pred[] parameter(0)
CHECK-NEXT: ROOT %f{{.*}} = pred[] constant(false)
CHECK-NEXT: }
CHECK: ROOT %w = pred[] while(%init), condition=%call_false, body=%call_false
""", tmp_path)
    assert "just_false" not in text


def test_callee_with_a_dead_parameter_and_calls_made_dead_by_inlining() -> None:
    changed, text = inlined("""HloModule m
empty {
  A = s32[] parameter(0)
  ROOT z = s32[] constant(0)
}
empty2 {
  A = s32[] parameter(0)
  ROOT z = s32[] constant(0)
}
ENTRY entry {
  zero = s32[] constant(0)
  c0 = s32[] call(zero), to_apply=empty
  c1 = s32[] call(zero), to_apply=empty2
  ROOT c2 = s32[] call(c1), to_apply=empty
}
""")
    assert changed
    body = text.split("ENTRY")[1]
    assert "ROOT %z" in body and "constant(0)" in body and "call(" not in text and "empty" not in text


def test_callee_with_side_effects_is_inlined_and_kept() -> None:
    changed, text = inlined("""HloModule m
effect {
  v = f32[] constant(42)
  ROOT s = f32[] custom-call(v), custom_call_target="report", custom_call_has_side_effect=true
}
ENTRY outer {
  p = f32[] parameter(0)
  unused = f32[] call(), to_apply=effect
  ROOT r = f32[] negate(p)
}
""")
    assert changed
    assert 'custom-call(%v.1), custom_call_target="report", custom_call_has_side_effect=true' in text
    assert "call()" not in text and "%effect" not in text


def test_single_call_site_inlines_only_computations_called_once() -> None:
    changed, text = inlined("""HloModule inline_module
a {
  ROOT tuple = () tuple()
}
b {
  ROOT tuple.1 = () tuple()
}
ENTRY inline {
  a = () call(), to_apply=a
  b = () call(), to_apply=a
  c = () call(), to_apply=b
  ROOT tuple = ((), (), ()) tuple(a, b, c)
}
""", single_call_site=True)
    assert changed
    entry = text.split("ENTRY")[1]
    assert entry.count(" call(") == 2 and entry.count(" tuple(") == 2 and "to_apply=%b" not in text


def test_the_root_copy_takes_the_name_of_a_call_it_replaces() -> None:
    # With single_call_site, ``middle``'s call of ``leaf`` (called twice) stays;
    # inlining ``middle`` makes that call's copy stand for the call ``top``.
    changed, text = inlined("""HloModule m
leaf {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
middle {
  x = f32[] parameter(0)
  ROOT inner_call = f32[] call(x), to_apply=leaf
}
ENTRY main {
  p = f32[] parameter(0)
  top = f32[] call(p), to_apply=middle
  other = f32[] call(p), to_apply=leaf
  ROOT r = f32[] add(top, other)
}
""", single_call_site=True)
    assert changed
    assert "%top = f32[] call(%p), to_apply=%leaf" in text
    assert "%middle" not in text


def test_calls_the_frontend_marks_not_inlineable_or_with_backend_config_stay() -> None:
    text = """HloModule m
f {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ENTRY main {
  p = f32[] parameter(0)
  c1 = f32[] call(p), to_apply=f, frontend_attributes={inlineable="false"}
  c2 = f32[] call(c1), to_apply=f, backend_config="{\\"flag\\":true}"
  ROOT c3 = f32[] call(c2), to_apply=f, frontend_attributes={inlineable="true"}
}
"""
    changed, result = inlined(text)
    assert changed
    assert result.count("to_apply=%f") == 2
    assert "ROOT %n.1 = f32[] negate(%c2), frontend_attributes={inlineable=\"true\"}" in result


COMPOSITE = """HloModule m
my_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = f32[] call(p, q), to_apply=my_add, is_composite=true, \
frontend_attributes={composite.attributes={n = 1 : i32},composite.name="foo.bar",composite.version="1"}
}
"""


def test_composites_are_inlined_by_default_without_their_composite_attributes() -> None:
    changed, text = inlined(COMPOSITE)
    assert changed
    assert "ROOT %s.1 = f32[] add(%p, %q)\n" in text
    assert "composite" not in text


def test_composites_named_to_preserve_stay() -> None:
    changed, text = inlined(COMPOSITE, composites_to_preserve={"foo.bar"})
    assert not changed
    assert text == parse_module(COMPOSITE).to_text()


def test_sharding_of_the_call_moves_to_the_root_copy_without_one() -> None:
    changed, text = inlined("""HloModule m
f {
  a = f32[8] parameter(0)
  ROOT n = f32[8] negate(a)
}
ENTRY main {
  p = f32[8] parameter(0), sharding={replicated}
  ROOT c = f32[8] call(p), to_apply=f, sharding={devices=[2]0,1}
}
""")
    assert changed
    assert "ROOT %n.1 = f32[8]{0} negate(%p), sharding={devices=[2]0,1}" in text


def test_a_callee_still_used_elsewhere_keeps_its_own_fusion(tmp_path: Path) -> None:
    # ``body`` is inlined at the call but remains a while body: the inlined
    # fusion must own a copy of the fused computation.
    text = """HloModule m
fused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
body {
  b = f32[] parameter(0)
  ROOT f = f32[] fusion(b), kind=kLoop, calls=fused
}
cond {
  c = f32[] parameter(0)
  ROOT k = pred[] constant(false)
}
ENTRY main {
  p = f32[] parameter(0)
  w = f32[] while(p), condition=cond, body=body
  ROOT r = f32[] call(w), to_apply=body
}
"""
    module = parse_module(text)
    assert CallInliner().run(module)
    verify(module)
    fusions = [i for i in module.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2 and fusions[0].fused_computation is not fusions[1].fused_computation
    assert all(f.fused_computation.fusion_instruction is f for f in fusions)
    filecheck(module.to_text(), """
CHECK: ENTRY %main
CHECK: %w = f32[] while(%p), condition=%cond, body=%body
CHECK: ROOT %f.1 = f32[] fusion(%w), kind=kLoop, calls=%fused.clone
""", tmp_path)
    for x in (0.5, -2.0):
        np.testing.assert_array_equal(evaluate(module, np.float32(x)), evaluate(parse_module(text), np.float32(x)))


def test_calls_inside_async_computations_stay() -> None:
    text = """HloModule m
f {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
wrapped {
  w = f32[] parameter(0)
  ROOT c = f32[] call(w), to_apply=f
}
ENTRY main {
  p = f32[] parameter(0)
  start = ((f32[]), f32[], u32[]) async-start(p), calls=wrapped
  ROOT done = f32[] async-done(start), calls=wrapped
}
"""
    changed, result = inlined(text)
    assert not changed
    assert result == parse_module(text).to_text()


def test_a_module_without_calls_is_unchanged() -> None:
    text = """HloModule m
ENTRY main {
  p = f32[2] parameter(0)
  dead = f32[2] negate(p)
  ROOT e = f32[2] exponential(p)
}
"""
    changed, result = inlined(text)
    assert not changed and result == parse_module(text).to_text()


def test_nested_jit_calls_from_jax_are_all_inlined_with_the_same_values() -> None:
    """HLO that JAX lowers for nested ``jax.jit`` functions, a ``while_loop``
    whose body calls one, and ``jax.named_call`` (saved in ``data/``)."""
    text = (DATA / "nested_jit_calls.hlo").read_text()
    module = assert_pass_preserves_values(CallInliner(), text)
    assert not any(i.opcode == "call" for i in module.instructions)
    # The entry and the loop's body and condition are all that remain.
    assert sorted(c.name for c in module.computations) == ["main.7", "region_0.5", "region_1.6"]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_inlining_preserves_values_of_random_programs(text: str) -> None:
    module = assert_pass_preserves_values(CallInliner(), text)
    assert not any(i.opcode == "call" for i in module.instructions)


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_single_call_site_inlining_preserves_values_of_random_programs(text: str) -> None:
    assert_pass_preserves_values(CallInliner(single_call_site=True), text)


@pytest.mark.parametrize(("name", "text"), [c for c in verifying_corpus() if " call(" in c[1]], ids=lambda v: v)
def test_inlining_preserves_corpus_modules_with_calls(name: str, text: str) -> None:
    if interpreter_runs(parse_module(text)):
        module = assert_pass_preserves_values(CallInliner(), text, seeds=(0,))
    else:  # an op the interpreter lacks: the structure is still checked
        module = parse_module(text)
        CallInliner().run(module)
        verify(module)
    assert not any(i.opcode == "call" for i in module.instructions)
