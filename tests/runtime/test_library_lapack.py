"""The LAPACK custom calls JAX emits on the CPU, run by the library thunks inside whole compiled programs and
compared with XLA:CPU through jax. jaxlib calls the same LAPACK (scipy's) with the same workspaces, so the
factorisations agree bit for bit (eigenvalues in the order LAPACK gives them, eigenvectors with LAPACK's
normalisation and signs); the programs around them (symmetrising, masking by ``info``, triangles) are
elementwise. The interpreter computes the same calls with the same code (``xlapy.interpreter.lapack``) and
is checked against the compiled programs; residuals (A V = V diag(w), A = Q T Q^H, ...) check the
decompositions against their definitions, independently of both."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

import xlapy
from tools.compare import assert_same
from xlapy.errors import UnimplementedError
from xlapy.frontends.jax import from_jax, optimized_from_jax
from xlapy.interpreter.lapack import SignatureError


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


def _hermitian(x):
    return x + jnp.conj(jnp.swapaxes(x, -1, -2))


def _tridiagonal_system(dtype, batch=(2,), n=5, rhs=3, seed=2):
    dl, d, du = (_general((*batch, n), dtype, seed + i) for i in range(3))
    return dl, d + 3, du, _general((*batch, n, rhs), dtype, seed + 3)


_QR_SVD = lax.linalg.SvdAlgorithm.QR
# The calls JAX emits beyond the factorisations above, each in one of the four element types (the slow
# test below runs every one in all four).
NEW_ROUTINES = {
    "eig": (jnp.linalg.eig, lambda t: (_general((2, 4, 4), t),)),
    "eig_left_right": (lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True), lambda t: (_general((4, 4), t),)),
    "eigvals": (jnp.linalg.eigvals, lambda t: (_general((2, 5, 5), t),)),
    "schur": (lax.linalg.schur, lambda t: (_general((2, 4, 4), t),)),
    "schur_form_only": (lambda x: lax.linalg.schur(x, compute_schur_vectors=False), lambda t: (_general((4, 4), t),)),
    "hessenberg": (lax.linalg.hessenberg, lambda t: (_general((2, 5, 5), t),)),
    "hessenberg_q": (lambda x: jsl.hessenberg(x, calc_q=True), lambda t: (_general((4, 4), t),)),
    "tridiagonal_lower": (lambda x: lax.linalg.tridiagonal(_hermitian(x), lower=True),
                          lambda t: (_general((2, 5, 5), t),)),
    "tridiagonal_upper": (lambda x: lax.linalg.tridiagonal(_hermitian(x), lower=False),
                          lambda t: (_general((4, 4), t),)),
    "tridiagonal_solve": (lax.linalg.tridiagonal_solve, _tridiagonal_system),
    "tridiagonal_solve_perturbed": (
        lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True), _tridiagonal_system),
    "svd_qr": (lambda x: lax.linalg.svd(x, algorithm=_QR_SVD), lambda t: (_general((2, 5, 3), t),)),
    "svd_qr_thin": (lambda x: lax.linalg.svd(x, full_matrices=False, algorithm=_QR_SVD),
                    lambda t: (_general((3, 5), t),)),
    "singular_values_qr": (lambda x: lax.linalg.svd(x, compute_uv=False, algorithm=_QR_SVD),
                           lambda t: (_general((2, 4, 6), t),)),
    "qr_pivoting": (lambda x: jsl.qr(x, pivoting=True), lambda t: (_general((5, 4), t),)),
    "qr_multiply": (jsl.qr_multiply, lambda t: (_general((5, 3), t), _general((2, 5), t))),
    "ormqr_left_transposed": (lambda a, taus, c: lax.linalg.ormqr(a, taus, c, left=True, transpose=True),
                              lambda t: (*jax.tree.map(np.asarray, jax.jit(lax.linalg.tridiagonal)(
                                  _hermitian(_general((2, 4, 4), t))))[::3], _general((2, 4, 3), t))),
}
_DEFAULT_TYPES = dict(zip(NEW_ROUTINES, [np.float32, np.complex64, np.float64, np.complex128] * 5))


def _compiled_interpreted_and_xla(function, arguments):
    module = from_jax(function, *arguments)
    executable = xlapy.compile(module)
    assert executable.summary.library_calls >= 1
    return executable(*arguments), xlapy.evaluate(module, *arguments), jax.jit(function)(*arguments)


def _check_routine(name, dtype):
    function, make_arguments = NEW_ROUTINES[name]
    with jax.enable_x64(True):
        arguments = make_arguments(dtype)
        compiled, interpreted, expected = _compiled_interpreted_and_xla(function, arguments)
    assert_same(compiled, expected, exact_bits=True)
    assert_same(interpreted, compiled, exact_bits=True)


# The default run compiles a spread of them; the rest run with the slow tests.
_DEFAULT = {"eig", "schur", "hessenberg_q", "tridiagonal_upper", "tridiagonal_solve_perturbed", "svd_qr_thin",
            "qr_multiply"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in _DEFAULT else [pytest.mark.slow])
                                  for n in NEW_ROUTINES])
def test_eigen_schur_reductions_and_solvers_match_xla_cpu(name):
    _check_routine(name, _DEFAULT_TYPES[name])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=str)
@pytest.mark.parametrize("name", NEW_ROUTINES)
def test_every_routine_in_every_element_type_matches_xla_cpu(name, dtype):
    _check_routine(name, dtype)


def _tolerance(dtype):
    return 200 * np.finfo(dtype).eps


def test_eigenvectors_and_schur_vectors_satisfy_their_definitions():
    a = _general((2, 5, 5), np.float32, seed=4)
    w, v, left_w, left, _, t, q = xlapy.compile(from_jax(
        lambda x: (*jnp.linalg.eig(x), *lax.linalg.eig(x, compute_left_eigenvectors=True), *lax.linalg.schur(x)),
        a))(a)
    a64 = a.astype(np.complex128)
    assert np.any(np.imag(w) != 0)  # a conjugate pair: the packed vectors were unpacked
    np.testing.assert_allclose(a64 @ v, v * w[:, None, :], atol=_tolerance(np.float32) * 10)
    # Left eigenvectors: u^H A = w u^H.
    left_h = np.conj(np.swapaxes(left, -1, -2))
    np.testing.assert_allclose(left_h @ a64, left_w[:, :, None] * left_h, atol=_tolerance(np.float32) * 10)
    np.testing.assert_allclose(q @ t @ np.swapaxes(q, -1, -2), a, atol=_tolerance(np.float32) * 10)
    assert np.all(np.tril(t, -2) == 0)  # quasi-triangular


def test_reductions_and_solves_satisfy_their_definitions():
    a = _general((5, 5), np.complex128, seed=5)
    hermitian = a + np.conj(a.T)
    dl, d, du, b = _tridiagonal_system(np.float64, batch=())
    with jax.enable_x64(True):
        h, q, _, diagonal, off, _, u, s, vh, x = xlapy.compile(from_jax(
            lambda a, hermitian, dl, d, du, b: (
                *jsl.hessenberg(a, calc_q=True), *lax.linalg.tridiagonal(hermitian, lower=True),
                *lax.linalg.svd(a, algorithm=_QR_SVD), lax.linalg.tridiagonal_solve(dl, d, du, b)),
            a, hermitian, dl, d, du, b))(a, hermitian, dl, d, du, b)
    np.testing.assert_allclose(q @ h @ np.conj(q.T), a, atol=1e-12)
    assert np.all(np.tril(h, -2) == 0)
    tridiagonal = np.diag(diagonal) + np.diag(off, 1) + np.diag(off, -1)
    np.testing.assert_allclose(np.linalg.eigvalsh(tridiagonal), np.linalg.eigvalsh(hermitian), atol=1e-12)
    np.testing.assert_allclose((u[:, :5] * s) @ vh, a, atol=1e-12)
    system = np.diag(d) + np.diag(du[:-1], 1) + np.diag(dl[1:], -1)
    np.testing.assert_allclose(system @ x, b, atol=1e-12)


def test_perturbed_solve_of_a_singular_system_stays_finite():
    # The second row is zero: gtsv reports it through info (JAX gives NaN), the perturbed solver moves the pivot.
    dl, d, du = np.array([0, 0, 0], np.float32), np.array([1, 0, 2], np.float32), np.array([1, 0, 0], np.float32)
    b = np.ones((3, 2), np.float32)
    function = lambda dl, d, du, b: (lax.linalg.tridiagonal_solve(dl, d, du, b),  # noqa: E731
                                     lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True))
    compiled, interpreted, expected = _compiled_interpreted_and_xla(function, (dl, d, du, b))
    assert_same(compiled, expected, exact_bits=True)
    assert_same(interpreted, compiled, exact_bits=True)
    assert np.all(np.isnan(compiled[0])) and np.all(np.isfinite(compiled[1]))


def test_eigendecomposition_of_a_matrix_with_nan_is_nan():
    # jaxlib does not call geev on it and reports info -4; JAX's program turns the results into NaN.
    a = _general((2, 3, 3), np.float32)
    a[1, 0, 0] = np.nan
    compiled, interpreted, expected = _compiled_interpreted_and_xla(jnp.linalg.eig, (a,))
    assert_same(compiled, expected, exact_bits=True)
    assert_same(interpreted, compiled, exact_bits=True)
    assert np.all(np.isnan(compiled[0][1])) and np.all(np.isfinite(compiled[0][0]))


@pytest.mark.parametrize("target, config", [
    ("lapack_sfoo_ffi", ""),  # no such routine
    ("lapack_sungqr_ffi", ""),  # the complex name of orgqr
    ("lapack_sgesdd_ffi", ", backend_config={mode = 79 : ui8}"),  # mode O: jaxlib's kernel refuses it too
])
def test_unsupported_lapack_calls_are_refused_when_compiling(target, config):
    module = xlapy.parse_hlo(f"""HloModule lapack
ENTRY e {{ p = f32[3,3]{{0,1}} parameter(0)
  ROOT c = (f32[3,3]{{0,1}}, f32[3]{{0}}, f32[3,3]{{0,1}}, f32[3,3]{{0,1}}, s32[]) custom-call(p),
    custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI{config} }}""")
    with pytest.raises(UnimplementedError, match=target):
        xlapy.compile(module, run_hlo_passes=False)


@pytest.mark.parametrize("results, config, why", [
    ("(f32[4]{0}, f32[4]{0}, c64[4,4]{1,0}, c64[4,4]{1,0}, s32[])", "", "compute_left"),
    ("(f32[4]{0}, f32[4]{0}, c64[4,4]{1,0}, s32[])", "compute_left = 78 : ui8, compute_right = 86 : ui8",
     "expected results"),
    ("(f32[4]{0}, f32[4]{0}, f32[4,4]{1,0}, c64[4,4]{1,0}, s32[])",
     "compute_left = 78 : ui8, compute_right = 86 : ui8", "expected results"),
])
def test_library_calls_with_the_wrong_signature_are_refused(results, config, why):
    module = xlapy.parse_hlo(f"""HloModule lapack
ENTRY e {{ p = f32[4,4]{{0,1}} parameter(0)
  ROOT c = {results} custom-call(p), custom_call_target="lapack_sgeev_ffi",
    api_version=API_VERSION_TYPED_FFI, backend_config={{{config}}} }}""")
    with pytest.raises(UnimplementedError, match=why):
        xlapy.compile(module, run_hlo_passes=False)
    with pytest.raises(SignatureError, match=why):
        xlapy.evaluate(module, np.eye(4, dtype=np.float32))
