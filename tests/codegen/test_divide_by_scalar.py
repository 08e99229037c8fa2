"""Division of f32 vectors by a broadcast scalar (the CPU backend's `divide_by_scalar`: the product with the
reciprocal, corrected with one FMA, and a branch to the plain division for lanes outside the correction's
range), compared bit for bit with numpy's IEEE division over spreads of all 2^32 dividend bit patterns. The
backend takes that path on AVX-512 hosts only (`corrects_division_by_scalar`); these tests take it on any host,
compiling into a kernel cache of their own."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.codegen.backends import cpu
from xlapy.codegen.backends.cpu import translate_module
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import lower_fusion
from xlapy.runtime.kernel_cache import clear_memory_cache

FUSION = """HloModule divide
f {{ x = {t}[{n}] parameter(0)  s = {t}[] parameter(1)  b = {t}[{n}] broadcast(s), dimensions={{}}
     ROOT q = {t}[{n}] divide(x, b) }}
ENTRY e {{ x = {t}[{n}] parameter(0)  s = {t}[] parameter(1)  ROOT r = {t}[{n}] fusion(x, s), kind=kLoop, calls=f }}
"""


@pytest.fixture(autouse=True)
def corrected_division(monkeypatch, tmp_path):
    """The corrected division on any host, in a kernel cache no other test reads (its kernels have the keys of
    the host's own)."""
    monkeypatch.setattr(cpu, "corrects_division_by_scalar", lambda: True)
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    clear_memory_cache()
    yield
    clear_memory_cache()


def _bits(value: int) -> np.float32:
    return np.uint32(value).view(np.float32)


# Edge divisors: zeros, infinities, NaN, the extremes of the normal and subnormal ranges, significands of all ones
# (whose reciprocal rounds furthest), a divisor with a subnormal reciprocal, and ordinary ones.
DIVISORS = [98.0, 3.0, 1.0, 0.1, -5.5, 1e-38, 1e-45, 7.0e-39, 3e38, np.inf, -np.inf, 0.0, -0.0, np.nan,
            _bits(0x3F7FFFFF), _bits(0x3F800001), _bits(0x3FFFFFFF), _bits(0x7E7FFFFF), _bits(0x7F7FFFFF),
            _bits(0x00800000), _bits(0x007FFFFF), _bits(0x7FC00123)]


def _compile(n: int, element_type: str = "f32") -> xlapy.Executable:
    return xlapy.compile(xlapy.parse_hlo(FUSION.format(n=n, t=element_type)), run_hlo_passes=False)


def _assert_divides_like_numpy(executable: xlapy.Executable, dividends: np.ndarray, divisor: np.float32) -> None:
    got = executable(dividends, np.float32(divisor))
    with np.errstate(all="ignore"):
        expected = dividends / np.float32(divisor)
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    if not same.all():
        first = np.flatnonzero(~same)[0]
        raise AssertionError(f"{(~same).sum()} quotients differ, first {dividends[first]!r} "
                             f"(0x{dividends.view(np.uint32)[first]:08x}) / {divisor!r}: {got[first]!r}, "
                             f"IEEE {expected[first]!r}")


def _spread(step: int, offset: int, count: int, first: int = 0) -> np.ndarray:
    """``count`` dividends with bit patterns ``first, first + step, ...`` shifted by ``offset``."""
    return ((np.arange(first, first + count, dtype=np.uint64) * step + offset) % (1 << 32)).astype(np.uint32) \
        .view(np.float32)


@pytest.mark.parametrize("divisor", DIVISORS, ids=lambda d: f"0x{np.float32(d).view(np.uint32):08x}")
def test_quotients_by_a_broadcast_scalar_are_ieee_quotients(divisor):
    # Every 4096th bit pattern of the dividend (all signs, binades, subnormals, zeros, infinities and NaNs).
    executable = _compile(1 << 20)
    _assert_divides_like_numpy(executable, _spread(4096, 1237, 1 << 20), divisor)


def test_random_divisors_and_dividends_near_their_multiples():
    executable = _compile(4096)
    rng = np.random.default_rng(7)
    for _ in range(200):
        divisor = np.uint32(rng.integers(0, 1 << 32)).view(np.float32)
        dividends = rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with np.errstate(all="ignore"):  # quotients in every binade around the divisor's multiples
            dividends[:2048] = divisor * rng.standard_normal(2048).astype(np.float32) * \
                np.exp2(rng.integers(-40, 40, 2048)).astype(np.float32)
        _assert_divides_like_numpy(executable, dividends, divisor)


@pytest.mark.slow
@pytest.mark.parametrize("divisor", [0.1, _bits(0x3F7FFFFF), 98.0, _bits(0x3FFFFFFF)],
                         ids=lambda d: f"0x{np.float32(d).view(np.uint32):08x}")
def test_every_dividend(divisor):
    chunk = 1 << 24
    executable = _compile(chunk)
    for first in range(0, 1 << 32, chunk):
        _assert_divides_like_numpy(executable, _spread(1, 0, chunk, first), divisor)


def _divisions(llvm_ir: str) -> list[str]:
    return re.findall(r"= fdiv (<\d+ x float>|float) ", llvm_ir)


def _llvm_ir() -> str:
    module = xlapy.parse_hlo(FUSION.format(n=1 << 12, t="f32"))
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return str(translate_module(lower_fusion(fusion, Device.host()).module)[0])


def test_the_kernel_divides_once_and_corrects_products():
    llvm_ir = _llvm_ir()
    divisions = _divisions(llvm_ir)
    # the scalar reciprocal, and the plain division of the rare branch
    assert divisions.count("float") == 1 and len(divisions) == 2, divisions
    assert re.search(r"call <\d+ x float> @\"?llvm\.fma\.v\d+f32", llvm_ir)


def test_hosts_without_avx512_divide_vectors(monkeypatch):
    monkeypatch.undo()  # not the fixture's forced correction: the choice of a host with 256-bit vectors
    monkeypatch.setattr(cpu, "vector_bits", lambda: 256)
    assert not cpu.corrects_division_by_scalar()
    llvm_ir = _llvm_ir()
    assert _divisions(llvm_ir) and "float" not in _divisions(llvm_ir)
    assert not re.search(r"llvm\.fma", llvm_ir)


@pytest.mark.parametrize("element_type", ["bf16", "f16"])
def test_narrow_types_divide_in_f32_and_round_once(element_type):
    dtype = ml_dtypes.bfloat16 if element_type == "bf16" else np.float16
    module = xlapy.parse_hlo(FUSION.format(n=4096, t=element_type))
    executable = xlapy.compile(module, run_hlo_passes=False)
    rng = np.random.default_rng(3)
    dividends = (rng.standard_normal(4096) * np.exp2(rng.integers(-20, 12, 4096))).astype(dtype)
    dividends[:8] = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-7, -3e-8, 65504], np.float32).astype(dtype)
    for divisor in [3.0, -0.7, 1e-3, 0.0, np.inf]:
        args = (dividends, np.asarray(divisor, np.float32).astype(dtype))
        assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)
