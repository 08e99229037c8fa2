"""``fft`` as a library call: numpy's pocketfft, where XLA:CPU's ``xla/backends/cpu/runtime/fft_thunk.cc``
calls DUCC. The transform runs over the last ``len(fft_length)`` dimensions; FFT and IFFT keep the complex
type, RFFT takes reals to the first ``n // 2 + 1`` frequencies, IRFFT goes back to ``fft_length`` reals.

As in XLA:CPU, c64/f32 transforms are computed in single precision and c128/f64 in double precision (numpy
2 transforms float32 and complex64 data without widening them), so the results differ from XLA's by the
rounding of two single-precision FFT algorithms: a few ulps of the largest magnitude, growing with
``log2(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, dtype_of
from xlapy.runtime.thunks.library import check_layout, read, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter

_TRANSFORMS = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn, "IRFFT": np.fft.irfftn}


def fft(x: np.ndarray, fft_type: str, lengths: tuple[int, ...], result: np.dtype) -> np.ndarray:
    """The ``fft_type`` transform of the logical array ``x`` over its last ``len(lengths)`` dimensions."""
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if 0 in x.shape or 0 in lengths:
        return np.zeros([*x.shape[:x.ndim - len(lengths)], *_result_lengths(fft_type, lengths)], result)
    # Single precision stays single precision (numpy >= 2 keeps float32 and complex64).
    single = result in (np.complex64, np.float32)
    if fft_type == "RFFT":
        x = x.astype(np.float32 if single else np.float64, copy=False)
    else:
        x = x.astype(np.complex64 if single else np.complex128, copy=False)
    return np.asarray(_TRANSFORMS[fft_type](x, lengths, axes)).astype(result, copy=False)


def _result_lengths(fft_type: str, lengths: tuple[int, ...]) -> tuple[int, ...]:
    if fft_type == "RFFT":
        return (*lengths[:-1], lengths[-1] // 2 + 1)
    return lengths


@dataclass
class FftThunk(Thunk):
    """One FFT over the slices of its operand and result."""

    name: str
    operand: BufferSlice
    operand_shape: Shape
    out: BufferSlice
    out_shape: Shape
    fft_type: str
    lengths: tuple[int, ...]
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        x = read(context, self.operand, self.operand_shape)
        write(context, self.out, self.out_shape, fft(x, self.fft_type, self.lengths, dtype_of(self.out_shape)))


@thunk_rule("fft")
def _fft(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    (operand,) = instr.operands
    fft_type = str(instr.attr("fft_type", ""))
    lengths = tuple(int(n) for n in instr.attr("fft_length", ()))
    if fft_type not in _TRANSFORMS or not 1 <= len(lengths) <= min(3, len(operand.shape.dimensions)):
        raise UnimplementedError(f"fft {instr.name}: fft_type {fft_type!r} with fft_length {list(lengths)} on "
                                 f"{operand.shape}")
    for shape in (operand.shape, instr.shape):
        check_layout(instr, shape)
    return [FftThunk(instr.name, emitter.slice(operand), operand.shape, emitter.slice(instr), instr.shape,
                     fft_type, lengths)]
