"""LogisticExpander: the expansion XLA's ``LogisticExpander`` makes
(``xla/hlo/transforms/expanders/logistic_expander.cc``) and its values against
the interpreter's ``logistic``, which rounds once where the expansion rounds
at each of its four steps."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from tools.loop_fusion_compare import max_ulp_difference
from tools.random_hlo import hlo_modules, random_arguments
from xlapy.hlo import HloInstruction, parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.logistic_expander import LogisticExpander

# Measured on every f16 and bf16 value and 2^18 random f32 bit patterns: the
# rounding of negate, exponential, add and divide one after the other costs
# at most 2 ulps against the once-rounded logistic, wherever exp(-x) is
# finite in the type.
EXPANSION_ULPS = 2


def expand(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = LogisticExpander().run(module)
    verify(module)
    return changed, module.to_text()


def test_logistic_becomes_one_over_one_plus_exp_of_minus_x(tmp_path: Path) -> None:
    changed, out = expand("""HloModule m
ENTRY main {
  p = f32[3] parameter(0)
  ROOT l = f32[3] logistic(p)
}""")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[ONE:constant[.0-9]*]] = f32[] constant(1)
CHECK-DAG: %[[ONES:broadcast[.0-9]*]] = f32[3]{0} broadcast(%[[ONE]]), dimensions={}
CHECK-DAG: %[[NEG:negate[.0-9]*]] = f32[3]{0} negate(%p)
CHECK: %[[EXP:exponential[.0-9]*]] = f32[3]{0} exponential(%[[NEG]])
CHECK: %[[DEN:add[.0-9]*]] = f32[3]{0} add(%[[ONES]], %[[EXP]])
CHECK: ROOT %{{[a-z.0-9]+}} = f32[3]{0} divide(%[[ONES]], %[[DEN]])
CHECK-NOT: logistic
""", tmp_path)


def test_scalar_logistic_uses_the_constant_without_broadcast(tmp_path: Path) -> None:
    changed, out = expand("""HloModule m
ENTRY main {
  p = bf16[] parameter(0)
  l = bf16[] logistic(p)
  ROOT n = bf16[] negate(l)
}""")
    assert changed
    filecheck(out, """
CHECK: %[[ONE:constant[.0-9]*]] = bf16[] constant(1)
CHECK-NOT: broadcast
CHECK: %[[DEN:add[.0-9]*]] = bf16[] add(%[[ONE]], %{{exponential[.0-9]*}})
CHECK: %[[DIV:divide[.0-9]*]] = bf16[] divide(%[[ONE]], %[[DEN]])
CHECK: ROOT %n = bf16[] negate(%[[DIV]])
""", tmp_path)


def test_logistic_in_called_computation_is_expanded_and_fused_one_is_not() -> None:
    changed, out = expand("""HloModule m
fused {
  fp = f32[2] parameter(0)
  ROOT fl = f32[2] logistic(fp)
}
callee {
  cp = f32[2] parameter(0)
  ROOT cl = f32[2] logistic(cp)
}
ENTRY main {
  p = f32[2] parameter(0)
  c = f32[2] call(p), to_apply=callee
  ROOT f = f32[2] fusion(c), kind=kLoop, calls=fused
}""")
    assert changed
    assert out.count("logistic(") == 1 and "logistic(%fp)" in out


def test_logistic_with_control_dependency_stays() -> None:
    changed, out = expand("""HloModule m
ENTRY main {
  p = f32[2] parameter(0)
  n = f32[2] negate(p)
  ROOT l = f32[2] logistic(p), control-predecessors={n}
}""")
    assert not changed
    assert "logistic(%p)" in out and "exponential" not in out


def test_no_logistic_is_no_change() -> None:
    text = "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT e = f32[2] exponential(p)\n}"
    changed, out = expand(text)
    assert not changed and out == parse_module(text).to_text()


def _every_value(type_name: str) -> np.ndarray:
    if type_name == "f32":
        bits = np.random.default_rng(0).integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
        return bits.view(np.float32)
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16 if type_name == "f16" else ml_dtypes.bfloat16)


@pytest.mark.parametrize("type_name", ["f16", "bf16", "f32"])
def test_expansion_is_within_two_ulps_of_the_interpreter(type_name: str) -> None:
    values = _every_value(type_name)
    text = (f"HloModule m\nENTRY main {{\n  p = {type_name}[{values.size}] parameter(0)\n"
            f"  ROOT l = {type_name}[{values.size}] logistic(p)\n}}")
    expanded = parse_module(text)
    assert LogisticExpander().run(expanded)
    expected, got = evaluate(parse_module(text), values), evaluate(expanded, values)
    with np.errstate(all="ignore"):
        exp_is_finite = np.isfinite(np.exp(-values.astype(np.float64)).astype(values.dtype)) | np.isnan(values)
    assert max_ulp_difference(got[exp_is_finite], expected[exp_is_finite], type_name) <= EXPANSION_ULPS
    # Where exp(-x) overflows, 1 / (1 + inf) is 0; logistic(x) is that small too (below f16's 2^-16).
    assert np.all(got[~exp_is_finite] == 0)
    assert np.all(np.abs(expected[~exp_is_finite].astype(np.float64)) < 2.0 ** -16)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules(special_floats=True))
def test_random_programs_ending_in_logistic_keep_their_values(module) -> None:
    root = module.entry.root
    if not root.shape.is_array or root.shape.element_type not in ("f32", "bf16"):
        return
    logistic = module.entry.add_instruction(HloInstruction("logistic", "logistic", root.shape, [root]))
    module.entry.root = logistic
    verify(module)
    text = module.to_text()
    for seed in (0, 1):
        arguments = random_arguments(parse_module(text), seed, special_floats=True)
        expected = evaluate(parse_module(text), *arguments)
        expanded = parse_module(text)
        LogisticExpander().run(expanded)
        verify(expanded)
        assert "logistic(" not in expanded.to_text()
        # Below the smallest normal number the expansion may give 0 (exp(-x) overflowed).
        tiny = float(np.finfo(np.float32).tiny)
        assert_same(evaluate(expanded, *arguments), expected, ulps=EXPANSION_ULPS, atol=tiny, atol_below=tiny)
