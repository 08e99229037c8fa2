"""The interpreter on JAX's CPU library calls (LAPACK and jaxlib's perturbed tridiagonal solver), against
XLA:CPU through jax, in all four element types: the same routines with the same workspaces give the same
bits. (The compiled programs are compared with the interpreter in tests/runtime/test_library_lapack.py.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

import xlapy
from tools.compare import assert_same
from xlapy.frontends.jax import from_jax


def _general(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _positive_definite(dtype):
    g = _general((4, 4), np.complex128 if np.dtype(dtype).kind == "c" else np.float64, 5)
    return (g @ np.conj(g.T) + 4 * np.eye(4)).astype(dtype)


def _tridiagonal(dtype):
    dl, d, du = (_general((2, 4), dtype, seed) for seed in (1, 2, 3))
    return dl, d, du, _general((2, 4, 2), dtype, 4)


PROGRAMS = {
    "eig": (lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True), lambda t: (_general((2, 4, 4), t),)),
    "schur": (lax.linalg.schur, lambda t: (_general((2, 4, 4), t),)),
    "hessenberg": (lambda x: jsl.hessenberg(x, calc_q=True), lambda t: (_general((4, 4), t),)),
    "tridiagonal": (lambda x: lax.linalg.tridiagonal(x + jnp.conj(jnp.swapaxes(x, -1, -2))),
                    lambda t: (_general((2, 4, 4), t),)),
    "tridiagonal_solves": (lambda dl, d, du, b: (lax.linalg.tridiagonal_solve(dl, d, du, b),
                                                 lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)),
                           _tridiagonal),
    "svd_qr": (lambda x: lax.linalg.svd(x, algorithm=lax.linalg.SvdAlgorithm.QR), lambda t: (_general((2, 3, 4), t),)),
    "qr_pivoting_multiply": (lambda x, c: (jsl.qr(x, pivoting=True), jsl.qr_multiply(x, c)),
                             lambda t: (_general((4, 3), t), _general((2, 4), t))),
    "factorisations": (lambda p, x: (jnp.linalg.cholesky(p), jsl.lu_factor(x), jnp.linalg.eigh(x + jnp.conj(x.T)),
                                     jnp.linalg.svd(x), jsl.solve_triangular(p, x, lower=True)),
                       lambda t: (_positive_definite(t), _general((4, 4), t))),
}


_TYPES = [np.float32, np.float64, np.complex64, np.complex128]


# One element type of each program in the default run (a different one from program to program), all four
# with the slow tests.
@pytest.mark.parametrize("name, dtype", [
    pytest.param(name, dtype, marks=[] if i % 4 == j else [pytest.mark.slow], id=f"{name}-{np.dtype(dtype)}")
    for i, name in enumerate(PROGRAMS) for j, dtype in enumerate(_TYPES)])
def test_library_calls_match_xla_cpu(name, dtype):
    function, make_arguments = PROGRAMS[name]
    with jax.enable_x64(True):
        arguments = make_arguments(dtype)
        module = from_jax(function, *arguments)
        expected = jax.jit(function)(*arguments)
        assert_same(xlapy.evaluate(module, *arguments), expected, exact_bits=True)
