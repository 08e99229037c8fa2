"""Runs of launches and copies, and whole while loops, in native code (``runtime/native_steps.py``): the loops
compared with the interpreter bit for bit, with the native calls counted so that a loop is known to have run
there (and to return to Python between slices of its iterations)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.runtime.test_thunks_control_flow import SWAP, _compile_and_compare
from xlapy.runtime import native_pool, native_steps
from xlapy.runtime.thunks.control_flow import WhileThunk

pytestmark = pytest.mark.skipif(not native_pool.supported(), reason="the native pool runs on x86-64 Linux only")


@pytest.fixture
def native_calls(monkeypatch):
    """The iteration counts of every native call of the steps runner made by loops prepared from now on."""
    calls: list[int] = []
    real = native_steps._runner

    def counting_runner():
        run_steps, budget = real()

        def counted(address: int, count: int, iterations: int, ticks: int) -> int:
            done = run_steps(address, count, iterations, ticks)
            calls.append(done)
            return done

        return counted, budget

    monkeypatch.setattr(native_steps, "_runner", counting_runner)
    return calls


def _while_thunk(executable) -> WhileThunk:
    (thunk,) = [t for t in executable.thunks.walk() if isinstance(t, WhileThunk)]
    return thunk


# A scan: 40 steps, each writing tanh of one row of the input, doubled, into row i of the carried buffer (in place).
SCAN = """HloModule scan
cond { s = (s32[], f32[40,96], f32[40,96]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       n = s32[] constant(40)  ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[40,96], f32[40,96]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       buffer = f32[40,96] get-tuple-element(s), index=1  rows = f32[40,96] get-tuple-element(s), index=2
       zero = s32[] constant(0)  row = f32[1,96] dynamic-slice(rows, i, zero), dynamic_slice_sizes={1,96}
       t = f32[1,96] tanh(row)  two = f32[] constant(2)  twos = f32[1,96] broadcast(two), dimensions={}
       update = f32[1,96] multiply(t, twos)  written = f32[40,96] dynamic-update-slice(buffer, update, i, zero)
       one = s32[] constant(1)  i1 = s32[] add(i, one)
       ROOT next = (s32[], f32[40,96], f32[40,96]) tuple(i1, written, rows) }
ENTRY e { rows = f32[40,96] parameter(0)  zero = s32[] constant(0)  z = f32[] constant(0)
          buffer = f32[40,96] broadcast(z), dimensions={}
          t = (s32[], f32[40,96], f32[40,96]) tuple(zero, buffer, rows)
          w = (s32[], f32[40,96], f32[40,96]) while(t), condition=cond, body=body
          ROOT r = f32[40,96] get-tuple-element(w), index=1 }
"""

# Doubles a vector until its first element reaches a limit: the trip count depends on the data.
UNTIL = """HloModule until
cond { s = (s32[], f32[8]) parameter(0)  v = f32[8] get-tuple-element(s), index=1
       first = f32[1] slice(v), slice={[0:1]}  x = f32[] reshape(first)  limit = f32[] constant(1000)
       ROOT lt = pred[] compare(x, limit), direction=LT }
body { s = (s32[], f32[8]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[8] get-tuple-element(s), index=1  one = s32[] constant(1)  i1 = s32[] add(i, one)
       v2 = f32[8] add(v, v)  ROOT t = (s32[], f32[8]) tuple(i1, v2) }
ENTRY e { v = f32[8] parameter(0)  zero = s32[] constant(0)  t = (s32[], f32[8]) tuple(zero, v)
          ROOT w = (s32[], f32[8]) while(t), condition=cond, body=body }
"""

def test_a_counted_loop_runs_in_one_native_call(native_calls):
    rows = np.random.default_rng(1).standard_normal((40, 96)).astype(np.float32)
    executable, got = _compile_and_compare(SCAN, rows)
    assert _while_thunk(executable).trips == 40
    assert 40 in native_calls  # all 40 iterations in one call
    np.testing.assert_array_equal(got, xlapy.evaluate(xlapy.parse_hlo(SCAN), rows))
    native_calls.clear()
    executable(rows)  # prepared already: the same single call
    assert native_calls.count(40) == 1


@pytest.mark.parametrize("start", [1.0, 999.0, 1000.0, 3e-3])
def test_a_loop_tested_by_its_condition_runs_natively(native_calls, start):
    v = np.full(8, start, np.float32)
    executable, (count, _) = _compile_and_compare(UNTIL, v)
    assert _while_thunk(executable).trips is None
    # The condition's test stops the native loop: one call, whatever the number of iterations.
    assert native_calls.count(-1) == 1
    assert int(count) == int(np.ceil(np.log2(1000.0 / start))) if start < 1000 else int(count) == 0


def test_loops_return_to_python_between_slices(native_calls, monkeypatch):
    # A budget of one tick: every native call returns after one iteration, where Python would see a signal.
    monkeypatch.setattr(native_steps, "SLICE_SECONDS", 0.0)
    rows = np.random.default_rng(2).standard_normal((40, 96)).astype(np.float32)
    _compile_and_compare(SCAN, rows)
    assert native_calls.count(1) >= 40
    native_calls.clear()
    _compile_and_compare(UNTIL, np.full(8, 1.0, np.float32))
    assert native_calls[-1] == -1 and native_calls.count(1) == 10  # 2^10 >= 1000: ten iterations, then the test


def test_a_loop_swapping_its_values_through_temporaries(native_calls):
    # Three swaps, the loop values' copies staged through temporaries.
    a, b = np.array([1, 2, 3], np.float32), np.array([-4, -5, -6], np.float32)
    _, (count, first, second) = _compile_and_compare(SWAP, a, b)
    assert int(count) == 3
    np.testing.assert_array_equal(first, b)
    np.testing.assert_array_equal(second, a)
    assert 3 in native_calls


def _move_only(destination: np.ndarray, source: np.ndarray):
    """A step that moves ``source``'s bytes into ``destination`` in native code and refuses to run in Python."""

    def in_python() -> None:
        raise AssertionError("a native step ran in Python")

    in_python.native_steps = (native_steps.move(destination.ctypes.data, source.ctypes.data, source.nbytes),)
    return in_python


def test_consecutive_native_steps_run_as_one_call_in_order():
    a, b, c = np.arange(16, dtype=np.int64), np.zeros(16, np.int64), np.zeros(16, np.int64)
    ran: list[str] = []

    def python_step() -> None:
        ran.append("python")

    merged = native_steps.in_turn([_move_only(b, a), _move_only(c, b), python_step])
    assert len(merged) == 2 and merged[1] is python_step
    for step in merged:
        step()
    np.testing.assert_array_equal(c, a)  # b was written before c read it
    assert ran == ["python"]
    # A lone native step stays as it is (it is one call already).
    lone = _move_only(b, a)
    assert native_steps.in_turn([python_step, lone, python_step])[1] is lone
