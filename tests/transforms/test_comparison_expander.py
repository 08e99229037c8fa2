"""ComparisonExpander: the integer compares XLA's ``ComparisonExpander``
(``xla/hlo/transforms/expanders/comparison_expander.cc``) makes of float
TOTALORDER compares, bit-identical to the interpreter's total order."""

from __future__ import annotations

import itertools
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_modules
from xlapy.hlo import parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.comparison_expander import ComparisonExpander

DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def expand(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = ComparisonExpander().run(module)
    verify(module)
    return changed, module.to_text()


def compare_module(type_name: str, size: int, direction: str, order: str = "TOTALORDER") -> str:
    return (f"HloModule m\nENTRY main {{\n  p = {type_name}[{size}] parameter(0)\n"
            f"  q = {type_name}[{size}] parameter(1)\n"
            f"  ROOT c = pred[{size}] compare(p, q), direction={direction}, type={order}\n}}")


def test_total_order_compare_becomes_signed_compare_of_keys(tmp_path: Path) -> None:
    changed, out = expand(compare_module("f32", 4, "LT"))
    assert changed
    filecheck(out, """
CHECK-DAG: %[[ZERO:constant[.0-9]*]] = s32[] constant(0)
CHECK-DAG: %[[ZEROS:broadcast[.0-9]*]] = s32[4]{0} broadcast(%[[ZERO]]), dimensions={}
CHECK-DAG: %[[MAX:constant[.0-9]*]] = s32[] constant(2147483647)
CHECK-DAG: %[[MAXS:broadcast[.0-9]*]] = s32[4]{0} broadcast(%[[MAX]]), dimensions={}
CHECK-DAG: %[[PBITS:bitcast-convert[.0-9]*]] = s32[4]{0} bitcast-convert(%p)
CHECK-DAG: %[[PFLIP:xor[.0-9]*]] = s32[4]{0} xor(%[[MAXS]], %[[PBITS]])
CHECK-DAG: %[[PNEG:compare[.0-9]*]] = pred[4]{0} compare(%[[PBITS]], %[[ZEROS]]), direction=LT
CHECK-DAG: %[[PKEY:select[.0-9]*]] = s32[4]{0} select(%[[PNEG]], %[[PFLIP]], %[[PBITS]])
CHECK-DAG: %[[QBITS:bitcast-convert[.0-9]*]] = s32[4]{0} bitcast-convert(%q)
CHECK-DAG: %[[QKEY:select[.0-9]*]] = s32[4]{0} select(%{{compare[.0-9]*}}, %{{xor[.0-9]*}}, %[[QBITS]])
CHECK: ROOT %c = pred[4]{0} compare(%[[PKEY]], %[[QKEY]]), direction=LT, type=SIGNED
""", tmp_path)


def test_bf16_uses_16_bit_keys_and_fnuz_types_their_nan_case(tmp_path: Path) -> None:
    changed, out = expand(compare_module("bf16", 2, "GE"))
    assert changed and "s16[2]{0} bitcast-convert(%p)" in out and "constant(32767)" in out
    changed, out = expand(compare_module("f8e5m2fnuz", 2, "EQ"))
    assert changed
    filecheck(out, """
CHECK-DAG: %[[MIN:constant[.0-9]*]] = s8[] constant(-128)
CHECK-DAG: %[[MINS:broadcast[.0-9]*]] = s8[2]{0} broadcast(%[[MIN]]), dimensions={}
CHECK-DAG: %[[BITS:bitcast-convert[.0-9]*]] = s8[2]{0} bitcast-convert(%p)
CHECK-DAG: %[[SUB:subtract[.0-9]*]] = s8[2]{0} subtract(%[[MINS]], %[[BITS]])
CHECK-DAG: %[[NAN:compare[.0-9]*]] = pred[2]{0} compare(%[[BITS]], %[[MINS]]), direction=EQ
CHECK-DAG: %{{select[.0-9]*}} = s8[2]{0} select(%[[NAN]], %[[MINS]], %[[SUB]])
CHECK-NOT: xor
""", tmp_path)


@pytest.mark.parametrize("text", [
    compare_module("f32", 2, "LT", "FLOAT"),
    compare_module("s32", 2, "LT", "SIGNED"),
    compare_module("f8e8m0fnu", 2, "LT"),
])
def test_other_compares_stay(text: str) -> None:
    changed, out = expand(text)
    assert not changed and out == parse_module(text).to_text()


def test_upcast_converts_first() -> None:
    module = parse_module(compare_module("bf16", 2, "LT"))
    assert ComparisonExpander(upcasts={"bf16": "f32"}).run(module)
    verify(module)
    out = module.to_text()
    assert "f32[2]{0} convert(%p)" in out and "s32[2]{0} bitcast-convert" in out


def _special_values(dtype: np.dtype) -> np.ndarray:
    values = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 3.5, -2.0])
    return values.astype(dtype)


def _all_bit_patterns(dtype: np.dtype) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).view(dtype)


CASES = [("f32", _special_values(np.float32)), ("f64", _special_values(np.float64)),
         ("f16", _special_values(np.float16)), ("bf16", _special_values(ml_dtypes.bfloat16)),
         ("f8e4m3fn", _all_bit_patterns(ml_dtypes.float8_e4m3fn)),
         ("f8e5m2", _all_bit_patterns(ml_dtypes.float8_e5m2)),
         ("f8e4m3fnuz", _all_bit_patterns(ml_dtypes.float8_e4m3fnuz)),
         ("f8e5m2fnuz", _all_bit_patterns(ml_dtypes.float8_e5m2fnuz))]


@pytest.mark.parametrize("type_name, values", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_every_pair_compares_as_the_interpreter_does(type_name: str, values: np.ndarray, direction: str) -> None:
    pairs = np.array(list(itertools.product(range(values.size), repeat=2)))
    lhs, rhs = values[pairs[:, 0]], values[pairs[:, 1]]
    text = compare_module(type_name, lhs.size, direction)
    expanded = parse_module(text)
    assert ComparisonExpander().run(expanded)
    verify(expanded)
    expected, got = evaluate(parse_module(text), lhs, rhs), evaluate(expanded, lhs, rhs)
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules(special_floats=True))
def test_random_programs_with_total_order_compares_keep_their_values(module) -> None:
    for instruction in module.instructions:
        if instruction.opcode == "compare" and instruction.operands[0].shape.element_type in ("f32", "bf16"):
            instruction.attributes["type"] = "TOTALORDER"
    expanded = assert_pass_preserves_values(ComparisonExpander(), module.to_text(), special_floats=True)
    assert "TOTALORDER" not in expanded.to_text()


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name: str, text: str) -> None:
    if interpreter_runs(parse_module(text)):
        assert_pass_preserves_values(ComparisonExpander(), text, seeds=(0,), special_floats=True)
