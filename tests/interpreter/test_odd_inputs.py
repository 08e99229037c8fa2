"""Small random modules on odd-but-valid inputs (rank 0, dimensions of size 0 or 1,
s4/u4/f8/bf16/pred elements): the interpreter gives XLA:CPU's result, and
never a Python exception other than ``XlapyError``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlapy
from tools.oracles import require_jax
from xlapy.interpreter import Evaluator

require_jax()

from tools.xla_cpu import run_on_xla_cpu  # noqa: E402

_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
           "s32": np.int32, "u8": np.uint8, "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "pred": np.bool_}
_INTEGERS = {"s32", "u8", "s4", "u4"}
_FLOATS = {"f32", "f16", "bf16", "f8e4m3fn"}


def _shape(element_type: str, dims: list[int]) -> str:
    return f"{element_type}[{','.join(map(str, dims))}]"


def _values(draw, element_type: str, dims: list[int]) -> np.ndarray:
    count = int(np.prod(dims, dtype=np.int64))
    if element_type == "pred":
        raw = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    elif element_type in _INTEGERS:
        info = ml_dtypes.iinfo(_DTYPES[element_type])
        raw = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=count, max_size=count))
    else:
        raw = draw(st.lists(st.sampled_from([0.0, -0.0, 1.0, -2.5, 0.375, 3.0, float("inf"), float("nan")]),
                            min_size=count, max_size=count))
    return np.array(raw, dtype=np.float64 if element_type in _FLOATS else None).astype(
        _DTYPES[element_type]).reshape(dims)


@st.composite
def _programs(draw):
    element_type = draw(st.sampled_from(sorted(_DTYPES)))
    dims = draw(st.lists(st.integers(0, 3), max_size=3))
    rank = len(dims)
    kinds = ["unary", "binary", "slice", "reverse", "reduce", "broadcast", "concatenate"]
    kind = draw(st.sampled_from(kinds))
    t = _shape(element_type, dims)
    lines = [f"  p = {t} parameter(0)", f"  q = {t} parameter(1)"]
    computations = ""
    if kind == "unary":
        opcodes = ["negate", "abs"] if element_type in _FLOATS | {"s32", "s4"} else ["not"]
        op = draw(st.sampled_from(opcodes))
        lines.append(f"  ROOT r = {t} {op}(p)")
    elif kind == "binary":
        opcodes = ["maximum", "minimum"] + (["and", "or", "xor"] if element_type not in _FLOATS else []) + (
            ["add", "subtract", "multiply"] if element_type != "pred" else [])
        op = draw(st.sampled_from(opcodes))
        lines.append(f"  ROOT r = {t} {op}(p, q)")
    elif kind == "slice":
        starts, limits, strides, out = [], [], [], []
        for d in dims:
            start = draw(st.integers(0, d))
            limit = draw(st.integers(start, d))
            stride = draw(st.integers(1, 3))
            starts.append(start), limits.append(limit), strides.append(stride)
            out.append(-(-(limit - start) // stride))
        spec = ", ".join(f"[{a}:{b}:{c}]" for a, b, c in zip(starts, limits, strides))
        lines.append(f"  ROOT r = {_shape(element_type, out)} slice(p), slice={{{spec}}}")
    elif kind == "reverse":
        axes = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank)) if rank else []
        lines.append(f"  ROOT r = {t} reverse(p), dimensions={{{','.join(map(str, sorted(axes)))}}}")
    elif kind == "reduce":
        axes = sorted(draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank))) if rank else []
        op = "add" if element_type in _INTEGERS else "maximum"
        inits = {"pred": "false", "s32": "0", "u8": "0", "s4": "0", "u4": "0", "f8e4m3fn": "-448"}
        init = inits.get(element_type, "-inf")
        out = [d for i, d in enumerate(dims) if i not in axes]
        computations = (f"combine {{\n  a = {element_type}[] parameter(0)\n  b = {element_type}[] parameter(1)\n"
                        f"  ROOT c = {element_type}[] {op}(a, b)\n}}\n\n")
        lines += [f"  i = {element_type}[] constant({init})",
                  f"  ROOT r = {_shape(element_type, out)} reduce(p, i), dimensions={{{','.join(map(str, axes))}}}, "
                  "to_apply=combine"]
    elif kind == "broadcast":
        extra = draw(st.integers(0, 2))
        out = [extra, *dims]
        lines.append(f"  ROOT r = {_shape(element_type, out)} broadcast(p), "
                     f"dimensions={{{','.join(str(i + 1) for i in range(rank))}}}")
    else:
        if not rank:
            dims, rank = [1], 1
            t = _shape(element_type, dims)
            lines = [f"  p = {t} parameter(0)", f"  q = {t} parameter(1)"]
        axis = draw(st.integers(0, rank - 1))
        out = [d * 2 if i == axis else d for i, d in enumerate(dims)]
        lines.append(f"  ROOT r = {_shape(element_type, out)} concatenate(p, q), dimensions={{{axis}}}")
    text = f"HloModule m\n\n{computations}ENTRY e {{\n" + "\n".join(lines) + "\n}\n"
    args = (_values(draw, element_type, dims), _values(draw, element_type, dims))
    return text, args


def _same(got, expected) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if got.dtype.kind == "f" or got.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn):
        a, b = got.astype(np.float64), expected.astype(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_array_equal(np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b))
    else:
        np.testing.assert_array_equal(got, expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_programs())
def test_small_modules_on_odd_inputs_match_xla(program) -> None:
    text, args = program
    module = xlapy.parse_hlo(text)
    xlapy.verify(module)
    try:
        got = Evaluator(module).call(module.entry, *args)
    except xlapy.XlapyError:
        return  # a clear refusal is allowed; any other exception fails the test
    _same(got, run_on_xla_cpu(text, *args))


@pytest.mark.parametrize("dims, axes, out, expected", [
    ([0, 3], "0", [3], [-np.inf] * 3),  # nothing to reduce: the init
    ([3, 0], "1", [3], [-np.inf] * 3),
    ([0, 3], "1", [0], []),
])
def test_reduce_of_empty_arrays_gives_the_init(dims, axes, out, expected) -> None:
    text = f"""HloModule m
combine {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}}
ENTRY e {{
  p = f32[{','.join(map(str, dims))}] parameter(0)
  i = f32[] constant(-inf)
  ROOT r = f32[{','.join(map(str, out))}] reduce(p, i), dimensions={{{axes}}}, to_apply=combine
}}
"""
    got = xlapy.evaluate(xlapy.parse_hlo(text), np.zeros(dims, np.float32))
    np.testing.assert_array_equal(got, np.array(expected, np.float32))
