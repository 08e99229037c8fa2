"""StochasticConvertDecomposer: the expansion XLA's ``StochasticConvertDecomposer``
makes (``xla/hlo/transforms/expanders/stochastic_convert_decomposer.cc``) and
its values against the interpreter's ``stochastic-convert``: every step of the
expansion is exact, so the results are bit-identical."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.codegen.filecheck import filecheck
from xlapy.errors import UnimplementedError
from xlapy.hlo import parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.stochastic_convert_decomposer import StochasticConvertDecomposer

_RANDOM_TYPES = {"f16": "u16", "bf16": "u16", "f32": "u32", "f64": "u64"}
_DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


def _module(source: str, target: str, n: int) -> str:
    return (f"HloModule m\nENTRY main {{\n  p = {source}[{n}] parameter(0)\n"
            f"  r = {_RANDOM_TYPES[source]}[{n}] parameter(1)\n"
            f"  ROOT s = {target}[{n}] stochastic-convert(p, r)\n}}")


def expand(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = StochasticConvertDecomposer().run(module)
    verify(module)
    return changed, module.to_text()


def test_f32_to_s32_expansion(tmp_path: Path) -> None:
    changed, out = expand(_module("f32", "s32", 4))
    assert changed
    filecheck(out, """
CHECK-DAG: %[[HIGH:constant[.0-9]*]] = f32[] constant(2.14748365e+09)
CHECK-DAG: %[[HIGH_INT:constant[.0-9]*]] = s32[] constant(2147483647)
CHECK-DAG: %[[LOW:constant[.0-9]*]] = f32[] constant(-2.14748365e+09)
CHECK-DAG: %[[LOW_INT:constant[.0-9]*]] = s32[] constant(-2147483648)
CHECK-DAG: %[[SIGN:sign[.0-9]*]] = f32[4]{0} sign(%p)
CHECK-DAG: %[[NEG:compare[.0-9]*]] = pred[4]{0} compare(%[[SIGN]], %{{broadcast[.0-9]*}}), direction=LT
CHECK-DAG: %[[ABS:abs[.0-9]*]] = f32[4]{0} abs(%p)
CHECK-DAG: %[[FLOOR:floor[.0-9]*]] = f32[4]{0} floor(%[[ABS]])
CHECK-DAG: %[[FRAC:subtract[.0-9]*]] = f32[4]{0} subtract(%[[ABS]], %[[FLOOR]])
CHECK-DAG: %[[SCALE:constant[.0-9]*]] = f32[] constant(4.2949673e+09)
CHECK-DAG: %[[SCALES:broadcast[.0-9]*]] = f32[4]{0} broadcast(%[[SCALE]]), dimensions={}
CHECK-DAG: %[[FIXED:multiply[.0-9]*]] = f32[4]{0} multiply(%[[FRAC]], %[[SCALES]])
CHECK-DAG: %[[THRESHOLD:convert[.0-9]*]] = u32[4]{0} convert(%[[FIXED]])
CHECK-DAG: %[[UP:compare[.0-9]*]] = pred[4]{0} compare(%r, %[[THRESHOLD]]), direction=LT
CHECK-DAG: %[[WHOLE:convert[.0-9]*]] = s32[4]{0} convert(%[[FLOOR]])
CHECK-DAG: %[[PLUS1:add[.0-9]*]] = s32[4]{0} add(%[[WHOLE]], %{{broadcast[.0-9]*}})
CHECK-DAG: %[[ROUNDED:select[.0-9]*]] = s32[4]{0} select(%[[UP]], %[[PLUS1]], %[[WHOLE]])
CHECK-DAG: %[[NEGATED:negate[.0-9]*]] = s32[4]{0} negate(%[[ROUNDED]])
CHECK-DAG: %[[SIGNED:select[.0-9]*]] = s32[4]{0} select(%[[NEG]], %[[NEGATED]], %[[ROUNDED]])
CHECK-DAG: %[[AT_LOW:compare[.0-9]*]] = pred[4]{0} compare(%p, %{{broadcast[.0-9]*}}), direction=LE
CHECK-DAG: %[[CLAMPED:select[.0-9]*]] = s32[4]{0} select(%[[AT_LOW]], %{{broadcast[.0-9]*}}, %[[SIGNED]])
CHECK-DAG: %[[AT_HIGH:compare[.0-9]*]] = pred[4]{0} compare(%p, %{{broadcast[.0-9]*}}), direction=GE
CHECK: ROOT %{{select[.0-9]*}} = s32[4]{0} select(%[[AT_HIGH]], %{{broadcast[.0-9]*}}, %[[CLAMPED]])
CHECK-NOT: stochastic-convert
""", tmp_path)


def test_f16_fraction_is_scaled_in_f32(tmp_path: Path) -> None:
    changed, out = expand(_module("f16", "s8", 2))
    assert changed
    filecheck(out, """
CHECK-DAG: %[[FRAC:subtract[.0-9]*]] = f16[2]{0} subtract(
CHECK-DAG: %[[WIDE:convert[.0-9]*]] = f32[2]{0} convert(%[[FRAC]])
CHECK-DAG: %[[SCALE:constant[.0-9]*]] = f32[] constant(65536)
CHECK-DAG: %[[FIXED:multiply[.0-9]*]] = f32[2]{0} multiply(%[[WIDE]], %{{broadcast[.0-9]*}})
CHECK-DAG: %{{convert[.0-9]*}} = u16[2]{0} convert(%[[FIXED]])
CHECK-DAG: %{{constant[.0-9]*}} = f16[] constant(127)
CHECK-DAG: %{{constant[.0-9]*}} = f16[] constant(-128)
""", tmp_path)


def test_scalar_uses_constants_without_broadcast(tmp_path: Path) -> None:
    changed, out = expand("""HloModule m
ENTRY main {
  p = bf16[] parameter(0)
  r = u16[] parameter(1)
  ROOT s = s16[] stochastic-convert(p, r)
}""")
    assert changed
    filecheck(out, """
CHECK-NOT: broadcast
CHECK: ROOT %{{select[.0-9]*}} = s16[] select(
""", tmp_path)


def test_fused_stochastic_convert_is_left_and_called_one_expanded() -> None:
    changed, out = expand("""HloModule m
fused {
  fp = f32[2] parameter(0)
  fr = u32[2] parameter(1)
  ROOT fs = s32[2] stochastic-convert(fp, fr)
}
callee {
  cp = f32[2] parameter(0)
  cr = u32[2] parameter(1)
  ROOT cs = s32[2] stochastic-convert(cp, cr)
}
ENTRY main {
  p = f32[2] parameter(0)
  r = u32[2] parameter(1)
  c = s32[2] call(p, r), to_apply=callee
  f = s32[2] fusion(p, r), kind=kLoop, calls=fused
  ROOT a = s32[2] add(c, f)
}""")
    assert changed
    assert out.count("stochastic-convert(") == 1 and "stochastic-convert(%fp, %fr)" in out


def test_no_stochastic_convert_is_no_change() -> None:
    text = "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT c = s32[2] convert(p)\n}"
    changed, out = expand(text)
    assert not changed and out == parse_module(text).to_text()


def test_unsigned_result_is_unimplemented_and_module_untouched() -> None:
    text = _module("f32", "u32", 2)
    module = parse_module(text)
    with pytest.raises(UnimplementedError, match="only signed integer results"):
        StochasticConvertDecomposer().run(module)
    assert module.to_text() == parse_module(text).to_text()


def _values_and_bits(source: str) -> tuple[np.ndarray, np.ndarray]:
    """Every value of a 16-bit type (or random bit patterns and values with
    fractions for the wider ones), each paired with several random bit
    patterns including the extremes."""
    rng = np.random.default_rng(7)
    width = np.dtype(_DTYPES[source]).itemsize * 8
    unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    if width == 16:
        values = np.arange(1 << 16, dtype=np.uint16).view(_DTYPES[source])
    else:
        patterns = rng.integers(0, np.iinfo(unsigned).max, 1 << 14, dtype=unsigned, endpoint=True)
        fractional = rng.uniform(-300.0, 300.0, 1 << 14)
        specials = np.array([0.0, -0.0, 0.5, -0.5, 127.5, -128.5, 2.0 ** 31, -2.0 ** 31, 2.0 ** 63, -2.0 ** 63,
                             np.inf, -np.inf, np.nan, 1e30, -1e30])
        values = np.concatenate([patterns.view(_DTYPES[source]), fractional.astype(_DTYPES[source]),
                                 specials.astype(_DTYPES[source])])
    values = np.tile(values, 4)
    bits = rng.integers(0, np.iinfo(unsigned).max, values.size, dtype=unsigned, endpoint=True)
    bits[: values.size // 4] = 0
    bits[values.size // 4: values.size // 2] = np.iinfo(unsigned).max
    return values, bits


@pytest.mark.parametrize("source", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("target", ["s8", "s16", "s32", "s64"])
def test_expansion_is_bit_identical_to_the_interpreter(source: str, target: str) -> None:
    values, bits = _values_and_bits(source)
    text = _module(source, target, values.size)
    expanded = parse_module(text)
    assert StochasticConvertDecomposer().run(expanded)
    expected, got = evaluate(parse_module(text), values, bits), evaluate(expanded, values, bits)
    assert got.dtype == expected.dtype
    mismatched = np.flatnonzero(got != expected)
    assert mismatched.size == 0, (values[mismatched[:5]], bits[mismatched[:5]], got[mismatched[:5]],
                                  expected[mismatched[:5]])


def test_u64_bits_just_below_the_threshold_round_up_as_on_xla_cpu() -> None:
    """0.75 scaled by 2^64 is 3 * 2^62: bits one below it round up, which a
    comparison in float64 (rounding the bits) would miss."""
    from tools.xla_cpu import run_on_xla_cpu

    values = np.array([0.75, 0.75, 0.75, -0.75, 2.5])
    bits = np.array([3 * 2 ** 62 - 1, 3 * 2 ** 62, 3 * 2 ** 62 - 4096, 3 * 2 ** 62 - 1, 2 ** 63 - 1], dtype=np.uint64)
    text = _module("f64", "s32", values.size)
    expanded = parse_module(text)
    assert StochasticConvertDecomposer().run(expanded)
    expected = np.array([1, 0, 1, -1, 3], dtype=np.int32)
    np.testing.assert_array_equal(run_on_xla_cpu(text, values, bits), expected)
    np.testing.assert_array_equal(evaluate(parse_module(text), values, bits), expected)
    np.testing.assert_array_equal(evaluate(expanded, values, bits), expected)
