"""The executable around the thunks: constants filled once (tuple constants and layouts included), arguments
checked and copied in, results copied out, runs independent of each other (also from several threads)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import XlapyError

CONSTANTS = """HloModule constants
ENTRY e { p = f32[2] parameter(0)  c = (f32[2], s32[]) constant(({1.5, 2}, 3))
          a = f32[2] get-tuple-element(c), index=0  s = f32[2] add(a, p)  k = f32[2,2]{0,1} constant({{1,2},{3,4}})
          ROOT t = ((f32[2], s32[]), f32[2], f32[2,2]{0,1}) tuple(c, s, k) }
"""


def test_constants_of_tuple_type_and_other_layouts():
    module = xlapy.parse_hlo(CONSTANTS)
    run = xlapy.compile(module, run_hlo_passes=False)
    x = np.array([1, -1], np.float32)
    got = run(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True)
    np.testing.assert_array_equal(got[2], [[1, 2], [3, 4]])
    got[0][0][0] = 7  # a result is a copy: the constant stays as it was for the next run
    np.testing.assert_array_equal(run(x)[0][0], [1.5, 2])


def test_arguments_are_checked_before_anything_runs():
    module = xlapy.parse_hlo(CONSTANTS)
    run = xlapy.compile(module, run_hlo_passes=False)
    with pytest.raises(XlapyError, match="takes 1 argument, got 2"):
        run(np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(XlapyError, match="parameter p"):
        run(np.ones(3, np.float32))


def test_runs_from_several_threads_do_not_share_buffers():
    module = xlapy.parse_hlo("""HloModule loop
cond { s = (s32[], f32[64]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(50)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[64]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[64] get-tuple-element(s), index=1  one = s32[] constant(1)  i1 = s32[] add(i, one)
       h = f32[] constant(0.5)  hb = f32[64] broadcast(h), dimensions={}  v1 = f32[64] add(v, hb)
       ROOT t = (s32[], f32[64]) tuple(i1, v1) }
ENTRY e { v = f32[64] parameter(0)  zero = s32[] constant(0)  t = (s32[], f32[64]) tuple(zero, v)
          w = (s32[], f32[64]) while(t), condition=cond, body=body  ROOT r = f32[64] get-tuple-element(w), index=1 }
""")
    run = xlapy.compile(module, run_hlo_passes=False)
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = run(np.full(64, k, np.float32))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(6):
        np.testing.assert_array_equal(results[k], np.full(64, k + 25, np.float32))


def test_module_without_entry_is_a_clear_error():
    module = xlapy.parse_hlo("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
    module.entry = None
    with pytest.raises(XlapyError, match="no entry computation"):
        xlapy.compile(module, verify=False)


def test_unknown_backend():
    module = xlapy.parse_hlo("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
    with pytest.raises(XlapyError, match="unknown backend 'gpu'"):
        xlapy.compile(module, backend="gpu")
