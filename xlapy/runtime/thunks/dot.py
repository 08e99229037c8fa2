"""``dot`` as a library call: numpy's ``matmul`` (BLAS for floats and complex numbers), as XLA:CPU's
``xla/backends/cpu/runtime/dot_thunk.cc`` hands dots to Eigen or XNNPACK.

Any dimension numbers are brought to ``[batch..., m, k] x [batch..., k, n]`` by transposing views (the
dot decomposer makes that form, in which the operands are used in place and the product is written straight
into the result's slice). Integer dots wrap around in the result type. Narrow floats (bf16, f16, f8) are
multiplied in f32 and the result rounded, as XLA:CPU computes them (its pipeline upcasts such dots to f32 and
converts the result back). The kCustom fusions XLA:CPU dumps for dots (``__ynn_fusion``: a fused
computation whose root is a dot of its parameters) run through ``dot_fusion_thunk``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.runtime.thunks.base import Thunk
from xlapy.runtime.thunks.library import BinaryLibraryThunk, check_layout
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape, TypeKind

if TYPE_CHECKING:
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter


@dataclass(frozen=True)
class DotDimensions:
    """XLA's ``DotDimensionNumbers``."""

    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()
    lhs_contracting: tuple[int, ...] = ()
    rhs_contracting: tuple[int, ...] = ()

    @staticmethod
    def of(instr: HloInstruction) -> DotDimensions:
        return DotDimensions(tuple(instr.attr("lhs_batch_dims", ())), tuple(instr.attr("rhs_batch_dims", ())),
                             tuple(instr.attr("lhs_contracting_dims", ())),
                             tuple(instr.attr("rhs_contracting_dims", ())))


def compute_dtype(result: np.dtype) -> np.dtype:
    """The type a dot producing ``result`` multiplies and sums in: f32 for floats narrower than 32 bits."""
    # ml_dtypes' narrow floats (bf16, the f8 types) have numpy kind "V".
    if (result.kind == "f" and result.itemsize < 4) or result.kind == "V":
        return np.dtype(np.float32)
    return result


def _as_matrices(x: np.ndarray, batch: tuple[int, ...], rows: list[int], columns: list[int]) -> np.ndarray:
    """``x`` as ``[batch..., prod(rows), prod(columns)]`` (a view whenever the dimensions allow)."""
    moved = x.transpose([*batch, *rows, *columns]) if [*batch, *rows, *columns] != list(range(x.ndim)) else x
    sizes = [x.shape[d] for d in batch]
    return moved.reshape([*sizes, int(np.prod([x.shape[d] for d in rows], dtype=np.int64)),
                          int(np.prod([x.shape[d] for d in columns], dtype=np.int64))])


def dot_general(lhs: np.ndarray, rhs: np.ndarray, dims: DotDimensions, result: np.dtype,
                out: np.ndarray | None = None) -> np.ndarray:
    """The dot of the logical arrays ``lhs`` and ``rhs`` with element type ``result``, written into ``out``
    (a logical array of the result's shape) when given."""
    compute = compute_dtype(result)
    lhs_free = [d for d in range(lhs.ndim) if d not in dims.lhs_batch and d not in dims.lhs_contracting]
    rhs_free = [d for d in range(rhs.ndim) if d not in dims.rhs_batch and d not in dims.rhs_contracting]
    batch_sizes = [lhs.shape[d] for d in dims.lhs_batch]
    result_dims = (*batch_sizes, *(lhs.shape[d] for d in lhs_free), *(rhs.shape[d] for d in rhs_free))
    lhs3 = _as_matrices(lhs.astype(compute, copy=False), dims.lhs_batch, lhs_free, list(dims.lhs_contracting))
    rhs3 = _as_matrices(rhs.astype(compute, copy=False), dims.rhs_batch, list(dims.rhs_contracting), rhs_free)
    k = lhs3.shape[-1]
    direct = (out is not None and compute == result and out.flags.c_contiguous and k != 1
              and not np.may_share_memory(out, lhs) and not np.may_share_memory(out, rhs))
    if direct:
        np.matmul(lhs3, rhs3, out=out.reshape([*batch_sizes, lhs3.shape[-2], rhs3.shape[-1]]))
        return out
    # Without a real contraction the product is the elementwise one (so -0 stays -0, no +0 is added).
    product = lhs3 * rhs3 if k == 1 else np.matmul(lhs3, rhs3)
    product = product.reshape(result_dims)
    if out is None:
        return product.astype(result, copy=False)
    np.copyto(out, product, casting="unsafe")
    return out


@dataclass
class DotThunk(BinaryLibraryThunk):
    """One dot over the slices of its operands and result."""

    dims: DotDimensions
    kind: str = "library"

    def compute(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        dot_general(lhs, rhs, self.dims, out.dtype, out)


def _check_dot(instr: HloInstruction, lhs: Shape, rhs: Shape) -> None:
    """Refuses at compile time what the dot thunk does not compute."""
    for shape in (lhs, rhs, instr.shape):
        check_layout(instr, shape)
        if not shape.is_array:
            raise UnimplementedError(f"dot {instr.name}: the CPU dot thunk does not multiply {shape}")
    if instr.shape.type.kind not in (TypeKind.FLOAT, TypeKind.COMPLEX, TypeKind.SIGNED, TypeKind.UNSIGNED):
        raise UnimplementedError(f"dot {instr.name}: the CPU dot thunk does not compute {instr.shape.element_type} "
                                 "results")
    algorithm = instr.attr("algorithm")
    if algorithm not in (None, "ALG_UNSET", "unset"):
        raise UnimplementedError(f"dot {instr.name}: algorithm {algorithm} is not supported by the CPU dot thunk")


@thunk_rule("dot")
def _dot(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    lhs, rhs = instr.operands
    _check_dot(instr, lhs.shape, rhs.shape)
    return [DotThunk(instr.name, emitter.slice(lhs), lhs.shape, emitter.slice(rhs), rhs.shape, emitter.slice(instr),
                     instr.shape, DotDimensions.of(instr))]


def dot_fusion_thunk(fusion: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    """The dot thunk of a kCustom dot fusion XLA:CPU dumps (its fused computation's root a dot of two of its
    parameters); any other kCustom fusion is refused."""
    root = fusion.fused_computation.root
    if root is None or root.opcode != "dot" or any(o.opcode != "parameter" for o in root.operands):
        raise UnimplementedError(f"fusion {fusion.name}: the CPU backend runs kCustom fusions only when they are a "
                                 "dot of the fusion's parameters")
    lhs, rhs = (fusion.operands[o.parameter_number] for o in root.operands)
    _check_dot(root, lhs.shape, rhs.shape)
    return [DotThunk(fusion.name, emitter.slice(lhs), lhs.shape, emitter.slice(rhs), rhs.shape,
                     emitter.slice(fusion), fusion.shape, DotDimensions.of(root))]

