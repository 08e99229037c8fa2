"""The opt-in step limit of ``while`` and computations that call themselves."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax
from xlapy.interpreter import Evaluator

_COUNTING_LOOP = """HloModule m
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(LIMIT)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[] multiply(x, x)
  ROOT t = (s32[], f32[]) tuple(j, y)
}
ENTRY e {
  x = f32[] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[]) tuple(zero, x)
  ROOT loop = (s32[], f32[]) while(init), condition=cond, body=body
}
"""


def _run(trips: int, limit: int | None):
    module = xlapy.parse_hlo(_COUNTING_LOOP.replace("LIMIT", str(trips)))
    return Evaluator(module, max_while_iterations=limit).call(module.entry, np.float32(1.5))


def test_loop_within_the_limit_is_exact() -> None:
    count, value = _run(3, 3)
    assert int(count) == 3 and value == np.float32(1.5 ** 8)


def test_loop_past_the_limit_names_the_while_and_the_limit() -> None:
    with pytest.raises(xlapy.XlapyError, match=r"while loop did not finish within max_while_iterations=2"):
        _run(3, 2)


def test_endless_loop_stops_at_the_limit() -> None:
    text = _COUNTING_LOOP.replace("ROOT lt = pred[] compare(i, n), direction=LT", "ROOT lt = pred[] constant(true)")
    module = xlapy.parse_hlo(text.replace("LIMIT", "0"))
    with pytest.raises(xlapy.XlapyError, match="max_while_iterations=1000"):
        Evaluator(module, max_while_iterations=1000).call(module.entry, np.float32(1.0))


def test_zero_limit_allows_a_loop_that_never_runs_its_body() -> None:
    count, value = _run(0, 0)
    assert int(count) == 0 and value == np.float32(1.5)


def test_stablehlo_while_has_the_limit_too() -> None:
    jax = require_jax()
    from xlapy.frontends.stablehlo import parse_module

    def f(n):
        return jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, 1))

    module = parse_module(jax.jit(f).lower(np.int32(5)).as_text(), implicit_manual_replication=True)
    ok = Evaluator(module, max_while_iterations=5).call(module.entry, np.int32(5))
    assert [int(v) for v in ok] == [int(v) for v in jax.jit(f)(np.int32(5))] == [5, 32]
    with pytest.raises(xlapy.XlapyError, match="max_while_iterations=4"):
        Evaluator(module, max_while_iterations=4).call(module.entry, np.int32(5))


@pytest.mark.parametrize("limit", [-1, 1.5, "3", True])
def test_bad_limits_are_refused(limit) -> None:
    module = xlapy.parse_hlo(_COUNTING_LOOP.replace("LIMIT", "1"))
    with pytest.raises(xlapy.XlapyError, match="max_while_iterations"):
        Evaluator(module, max_while_iterations=limit)


_SELF_CALL = """HloModule m
f {
  a = f32[2] parameter(0)
  ROOT c = f32[2] OPCODE(a), CALLEE=f
}
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] OPCODE(p), CALLEE=f
}
"""


@pytest.mark.parametrize("opcode, callee", [("call", "to_apply"), ("fusion", "kind=kLoop, calls")])
def test_a_computation_calling_itself_is_an_error_not_a_recursion_error(opcode: str, callee: str) -> None:
    module = xlapy.parse_hlo(_SELF_CALL.replace("OPCODE", opcode).replace("CALLEE", callee))
    with pytest.raises(xlapy.XlapyError, match="computation f calls itself"):
        Evaluator(module).call(module.entry, np.zeros(2, np.float32))


def test_a_while_body_calling_itself_is_an_error() -> None:
    text = """HloModule m
cond {
  s = f32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  s = f32[] parameter(0)
  ROOT w = f32[] while(s), condition=cond, body=body
}
ENTRY e {
  p = f32[] parameter(0)
  ROOT w = f32[] while(p), condition=cond, body=body
}
"""
    module = xlapy.parse_hlo(text)
    with pytest.raises(xlapy.XlapyError, match="computation body calls itself"):
        Evaluator(module).call(module.entry, np.float32(0))


def test_evaluate_without_verification_reports_a_self_call() -> None:
    module = xlapy.parse_hlo(_SELF_CALL.replace("OPCODE", "call").replace("CALLEE", "to_apply"))
    with pytest.raises(xlapy.XlapyError, match="computation f calls itself"):
        xlapy.evaluate(module, np.zeros(2, np.float32), verify=False)


def test_evaluate_passes_the_limit_on() -> None:
    module = xlapy.parse_hlo(_COUNTING_LOOP.replace("LIMIT", "3"))
    with pytest.raises(xlapy.XlapyError, match="while loop did not finish within max_while_iterations=2"):
        xlapy.evaluate(module, np.float32(1.5), max_while_iterations=2)
    assert xlapy.evaluate(module, np.float32(1.5), max_while_iterations=3)[1] == np.float32(1.5 ** 8)
