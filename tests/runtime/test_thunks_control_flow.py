"""While, conditional and call thunks on small hand-made modules, each compiled whole (no HLO passes: the
modules run as written) and compared with the reference interpreter, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.runtime.thunks.control_flow import CallThunk, ConditionalThunk, WhileThunk

ADD = "add { x = s32[] parameter(0)  y = s32[] parameter(1)  ROOT s = s32[] add(x, y) }"


def _compile_and_compare(text: str, *args):
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(module, run_hlo_passes=False)
    got = executable(*args)
    assert_same(got, xlapy.evaluate(module, *args), exact_bits=True)
    return executable, got


# Counts to the limit, doubling a vector on each iteration.
COUNTER = """HloModule counter
cond { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(5)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[4] get-tuple-element(s), index=1  one = s32[] constant(1)  i1 = s32[] add(i, one)
       v2 = f32[4] add(v, v)  ROOT t = (s32[], f32[4]) tuple(i1, v2) }
ENTRY e { start = s32[] parameter(0)  v = f32[4] parameter(1)  t = (s32[], f32[4]) tuple(start, v)
          ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body }
"""


@pytest.mark.parametrize("start", [0, 3, 5, 9])
def test_while_with_a_counter(start):
    v = np.array([1, -2.5, 3, 0.25], np.float32)
    executable, (count, doubled) = _compile_and_compare(COUNTER, np.int32(start), v)
    assert int(count) == max(start, 5)
    np.testing.assert_array_equal(doubled, v * 2.0 ** max(0, 5 - start))
    (thunk,) = [t for t in executable.thunks if isinstance(t, WhileThunk)]
    assert thunk.kind == "control-flow"


NESTED = """HloModule nested
inner_cond { s = (s32[], s32[]) parameter(0)  j = s32[] get-tuple-element(s), index=0  n = s32[] constant(3)
             ROOT lt = pred[] compare(j, n), direction=LT }
inner_body { s = (s32[], s32[]) parameter(0)  j = s32[] get-tuple-element(s), index=0
             a = s32[] get-tuple-element(s), index=1  one = s32[] constant(1)  j1 = s32[] add(j, one)
             a1 = s32[] multiply(a, j1)  ROOT t = (s32[], s32[]) tuple(j1, a1) }
outer_cond { s = (s32[], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(4)
             ROOT lt = pred[] compare(i, n), direction=LT }
outer_body { s = (s32[], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
             a = s32[] get-tuple-element(s), index=1  zero = s32[] constant(0)
             it = (s32[], s32[]) tuple(zero, a)
             w = (s32[], s32[]) while(it), condition=inner_cond, body=inner_body
             a2 = s32[] get-tuple-element(w), index=1  a3 = s32[] add(a2, i)  one = s32[] constant(1)
             i1 = s32[] add(i, one)  ROOT t = (s32[], s32[]) tuple(i1, a3) }
ENTRY e { a = s32[] parameter(0)  zero = s32[] constant(0)  t = (s32[], s32[]) tuple(zero, a)
          w = (s32[], s32[]) while(t), condition=outer_cond, body=outer_body
          ROOT r = s32[] get-tuple-element(w), index=1 }
"""


@pytest.mark.parametrize("a", [1, -2, 100000])
def test_nested_whiles(a):
    _, got = _compile_and_compare(NESTED, np.int32(a))
    expected = a
    for i in range(4):
        expected = (expected * 6 + i) & 0xFFFFFFFF  # 1 * 2 * 3, wrapping as s32 does
    assert int(got) == np.uint32(expected).astype(np.int32)


# The body swaps the two loop values: without copy insertion their slices trade places.
SWAP = """HloModule swap
cond { s = (s32[], f32[3], f32[3]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(3)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[3], f32[3]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       a = f32[3] get-tuple-element(s), index=1  b = f32[3] get-tuple-element(s), index=2
       one = s32[] constant(1)  i1 = s32[] add(i, one)  ROOT t = (s32[], f32[3], f32[3]) tuple(i1, b, a) }
ENTRY e { a = f32[3] parameter(0)  b = f32[3] parameter(1)  zero = s32[] constant(0)
          t = (s32[], f32[3], f32[3]) tuple(zero, a, b)
          ROOT w = (s32[], f32[3], f32[3]) while(t), condition=cond, body=body }
"""


def test_a_loop_that_swaps_its_values():
    a, b = np.array([1, 2, 3], np.float32), np.array([-4, -5, -6], np.float32)
    _, (count, first, second) = _compile_and_compare(SWAP, a, b)
    assert int(count) == 3
    np.testing.assert_array_equal(first, b)  # three swaps
    np.testing.assert_array_equal(second, a)


CONDITIONAL_PRED = """HloModule cond_pred
on_true { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }
on_false { y = (f32[4], f32[4]) parameter(0)  a = f32[4] get-tuple-element(y), index=0
           b = f32[4] get-tuple-element(y), index=1  ROOT m = f32[4] multiply(a, b) }
ENTRY e { p = pred[] parameter(0)  x = f32[4] parameter(1)  y = f32[4] parameter(2)
          t = (f32[4], f32[4]) tuple(x, y)
          ROOT c = f32[4] conditional(p, x, t), true_computation=on_true, false_computation=on_false }
"""


@pytest.mark.parametrize("predicate", [True, False])
def test_conditional_on_a_predicate(predicate):
    x, y = np.array([1, -2, 3.5, 0], np.float32), np.array([2, 2, -1, 7], np.float32)
    executable, got = _compile_and_compare(CONDITIONAL_PRED, np.bool_(predicate), x, y)
    np.testing.assert_array_equal(got, -x if predicate else x * y)
    assert any(isinstance(t, ConditionalThunk) for t in executable.thunks)


CONDITIONAL_INDEX = """HloModule cond_index
b0 { x = s32[3] parameter(0)  ROOT n = s32[3] negate(x) }
b1 { x = s32[3] parameter(0)  ROOT m = s32[3] multiply(x, x) }
b2 { x = s32[3] parameter(0)  c = s32[3] constant({7, 8, 9})  ROOT s = s32[3] subtract(x, c) }
ENTRY e { i = s32[] parameter(0)  x = s32[3] parameter(1)
          ROOT c = s32[3] conditional(i, x, x, x), branch_computations={b0, b1, b2} }
"""


@pytest.mark.parametrize("index, branch", [(0, 0), (1, 1), (2, 2), (3, 2), (-1, 2), (2**31 - 1, 2)])
def test_conditional_on_an_index_runs_the_last_branch_when_out_of_range(index, branch):
    x = np.array([3, -4, 5], np.int32)
    _, got = _compile_and_compare(CONDITIONAL_INDEX, np.int32(index), x)
    np.testing.assert_array_equal(got, [-x, x * x, x - np.array([7, 8, 9], np.int32)][branch])


CALL = """HloModule calls
callee { a = f32[2,3] parameter(0)  b = f32[2,3] parameter(1)  s = f32[2,3] add(a, b)
         ROOT t = (f32[2,3], f32[2,3]) tuple(s, a) }
ENTRY e { x = f32[2,3] parameter(0)  y = f32[2,3] parameter(1)
          c = (f32[2,3], f32[2,3]) call(x, y), to_apply=callee
          s = f32[2,3] get-tuple-element(c), index=0  ROOT m = f32[2,3] multiply(s, x) }
"""


def test_call_runs_its_callee_on_the_operands():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    executable, got = _compile_and_compare(CALL, x, y)
    np.testing.assert_array_equal(got, (x + y) * x)
    assert any(isinstance(t, CallThunk) for t in executable.thunks)


TUPLES = """HloModule tuples
ENTRY e { p = (f32[2], (s32[3], pred[2])) parameter(0)  q = f32[2] parameter(1)
          a = f32[2] get-tuple-element(p), index=0  inner = (s32[3], pred[2]) get-tuple-element(p), index=1
          i = s32[3] get-tuple-element(inner), index=0  s = f32[2] add(a, q)  n = (s32[3], f32[2]) tuple(i, q)
          ROOT r = (f32[2], (s32[3], f32[2]), f32[2]) tuple(s, n, q) }
"""


def test_tuple_parameters_and_nested_tuple_results():
    p = (np.array([1.5, 2], np.float32), (np.array([1, 2, 3], np.int32), np.array([True, False])))
    q = np.array([10, 20], np.float32)
    _, got = _compile_and_compare(TUPLES, p, q)
    assert isinstance(got, tuple) and isinstance(got[1], tuple) and len(got) == 3


def test_an_output_that_is_a_parameter_is_a_copy():
    module = xlapy.parse_hlo("""HloModule identity
ENTRY e { p = f32[3] parameter(0)  ROOT t = (f32[3], f32[3]) tuple(p, p) }""")
    x = np.array([1, 2, 3], np.float32)
    run = xlapy.compile(module, run_hlo_passes=False)
    first, second = run(x)
    np.testing.assert_array_equal(first, x)
    first[0] = 99  # results own their memory: neither the argument, the other result nor a later run changes
    assert x[0] == 1 and second[0] == 1
    np.testing.assert_array_equal(run(x)[0], x)


def test_a_while_inside_a_branch():
    text = """HloModule branch_loop
cond { s = (s32[], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(4)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       a = s32[] get-tuple-element(s), index=1  one = s32[] constant(1)  i1 = s32[] add(i, one)
       a1 = s32[] add(a, i)  ROOT t = (s32[], s32[]) tuple(i1, a1) }
looping { x = s32[] parameter(0)  zero = s32[] constant(0)  t = (s32[], s32[]) tuple(zero, x)
          w = (s32[], s32[]) while(t), condition=cond, body=body  ROOT r = s32[] get-tuple-element(w), index=1 }
plain { x = s32[] parameter(0)  ROOT n = s32[] negate(x) }
ENTRY e { p = pred[] parameter(0)  x = s32[] parameter(1)
          ROOT c = s32[] conditional(p, x, x), true_computation=looping, false_computation=plain }
"""
    for predicate in (True, False):
        _, got = _compile_and_compare(text, np.bool_(predicate), np.int32(10))
        assert int(got) == (16 if predicate else -10)


def test_a_computation_called_twice_runs_as_given():
    # Each call site gets its own copy of the callee (flatten-call-graph), so each its own buffers.
    text = """HloModule twice
f { a = f32[3] parameter(0)  ROOT n = f32[3] negate(a) }
ENTRY e { p = f32[3] parameter(0)  c1 = f32[3] call(p), to_apply=f  c2 = f32[3] call(c1), to_apply=f
          ROOT s = (f32[3], f32[3]) tuple(c1, c2) }
"""
    x = np.array([1, -2, 3], np.float32)
    _, (once, twice) = _compile_and_compare(text, x)
    np.testing.assert_array_equal(once, -x)
    np.testing.assert_array_equal(twice, x)
