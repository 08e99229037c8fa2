"""The normalization emitter (``xlapy/codegen/emitters/normalization.py``): softmax, layer norm and RMS norm in one
kernel per fusion, a thread per row.

Every module of ``data/normalization`` (an entry computation around one fusion) has FileCheck expectations on the
emitted MLIR (``// CHECK`` lines, on an AVX-512-sized device so that they do not depend on the host; a module the
emitter must not take names the one that does, ``// EMITTER:``) and is compiled for the CPU and compared with the
reference interpreter on seeded arguments:

- bit for bit, on random arguments rich in special values, when every reduce is exact in any order (maximum,
  minimum); and on arguments whose sums are exact in any order (``// VALUES: exact``: multiples of 1/8, see
  ``emitter_cases.exact_values``; ``zero-sum rows``: besides, the second half of each row is the first negated and
  has no zero, so that a mean is exactly 0 and the squares of the centred values are exact too), where the rest of
  the fusion rounds as the interpreter does;
- within the bound of two summation orders (``// BOUND:``) on random arguments without special values. The kernel's
  sum of ``n`` terms and the interpreter's are each within ``gamma(k) * M`` of the exact sum (Higham, Accuracy and
  Stability of Numerical Algorithms, 4.2; ``gamma(k) = k*u / (1 - k*u)``, ``M`` the sum of the terms' magnitudes),
  ``k = n`` for the interpreter's order and ``k = n/V + log2 V + 1`` for the kernel's partial accumulators of
  ``V >= 16`` f32 lanes (``xlapy/codegen/emitters/reduction.py``), at most ``n/16 + 5`` for rows of ``4V`` or more.
  For softmax the terms are positive (``M`` is the sum ``s``): ``|s' - s| <= beta * s`` with ``beta = gamma(n/16 + 5)
  + gamma(n)``, and ``e / s'`` and ``e / s``, each rounded once, differ by at most ``(beta / (1 - beta) + 3u)`` times
  the result (``relative``). For log-softmax, ``s`` is in ``[1, n]`` (the largest term is ``exp(0)``):
  ``|log s' - log s| <= beta / (1 - beta)``, the two logarithms are rounded once each (``u log n`` apart at most
  each) and so are the two differences ``x - max - log s``: ``(1 + u) (beta / (1 - beta) + 2u log n (1 + beta)) +
  2u |result|`` (``log-softmax``).

Compared with XLA:CPU through jax as well: softmax and layer norm as jax writes them, compiled by the whole pipeline
into one normalization kernel.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import xlapy
from tests.codegen.emitter_cases import WIDE_HOST, check_lines, directive, exact_values, kernel_thunks, only_fusion
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import assert_within_ulps, random_arguments
from xlapy.codegen.emitters.normalization import (
    element_map,
    emit_normalization_fusion,
    normalization_fusion,
    output_lanes,
    phases,
    stored_value,
)
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import print_mlir
from xlapy.codegen.pipeline import EMITTERS, emitter_name
from xlapy.errors import VerifyError
from xlapy.frontends.jax import from_jax

DATA = Path(__file__).parent / "data" / "normalization"
FILES = sorted(DATA.glob("*.hlo"), key=lambda p: p.name)

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def test_the_folder_has_the_programs():
    assert {p.stem for p in FILES} >= {"softmax", "log_softmax", "layernorm", "rmsnorm_bf16", "rows_of_100",
                                       "rows_of_37", "column_major_layout"}



def _emitter(text: str) -> str:
    """The emitter a program states it gets (``// EMITTER:``; by default the normalization emitter)."""
    return directive(text, "EMITTER") or "normalization"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_uses_its_emitter_and_matches_its_checks(path: Path, tmp_path):
    text = path.read_text()
    fusion = only_fusion(xlapy.parse_hlo(text))
    name = _emitter(text)
    assert emitter_name(fusion) == name
    checks = check_lines(text)
    assert checks, f"{path.name} has no CHECK lines"
    module, _ = EMITTERS[name](fusion, WIDE_HOST, None)
    filecheck(print_mlir(module, map_aliases=True), checks, tmp_path)


def _arguments(module: xlapy.HloModule, text: str, seed: int) -> list[np.ndarray]:
    values = directive(text, "VALUES")
    if values is None:
        return random_arguments(module, seed, specials=directive(text, "BOUND") is None)
    args = [exact_values(str(p.shape), seed * 7 + k) for k, p in enumerate(module.entry.parameters)]
    if values == "zero-sum rows":
        for a in args:
            if a.ndim >= 2:
                half = a.shape[-1] // 2
                first = a[..., :half]
                first[first == 0] = 0.125  # no zeros: a zero's sign would depend on the order of the sums
                a[..., half:2 * half] = -first
    return args


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_matches_the_interpreter(path: Path):
    text = path.read_text()
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == _emitter(text)
    bound = directive(text, "BOUND")
    for seed in (0, 1):
        args = _arguments(module, text, seed)
        got, expected = executable(*args), xlapy.evaluate(module, *args)
        if bound is None:
            assert_within_ulps(got, expected, module, 0, context=f"{path.stem} (seed {seed})")
        else:
            n = normalization_fusion(only_fusion(module)).shape.row_elements
            _assert_within_sum_bound(np.asarray(got), np.asarray(expected), n, bound)


def test_rmsnorm_bf16_rounds_every_kind_of_value_as_the_interpreter():
    """The vector f32 -> bf16 roundings of the output walk on every class of value: gamma is random bf16 bits
    (denormals, infinities, NaNs, the largest magnitudes), so the products rounded to bf16 include ties, denormals
    and overflows; rows of x are exact values (sums exact in any order), zeros (scale ``rsqrt(1e-6)``), or hold an
    infinity or a NaN."""
    text = (DATA / "rmsnorm_bf16.hlo").read_text()
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "normalization"
    rng = np.random.default_rng(5)
    x = exact_values("bf16[8,512]", 11)
    x[1] = 0
    x[2, 7] = np.inf
    x[3, 100] = np.nan
    x[4, 3] = -np.inf
    gamma = rng.integers(0, 1 << 16, 512, dtype=np.uint32).astype(np.uint16).view(x.dtype)
    gamma[:4] = np.array([0x0001, 0x807F, 0x7F7F, 0xFF7F], np.uint16).view(x.dtype)  # denormals, largest finite
    got, expected = executable(x, gamma), xlapy.evaluate(module, x, gamma)
    assert_within_ulps(got, expected, module, 0, context="rmsnorm_bf16 (special gammas)")


def _assert_within_sum_bound(got: np.ndarray, expected: np.ndarray, n: int, kind: str) -> None:
    """The bounds of the module docstring (f32 results)."""
    u = np.finfo(np.float32).eps / 2

    def gamma(k: float) -> float:
        return k * u / (1 - k * u)

    beta = gamma(n / 16 + 5) + gamma(n)
    want = np.asarray(expected, np.float64)
    if kind == "relative":
        bound = np.abs(want) * (beta / (1 - beta) + 3 * u)
    else:
        assert kind == "log-softmax", kind
        bound = (1 + u) * (beta / (1 - beta) + 2 * u * math.log(n) * (1 + beta)) + 2 * u * np.abs(want)
    error = np.abs(np.asarray(got, np.float64) - want)
    assert np.all(np.isfinite(got)) and np.all(error <= bound), f"largest excess {np.max(error - bound)}"


# -- the analysis ---------------------------------------------------------------------------------------------


def test_phases_follow_the_reduces_and_carry_the_row_values_they_complete():
    fusion = only_fusion(xlapy.parse_hlo((DATA / "layernorm.hlo").read_text()))
    info = normalization_fusion(fusion)
    assert [(p.reduce.name, [v.name for v in p.values]) for p in phases(info)] == [
        ("sum", ["sum", "mean"]), ("square_sum", ["square_sum", "scale"])]
    assert stored_value(info, fusion) is None  # (x - mean)^2 is cheap: computed again in the last walk


def test_softmax_stores_exp_unless_the_output_shares_an_operand_buffer():
    fusion = only_fusion(xlapy.parse_hlo((DATA / "softmax.hlo").read_text()))
    info = normalization_fusion(fusion)
    assert stored_value(info, fusion).name == "exp"
    assert stored_value(info, fusion, [0, 1]).name == "exp"
    assert stored_value(info, fusion, [0, 0]) is None  # the output row holds x until it is written


@pytest.mark.parametrize(("row", "lanes"), [(256, 32), (100, 4), (37, 1), (48, 16)])
def test_output_lanes_divide_the_row(row: int, lanes: int):
    text = (DATA / "rows_of_37.hlo").read_text().replace("37]", f"{row}]")
    fusion = only_fusion(xlapy.parse_hlo(text))
    info = normalization_fusion(fusion)
    assert output_lanes(info, fusion, WIDE_HOST) == lanes
    assert output_lanes(info, fusion, Device("cpu", vector_bytes=64, max_vector=1)) == 1
    assert element_map(info, lanes).range_vars[0].bounds.upper == row // lanes - 1


def test_a_reduction_fusion_is_refused():
    text = """HloModule m
r { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
f { x = f32[4,64] parameter(0)  z = f32[] constant(0)  ROOT s = f32[4] reduce(x, z), dimensions={1}, to_apply=r }
ENTRY e { x = f32[4,64] parameter(0)  ROOT fusion = f32[4] fusion(x), kind=kLoop, calls=f }
"""
    fusion = only_fusion(xlapy.parse_hlo(text))
    assert normalization_fusion(fusion) is None
    assert emitter_name(fusion) == "reduction"
    with pytest.raises(VerifyError, match="not a normalization fusion"):
        emit_normalization_fusion(fusion, WIDE_HOST)


# -- against XLA:CPU ------------------------------------------------------------------------------------------


def _softmax(x):
    return jax.nn.softmax(x, axis=-1)


def _layernorm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


@pytest.mark.parametrize(("name", "fn", "shapes"), [
    ("softmax", _softmax, [(64, 512)]),
    ("layernorm", _layernorm, [(64, 512), (512,), (512,)]),
])
def test_jax_program_is_one_normalization_kernel_and_matches_xla_cpu(name, fn, shapes):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    executable = xlapy.compile(from_jax(fn, *args))
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "normalization"
    got = np.asarray(executable(*args), np.float64)
    want = np.asarray(jax.jit(fn)(*[jnp.asarray(a) for a in args]), np.float64)
    # XLA:CPU sums in its own order and its exp and rsqrt are within a few ulps of the exact values: the results differ
    # by at most 1.5 epsilons of the largest one on seeds 0 to 3 (measured); 4 are allowed.
    eps = np.finfo(np.float32).eps
    assert np.max(np.abs(got - want)) <= 4 * eps * np.max(np.abs(want)), np.max(np.abs(got - want))
