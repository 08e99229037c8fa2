"""``custom-call`` as library calls, by target: XLA:CPU's ``TopK`` and the LAPACK calls JAX emits on the CPU
(``lapack_<t><routine>_ffi``, with ``t`` one of s, d, c, z; the kernels of ``jaxlib/cpu/lapack_kernels.cc``).

The LAPACK routines come from ``scipy.linalg.lapack`` and ``scipy.linalg.blas``, the library jaxlib itself
calls on the CPU, and run as JAX's kernels run them: every matrix of the batch (the leading dimensions) in
turn, column-major (the layouts JAX asks for make that the slices' own order), with the optimal workspace
LAPACK reports (JAX's for ``syevd``/``heevd``), pivots counted from 1 and the ``info`` of each matrix as an
s32 result. Operands are never overwritten: each result is computed from a copy and written to its slice.

Supported: Cholesky ``potrf`` (attribute ``uplo``), LU ``getrf``, QR ``geqrf`` and ``orgqr``/``ungqr``,
symmetric/Hermitian eigendecomposition ``syevd``/``heevd`` (``mode`` V or N, ``uplo``), SVD ``gesdd``
(``mode`` A, S or N) and triangular solve ``trsm`` (``side``, ``uplo``, ``trans_x``, ``diag``; alpha 1 or a
third operand). Anything else is refused at compile time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg.blas
import scipy.linalg.lapack

from xlapy.errors import UnimplementedError
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, dtype_of
from xlapy.runtime.thunks.library import backend_config_integers, check_layout, read, result_shapes, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.runtime.thunks.top_k import top_k_custom_call_thunk
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter

# A LAPACK computation: (routine prefix s/d/c/z, attributes, operands, result shapes) -> results, all logical.
Computation = Callable[[str, dict[str, str], list[np.ndarray], list[Shape]], list[np.ndarray]]

_TARGET = re.compile(r"lapack_([sdcz])(\w+)_ffi")


def _routine(prefix: str, name: str) -> Callable:
    return getattr(scipy.linalg.lapack, prefix + name)


def _matrices(x: np.ndarray) -> np.ndarray:
    """``x`` as ``[batch, rows, columns]`` (a copy)."""
    return np.array(x.reshape(-1, *x.shape[-2:]))


def _workspace(routine: Callable, *args, **kwargs) -> int:
    """The optimal workspace LAPACK reports for ``routine`` (a query with ``lwork=-1``)."""
    work, info = routine(*args, lwork=-1, **kwargs)[-2:]
    return max(1, int(np.real(np.ravel(work)[0]))) if info == 0 else 1


def _batched(results: list[list[np.ndarray]], shapes: list[Shape]) -> list[np.ndarray]:
    """Per-matrix results stacked into the logical arrays of ``shapes``."""
    stacked = []
    for parts, shape in zip(results, shapes):
        array = np.zeros(shape.dimensions, dtype_of(shape))
        flat = array.reshape(-1, *array.shape[len(array.shape) - parts[0].ndim:]) if parts else array
        for i, part in enumerate(parts):
            flat[i] = part
        stacked.append(array)
    return stacked


def _cholesky(prefix: str, attributes: dict[str, str], operands: list[np.ndarray],
              shapes: list[Shape]) -> list[np.ndarray]:
    potrf = _routine(prefix, "potrf")
    factors, infos = [], []
    for a in _matrices(operands[0]):
        # clean=0: the other triangle keeps the operand's values, as LAPACK leaves it.
        factor, info = potrf(np.asfortranarray(a), lower=attributes.get("uplo", "L") == "L", clean=0)
        factors.append(factor)
        infos.append(np.int32(info))
    return _batched([factors, infos], shapes)


def _lu(prefix: str, attributes: dict[str, str], operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    getrf = _routine(prefix, "getrf")
    factors, pivots, infos = [], [], []
    for a in _matrices(operands[0]):
        lu, pivot, info = getrf(np.asfortranarray(a))
        factors.append(lu)
        pivots.append(pivot + 1)  # scipy counts pivots from 0, LAPACK (and JAX) from 1
        infos.append(np.int32(info))
    return _batched([factors, pivots, infos], shapes)


def _qr(prefix: str, attributes: dict[str, str], operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    geqrf = _routine(prefix, "geqrf")
    factors, taus = [], []
    for a in _matrices(operands[0]):
        a = np.asfortranarray(a)
        qr, tau, _, _ = geqrf(a, lwork=_workspace(geqrf, a))
        factors.append(qr)
        taus.append(tau)
    return _batched([factors, taus], shapes)


def _householder_product(prefix: str, attributes: dict[str, str], operands: list[np.ndarray],
                         shapes: list[Shape]) -> list[np.ndarray]:
    orgqr = _routine(prefix, "orgqr" if prefix in "sd" else "ungqr")
    taus = operands[1].reshape(-1, operands[1].shape[-1])
    products = []
    for a, tau in zip(_matrices(operands[0]), taus):
        a = np.asfortranarray(a)
        q, _, _ = orgqr(a, tau, lwork=_workspace(orgqr, a, tau))
        products.append(q)
    return _batched([products], shapes)


def _eigh(prefix: str, attributes: dict[str, str], operands: list[np.ndarray],
          shapes: list[Shape]) -> list[np.ndarray]:
    vectors = attributes.get("mode", "V") == "V"
    lower = attributes.get("uplo", "L") == "L"
    matrices = _matrices(operands[0])
    n = matrices.shape[-1]
    # The workspace sizes JAX's kernels pass (the LAPACK documentation's minimum with vectors).
    if prefix in "sd":
        routine = _routine(prefix, "syevd")
        sizes = {"lwork": 1 + 6 * n + 2 * n * n, "liwork": 3 + 5 * n}
    else:
        routine = _routine(prefix, "heevd")
        sizes = {"lwork": 1 + 2 * n + n * n, "lrwork": 1 + 5 * n + 2 * n * n, "liwork": 3 + 5 * n}
    all_vectors, values, infos = [], [], []
    for a in matrices:
        a = np.asfortranarray(a)
        w, v, info = routine(a, compute_v=int(vectors), lower=int(lower), overwrite_a=1, **sizes)
        all_vectors.append(v)
        values.append(w)
        infos.append(np.int32(info))
    return _batched([all_vectors, values, infos], shapes)


def _svd(prefix: str, attributes: dict[str, str], operands: list[np.ndarray], shapes: list[Shape]) -> list[np.ndarray]:
    mode = attributes.get("mode", "A")
    gesdd = _routine(prefix, "gesdd")
    lwork_query = _routine(prefix, "gesdd_lwork")
    compute_uv, full = int(mode != "N"), int(mode == "A")
    outs: list[list[np.ndarray]] = [[], [], [], [], []]
    for a in _matrices(operands[0]):
        m, n = a.shape
        a = np.asfortranarray(a)
        work, _ = lwork_query(m, n, compute_uv=compute_uv, full_matrices=full)
        u, s, vt, info = gesdd(a, compute_uv=compute_uv, full_matrices=full, overwrite_a=1,
                               lwork=max(1, int(np.real(work))))
        if not compute_uv:  # U and V^T are results even when not computed: zeros
            u = np.zeros(shapes[2].dimensions[-2:], a.dtype)
            vt = np.zeros(shapes[3].dimensions[-2:], a.dtype)
        for out, value in zip(outs, (a, s, u, vt, np.int32(info))):
            out.append(value)
    return _batched(outs, shapes)


def _triangular_solve(prefix: str, attributes: dict[str, str], operands: list[np.ndarray],
                      shapes: list[Shape]) -> list[np.ndarray]:
    trsm = getattr(scipy.linalg.blas, prefix + "trsm")
    alpha = operands[2].reshape(()).item() if len(operands) > 2 else 1
    options = {"side": int(attributes.get("side", "L") == "R"), "lower": int(attributes.get("uplo", "L") == "L"),
               "trans_a": {"N": 0, "T": 1, "C": 2}[attributes.get("trans_x", "N")],
               "diag": int(attributes.get("diag", "N") == "U")}
    solutions = []
    for a, b in zip(_matrices(operands[0]), _matrices(operands[1])):
        solutions.append(trsm(alpha, np.asfortranarray(a), np.asfortranarray(b), **options))
    return _batched([solutions], shapes)


# Each routine's computation, the number of operands and results it takes, and the attributes it reads with
# the letters they may be.
_ROUTINES: dict[str, tuple[Computation, int, int, dict[str, str]]] = {
    "potrf": (_cholesky, 1, 2, {"uplo": "LU"}),
    "getrf": (_lu, 1, 3, {}),
    "geqrf": (_qr, 1, 2, {}),
    "orgqr": (_householder_product, 2, 1, {}),
    "ungqr": (_householder_product, 2, 1, {}),
    "syevd": (_eigh, 1, 3, {"mode": "VN", "uplo": "LU"}),
    "heevd": (_eigh, 1, 3, {"mode": "VN", "uplo": "LU"}),
    "gesdd": (_svd, 1, 5, {"mode": "ASN"}),
    "trsm": (_triangular_solve, 2, 1, {"side": "LR", "uplo": "LU", "trans_x": "NTC", "diag": "NU"}),
}


@dataclass
class LapackThunk(Thunk):
    """One LAPACK (or BLAS) custom call over the slices of its operands and results."""

    name: str
    prefix: str
    computation: Computation
    attributes: dict[str, str]
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[BufferSlice, Shape]]
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        values = [read(context, s, shape) for s, shape in self.operands]
        outputs = self.computation(self.prefix, self.attributes, values, [shape for _, shape in self.results])
        for (s, shape), value in zip(self.results, outputs):
            write(context, s, shape, value)


def _lapack_thunk(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    target = instr.attr("custom_call_target")
    match = _TARGET.fullmatch(target)
    routine = _ROUTINES.get(match.group(2)) if match else None
    if routine is None:
        raise UnimplementedError(f"custom-call {instr.name}: the CPU backend has no library call for target "
                                 f"{target!r}")
    computation, operand_count, result_count, allowed = routine
    shapes = result_shapes(instr)
    trsm_alpha = match.group(2) == "trsm" and len(instr.operands) == 3
    if (len(instr.operands) != operand_count and not trsm_alpha) or len(shapes) != result_count or \
            any(len(o.shape.dimensions) < 2 for o in instr.operands[:2 if match.group(2) == "trsm" else 1]):
        raise UnimplementedError(f"custom-call {instr.name}: {target} with operands "
                                 f"{', '.join(str(o.shape) for o in instr.operands)} and results {instr.shape}")
    attributes = {}
    for name, number in backend_config_integers(instr).items():
        letter = chr(number) if 0 < number < 128 else "?"
        if name in allowed and letter not in allowed[name]:
            raise UnimplementedError(f"custom-call {instr.name}: {target} with {name} {letter!r}")
        attributes[name] = letter
    for shape in [*(o.shape for o in instr.operands), *shapes]:
        check_layout(instr, shape)
    operands = [(emitter.slice(o), o.shape) for o in instr.operands]
    results = [(emitter.slice(instr, (i,) if instr.shape.is_tuple else ()), s) for i, s in enumerate(shapes)]
    return [LapackThunk(instr.name, match.group(1), computation, attributes, operands, results)]


# Targets with their own thunk builder; every ``lapack_*_ffi`` target goes through ``_lapack_thunk``.
CUSTOM_CALL_THUNKS: dict[str, Callable[[HloInstruction, ThunkEmitter], list[Thunk]]] = {
    "TopK": top_k_custom_call_thunk,
}


@thunk_rule("custom-call")
def _custom_call(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    target = instr.attr("custom_call_target")
    builder = CUSTOM_CALL_THUNKS.get(target)
    if builder is not None:
        return builder(instr, emitter)
    return _lapack_thunk(instr, emitter)
