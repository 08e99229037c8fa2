"""The FFT library thunk against XLA:CPU through jax: FFT, IFFT, RFFT and IRFFT over one to three dimensions,
in single and double precision.

Both sides are FFT algorithms rounding in the working precision, so each result may be off by a few epsilons
of the sum of the magnitudes of the terms it adds up (the sum of |x| over the transformed dimensions, scaled
by 1/n for the inverse transforms), growing with log2 of the length.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlapy
from tools.compare import assert_within_sum_of_magnitudes
from tools.xla_cpu import run_on_xla_cpu
from xlapy.frontends.jax import from_jax

TRANSFORMS = [
    ("fft", lambda x: jnp.fft.fft(x), np.complex64, (4, 16), 1),
    ("ifft_2d", lambda x: jnp.fft.ifft2(x), np.complex64, (3, 8, 12), 2),
    ("rfft", lambda x: jnp.fft.rfft(x), np.float32, (5, 30), 1),
    ("rfft_3d", lambda x: jnp.fft.rfftn(x), np.float32, (4, 6, 10), 3),
    ("irfft", lambda x: jnp.fft.irfft(x, n=14), np.complex64, (3, 8), 1),
    ("irfft_2d", lambda x: jnp.fft.irfft2(x, s=(6, 9)), np.complex64, (2, 6, 5), 2),
]


def _random(shape, dtype, rng):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("name, function, dtype, shape, rank", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_fft_matches_xla_cpu(name, function, dtype, shape, rank):
    x = _random(shape, dtype, np.random.default_rng(0))
    module = from_jax(function, x)
    executable = xlapy.compile(module)
    assert executable.summary.library_calls == 1
    got = executable(x)
    expected = np.asarray(jax.jit(function)(x))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    axes = tuple(range(x.ndim - rank, x.ndim))
    lengths = [got.shape[a] if name.startswith("irfft") else x.shape[a] for a in axes]
    n = math.prod(lengths)
    # Every output adds up every input of its row (mirrored halves twice for IRFFT), times 1/n when inverse.
    magnitudes = np.sum(np.abs(x), axis=axes, keepdims=True) * (2 if name.startswith("irfft") else 1)
    if name.startswith(("ifft", "irfft")):
        magnitudes = magnitudes / n
    magnitudes = np.broadcast_to(magnitudes, got.shape)
    assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=4 * math.log2(n) + 4)


def test_double_precision_fft():
    x = _random((3, 20), np.complex128, np.random.default_rng(1))
    text = """HloModule fft
ENTRY e { p = c128[3,20]{1,0} parameter(0)  ROOT f = c128[3,20]{1,0} fft(p), fft_type=FFT, fft_length={20} }"""
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x)
    assert got.dtype == np.complex128
    magnitudes = np.broadcast_to(np.sum(np.abs(x), axis=1, keepdims=True), got.shape)
    assert_within_sum_of_magnitudes(got, run_on_xla_cpu(text, x), magnitudes, epsilons=4 * math.log2(20) + 4)
