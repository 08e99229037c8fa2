"""The LAPACK custom calls JAX emits on the CPU, run by the library thunks inside whole compiled programs and
compared with XLA:CPU through jax. jaxlib calls the same LAPACK (scipy's) with the same workspaces, so the
factorisations agree bit for bit; the programs around them (symmetrising, masking by ``info``, triangles)
are elementwise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import UnimplementedError
from xlapy.frontends.jax import from_jax, optimized_from_jax


def _positive_definite(n, dtype, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((*batch, n, n))
    if np.dtype(dtype).kind == "c":
        g = g + 1j * rng.standard_normal((*batch, n, n))
    return (g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)).astype(dtype)


def _general(shape, dtype, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


PROGRAMS = [
    ("cholesky", jnp.linalg.cholesky, lambda: (_positive_definite(5, np.float32, (2,)),)),
    ("cholesky_complex", jnp.linalg.cholesky, lambda: (_positive_definite(4, np.complex64),)),
    ("cholesky_not_positive", jnp.linalg.cholesky, lambda: (-_positive_definite(3, np.float32),)),
    ("lu_factor", jsl.lu_factor, lambda: (_general((6, 6), np.float32),)),
    ("qr", jnp.linalg.qr, lambda: (_general((2, 6, 4), np.float32),)),
    ("qr_complex_wide", jnp.linalg.qr, lambda: (_general((3, 5), np.complex64),)),
    ("eigh", jnp.linalg.eigh, lambda: (_positive_definite(6, np.float32),)),
    ("eigh_complex", jnp.linalg.eigh, lambda: (_positive_definite(4, np.complex64, (2,)),)),
    ("eigvalsh", jnp.linalg.eigvalsh, lambda: (_positive_definite(5, np.float32),)),
    ("svd", jnp.linalg.svd, lambda: (_general((2, 6, 4), np.float32),)),
    ("svd_thin", lambda x: jnp.linalg.svd(x, full_matrices=False), lambda: (_general((4, 7), np.complex64),)),
    ("singular_values", lambda x: jnp.linalg.svd(x, compute_uv=False), lambda: (_general((5, 3), np.float32),)),
    ("solve_triangular", lambda a, b: jsl.solve_triangular(a, b, lower=True),
     lambda: (_positive_definite(5, np.float32), _general((5, 3), np.float32))),
    ("solve_triangular_right", lambda a, b: jax.lax.linalg.triangular_solve(
        a, b, left_side=False, lower=False, transpose_a=True, unit_diagonal=True),
     lambda: (_positive_definite(4, np.float32, (2,)), _general((2, 3, 4), np.float32))),
]


@pytest.mark.parametrize("name, function, make_arguments", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_linear_algebra_programs_match_xla_cpu(name, function, make_arguments):
    arguments = make_arguments()
    executable = xlapy.compile(from_jax(function, *arguments))
    assert executable.summary.library_calls >= 1
    assert_same(executable(*arguments), jax.jit(function)(*arguments), exact_bits=True)


def test_xla_cpu_optimised_linear_algebra_runs_as_given():
    a = _positive_definite(4, np.float32, (3,))
    executable = xlapy.compile(optimized_from_jax(jnp.linalg.eigh, a), run_hlo_passes=False)
    assert_same(executable(a), jax.jit(jnp.linalg.eigh)(a), exact_bits=True)


@pytest.mark.parametrize("target, config", [
    ("lapack_sgeev_ffi", ""),
    ("lapack_sgesdd_ffi", ", backend_config={mode = 79 : ui8}"),
])
def test_unsupported_lapack_calls_are_refused_when_compiling(target, config):
    module = xlapy.parse_hlo(f"""HloModule lapack
ENTRY e {{ p = f32[3,3]{{0,1}} parameter(0)
  ROOT c = (f32[3,3]{{0,1}}, f32[3]{{0}}, f32[3,3]{{0,1}}, f32[3,3]{{0,1}}, s32[]) custom-call(p),
    custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI{config} }}""")
    with pytest.raises(UnimplementedError, match=target):
        xlapy.compile(module, run_hlo_passes=False)
