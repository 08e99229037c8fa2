"""``convolution`` as a library call: the input's windows gathered into a matrix (im2col) and multiplied with
the kernel by numpy's ``matmul`` (BLAS), where XLA:CPU's ``xla/backends/cpu/runtime/convolution_thunk.cc``
calls Eigen or XNNPACK.

Every form XLA allows runs: any dimension labels, strides, padding (negative too), input (lhs) and kernel
(rhs) dilation, window reversal, feature groups and batch groups. Sums are taken in f32 for floats narrower
than 32 bits (rounded to the result type at the end, as XLA:CPU upcasts such convolutions), in int64 for
integers (which wraps to the same value as wrapping in the result type), else in the result type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.hlo.attributes import WindowDimension
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, dtype_of
from xlapy.runtime.thunks.dot import compute_dtype
from xlapy.runtime.thunks.library import check_layout, read, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter


@dataclass(frozen=True)
class ConvolutionDimensions:
    """Where each labelled dimension sits: ``[batch, feature, spatial...]`` of the input and the output,
    ``[output feature, input feature, spatial...]`` of the kernel (XLA's ``dim_labels``)."""

    lhs: tuple[int, ...]
    rhs: tuple[int, ...]
    out: tuple[int, ...]

    @staticmethod
    def parse(labels: str, spatial_rank: int) -> ConvolutionDimensions | None:
        """The positions ``labels`` (e.g. ``b01f_01io->b01f``) give, or None when they are malformed."""
        try:
            lhs, rest = labels.split("_", 1)
            rhs, out = rest.split("->")
        except ValueError:
            return None
        parsed = [_positions(lhs, "b", "f", spatial_rank), _positions(rhs, "o", "i", spatial_rank),
                  _positions(out, "b", "f", spatial_rank)]
        return None if None in parsed else ConvolutionDimensions(*parsed)


def _positions(labels: str, first: str, second: str, spatial_rank: int) -> tuple[int, ...] | None:
    spatial = [labels.find(str(d)) for d in range(spatial_rank)]
    if len(labels) != spatial_rank + 2 or labels.count(first) != 1 or labels.count(second) != 1 or -1 in spatial:
        return None
    return (labels.index(first), labels.index(second), *spatial)


def accumulation_dtype(result: np.dtype) -> np.dtype:
    """The type a convolution producing ``result`` sums in."""
    if result.kind in "biu":
        return np.dtype(np.int64)
    return compute_dtype(result)


def _dilate_and_pad(x: np.ndarray, window: tuple[WindowDimension, ...]) -> np.ndarray:
    """The spatial dimensions (2, 3, ...) of ``x`` with ``base_dilation - 1`` zeros between elements, then
    padded with zeros (negative padding crops)."""
    for axis, dim in enumerate(window, start=2):
        size = x.shape[axis]
        if dim.base_dilation > 1 and size > 1:
            dilated = np.zeros((*x.shape[:axis], (size - 1) * dim.base_dilation + 1, *x.shape[axis + 1:]), x.dtype)
            dilated[(slice(None),) * axis + (slice(None, None, dim.base_dilation),)] = x
            x = dilated
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(dim.padding_low, 0), max(dim.padding_high, 0))
        x = np.pad(x, widths)
        low, high = max(-dim.padding_low, 0), max(-dim.padding_high, 0)
        x = x[(slice(None),) * axis + (slice(low, max(x.shape[axis] - high, low)),)]
    return x


def convolve(lhs: np.ndarray, rhs: np.ndarray, dims: ConvolutionDimensions, window: tuple[WindowDimension, ...],
             feature_groups: int, batch_groups: int, out_shape: tuple[int, ...], result: np.dtype) -> np.ndarray:
    """The convolution of the logical arrays ``lhs`` (input) and ``rhs`` (kernel) as an array of
    ``out_shape`` and element type ``result``."""
    acc = accumulation_dtype(result)
    spatial_rank = len(window)
    x = lhs.transpose(dims.lhs).astype(acc)                  # [batch, feature, spatial...]
    w = rhs.transpose(dims.rhs).astype(acc)                  # [out feature, in feature, window...]
    reversed_axes = tuple(2 + i for i, d in enumerate(window) if d.window_reversal)
    if reversed_axes:
        w = np.flip(w, reversed_axes)
    out_sizes = [out_shape[p] for p in dims.out]             # [batch, feature, spatial...]
    batch, features = out_sizes[0], out_sizes[1]
    in_features = w.shape[1]
    per_group = features // (feature_groups * batch_groups)  # output features of one group
    spatial_out = out_sizes[2:]
    window_size = [d.size for d in window]
    columns = in_features * int(np.prod(window_size, dtype=np.int64))
    rows = batch * int(np.prod(spatial_out, dtype=np.int64))
    if 0 in out_sizes or columns == 0:
        summed = np.zeros(out_sizes, acc)
    else:
        x = _dilate_and_pad(x, window)
        extents = [(d.size - 1) * d.window_dilation + 1 for d in window]
        windows = np.lib.stride_tricks.sliding_window_view(x, extents, axis=tuple(range(2, 2 + spatial_rank)))
        taken = (slice(None), slice(None),
                 *(slice(0, (n - 1) * d.stride + 1, d.stride) for n, d in zip(spatial_out, window)),
                 *(slice(None, None, d.window_dilation) for d in window))
        windows = windows[taken]                             # [batch, feature, out spatial..., window...]
        # Input batch = (batch group, batch); input feature = (feature group, in feature).
        windows = windows.reshape(batch_groups, batch, feature_groups, in_features, *windows.shape[2:])
        s = list(range(4, 4 + spatial_rank))
        k = list(range(4 + spatial_rank, 4 + 2 * spatial_rank))
        patches = windows.transpose(0, 2, 1, *s, 3, *k).reshape(batch_groups, feature_groups, rows, columns)
        # Output feature = (batch group, feature group, feature within the group).
        kernel = w.reshape(batch_groups, feature_groups, per_group, in_features, *window_size)
        kernel = kernel.transpose(0, 1, 3, *range(4, 4 + spatial_rank), 2).reshape(
            batch_groups, feature_groups, columns, per_group)
        product = np.matmul(patches, kernel)                 # [batch groups, feature groups, rows, per group]
        product = product.reshape(batch_groups, feature_groups, batch, *spatial_out, per_group)
        summed = product.transpose(2, 0, 1, 3 + spatial_rank, *range(3, 3 + spatial_rank)).reshape(out_sizes)
    # From [batch, feature, spatial...] to the output's labels.
    return summed.transpose(np.argsort(dims.out)).astype(result)


@dataclass
class ConvolutionThunk(Thunk):
    """One convolution over the slices of its operands and result."""

    name: str
    lhs: BufferSlice
    lhs_shape: Shape
    rhs: BufferSlice
    rhs_shape: Shape
    out: BufferSlice
    out_shape: Shape
    dims: ConvolutionDimensions
    window: tuple[WindowDimension, ...]
    feature_groups: int
    batch_groups: int
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        result = convolve(read(context, self.lhs, self.lhs_shape), read(context, self.rhs, self.rhs_shape),
                          self.dims, self.window, self.feature_groups, self.batch_groups,
                          self.out_shape.dimensions, dtype_of(self.out_shape))
        write(context, self.out, self.out_shape, result)


@thunk_rule("convolution")
def _convolution(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    lhs, rhs = instr.operands
    window = tuple(instr.attr("window", ()))
    spatial_rank = len(lhs.shape.dimensions) - 2
    dims = ConvolutionDimensions.parse(str(instr.attr("dim_labels", "")), spatial_rank)
    if dims is None or len(window) != spatial_rank:
        raise UnimplementedError(f"convolution {instr.name}: dim_labels {instr.attr('dim_labels')!r} and a window "
                                 f"of {len(window)} dimensions do not fit {lhs.shape}")
    for shape in (lhs.shape, rhs.shape, instr.shape):
        check_layout(instr, shape)
    if instr.shape.element_type == "pred":
        raise UnimplementedError(f"convolution {instr.name}: the CPU convolution thunk does not compute "
                                 f"{instr.shape.element_type} results")
    return [ConvolutionThunk(instr.name, emitter.slice(lhs), lhs.shape, emitter.slice(rhs), rhs.shape,
                             emitter.slice(instr), instr.shape, dims, window,
                             int(instr.attr("feature_group_count", 1)), int(instr.attr("batch_group_count", 1)))]
