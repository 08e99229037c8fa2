"""XLA:CPU's TopK custom call: XLA's results on awkward values, and a clean error
(not a Python exception) on a module that the interpreter cannot run."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax
from xlapy.interpreter import Evaluator

jax = require_jax()


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


TOPK_TEMPLATE = """HloModule m
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
    module = xlapy.parse_hlo(TOPK_TEMPLATE.replace("RESULT", result).replace("CALLED", called))
    with pytest.raises(xlapy.XlapyError, match="TopK custom-call t"):
        Evaluator(module).call(module.entry, np.zeros((2, 6), np.float32))


# A sort of the values alone, largest first, then a slice: XLA:CPU's
# TopkRewriter turns it into a TopK custom call that keeps the sort's
# comparator, of two parameters (no indices).
_SORT_THEN_SLICE = """HloModule m
greater {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[3,9] parameter(0)
  s = f32[3,9] sort(x), dimensions={1}, to_apply=greater
  ROOT r = f32[3,4] slice(s), slice={[0:3], [0:4]}
}
"""

# Distinct magnitudes with ties, no NaN or signed zeros: the GT comparator and
# top_k's total order agree, and ties go to the lower index in both.
_ROWS = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5],
                  [-1, -1, -1, -1, 2, 2, -7, 8, 8],
                  [np.inf, -np.inf, 0.5, 0.25, 0.5, 1e30, -1e30, 3, 0.125]], np.float32)


def test_top_k_custom_call_with_a_comparator_of_values_alone_from_xla_cpu() -> None:
    from tools.xla_cpu import compile_on_xla_cpu

    compiled = compile_on_xla_cpu(_SORT_THEN_SLICE).executable.hlo_modules()[0].to_string()
    assert 'custom_call_target="TopK"' in compiled
    module = xlapy.parse_hlo(compiled)
    xlapy.verify(module)
    (call,) = [i for i in module.entry.instructions if i.opcode == "custom-call"]
    assert len(call.called_computations[0].parameters) == 2
    got = xlapy.evaluate(module, _ROWS)
    expected_values, _ = jax.lax.top_k(_ROWS, 4)
    np.testing.assert_array_equal(got, np.asarray(expected_values))
    np.testing.assert_array_equal(got, -np.sort(-_ROWS, axis=1)[:, :4])


def test_top_k_custom_call_with_a_comparator_of_values_alone_gives_indices() -> None:
    text = (TOPK_TEMPLATE.replace("f32[2,6]", "f32[3,9]").replace("  i = s32[] parameter(2)\n", "")
            .replace("  j = s32[] parameter(3)\n", "")
            .replace("RESULT", "(f32[3,4], s32[3,4])").replace("CALLED", ", called_computations={greater}"))
    module = xlapy.parse_hlo(text)
    xlapy.verify(module)
    values, indices = xlapy.evaluate(module, _ROWS)
    expected_values, expected_indices = jax.lax.top_k(_ROWS, 4)
    np.testing.assert_array_equal(values, np.asarray(expected_values))
    np.testing.assert_array_equal(indices, np.asarray(expected_indices))
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(indices, [[5, 7, 4, 8], [7, 8, 4, 5], [0, 5, 7, 2]])
