"""The stateful ``rng`` compiled: ``rng-get-and-update-state``'s thunk (XLA:CPU's initial state, advanced by delta
on each run, one counter per instruction and executable), the expanded module compiled against the same module
interpreted over several calls (bit for bit), and against XLA:CPU, which expands ``rng`` the same way and, in a
fresh process, with the same keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax
from xlapy.hlo import parse_module, verify
from xlapy.hlo.ir import HloModule
from xlapy.interpreter import evaluate
from xlapy.runtime.ulps import max_ulp_difference
from xlapy.transforms.rng_expander import PROCESS_SEED, MersenneTwister64, RngExpander

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")

# XLA:CPU's first state (xla/backends/cpu/runtime/rng_state_thunk.cc).
XLA_CPU_INITIAL_STATE = 0x7012395

STATE_ONLY = """HloModule m
ENTRY main {
  s = u64[2] rng-get-and-update-state(), delta=5
  t = u64[2] rng-get-and-update-state(), delta=1000
  ROOT r = (u64[2], u64[2]) tuple(s, t)
}"""

# Every kind of value the expander makes: uniform floats on an interval and on [0, 1), doubles, signed and
# unsigned integers, normals of even, odd, scalar and size-1-dimensioned shapes, f16 drawn in f32.
MANY = """HloModule m
ENTRY main {
  a = f32[] constant(-2)
  b = f32[] constant(3)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  u = f32[3,5] rng(a, b), distribution=rng_uniform
  unit = f32[6] rng(zero, one), distribution=rng_uniform
  n = f32[3,5] rng(a, b), distribution=rng_normal
  a64 = f64[] constant(1)
  b64 = f64[] constant(2.5)
  uf = f64[7] rng(a64, b64), distribution=rng_uniform
  n64 = f64[2,3] rng(a64, b64), distribution=rng_normal
  ai = s32[] constant(-5)
  bi = s32[] constant(7)
  i = s32[9] rng(ai, bi), distribution=rng_uniform
  al = u64[] constant(3)
  bl = u64[] constant(100000000000)
  l = u64[5] rng(al, bl), distribution=rng_uniform
  ah = f16[] constant(0)
  bh = f16[] constant(1)
  h = f16[3] rng(ah, bh), distribution=rng_normal
  ns = f32[] rng(a, b), distribution=rng_normal
  no = f32[3,1,5] rng(a, b), distribution=rng_normal
  ROOT t = (f32[3,5], f32[6], f32[3,5], f64[7], f64[2,3], s32[9], u64[5], f16[3], f32[], f32[3,1,5]) tuple(u, unit,
    n, uf, n64, i, l, h, ns, no)
}"""
NAMES = ("u", "unit", "n", "uf", "n64", "i", "l", "h", "ns", "no")

# Fewer of them, for the default run (each is a kernel to compile, for xlapy and XLA:CPU): uniform floats, doubles
# and integers, normals of f32 and of f16 drawn in f32. The slow tests take MANY.
FEW = """HloModule m
ENTRY main {
  a = f32[] constant(-2)
  b = f32[] constant(3)
  u = f32[3,5] rng(a, b), distribution=rng_uniform
  n = f32[3,5] rng(a, b), distribution=rng_normal
  a64 = f64[] constant(1)
  b64 = f64[] constant(2.5)
  uf = f64[7] rng(a64, b64), distribution=rng_uniform
  ai = s32[] constant(-5)
  bi = s32[] constant(7)
  i = s32[9] rng(ai, bi), distribution=rng_uniform
  ah = f16[] constant(0)
  bh = f16[] constant(1)
  h = f16[3] rng(ah, bh), distribution=rng_normal
  ROOT t = (f32[3,5], f32[3,5], f64[7], s32[9], f16[3]) tuple(u, n, uf, i, h)
}"""
NAMES_OF = {FEW: ("u", "n", "uf", "i", "h"), MANY: NAMES}

LOOP = """HloModule m
cond {
  cp = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  bp = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  acc = f32[4] get-tuple-element(bp), index=1
  lo = f32[] constant(0)
  hi = f32[] constant(10)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  sum = f32[4] add(acc, r)
  ROOT t = (s32[], f32[4]) tuple(next, sum)
}
ENTRY main {
  zero = s32[] constant(0)
  z = f32[] constant(0)
  acc = f32[4] broadcast(z), dimensions={}
  init = (s32[], f32[4]) tuple(zero, acc)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT sum = f32[4] get-tuple-element(w), index=1
}"""


def expanded(text: str) -> HloModule:
    """``text`` with its rngs expanded as in a fresh process."""
    module = parse_module(text)
    assert RngExpander(MersenneTwister64(PROCESS_SEED)).run(module)
    verify(module)
    return module


def leaves(value) -> list[np.ndarray]:
    return [np.asarray(v) for v in value] if isinstance(value, tuple) else [np.asarray(value)]


def test_state_starts_at_xla_cpus_value_and_advances_by_delta() -> None:
    executable = xlapy.compile(parse_module(STATE_ONLY))
    for run in range(3):
        first, second = executable()
        np.testing.assert_array_equal(first, np.array([XLA_CPU_INITIAL_STATE + 5 * run, 0], np.uint64))
        np.testing.assert_array_equal(second, np.array([XLA_CPU_INITIAL_STATE + 1000 * run, 0], np.uint64))
    # Another executable of the same module has counters of its own.
    np.testing.assert_array_equal(xlapy.compile(parse_module(STATE_ONLY))()[0],
                                  np.array([XLA_CPU_INITIAL_STATE, 0], np.uint64))


def test_interpreter_state_advances_across_evaluations() -> None:
    module = parse_module(STATE_ONLY)
    states = [evaluate(module)[1] for _ in range(3)]
    assert [int(s[0]) for s in states] == [XLA_CPU_INITIAL_STATE + 1000 * k for k in range(3)]


# Normals go through log, sine and cosine, which compiled code computes its own way (within an ulp or two of
# numpy's); everything else is integer ops, conversions and correctly rounded arithmetic: identical.
NORMALS = {"n", "n64", "ns", "no"}


@pytest.mark.parametrize("text", [FEW, pytest.param(MANY, marks=pytest.mark.slow), LOOP], ids=["few", "many", "loop"])
def test_compiled_values_are_the_interpreters_call_after_call(text: str) -> None:
    module = expanded(text)
    executable = xlapy.compile(module)
    names = NAMES_OF.get(text, ("sum",))
    for _ in range(3):
        want = leaves(evaluate(module))
        got = leaves(executable())
        for name, w, g in zip(names, want, got, strict=True):
            assert w.dtype == g.dtype
            assert max_ulp_difference(g, w) <= (2 if name in NORMALS else 0), name


def test_compiling_rng_expands_it() -> None:
    # The pipeline's own expansion (keys from the process's generator wherever it stands): values in range.
    executable = xlapy.compile(parse_module("""HloModule m
ENTRY main {
  a = s32[] constant(3)
  b = s32[] constant(9)
  ROOT r = s32[1000] rng(a, b), distribution=rng_uniform
}"""))
    first, second = executable(), executable()
    assert first.min() == 3 and first.max() == 8
    assert not np.array_equal(first, second)


_XLA_CPU_RUNS = """
import json, sys
import numpy as np
from tools.xla_cpu import run_on_xla_cpu
text = sys.stdin.read()
runs = []
for _ in range(3):
    out = run_on_xla_cpu(text)
    runs.append([[str(np.asarray(v).dtype), np.asarray(v).tobytes().hex()] for v in out])
print(json.dumps(runs))
"""


def xla_cpu_runs_in_a_fresh_process(text: str) -> list[list[np.ndarray]]:
    """Three runs of ``text`` on XLA:CPU, compiled first thing in a new process (so its keys are the first
    values of XLA's process-wide generator)."""
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-c", _XLA_CPU_RUNS], input=text, capture_output=True, text=True,
                            cwd=root, env=environment, timeout=600, check=True)
    return [[np.frombuffer(bytes.fromhex(data), dtype) for dtype, data in run]
            for run in json.loads(result.stdout)]


# How far XLA:CPU may be from the expansion: its kernels fuse the multiply and add of a + (b - a) u (one
# rounding instead of two: within an ulp of the interval's size) and compute log, sine and cosine their own way
# (a few ulps of the values' size); integers, doubles on [1, 2.5) whose products are exact, [0, 1) floats and
# f16 must be identical.
ABSOLUTE = {"u": 2 * np.spacing(np.float32(4)), "n": 8 * np.spacing(np.float32(8)),
            "ns": 8 * np.spacing(np.float32(8)), "no": 8 * np.spacing(np.float32(8)), "n64": 8 * np.spacing(8.0)}


@pytest.mark.parametrize("text", [FEW, pytest.param(MANY, marks=pytest.mark.slow)], ids=["few", "many"])
def test_first_values_are_xla_cpus(text: str) -> None:
    require_jax()
    want_runs = xla_cpu_runs_in_a_fresh_process(text)
    executable = xlapy.compile(expanded(text))
    for want in want_runs:
        got = leaves(executable())
        for name, w, g in zip(NAMES_OF[text], want, got, strict=True):
            w = w.view(g.dtype).reshape(g.shape) if w.dtype.itemsize == g.dtype.itemsize else w.reshape(g.shape)
            if name in ABSOLUTE:
                np.testing.assert_allclose(g, w, rtol=0, atol=ABSOLUTE[name], err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)


# ThreeFry's twenty rounds fuse into one kernel whose helper functions each call the next ones twice; the
# backend inlines them without copying the DAG exponentially (it once ran out of memory here).
@pytest.mark.parametrize(("state", "bits"), [("u64[2]", "u32[4]"),
                                             *(pytest.param("u64[2]", bits, marks=pytest.mark.slow)
                                               for bits in ("u64[6]", "u8[5,3]"))])
def test_three_fry_bit_generators_compile_to_the_interpreters_bits(state: str, bits: str) -> None:
    module = parse_module(f"""HloModule m
ENTRY e {{ s = {state} parameter(0)
          ROOT r = ({state}, {bits}) rng-bit-generator(s), algorithm=rng_three_fry }}""")
    seed = np.array([0x123456789ABCDEF0, 42], dtype=np.uint64)
    compiled = xlapy.compile(module)(seed)
    expected = evaluate(module, seed)
    for got, want in zip(compiled, expected):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
