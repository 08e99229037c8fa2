"""XLA:CPU's TopK custom call: XLA's results on awkward values, and a clean error
(not a Python exception) on a module that the interpreter cannot run."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.interpreter import Evaluator

jax = pytest.importorskip("jax")


@pytest.mark.parametrize("k", [1, 4, 7])
def test_top_k_custom_call_as_xla_cpu_compiles_it(k: int) -> None:
    x = np.array([[1, np.nan, 3, 3, -0.0, 0.0, -np.inf, 2],
                  [np.inf, -1, -1, 5, 5, 5, np.nan, -np.nan]], np.float32)
    fn = jax.jit(lambda v: jax.lax.top_k(v, k))
    text = fn.lower(x).compile().as_text()
    assert 'custom_call_target="TopK"' in text
    got = xlapy.evaluate(xlapy.parse_hlo(text), x)
    expected = fn(x)
    np.testing.assert_array_equal(got[1], np.asarray(expected[1]))
    np.testing.assert_array_equal(got[0].view(np.uint32), np.asarray(expected[0]).view(np.uint32))


_TOPK = """HloModule m
greater {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[2,6] parameter(0)
  ROOT t = RESULT custom-call(x), custom_call_target="TopK"CALLED
}
"""


@pytest.mark.parametrize("result, called", [
    ("(f32[2,3], s32[2,3])", ""),
    ("(f32[2,7], s32[2,7])", ", called_computations={greater}"),
    ("(f32[2,3], s32[2,2])", ", called_computations={greater}"),
    ("f32[2,3]", ", called_computations={greater}"),
])
def test_top_k_custom_call_the_interpreter_cannot_run_is_an_error(result: str, called: str) -> None:
    module = xlapy.parse_hlo(_TOPK.replace("RESULT", result).replace("CALLED", called))
    with pytest.raises(xlapy.XlapyError, match="TopK custom-call t"):
        Evaluator(module).call(module.entry, np.zeros((2, 6), np.float32))
