"""HloDCE: what XLA's dead code elimination removes and keeps (cases after
``xla/hlo/transforms/simplifiers/hlo_dce_test.cc``), values kept on random
programs and on the repository's HLO files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.errors import UnimplementedError
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.transforms.dce import HloDCE


def run_dce(text: str, **options: bool) -> tuple[bool, HloModule]:
    module = parse_module(text)
    changed = HloDCE(**options).run(module)
    verify(module)
    return changed, module


def test_nothing_dead_is_no_change() -> None:
    text = """HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  ROOT a = f32[4] add(p, c)
}
"""
    changed, module = run_dce(text)
    assert not changed
    assert module.to_text() == parse_module(text).to_text()


def test_dead_chain_is_removed_but_parameters_stay(tmp_path: Path) -> None:
    changed, module = run_dce("""HloModule m

ENTRY main {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  n = f32[4] negate(p1)
  e = f32[4] exponential(n)
  dead_tuple = (f32[4], f32[4]) tuple(e, n)
  ROOT r = f32[4] abs(p0)
}
""")
    assert changed
    filecheck(module.to_text(), """
CHECK: ENTRY %main (p0: f32[4], p1: f32[4]) -> f32[4] {
CHECK-DAG: %p0 = f32[4]{0} parameter(0)
CHECK-DAG: %p1 = f32[4]{0} parameter(1)
CHECK-NOT: negate
CHECK-NOT: exponential
CHECK-NOT: tuple
CHECK: ROOT %r = f32[4]{0} abs(%p0)
CHECK-NEXT: }
""", tmp_path)


def test_side_effects_are_kept() -> None:
    _, module = run_dce("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  random = f32[4] rng(zero, one), distribution=rng_uniform
  effect = f32[4] custom-call(p), custom_call_target="log", custom_call_has_side_effect=true
  pure = f32[4] custom-call(p), custom_call_target="log"
  token = token[] after-all()
  sent = token[] outfeed(p, token), outfeed_shape=f32[4]{0}
  layout = f32[4] all-reduce(p), replica_groups={}, constrain_layout=true, to_apply=add
  plain = f32[4] all-reduce(p), replica_groups={}, to_apply=add
  ROOT r = f32[4] negate(p)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
""")
    names = {i.name for i in module.entry.instructions}
    # zero/one stay as operands of the kept rng, the token for the outfeed.
    assert names == {"p", "zero", "one", "random", "effect", "token", "sent", "layout", "r"}


def test_control_dependencies_keep_instructions() -> None:
    _, module = run_dce("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  ordered = f32[4] negate(p)
  free = f32[4] exponential(p)
  ROOT r = f32[4] abs(p), control-predecessors={ordered}
}
""")
    assert {i.name for i in module.entry.instructions} == {"p", "ordered", "r"}


def test_dead_call_and_its_computations_go(tmp_path: Path) -> None:
    changed, module = run_dce("""HloModule m

inner {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}

outer {
  x = f32[4] parameter(0)
  ROOT y = f32[4] call(x), to_apply=inner
}

unreachable {
  ROOT c = f32[] constant(1)
}

ENTRY main {
  p = f32[4] parameter(0)
  dead = f32[4] call(p), to_apply=outer
  ROOT r = f32[4] abs(p)
}
""")
    assert changed
    assert [c.name for c in module.computations] == ["main"]
    filecheck(module.to_text(), """
CHECK-NOT: call
CHECK: ROOT %r = f32[4]{0} abs(%p)
""", tmp_path)


def test_call_of_a_computation_with_side_effects_is_kept() -> None:
    _, module = run_dce("""HloModule m

effectful {
  x = f32[4] parameter(0)
  ROOT y = f32[4] custom-call(x), custom_call_target="log", custom_call_has_side_effect=true
}

ENTRY main {
  p = f32[4] parameter(0)
  kept = f32[4] call(p), to_apply=effectful
  ROOT r = f32[4] abs(p)
}
""")
    assert "kept" in {i.name for i in module.entry.instructions}
    assert [c.name for c in module.computations] == ["effectful", "main"]


def test_dead_computations_kept_when_asked() -> None:
    text = """HloModule m

unreachable {
  ROOT c = f32[] constant(1)
}

ENTRY main {
  p = f32[4] parameter(0)
  ROOT r = f32[4] abs(p)
}
"""
    changed, module = run_dce(text, remove_dead_computations=False)
    assert not changed and [c.name for c in module.computations] == ["unreachable", "main"]
    changed, module = run_dce(text)
    assert changed and [c.name for c in module.computations] == ["main"]


def test_callees_are_cleaned_too() -> None:
    _, module = run_dce("""HloModule m

callee {
  x = f32[4] parameter(0)
  unused = f32[4] exponential(x)
  ROOT y = f32[4] negate(x)
}

ENTRY main {
  p = f32[4] parameter(0)
  ROOT r = f32[4] call(p), to_apply=callee
}
""")
    assert {i.name for i in module.computation("callee").instructions} == {"x", "y"}


def test_multi_output_fusion_drops_unread_outputs(tmp_path: Path) -> None:
    text = """HloModule m

fused {
  x = f32[4] parameter(0)
  a = f32[4] negate(x)
  b = f32[4] exponential(x)
  c = f32[4] abs(x)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(a, b, c)
}

ENTRY main {
  p = f32[4] parameter(0)
  f = (f32[4], f32[4], f32[4]) fusion(p), kind=kLoop, calls=fused
  g0 = f32[4] get-tuple-element(f), index=0
  g2 = f32[4] get-tuple-element(f), index=2
  ROOT r = f32[4] add(g0, g2)
}
"""
    changed, module = run_dce(text)
    assert changed
    filecheck(module.to_text(), """
CHECK: %fused
CHECK-NOT: exponential
CHECK: ROOT {{.*}} = (f32[4]{0}, f32[4]{0}) tuple(%a, %c)
CHECK: ENTRY %main
CHECK: %f = (f32[4]{0}, f32[4]{0}) fusion(%p), kind=kLoop, calls=%fused
CHECK-DAG: %g0 = f32[4]{0} get-tuple-element(%f), index=0
CHECK-DAG: %g2 = f32[4]{0} get-tuple-element(%f), index=1
""", tmp_path)
    assert_pass_preserves_values(HloDCE(), text)


def test_multi_output_fusion_with_one_read_output_returns_it(tmp_path: Path) -> None:
    text = """HloModule m

fused {
  x = f32[4] parameter(0)
  a = f32[4] negate(x)
  b = f32[4] exponential(x)
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}

ENTRY main {
  p = f32[4] parameter(0)
  f = (f32[4], f32[4]) fusion(p), kind=kLoop, calls=fused
  g1 = f32[4] get-tuple-element(f), index=1
  ROOT r = f32[4] abs(g1)
}
"""
    _, module = run_dce(text)
    filecheck(module.to_text(), """
CHECK: %fused
CHECK-NOT: negate
CHECK: ROOT %b = f32[4]{0} exponential(%x)
CHECK: ENTRY %main
CHECK: %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused
CHECK-NEXT: ROOT %r = f32[4]{0} abs(%f)
""", tmp_path)
    assert_pass_preserves_values(HloDCE(), text)


def test_sharding_custom_call_kept_while_it_names_a_value_in_use() -> None:
    _, module = run_dce("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  on_parameter = f32[4] custom-call(p), custom_call_target="Sharding", sharding={replicated}
  on_shared = f32[4] custom-call(n), custom_call_target="Sharding", sharding={replicated}
  e = f32[4] exponential(p)
  on_sole_use = f32[4] custom-call(e), custom_call_target="Sharding", sharding={replicated}
  ROOT r = f32[4] abs(n)
}
""")
    assert {i.name for i in module.entry.instructions} == {"p", "n", "on_parameter", "on_shared", "r"}


def test_running_twice_changes_nothing_more() -> None:
    _, module = run_dce("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  d = f32[4] negate(p)
  ROOT r = f32[4] abs(p)
}
""")
    assert not HloDCE().run(module)


def _live(module: HloModule) -> int:
    """Instructions a root needs (through operands and called computations),
    and every parameter: what XLA's DCE keeps of a program without side
    effects or control dependencies."""
    needed: set[int] = set()
    pending = [module.entry.root]
    seen_computations = {id(module.entry)}
    while pending:
        instruction = pending.pop()
        if id(instruction) in needed:
            continue
        needed.add(id(instruction))
        pending.extend(instruction.operands)
        for callee in instruction.called_computations:
            if id(callee) not in seen_computations:
                seen_computations.add(id(callee))
                pending.append(callee.root)
                pending.extend(callee.parameters)
    needed.update(id(p) for p in module.entry.parameters)
    return len(needed)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_random_programs_keep_their_values_and_lose_exactly_the_dead_code(text: str) -> None:
    rewritten = assert_pass_preserves_values(HloDCE(), text)
    assert sum(1 for _ in rewritten.instructions) == _live(parse_module(text))
    assert not HloDCE().run(rewritten)


@pytest.mark.parametrize(("name", "text"), corpus_params(verifying_corpus()))
def test_corpus_keeps_its_values(name: str, text: str) -> None:
    module = parse_module(text)
    try:
        assert_pass_preserves_values(HloDCE(), module, seeds=(0,))
    except UnimplementedError:
        # The interpreter lacks an op of this module; the rewrite must still verify.
        HloDCE().run(module)
        verify(module)
