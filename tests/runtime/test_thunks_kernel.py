"""Kernel thunks: kLoop fusions, lone elemental ops (as fusions of one instruction) and the kCustom dot
fusions XLA:CPU dumps, compared with the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import VerifyError
from xlapy.runtime.thunks.kernel import KernelThunk
from xlapy.shapes import parse_shape


def test_lone_elemental_ops_become_kernels():
    module = xlapy.parse_hlo("""HloModule lone
ENTRY e { p = f32[4,3] parameter(0)  t = f32[3,4] transpose(p), dimensions={1,0}
          b = f32[2,3,4] broadcast(t), dimensions={1,2}  ROOT e = f32[2,3,4] exponential(b) }""")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert_same(executable(x), xlapy.evaluate(module, x), exact_bits=True)
    assert [t.name for t in executable.thunks] == ["t", "b", "e"]
    assert all(isinstance(t, KernelThunk) for t in executable.thunks)
    assert sorted(executable.kernels) == ["b", "e", "t"]
    assert executable.summary.kernels == 3 and executable.summary.library_calls == 0


# As XLA:CPU dumps a matrix product: a kCustom fusion whose root is a dot of its parameters.
CUSTOM_DOT = """HloModule custom_dot
dot_computation { a = f32[4,8] parameter(0)  b = f32[8,3] parameter(1)
                  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }
ENTRY e { x = f32[4,8] parameter(0)  y = f32[8,3] parameter(1)
          ROOT f = f32[4,3] fusion(x, y), kind=kCustom, calls=dot_computation }
"""


def test_a_custom_dot_fusion_is_a_library_call():
    module = xlapy.parse_hlo(CUSTOM_DOT)
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 8
    y = np.arange(24, dtype=np.float32).reshape(8, 3) - 12
    executable = xlapy.compile(module, run_hlo_passes=False)
    ((thunk),) = executable.thunks
    assert thunk.kind == "library"
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)  # small integers: exact sums


def test_a_custom_fusion_that_is_not_a_plain_dot_is_a_kernel():
    # A dot followed by an elementwise op: not a BLAS call, but code the loop emitter generates.
    text = CUSTOM_DOT.replace("ROOT d = f32[4,3] dot(a, b)", "d = f32[4,3] dot(a, b)").replace(
        "rhs_contracting_dims={0} }", "rhs_contracting_dims={0}  ROOT n = f32[4,3] negate(d) }", 1)
    module = xlapy.parse_hlo(text)
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 8
    y = np.arange(24, dtype=np.float32).reshape(8, 3) - 12
    executable = xlapy.compile(module, run_hlo_passes=False)
    ((thunk),) = executable.thunks
    assert isinstance(thunk, KernelThunk) and thunk.name == "f"
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)


def test_a_kernel_checks_every_buffer_it_is_given():
    module = xlapy.parse_hlo("""HloModule m
f { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }
ENTRY e { p = f32[4] parameter(0)  ROOT fusion = f32[4] fusion(p), kind=kLoop, calls=f }
""")
    run = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = run.thunks
    assert thunk.kernel.signature.buffer_sizes == (16, 16)
    thunk.outputs = [(thunk.operands[0][0], parse_shape("f32[2]"))]  # a buffer smaller than the output
    thunk.refresh()
    with pytest.raises(VerifyError, match="fusion fusion: buffer 1 has 8 bytes, its kernel was compiled for 16"):
        run(np.ones(4, np.float32))


def test_kernels_whose_reducers_differ_are_not_confused_by_the_cache():
    # The reducer is named f in both modules: the cache key must cover what f computes, not only its name.
    text = """HloModule m
f {{ x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] {op}(x, y) }}
ENTRY e {{ p = f32[4] parameter(0)  z = f32[] constant(1)
          ROOT r = f32[] reduce(p, z), dimensions={{0}}, to_apply=f }}"""
    x = np.array([1, 2, 3, 4], np.float32)
    for op, expected in (("add", 11), ("multiply", 24)):
        module = xlapy.parse_hlo(text.format(op=op))
        assert float(xlapy.compile(module, run_hlo_passes=False)(x)) == expected == float(xlapy.evaluate(module, x))


def test_a_lone_variadic_reduce_writes_each_of_its_results():
    module = xlapy.parse_hlo("""HloModule argmax
pick { a = f32[] parameter(0)  i = s32[] parameter(1)  b = f32[] parameter(2)  j = s32[] parameter(3)
       gt = pred[] compare(a, b), direction=GT  eq = pred[] compare(a, b), direction=EQ
       lt = pred[] compare(i, j), direction=LT  tie = pred[] and(eq, lt)  keep = pred[] or(gt, tie)
       v = f32[] select(keep, a, b)  k = s32[] select(keep, i, j)  ROOT t = (f32[], s32[]) tuple(v, k) }
ENTRY e { x = f32[3,5] parameter(0)  iota = s32[3,5] iota(), iota_dimension=1
          lowest = f32[] constant(-inf)  zero = s32[] constant(0)
          ROOT r = (f32[3], s32[3]) reduce(x, iota, lowest, zero), dimensions={1}, to_apply=pick }""")
    x = np.array([[1, 5, 2, 5, 0], [-1, -2, -3, -4, -5], [0, 0, 9, 1, 9]], np.float32)
    executable = xlapy.compile(module, run_hlo_passes=False)
    got = executable(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True)
    np.testing.assert_array_equal(got[1], [1, 0, 2])
    assert [t.name for t in executable.thunks] == ["iota", "r"]


def test_a_reduction_to_no_elements_needs_no_kernel():
    # A lone reduce and a fusion whose results have no elements; the other fusion reduces a zero-sized
    # dimension to its initial values and runs.
    module = xlapy.parse_hlo("""HloModule nothing_to_write
or_pred { a = pred[] parameter(0)  b = pred[] parameter(1)  ROOT o = pred[] or(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
fused_empty { q = f32[0,3] parameter(0)  z = f32[] constant(0)
              ROOT r = f32[0] reduce(q, z), dimensions={1}, to_apply=add }
fused_sums { q = f32[3,0] parameter(0)  z = f32[] constant(1.5)
             ROOT r = f32[3] reduce(q, z), dimensions={1}, to_apply=add }
ENTRY e { p = pred[1,0,4] parameter(0)  f = pred[] constant(false)  x = f32[0,3] parameter(1)
          y = f32[3,0] parameter(2)
          lone = pred[1,0] reduce(p, f), dimensions={2}, to_apply=or_pred
          empty = f32[0] fusion(x), kind=kLoop, calls=fused_empty
          sums = f32[3] fusion(y), kind=kLoop, calls=fused_sums
          ROOT t = (pred[1,0], f32[0], f32[3]) tuple(lone, empty, sums) }""")
    args = [np.zeros((1, 0, 4), bool), np.zeros((0, 3), np.float32), np.zeros((3, 0), np.float32)]
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.name for t in executable.thunks] == ["sums"]
    got = executable(*args)
    assert [g.shape for g in got] == [(1, 0), (0,), (3,)]
    assert_same(got, xlapy.evaluate(module, *args), exact_bits=True)
