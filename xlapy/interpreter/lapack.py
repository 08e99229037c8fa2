"""The CPU library calls JAX emits as typed-FFI custom calls, computed as jaxlib computes them: the LAPACK
routines of ``jaxlib/cpu/lapack_kernels.cc`` (targets ``lapack_<t><routine>_ffi``, ``t`` one of s, d, c, z
for f32, f64, c64, c128) and the perturbed tridiagonal solver of ``jaxlib/tridiagonal_solve_perturbed.h``
(target ``tridiagonal_solve_perturbed_ffi``). The interpreter and the runtime's library thunks both run
them from here.

jaxlib takes its LAPACK from scipy (``scipy.linalg.cython_lapack``), so the routines here are scipy's too:
through its Python wrappers where they call the routine as jaxlib does, through the Cython-level function
where they do not (``geqp3`` with initial pivots). Each call is made as jaxlib's kernel makes it: every
matrix of the batch (the leading dimensions) in turn, with the same workspace sizes (the optimal size
LAPACK reports, or the documentation's sizes where jaxlib uses those), pivots counted from 1, the ``info``
of each matrix as an s32 result. Operands are never overwritten: each result is computed from a copy.

Where jaxlib leaves a result unwritten (eigenvectors not asked for, results of a matrix LAPACK failed on,
the eigendecomposition of a matrix with non-finite entries, whose ``info`` jaxlib sets to -4), the result
here is zero; JAX's programs replace such results with NaN by ``info`` or drop them.

Attributes are read from the custom call's ``backend_config`` dictionary: characters as u8 codes
(``uplo = 76 : ui8`` is ``L``), integers (``low = 1 : i32``) and booleans (``left = true``).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg.blas
import scipy.linalg.cython_lapack
import scipy.linalg.lapack

from xlapy.errors import UnimplementedError
from xlapy.shapes import ELEMENT_TYPES

if TYPE_CHECKING:
    from xlapy.hlo.ir import HloInstruction
    from xlapy.shapes import Shape

Attributes = dict[str, "str | int | bool"]
# A library computation: (routine prefix s/d/c/z, attributes, operands, result shapes) -> results, all
# logical arrays (the layouts of the custom call's shapes are the runner's business).
Computation = Callable[[str, Attributes, list[np.ndarray], list["Shape"]], list[np.ndarray]]
# An array's signature: (element type, dimensions).
Signature = tuple[str, tuple[int, ...]]

_LAPACK_TARGET = re.compile(r"lapack_([sdcz])(\w+)_ffi")
PERTURBED_TRIDIAGONAL_SOLVE = "tridiagonal_solve_perturbed_ffi"

_TYPES = {"s": "f32", "d": "f64", "c": "c64", "z": "c128"}
_REAL = {"s": "f32", "d": "f64", "c": "f32", "z": "f64"}
_COMPLEX = {"s": "c64", "d": "c128", "c": "c64", "z": "c128"}
_PREFIX_OF_TYPE = {t: p for p, t in _TYPES.items()}


class SignatureError(UnimplementedError):
    """A library custom call whose operands, results or attributes are not those of its target."""


# -- helpers -------------------------------------------------------------------------------------------


def _routine(prefix: str, name: str) -> Callable:
    return getattr(scipy.linalg.lapack, prefix + name)


def _matrices(x: np.ndarray) -> np.ndarray:
    """``x`` as ``[batch, rows, columns]`` (a copy)."""
    return np.array(x.reshape(-1, *x.shape[-2:]))


def _vectors(x: np.ndarray) -> np.ndarray:
    """``x`` as ``[batch, length]`` (a copy)."""
    return np.array(x.reshape(-1, x.shape[-1]))


def _workspace(routine: Callable, *args, **kwargs) -> int:
    """The optimal workspace LAPACK reports for ``routine`` (a query with ``lwork=-1``)."""
    work, info = routine(*args, lwork=-1, **kwargs)[-2:]
    return max(1, int(np.real(np.ravel(work)[0]))) if info == 0 else 1


def _reported_workspace(work: np.ndarray, info: int) -> int:
    """The workspace size a ``<routine>_lwork`` query reports."""
    return max(1, int(np.real(np.ravel(work)[0]))) if info == 0 else 1


def _dtype(shape: Shape) -> np.dtype:
    return np.dtype(ELEMENT_TYPES[shape.element_type].dtype)


def _batched(results: Sequence[Sequence[np.ndarray]], shapes: list[Shape]) -> list[np.ndarray]:
    """Per-matrix results stacked into the logical arrays of ``shapes``; a result with no parts is zero."""
    stacked = []
    for parts, shape in zip(results, shapes):
        array = np.zeros(shape.dimensions, _dtype(shape))
        if parts:
            flat = array.reshape(-1, *array.shape[len(array.shape) - np.ndim(parts[0]):])
            for i, part in enumerate(parts):
                if part is not None:
                    flat[i] = part
        stacked.append(array)
    return stacked


def _is_finite(a: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(a)))


_CAPSULE_NAME = ctypes.pythonapi.PyCapsule_GetName
_CAPSULE_NAME.restype, _CAPSULE_NAME.argtypes = ctypes.c_char_p, [ctypes.py_object]
_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.restype, _CAPSULE_POINTER.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _fortran_routine(name: str, arguments: int) -> Callable[..., None]:
    """The LAPACK routine ``name`` of ``scipy.linalg.cython_lapack`` as a C function of ``arguments``
    pointers (the Fortran calling convention: every argument by reference)."""
    capsule = scipy.linalg.cython_lapack.__pyx_capi__[name]
    address = _CAPSULE_POINTER(capsule, _CAPSULE_NAME(capsule))
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * arguments)(address)


def _int(value: int) -> np.ndarray:
    return np.array([value], np.int32)


# -- the routines ----------------------------------------------------------------------------------------


def _cholesky(prefix: str, attributes: Attributes, operands: list[np.ndarray],
              shapes: list[Shape]) -> list[np.ndarray]:
    potrf = _routine(prefix, "potrf")
    factors, infos = [], []
    for a in _matrices(operands[0]):
        # clean=0: the other triangle keeps the operand's values, as LAPACK leaves it.
        factor, info = potrf(np.asfortranarray(a), lower=attributes["uplo"] == "L", clean=0)
        factors.append(factor)
        infos.append(np.int32(info))
    return _batched([factors, infos], shapes)


def _lu(prefix: str, attributes: Attributes, operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    getrf = _routine(prefix, "getrf")
    factors, pivots, infos = [], [], []
    for a in _matrices(operands[0]):
        lu, pivot, info = getrf(np.asfortranarray(a))
        factors.append(lu)
        pivots.append(pivot + 1)  # scipy counts pivots from 0, LAPACK (and JAX) from 1
        infos.append(np.int32(info))
    return _batched([factors, pivots, infos], shapes)


def _qr(prefix: str, attributes: Attributes, operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    geqrf = _routine(prefix, "geqrf")
    factors, taus = [], []
    for a in _matrices(operands[0]):
        a = np.asfortranarray(a)
        qr, tau, _, _ = geqrf(a, lwork=_workspace(geqrf, a))
        factors.append(qr)
        taus.append(tau)
    return _batched([factors, taus], shapes)


def _pivoted_qr(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                shapes: list[Shape]) -> list[np.ndarray]:
    # scipy's wrapper of geqp3 starts every column free; jaxlib passes the operand's pivots (a nonzero
    # entry fixes that column to the front), so the routine is called directly.
    complex_routine = prefix in "cz"
    geqp3 = _fortran_routine(prefix + "geqp3", 10 if complex_routine else 9)
    matrices = _matrices(operands[0])
    m, n = matrices.shape[-2:]
    dtype = matrices.dtype
    # The integer arguments live in arrays held here for the length of the calls.
    rows, columns, lda, query_size, info = _int(m), _int(n), _int(max(1, m)), _int(-1), _int(0)
    query = np.zeros(1, dtype)
    geqp3(rows.ctypes.data, columns.ctypes.data, None, lda.ctypes.data, None, None, query.ctypes.data,
          query_size.ctypes.data, *([None] if complex_routine else []), info.ctypes.data)
    lwork = _int(max(1, int(np.real(query[0]))) if info[0] == 0 else 1)
    work = np.zeros(lwork[0], dtype)
    rwork = np.zeros(2 * n, np.abs(query).dtype)
    factors, pivots, taus = [], [], []
    for a, jpvt in zip(matrices, _vectors(operands[1].astype(np.int32))):
        a, jpvt, tau = np.asfortranarray(a), np.ascontiguousarray(jpvt), np.zeros(min(m, n), dtype)
        geqp3(rows.ctypes.data, columns.ctypes.data, a.ctypes.data, lda.ctypes.data, jpvt.ctypes.data,
              tau.ctypes.data, work.ctypes.data, lwork.ctypes.data,
              *([rwork.ctypes.data] if complex_routine else []), info.ctypes.data)
        factors.append(a)
        pivots.append(jpvt)
        taus.append(tau)
    return _batched([factors, pivots, taus], shapes)


def _householder_product(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                         shapes: list[Shape]) -> list[np.ndarray]:
    orgqr = _routine(prefix, "orgqr" if prefix in "sd" else "ungqr")
    products = []
    for a, tau in zip(_matrices(operands[0]), _vectors(operands[1])):
        a = np.asfortranarray(a)
        q, _, _ = orgqr(a, tau, lwork=_workspace(orgqr, a, tau))
        products.append(q)
    return _batched([products], shapes)


def _householder_multiply(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                          shapes: list[Shape]) -> list[np.ndarray]:
    ormqr = _routine(prefix, "ormqr" if prefix in "sd" else "unmqr")
    side = b"L" if attributes["left"] else b"R"
    trans = (b"T" if prefix in "sd" else b"C") if attributes["transpose"] else b"N"
    products = []
    for a, tau, c in zip(_matrices(operands[0]), _vectors(operands[1]), _matrices(operands[2])):
        # The reflectors are the first len(tau) columns (scipy's wrapper takes their count from a's shape).
        a, c = np.asfortranarray(a[:, :len(tau)]), np.asfortranarray(c)
        _, work, info = ormqr(side, trans, a, tau, c, -1)
        product, _, _ = ormqr(side, trans, a, tau, c, _reported_workspace(work, info))
        products.append(product)
    return _batched([products], shapes)


def _symmetric_eigen(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                     shapes: list[Shape]) -> list[np.ndarray]:
    vectors = attributes["mode"] == "V"
    lower = attributes["uplo"] == "L"
    matrices = _matrices(operands[0])
    n = matrices.shape[-1]
    # The workspace sizes jaxlib passes (the LAPACK documentation's minimum for the mode).
    liwork = 3 + 5 * n if vectors else 1
    if prefix in "sd":
        routine = _routine(prefix, "syevd")
        sizes = {"lwork": 1 + 6 * n + 2 * n * n if vectors else 2 * n + 1, "liwork": liwork}
    else:
        routine = _routine(prefix, "heevd")
        sizes = {"lwork": 2 * n + n * n if vectors else n + 1,
                 "lrwork": 1 + 5 * n + 2 * n * n if vectors else max(n, 1), "liwork": liwork}
    all_vectors, values, infos = [], [], []
    for a in matrices:
        a = np.asfortranarray(a)
        w, v, info = routine(a, compute_v=int(vectors), lower=int(lower), overwrite_a=1, **sizes)
        all_vectors.append(v if vectors else a)
        values.append(w)
        infos.append(np.int32(info))
    return _batched([all_vectors, values, infos], shapes)


def _unpack_eigenvectors(imaginary: np.ndarray, packed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Real ``geev``'s eigenvectors as complex columns: a conjugate pair of eigenvalues (imaginary parts
    nonzero) shares two columns, the real and imaginary parts of the first one's vector."""
    n = len(imaginary)
    unpacked = np.zeros((n, n), dtype)
    j = 0
    while j < n:
        if imaginary[j] == 0 or np.isnan(imaginary[j]) or j + 1 == n:
            unpacked[:, j].real = packed[:, j]
            j += 1
        else:
            unpacked[:, j].real = unpacked[:, j + 1].real = packed[:, j]
            unpacked[:, j].imag = packed[:, j + 1]
            unpacked[:, j + 1].imag = -packed[:, j + 1]
            j += 2
    return unpacked


def _general_eigen(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                   shapes: list[Shape]) -> list[np.ndarray]:
    geev = _routine(prefix, "geev")
    left, right = int(attributes["compute_left"] == "V"), int(attributes["compute_right"] == "V")
    matrices = _matrices(operands[0])
    n = matrices.shape[-1]
    lwork = _reported_workspace(*_routine(prefix, "geev_lwork")(n, compute_vl=left, compute_vr=right))
    real = prefix in "sd"
    outs: list[list[np.ndarray | None]] = [[] for _ in shapes]
    for a in matrices:
        values: list[np.ndarray | None]
        if not _is_finite(a):  # jaxlib does not call geev on it
            values, info = [None] * (len(shapes) - 1), -4
        elif real:
            wr, wi, vl, vr, info = geev(np.asfortranarray(a), compute_vl=left, compute_vr=right, lwork=lwork,
                                        overwrite_a=1)
            complex_type = _dtype(shapes[2])
            vectors = [_unpack_eigenvectors(wi, v, complex_type) if compute and info == 0 else None
                       for v, compute in ((vl, left), (vr, right))]
            values = [wr, wi, *vectors]
        else:
            w, vl, vr, info = geev(np.asfortranarray(a), compute_vl=left, compute_vr=right, lwork=lwork,
                                   overwrite_a=1)
            values = [w, vl if left else None, vr if right else None]
        for out, value in zip(outs, [*values, np.int32(info)]):
            out.append(value)
    return _batched(outs, shapes)


def _schur(prefix: str, attributes: Attributes, operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    gees = _routine(prefix, "gees")
    vectors = int(attributes["mode"] == "V")
    matrices = _matrices(operands[0])

    def not_selected(*_):  # never called: jaxlib does not sort the eigenvalues
        return 0

    lwork = _workspace(gees, not_selected, np.asfortranarray(matrices[0]), compute_v=vectors, sort_t=0) \
        if len(matrices) else 1
    outs: list[list[np.ndarray | None]] = [[] for _ in shapes]
    for a in matrices:
        t, sdim, *values, _, info = gees(not_selected, np.asfortranarray(a), compute_v=vectors, sort_t=0,
                                            lwork=lwork, overwrite_a=1)
        *eigenvalues, schur_vectors = values
        for out, value in zip(outs, [t, schur_vectors if vectors else None, *eigenvalues, np.int32(sdim),
                                     np.int32(info)]):
            out.append(value)
    return _batched(outs, shapes)


def _hessenberg(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                shapes: list[Shape]) -> list[np.ndarray]:
    gehrd = _routine(prefix, "gehrd")
    matrices = _matrices(operands[0])
    n = matrices.shape[-1]
    # scipy's wrapper counts lo and hi from 0, LAPACK (and the attributes) from 1.
    lo, hi = int(attributes["low"]) - 1, int(attributes["high"]) - 1
    lwork = _reported_workspace(*_routine(prefix, "gehrd_lwork")(n, lo=lo, hi=hi))
    outs: list[list[np.ndarray]] = [[], [], []]
    for a in matrices:
        h, tau, info = gehrd(np.asfortranarray(a), lo=lo, hi=hi, lwork=lwork, overwrite_a=1)
        for out, value in zip(outs, (h, tau[:n - 1], np.int32(info))):
            out.append(value)
    return _batched(outs, shapes)


def _tridiagonal(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                 shapes: list[Shape]) -> list[np.ndarray]:
    sytrd = _routine(prefix, "sytrd" if prefix in "sd" else "hetrd")
    matrices = _matrices(operands[0])
    n = matrices.shape[-1]
    # jaxlib asks for the workspace of the lower triangle whichever triangle it reduces.
    lwork = _reported_workspace(*_routine(prefix, "sytrd_lwork" if prefix in "sd" else "hetrd_lwork")(n, lower=1))
    lower = int(attributes["uplo"] == "L")
    outs: list[list[np.ndarray]] = [[], [], [], [], []]
    for a in matrices:
        c, d, e, tau, info = sytrd(np.asfortranarray(a), lower=lower, lwork=lwork, overwrite_a=1)
        for out, value in zip(outs, (c, d, e, tau, np.int32(info))):
            out.append(value)
    return _batched(outs, shapes)


def _tridiagonal_solve(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                       shapes: list[Shape]) -> list[np.ndarray]:
    gtsv = _routine(prefix, "gtsv")
    outs: list[list[np.ndarray]] = [[], [], [], [], []]
    for dl, d, du, b in zip(*(_vectors(o) for o in operands[:3]), _matrices(operands[3])):
        # jaxlib passes the sub-diagonal from its second entry (the first is outside the matrix) and the
        # super-diagonal up to its second last; gtsv overwrites them with U's second and first
        # super-diagonals, the diagonal with U's.
        second, d_out, first, x, info = gtsv(dl[1:], d, du[:-1], np.asfortranarray(b))
        dl_out, du_out = dl.copy(), du.copy()
        dl_out[1:len(second) + 1] = second
        du_out[:len(first)] = first
        for out, value in zip(outs, (dl_out, d_out, du_out, x, np.int32(info))):
            out.append(value)
    return _batched(outs, shapes)


def _svd(prefix: str, attributes: Attributes, operands: list[np.ndarray], shapes: list[Shape],
         routine_name: str) -> list[np.ndarray]:
    mode = attributes["mode"]
    routine = _routine(prefix, routine_name)
    lwork_query = _routine(prefix, routine_name + "_lwork")
    compute_uv, full = int(mode != "N"), int(mode == "A")
    outs: list[list[np.ndarray | None]] = [[], [], [], [], []]
    matrices = _matrices(operands[0])
    m, n = matrices.shape[-2:]
    lwork = _reported_workspace(*lwork_query(m, n, compute_uv=compute_uv, full_matrices=full))
    for a in matrices:
        a = np.asfortranarray(a)
        u, s, vt, info = routine(a, compute_uv=compute_uv, full_matrices=full, overwrite_a=1, lwork=lwork)
        for out, value in zip(outs, (a, s, u if compute_uv else None, vt if compute_uv else None,
                                     np.int32(info))):
            out.append(value)
    return _batched(outs, shapes)


def _divide_and_conquer_svd(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                            shapes: list[Shape]) -> list[np.ndarray]:
    return _svd(prefix, attributes, operands, shapes, "gesdd")


def _qr_iteration_svd(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                      shapes: list[Shape]) -> list[np.ndarray]:
    return _svd(prefix, attributes, operands, shapes, "gesvd")


def _triangular_solve(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                      shapes: list[Shape]) -> list[np.ndarray]:
    trsm = getattr(scipy.linalg.blas, prefix + "trsm")
    alpha = operands[2].reshape(()).item() if len(operands) > 2 else 1
    options = {"side": int(attributes["side"] == "R"), "lower": int(attributes["uplo"] == "L"),
               "trans_a": {"N": 0, "T": 1, "C": 2}[str(attributes["trans_x"])],
               "diag": int(attributes["diag"] == "U")}
    solutions = []
    for a, b in zip(_matrices(operands[0]), _matrices(operands[1])):
        solutions.append(trsm(alpha, np.asfortranarray(a), np.asfortranarray(b), **options))
    return _batched([solutions], shapes)


# -- the perturbed tridiagonal solver (jaxlib's own, after LAPACK's xLAGTF and xLAGTS) ----------------------


def _complex_divide(a: np.complexfloating, b: np.complexfloating) -> np.complexfloating:
    """``a / b`` as C++'s ``std::complex`` divides (the runtime library's ``__divdc3``/``__divsc3``): Smith's
    algorithm in the element's precision, which rounds differently from numpy's complex division."""
    complex_type = np.result_type(a, b).type
    real = np.finfo(complex_type).dtype.type
    ar, ai, c, d = real(np.real(a)), real(np.imag(a)), real(np.real(b)), real(np.imag(b))
    if np.abs(c) < np.abs(d):
        ratio = c / d
        denominator = c * ratio + d
        return complex_type(complex((ar * ratio + ai) / denominator, (ai * ratio - ar) / denominator))
    ratio = d / c
    denominator = d * ratio + c
    return complex_type(complex((ai * ratio + ar) / denominator, (ai - ar * ratio) / denominator))


def _multiply(a: np.ndarray | np.generic, b: np.ndarray | np.generic) -> np.ndarray | np.generic:
    """``a * b`` rounding each product and sum once, as C++ does: numpy's vectorised complex product may fuse
    them."""
    if not (np.iscomplexobj(a) and np.iscomplexobj(b)):
        return a * b
    real = np.real(a) * np.real(b) - np.imag(a) * np.imag(b)
    imaginary = np.real(a) * np.imag(b) + np.imag(a) * np.real(b)
    result = np.empty(np.broadcast(real, imaginary).shape, np.result_type(a, b))
    result.real, result.imag = real, imaginary
    return result if result.ndim else result[()]


def _divide(a: np.ndarray | np.generic, b: np.generic) -> np.ndarray | np.generic:
    if not (np.iscomplexobj(a) or np.iscomplexobj(b)):
        return a / b
    if np.ndim(a):
        return np.array([_complex_divide(v, b) for v in a], np.result_type(a, b))
    return _complex_divide(a, b)


def _copysign(magnitude: np.floating, value: np.generic) -> np.floating:
    return np.copysign(magnitude, np.real(value))


def _perturb_pivot(perturb: np.floating, pivot: np.generic, row: np.ndarray) -> tuple[np.generic, np.ndarray]:
    """A pivot below 1 moved away from zero (by ``perturb``, doubling) until neither the row divided by it
    nor its reciprocal overflows, or the pivot and row scaled up together when the pivot is tiny."""
    real = np.abs(pivot).dtype.type
    one = real(1)
    info = np.finfo(real)
    tiny, small = real(info.tiny), one / real(info.max)
    safe_minimum = tiny if small < tiny else small * (one + real(info.eps))
    big = one / safe_minimum
    magnitude = np.abs(pivot)
    if magnitude >= one:
        return pivot, row
    perturb = _copysign(max(np.abs(perturb), safe_minimum), pivot)
    largest = np.max(np.abs(row)) if row.size else real(0)
    while magnitude < one:
        if magnitude < safe_minimum:
            if magnitude == 0 or largest * safe_minimum > magnitude:
                pivot, perturb = pivot + perturb, perturb * real(2)
            else:
                return pivot * big, row * big
        elif largest > magnitude * big:
            pivot, perturb = pivot + perturb, perturb * real(2)
        else:
            break
        magnitude = np.abs(pivot)
    return pivot, row


def _solve_perturbed(dl: np.ndarray, d: np.ndarray, du: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """One tridiagonal system (sub-, main and super-diagonal of length n, ``rhs`` n x k) by Gaussian
    elimination with row pivoting, perturbing pivots too small to divide by."""
    n = len(d)
    x = np.zeros_like(rhs)
    if n == 0:
        return x
    real = np.abs(d[:1]).dtype.type
    eps = real(np.finfo(real).eps)
    zero, one = d.dtype.type(0), d.dtype.type(1)
    if n == 1:
        pivot, row = _perturb_pivot(eps * np.abs(d[0]), d[0], rhs[0].copy())
        x[0] = _divide(row, pivot)
        return x
    # The columns of u: U's diagonal and first and second super-diagonals.
    u = np.zeros((n, 3), d.dtype)
    u[0, 0], u[0, 1] = d[0], du[0]
    largest_u = max(np.abs(u[0, 0]), np.abs(u[0, 1]))
    scale1 = np.abs(u[0, 0]) + np.abs(u[0, 1])
    x[0] = rhs[0]
    for k in range(n - 1):
        u[k + 1, 0] = d[k + 1]
        scale2 = np.abs(dl[k + 1]) + np.abs(u[k + 1, 0])
        if k < n - 2:
            scale2 += np.abs(du[k + 1])
        if dl[k + 1] == zero:
            scale1 = scale2
            u[k + 1, 1] = du[k + 1]
            u[k, 2] = zero
            x[k + 1] = rhs[k + 1]
        else:
            pivot1 = real(0) if u[k, 0] == zero else np.abs(u[k, 0]) / scale1
            pivot2 = np.abs(dl[k + 1]) / scale2
            if pivot2 <= pivot1:
                scale1 = scale2
                factor = _divide(dl[k + 1], u[k, 0])
                u[k + 1, 0] -= _multiply(factor, u[k, 1])
                u[k + 1, 1] = du[k + 1]
                u[k, 2] = zero
                x[k + 1] = rhs[k + 1] - _multiply(factor, x[k])
            else:  # rows k and k + 1 swap
                factor = _divide(u[k, 0], dl[k + 1])
                previous = u[k, 1]
                u[k, 0] = dl[k + 1]
                u[k + 1, 0] = previous - _multiply(factor, d[k + 1])
                u[k, 1] = d[k + 1]
                if k < n - 2:
                    u[k, 2] = du[k + 1]
                    u[k + 1, 1] = _multiply(-factor, du[k + 1])
                x[k + 1] = x[k] - _multiply(factor, rhs[k + 1])
                x[k] = rhs[k + 1]
                scale1 = np.abs(u[k + 1, 0]) + np.abs(u[k + 1, 1])
        if k < n - 2:
            largest_u = max(largest_u, *np.abs(u[k]))
    largest_u = max(largest_u, np.abs(u[n - 1, 0]))
    perturb = eps * largest_u
    pivot, row = _perturb_pivot(perturb, u[n - 1, 0], x[n - 1].copy())
    x[n - 1] = _multiply(row, _divide(one, pivot))
    row = x[n - 2] - _multiply(u[n - 2, 1], x[n - 1])
    pivot, row = _perturb_pivot(_copysign(perturb, u[n - 2, 0]), u[n - 2, 0], row)
    x[n - 2] = _multiply(row, _divide(one, pivot))
    for k in range(n - 3, -1, -1):
        pivot, row = _perturb_pivot(_copysign(perturb, u[k, 0]), u[k, 0],
                                    x[k] - _multiply(u[k, 1], x[k + 1]) - _multiply(u[k, 2], x[k + 2]))
        x[k] = _multiply(row, _divide(one, pivot))
    return x


def _perturbed_tridiagonal_solve(prefix: str, attributes: Attributes, operands: list[np.ndarray],
                                 shapes: list[Shape]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):  # overflow and division by zero give what they give in C++
        solutions = [_solve_perturbed(dl, d, du, b)
                     for dl, d, du, b in zip(*(_vectors(o) for o in operands[:3]), _matrices(operands[3]))]
    return _batched([solutions], shapes)


# -- signatures ----------------------------------------------------------------------------------------------


def _batch(dims: tuple[int, ...]) -> tuple[int, ...]:
    return dims[:-2]


def _potrf_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), ("s32", _batch(dims))]


def _getrf_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), ("s32", (*_batch(dims), min(dims[-2:]))), ("s32", _batch(dims))]


def _geqrf_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), (_TYPES[p], (*_batch(dims), min(dims[-2:])))]


def _geqp3_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), ("s32", (*_batch(dims), dims[-1])), (_TYPES[p], (*_batch(dims), min(dims[-2:])))]


def _same_as_operand(index: int) -> Callable[[str, Attributes, list[Signature]], list[Signature]]:
    def results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
        return [operands[index]]

    return results


def _syevd_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), (_REAL[p], (*_batch(dims), dims[-1])), ("s32", _batch(dims))]


def _svd_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    batch, (m, n) = _batch(dims), dims[-2:]
    k = min(m, n)
    full = attributes["mode"] == "A"
    return [(_TYPES[p], dims), (_REAL[p], (*batch, k)), (_TYPES[p], (*batch, m, m if full else k)),
            (_TYPES[p], (*batch, n if full else k, n)), ("s32", batch)]


def _geev_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    values = (*_batch(dims), dims[-1])
    vectors = [(_COMPLEX[p], dims)] * 2
    eigenvalues = [(_TYPES[p], values)] * (2 if p in "sd" else 1)
    return [*eigenvalues, *vectors, ("s32", _batch(dims))]


def _gees_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    eigenvalues = [(_TYPES[p], (*_batch(dims), dims[-1]))] * (2 if p in "sd" else 1)
    return [(_TYPES[p], dims), (_TYPES[p], dims), *eigenvalues, ("s32", _batch(dims)), ("s32", _batch(dims))]


def _gehrd_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    return [(_TYPES[p], dims), (_TYPES[p], (*_batch(dims), max(dims[-1] - 1, 0))), ("s32", _batch(dims))]


def _sytrd_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    dims = operands[0][1]
    batch, n = _batch(dims), dims[-1]
    return [(_TYPES[p], dims), (_REAL[p], (*batch, n)), (_REAL[p], (*batch, max(n - 1, 0))),
            (_TYPES[p], (*batch, max(n - 1, 0))), ("s32", batch)]


def _gtsv_results(p: str, attributes: Attributes, operands: list[Signature]) -> list[Signature]:
    return [*operands, ("s32", _batch(operands[3][1]))]


@dataclass(frozen=True)
class LibraryRoutine:
    """One routine: its computation, how many operands it takes (and which are matrices, of rank >= 2), the
    results it returns for given operands, and the attributes it reads. ``letters`` names each character
    attribute with the letters it may be; ``integers`` and ``booleans`` the other attributes."""

    computation: Computation
    operand_counts: tuple[int, ...]
    matrix_operands: tuple[int, ...]
    results: Callable[[str, Attributes, list[Signature]], list[Signature]]
    letters: dict[str, str]
    integers: tuple[str, ...] = ()
    booleans: tuple[str, ...] = ()
    square: bool = False


_UPLO = {"uplo": "LU"}
LAPACK_ROUTINES: dict[str, LibraryRoutine] = {
    "potrf": LibraryRoutine(_cholesky, (1,), (0,), _potrf_results, _UPLO, square=True),
    "getrf": LibraryRoutine(_lu, (1,), (0,), _getrf_results, {}),
    "geqrf": LibraryRoutine(_qr, (1,), (0,), _geqrf_results, {}),
    "geqp3": LibraryRoutine(_pivoted_qr, (2,), (0,), _geqp3_results, {}),
    "orgqr": LibraryRoutine(_householder_product, (2,), (0,), _same_as_operand(0), {}),
    "ungqr": LibraryRoutine(_householder_product, (2,), (0,), _same_as_operand(0), {}),
    "ormqr": LibraryRoutine(_householder_multiply, (3,), (0, 2), _same_as_operand(2), {},
                            booleans=("left", "transpose")),
    "unmqr": LibraryRoutine(_householder_multiply, (3,), (0, 2), _same_as_operand(2), {},
                            booleans=("left", "transpose")),
    "syevd": LibraryRoutine(_symmetric_eigen, (1,), (0,), _syevd_results, {"mode": "VN", **_UPLO}, square=True),
    "heevd": LibraryRoutine(_symmetric_eigen, (1,), (0,), _syevd_results, {"mode": "VN", **_UPLO}, square=True),
    "geev": LibraryRoutine(_general_eigen, (1,), (0,), _geev_results, {"compute_left": "VN", "compute_right": "VN"},
                           square=True),
    "gees": LibraryRoutine(_schur, (1,), (0,), _gees_results, {"mode": "VN", "sort": "N"}, square=True),
    "gehrd": LibraryRoutine(_hessenberg, (1,), (0,), _gehrd_results, {}, integers=("low", "high"), square=True),
    "sytrd": LibraryRoutine(_tridiagonal, (1,), (0,), _sytrd_results, _UPLO, square=True),
    "hetrd": LibraryRoutine(_tridiagonal, (1,), (0,), _sytrd_results, _UPLO, square=True),
    "gtsv": LibraryRoutine(_tridiagonal_solve, (4,), (3,), _gtsv_results, {}),
    "gesdd": LibraryRoutine(_divide_and_conquer_svd, (1,), (0,), _svd_results, {"mode": "ASN"}),
    "gesvd": LibraryRoutine(_qr_iteration_svd, (1,), (0,), _svd_results, {"mode": "ASN"}),
    # alpha: 1, or a third operand (jaxlib before its FFI kernel dropped it).
    "trsm": LibraryRoutine(_triangular_solve, (2, 3), (0, 1), _same_as_operand(1),
                           {"side": "LR", "uplo": "LU", "trans_x": "NTC", "diag": "NU"}),
}
_PERTURBED = LibraryRoutine(_perturbed_tridiagonal_solve, (4,), (3,), _same_as_operand(3), {})

# The routines each dtype letter has (the others are the complex or real names of the same routine).
_REAL_ONLY, _COMPLEX_ONLY = {"orgqr", "ormqr", "syevd", "sytrd"}, {"ungqr", "unmqr", "heevd", "hetrd"}


@dataclass(frozen=True)
class LibraryCall:
    """A checked library custom call: what to compute and how."""

    target: str
    prefix: str
    routine: LibraryRoutine
    attributes: Attributes

    def run(self, operands: list[np.ndarray], result_shapes: list[Shape]) -> list[np.ndarray]:
        """The results (logical arrays) of the call on the logical arrays ``operands``."""
        return self.routine.computation(self.prefix, self.attributes, operands, result_shapes)


def _config_values(instr: HloInstruction) -> dict[str, str]:
    """The fields of a typed-FFI custom call's ``backend_config`` dictionary, as text (``{mode = 65 : ui8,
    left = true}`` gives ``{"mode": "65", "left": "true"}``)."""
    text = instr.attr("backend_config") or ""
    if not isinstance(text, str):
        return {}
    return dict(re.findall(r"([A-Za-z_][\w.]*)\s*=\s*(-?\d+|true|false)", text))


def is_library_target(target: str) -> bool:
    """Whether ``target`` names one of jaxlib's CPU library calls (known to xlapy or not)."""
    return target == PERTURBED_TRIDIAGONAL_SOLVE or _LAPACK_TARGET.fullmatch(target) is not None


def library_call(instr: HloInstruction) -> LibraryCall:
    """The library call ``instr`` makes, checked against its target's operands, results and attributes;
    raises ``UnimplementedError`` for a target xlapy does not run and ``SignatureError`` for a call whose
    shapes or attributes are not its target's."""
    target = instr.attr("custom_call_target")
    match = _LAPACK_TARGET.fullmatch(target) if isinstance(target, str) else None
    name = match.group(2) if match else None
    if target == PERTURBED_TRIDIAGONAL_SOLVE and instr.operands:
        routine = _PERTURBED
        prefix = _PREFIX_OF_TYPE.get(instr.operands[0].shape.element_type, "")
    elif match and name in LAPACK_ROUTINES and not (
            (match.group(1) in "sd" and name in _COMPLEX_ONLY) or (match.group(1) in "cz" and name in _REAL_ONLY)):
        routine, prefix = LAPACK_ROUTINES[name], match.group(1)
    else:
        raise UnimplementedError(f"custom-call {instr.name}: the CPU backend has no library call for target "
                                 f"{target!r}")
    operands = [o.shape for o in instr.operands]
    results = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]

    def mismatch(why: str) -> SignatureError:
        return SignatureError(f"custom-call {instr.name}: {target} with operands "
                              f"{', '.join(str(s) for s in operands)} and results {instr.shape}: {why}")

    if len(operands) not in routine.operand_counts:
        raise mismatch(f"it takes {' or '.join(map(str, routine.operand_counts))} operands")
    if not prefix or any(not s.is_array for s in operands) or operands[0].element_type != _TYPES[prefix]:
        raise mismatch(f"its operand is {_TYPES.get(prefix, 'f32, f64, c64 or c128')}")
    if any(operands[i].rank < 2 for i in routine.matrix_operands) or \
            (routine.square and operands[0].dimensions[-1] != operands[0].dimensions[-2]):
        raise mismatch("its matrix operands have rank >= 2" + (" and are square" if routine.square else ""))
    attributes = _attributes(instr, routine, mismatch)
    signatures = [(s.element_type, tuple(s.dimensions)) for s in operands]
    expected = routine.results(prefix, attributes, signatures)
    declared = [(s.element_type, tuple(s.dimensions)) if s.is_array else None for s in results]
    alternatives = [expected]
    if routine.computation in (_divide_and_conquer_svd, _qr_iteration_svd) and attributes["mode"] == "N":
        # U and V^T are not computed; JAX declares them full or thin.
        alternatives.append(routine.results(prefix, {"mode": "A"}, signatures))
    if declared not in alternatives:
        raise mismatch(f"expected results {', '.join(f'{t}{list(d)}' for t, d in expected)}")
    return LibraryCall(target, prefix, routine, attributes)


def _attributes(instr: HloInstruction, routine: LibraryRoutine,
                mismatch: Callable[[str], SignatureError]) -> Attributes:
    values = _config_values(instr)
    attributes: Attributes = {}
    for name, letters in routine.letters.items():
        number = values.get(name)
        letter = chr(int(number)) if number is not None and number.isdigit() and 0 < int(number) < 128 else None
        if letter is None or letter not in letters:
            raise mismatch(f"attribute {name} is one of {', '.join(letters)} (a u8 character code), got {number}")
        attributes[name] = letter
    for name in routine.integers:
        number = values.get(name)
        if number is None or number in ("true", "false"):
            raise mismatch(f"it needs the integer attribute {name}")
        attributes[name] = int(number)
    for name in routine.booleans:
        if values.get(name) not in ("true", "false"):
            raise mismatch(f"it needs the boolean attribute {name}")
        attributes[name] = values[name] == "true"
    return attributes
