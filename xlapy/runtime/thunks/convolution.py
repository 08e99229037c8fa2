"""``convolution`` as a library call, where XLA:CPU's ``xla/backends/cpu/runtime/convolution_thunk.cc`` calls
Eigen or XNNPACK: a native direct convolution, or a sum over the kernel's window positions of BLAS matrix
products.

``direct`` (f32 and f64 convolutions with feature groups only, no input dilation, at least
``DIRECT_MIN_OUT_FEATURES`` output features per group): the register-blocked kernel of
``xlapy/codegen/backends/cpu_convolution.py``, compiled once per convolution when the thunk is made and run over
the result's lines on the thread pool. It reads the input where it is when the input's layout puts the features
last (else from one transposed copy), handles padding, strides and window dilation itself (no padded copy), and
writes the result in place when its layout puts the features last. Each output element is summed in a fixed order
(window positions row-major, input features ascending), whatever the threads.

Otherwise the input is brought once to ``[group, batch, spatial..., feature]`` (features last, each feature group's
rows contiguous), dilated and padded with zeros only when the window asks for it. Every window position then
adds ``rows(position) @ kernel[position]`` into the result with one GEMM (``scipy.linalg.blas``, accumulating
in place with ``beta = 1``). The rows of a position are found one of two ways, chosen per convolution at
compile time by a fixed rule (``ConvolutionPlan.method``):

- ``shifted`` (every stride 1): the result is computed over the whole padded grid, whose row ``r`` takes the
  input row ``r + offset(position)``, so each position's rows are one contiguous slice of the padded input
  used in place; the rows past the output's extent in each spatial dimension are computed and dropped. Taken
  when the padded grid has at most twice as many rows as the output.
- ``gathered`` (strides, or a grid much larger than the output): each position's rows are a strided view of
  the padded input, copied into one contiguous matrix before its GEMM; with few input features per group
  every position's rows are copied side by side into one matrix (im2col) for a single GEMM instead.

Depthwise convolutions (one input feature per group) multiply and add elementwise over all groups at once
instead of calling one rank-1 GEMM per group. Batch groups become feature groups: the input's batch groups
are moved into its features. Sums are taken in f32 for floats narrower than 32 bits (rounded to the result
type at the end, as XLA:CPU upcasts such convolutions), in int64 for integers (which wraps to the same value
as wrapping in the result type; numpy's own loops, BLAS has no integers), else in the result type.

Small and thin convolutions, and integer ones, run as generated code instead (a kernel of the convolution alone,
``xlapy/codegen/elemental_convolution.py``), as ``generated_code_is_faster`` decides from measurements.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg.blas
from numpy.lib.stride_tricks import as_strided

from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.backends.cpu_convolution import DirectConvolution
from xlapy.codegen.launch import LaunchDimensions
from xlapy.codegen.types import tensor_type
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.attributes import WindowDimension
from xlapy.runtime.kernel_cache import cached_kernel, host_cpu, source_hash, toolchain
from xlapy.runtime.thread_pool import block_launcher
from xlapy.runtime.thunks.base import Thunk, dtype_of
from xlapy.runtime.thunks.dot import compute_dtype
from xlapy.runtime.thunks.kernel import lone_op_kernel, lone_op_problems
from xlapy.runtime.thunks.library import BinaryLibraryThunk, check_layout, logical_view
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import TypeKind
from xlapy.version import __version__

if TYPE_CHECKING:
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter
    from xlapy.runtime.thunks.base import ExecutionContext

# The padded grid may hold this many times the output's rows before ``shifted`` gives way to ``gathered``:
# the extra rows cost GEMM work, gathering costs one copy of the rows per window position.
SHIFTED_GRID_RATIO = 2

# Below this many input features per group a ``gathered`` plan copies the window positions' rows side by side
# (im2col) for one GEMM instead of one thin GEMM per position (measured: 7x7 windows over 3 features gain a
# third; ``shifted`` plans lose by any copy, even at 3 features).
IM2COL_FEATURES = 8

# The direct kernel keeps output features in SIMD vectors: with fewer per group than this, its vectors are mostly
# padding and the GEMMs are faster.
DIRECT_MIN_OUT_FEATURES = 4

# The thread pool runs a launch on the calling thread below a count of elements of generated loops, each about a
# nanosecond of work; the direct kernel makes about this many multiply-adds per nanosecond on one core.
DIRECT_MULTIPLY_ADDS_PER_ELEMENT = 64

_GEMMS = {np.dtype(np.float32): scipy.linalg.blas.sgemm, np.dtype(np.float64): scipy.linalg.blas.dgemm,
          np.dtype(np.complex64): scipy.linalg.blas.cgemm, np.dtype(np.complex128): scipy.linalg.blas.zgemm}


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


@dataclass(frozen=True)
class ConvolutionPlan:
    """How one convolution runs, decided from its shapes at compile time."""

    dims: ConvolutionDimensions
    window: tuple[WindowDimension, ...]
    batch_groups: int
    feature_groups: int
    batch: int                      # output batch
    in_features: int                # per group
    out_features: int               # per group
    input_spatial: tuple[int, ...]
    output_spatial: tuple[int, ...]
    padded_spatial: tuple[int, ...]  # after input dilation and padding
    method: str                     # "direct" | "shifted" | "gathered"
    im2col: bool                    # gathered into one matrix for one GEMM (few input features per group)
    depthwise: bool                 # one input feature per group: elementwise products, no GEMM
    accumulation: np.dtype
    result: np.dtype
    direct: DirectConvolution | None = None  # the native kernel's description, for "direct" plans

    @staticmethod
    def of(lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], dims: ConvolutionDimensions,
           window: tuple[WindowDimension, ...], feature_groups: int, batch_groups: int,
           result: np.dtype, operands: tuple[np.dtype, ...] | None = None) -> ConvolutionPlan:
        """The plan of a convolution of these shapes; ``operands``, the element types of input and kernel (the
        result's when None; empty: GEMMs only), decide whether the direct kernel can compute it."""
        input_spatial = tuple(lhs[p] for p in dims.lhs[2:])
        output_spatial = tuple(out[p] for p in dims.out[2:])
        padded = tuple(d.padding_low + ((n - 1) * d.base_dilation + 1 if n else 0) + d.padding_high
                       for n, d in zip(input_spatial, window))
        groups = feature_groups * batch_groups
        grid_rows, output_rows = math.prod(padded), math.prod(output_spatial)
        shifted = all(d.stride == 1 for d in window) and grid_rows <= SHIFTED_GRID_RATIO * output_rows
        in_features = rhs[dims.rhs[1]]
        depthwise = in_features == 1 and groups > 1
        plan = ConvolutionPlan(dims, window, batch_groups, feature_groups, out[dims.out[0]], in_features,
                               out[dims.out[1]] // groups if groups else 0, input_spatial, output_spatial, padded,
                               "shifted" if shifted else "gathered",
                               not shifted and not depthwise and in_features < IM2COL_FEATURES, depthwise,
                               accumulation_dtype(result), result)
        direct = _direct_convolution(plan, (result, result) if operands is None else operands)
        return plan if direct is None else replace(plan, method="direct", direct=direct)

    @property
    def groups(self) -> int:
        return self.feature_groups * self.batch_groups

    def offsets(self) -> list[int]:
        """The padded-grid row each window position (row-major over the window) adds to row 0 of the grid."""
        strides = [math.prod(self.padded_spatial[i + 1:]) for i in range(len(self.window))]
        offsets = [0]
        for d, stride in zip(self.window, strides):
            offsets = [o + k * d.window_dilation * stride for o in offsets for k in range(d.size)]
        return offsets


def _direct_convolution(plan: ConvolutionPlan, operands: tuple[np.dtype, ...]) -> DirectConvolution | None:
    """The direct kernel's description of ``plan`` when that kernel computes it, and faster than the GEMMs
    (``DIRECT_MIN_OUT_FEATURES``): f32 and f64 operands and result, feature groups only, no input dilation, at
    least one spatial dimension, no empty dimension."""
    element = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(plan.result)
    if element is None or len(operands) != 2 or any(np.dtype(o) != plan.result for o in operands):
        return None
    if plan.batch_groups != 1 or plan.depthwise or not plan.window or any(d.base_dilation != 1 for d in plan.window):
        return None
    if 0 in (plan.batch, plan.in_features, plan.out_features, *plan.input_spatial, *plan.output_spatial):
        return None
    if plan.out_features < DIRECT_MIN_OUT_FEATURES:
        return None
    return DirectConvolution(element, plan.batch, plan.feature_groups, plan.in_features, plan.out_features,
                             plan.input_spatial, plan.output_spatial, tuple(d.size for d in plan.window),
                             tuple(d.stride for d in plan.window), tuple(d.padding_low for d in plan.window),
                             tuple(d.window_dilation for d in plan.window))


def _padded_input(x: np.ndarray, plan: ConvolutionPlan) -> np.ndarray:
    """The logical input ``x`` as ``[group, batch, padded spatial..., feature]`` (``[batch, padded spatial...,
    group]`` for depthwise plans), contiguous, in the accumulation type."""
    rank = len(plan.window)
    spatial = list(range(2, 2 + rank))
    # [batch group, batch, spatial..., feature group, feature]
    x = x.transpose(plan.dims.lhs[0], *plan.dims.lhs[2:], plan.dims.lhs[1]).reshape(
        plan.batch_groups, plan.batch, *plan.input_spatial, plan.feature_groups, plan.in_features)
    if plan.depthwise:
        x = x.transpose(1, *spatial, 0, 2 + rank, 3 + rank)
        target = (plan.batch, *plan.padded_spatial, plan.batch_groups, plan.feature_groups, 1)
        first_spatial = 1
    else:
        x = x.transpose(0, 2 + rank, 1, *spatial, 3 + rank)
        target = (plan.batch_groups, plan.feature_groups, plan.batch, *plan.padded_spatial, plan.in_features)
        first_spatial = 3
    if all(d.padding_low == d.padding_high == 0 and d.base_dilation == 1 for d in plan.window):
        return np.ascontiguousarray(x, dtype=plan.accumulation)  # copies only when not already so laid out
    padded = np.zeros(target, plan.accumulation)
    source: list[slice] = [slice(None)] * x.ndim
    destination: list[slice] = [slice(None)] * x.ndim
    for axis, n, size, d in zip(range(first_spatial, first_spatial + rank), plan.input_spatial,
                                plan.padded_spatial, plan.window):
        # Input element i lands at padding_low + i * base_dilation when that is inside [0, size).
        first = -(min(d.padding_low, 0) // d.base_dilation)
        last = min(n, -((d.padding_low - size) // d.base_dilation))
        if last <= first:
            return padded
        source[axis] = slice(first, last)
        start = d.padding_low + first * d.base_dilation
        destination[axis] = slice(start, start + (last - first - 1) * d.base_dilation + 1, d.base_dilation)
    padded[tuple(destination)] = x[tuple(source)]
    return padded


def _kernel(w: np.ndarray, plan: ConvolutionPlan) -> np.ndarray:
    """The logical kernel ``w`` as ``[group, window position, in feature, out feature]`` (``[window position,
    group, out feature]`` for depthwise plans), contiguous, in the accumulation type."""
    w = w.transpose(*plan.dims.rhs[2:], plan.dims.rhs[1], plan.dims.rhs[0])  # [window..., in, out]
    reversed_axes = tuple(i for i, d in enumerate(plan.window) if d.window_reversal)
    if reversed_axes:
        w = np.flip(w, reversed_axes)
    positions = math.prod(d.size for d in plan.window)
    w = w.reshape(positions, plan.in_features, plan.groups, plan.out_features)
    if plan.depthwise:
        return np.ascontiguousarray(w[:, 0], dtype=plan.accumulation)
    return np.ascontiguousarray(w.transpose(2, 0, 1, 3), dtype=plan.accumulation)


def _multiply_add(a: np.ndarray, w: np.ndarray, c: np.ndarray, accumulate: bool) -> None:
    """``c = a @ w``, or ``c += a @ w`` when ``accumulate``: C-contiguous matrices, in place."""
    gemm = _GEMMS.get(c.dtype)
    if gemm is None:  # integers: numpy's loops
        if accumulate:
            c += a @ w
        else:
            np.matmul(a, w, out=c)
        return
    # Row-major c = a @ w is column-major c^T = w^T a^T: BLAS takes the transposed views without copies.
    product = gemm(1.0, w.T, a.T, beta=1.0 if accumulate else 0.0, c=c.T, overwrite_c=True)
    if product.ctypes.data != c.ctypes.data:
        c[...] = product.T


def _rows_view(x: np.ndarray, offset: int, plan: ConvolutionPlan, row_elements: int) -> np.ndarray:
    """``[batch, output spatial..., row]``: the input rows window position ``offset`` contributes to each
    output position (strided, for ``gathered`` plans), where ``x`` is ``[batch * grid rows, row]``."""
    item = x.itemsize
    grid = [math.prod(plan.padded_spatial[i + 1:]) for i in range(len(plan.window))]
    strides = (math.prod(plan.padded_spatial) * row_elements * item,
               *(d.stride * g * row_elements * item for d, g in zip(plan.window, grid)), item)
    return as_strided(x[offset:].reshape(-1), (plan.batch, *plan.output_spatial, row_elements), strides,
                      writeable=False)


def convolve(lhs: np.ndarray, rhs: np.ndarray, plan: ConvolutionPlan) -> np.ndarray:
    """The convolution of the logical arrays ``lhs`` (input) and ``rhs`` (kernel) as ``[batch, output
    spatial..., group, out feature]`` in the accumulation type (possibly a strided view of a temporary)."""
    groups, rank = plan.groups, len(plan.window)
    shifted = plan.method == "shifted"
    grid = plan.padded_spatial if shifted else plan.output_spatial
    rows = plan.batch * math.prod(grid)
    if plan.batch * math.prod(plan.output_spatial) * groups * plan.out_features == 0 or plan.in_features == 0:
        return np.zeros((plan.batch, *plan.output_spatial, groups, plan.out_features), plan.accumulation)
    x = _padded_input(lhs, plan)
    w = _kernel(rhs, plan)
    offsets = plan.offsets()
    if plan.depthwise:
        x = x.reshape(-1, groups)                                  # [grid rows, group]
        acc = np.empty((rows, groups, plan.out_features), plan.accumulation)
        product = np.empty_like(acc)
        count = rows - offsets[-1] if shifted else rows
        for position, offset in enumerate(offsets):
            a = x[offset:offset + count] if shifted else _rows_view(x, offset, plan, groups).reshape(rows, groups)
            target = acc[:count]
            if position == 0:
                np.multiply(a[:, :, None], w[position], out=target)
            else:
                np.multiply(a[:, :, None], w[position], out=product[:count])
                target += product[:count]
        result = acc.reshape(plan.batch, *grid, groups, plan.out_features)
    else:
        x = x.reshape(groups, -1, plan.in_features)                # [group, grid rows, in feature]
        acc = np.empty((groups, rows, plan.out_features), plan.accumulation)
        count = rows - offsets[-1] if shifted else rows
        if plan.im2col:  # [output rows, window position, in feature]
            columns = np.empty((rows, len(offsets), plan.in_features), plan.accumulation)
            blocks = columns.reshape(plan.batch, *grid, len(offsets), plan.in_features)
        else:
            gathered = None if shifted else np.empty((rows, plan.in_features), plan.accumulation)
        for g in range(groups):
            if plan.im2col:
                for position, offset in enumerate(offsets):
                    blocks[..., position, :] = _rows_view(x[g], offset, plan, plan.in_features)
                _multiply_add(columns.reshape(rows, -1), w[g].reshape(-1, plan.out_features), acc[g], False)
                continue
            for position, offset in enumerate(offsets):
                if shifted:
                    a = x[g, offset:offset + count]
                else:
                    np.copyto(gathered.reshape(plan.batch, *grid, plan.in_features),
                              _rows_view(x[g], offset, plan, plan.in_features))
                    a = gathered
                _multiply_add(a, w[g, position], acc[g, :count], position > 0)
        result = acc.reshape(groups, plan.batch, *grid, plan.out_features).transpose(
            *range(1, 2 + rank), 0, 2 + rank)
    if shifted:  # drop the grid rows past the output
        result = result[(slice(None), *(slice(0, n) for n in plan.output_spatial))]
    return result


def _canonical_output(out: np.ndarray, plan: ConvolutionPlan) -> np.ndarray:
    """The logical result ``out`` viewed as ``[batch, output spatial..., group, out feature]``."""
    view = out.transpose(plan.dims.out[0], *plan.dims.out[2:], plan.dims.out[1])
    *leading, features = view.strides
    return as_strided(view, (*view.shape[:-1], plan.groups, plan.out_features),
                      (*leading, plan.out_features * features, features))


@dataclass
class ConvolutionThunk(BinaryLibraryThunk):
    """One convolution over the slices of its operands and result."""

    plan: ConvolutionPlan
    kind: str = "library"
    kernel: CpuKernel | None = field(default=None, init=False, repr=False)  # the direct kernel, compiled once

    def __post_init__(self) -> None:
        if self.plan.direct is not None:
            self.kernel = direct_kernel(self.plan.direct)

    def compute(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        if self.kernel is not None:
            _DirectRun(self.kernel, lhs, rhs, out, self.plan)()
            return
        np.copyto(_canonical_output(out, self.plan), convolve(lhs, rhs, self.plan), casting="unsafe")

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        """With the direct kernel and layouts without tiles: the views of the slices taken, the kernel's buffers
        made and bound once; a run then rearranges the kernel (and an input or result whose features are not
        last) and launches."""
        if self.kernel is None:
            return super().prepare(context)
        views = [logical_view(context.array(piece, shape), shape) for piece, shape in
                 ((self.lhs, self.lhs_shape), (self.rhs, self.rhs_shape), (self.out, self.out_shape))]
        if any(view is None for view in views):  # tiled layouts: through the temporaries of ``run``
            return super().prepare(context)
        return _DirectRun(self.kernel, *views, self.plan)


def direct_kernel(direct: DirectConvolution) -> CpuKernel:
    """The compiled kernel of ``direct``, through the kernel cache (in memory and on disk) under a key of its LLVM
    IR, the compiler's source, toolchain and host."""
    text = direct.llvm_ir()
    key = hashlib.sha256(json.dumps({"kind": "direct convolution", "xlapy": __version__, "source": source_hash(),
                                     "toolchain": toolchain(), "host": host_cpu(), "llvm_ir": text},
                                    sort_keys=True).encode()).hexdigest()
    launch = LaunchDimensions(1, direct.blocks, 1)

    def build() -> tuple[bytes, LaunchDimensions]:
        return CpuKernel.from_llvm_ir(text).object_code, launch

    def check(kernel: CpuKernel, found: LaunchDimensions) -> None:
        signature = kernel.signature
        if found != launch or (signature.buffer_sizes, signature.blocks) != (direct.buffer_bytes(), direct.blocks):
            raise VerifyError(f"direct convolution: a cached kernel does not fit {direct}")

    return cached_kernel(key, build, CpuKernel.from_object, check).kernel


class _DirectRun:
    """The direct kernel of ``plan`` (compiled as ``kernel``) over the logical arrays ``lhs`` and ``rhs`` into the
    logical array ``out``, as a callable of no arguments: the input and the result are used in place when their
    layouts put the features last (else through buffers made here), the kernel is rearranged at every call into a
    buffer made here (window positions, then input features, then output features padded to whole vectors)."""

    def __init__(self, kernel: CpuKernel, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray,
                 plan: ConvolutionPlan):
        direct, dims = plan.direct, plan.dims
        self.plan, self.rhs = plan, rhs
        self.lhs = lhs.transpose(dims.lhs[0], *dims.lhs[2:], dims.lhs[1])
        self.x = self.lhs if self.lhs.flags.c_contiguous else np.empty(self.lhs.shape, self.lhs.dtype)
        self.w = np.zeros((plan.groups, math.prod(d.size for d in plan.window), plan.in_features,
                           direct.padded_out_features), plan.accumulation)
        self.result = out.transpose(dims.out[0], *dims.out[2:], dims.out[1])
        in_place = self.result.flags.c_contiguous and not np.may_share_memory(self.result, lhs) and \
            not np.may_share_memory(self.result, rhs)
        self.target = self.result if in_place else np.empty(self.result.shape, self.result.dtype)
        elements = self.target.size * self.w.shape[1] * plan.in_features // DIRECT_MULTIPLY_ADDS_PER_ELEMENT
        # Lines in chunks the threads take in turn (the native pool's claims), so a thread slowed down by other
        # work on its core takes fewer.
        self.launch = block_launcher(kernel.bind([self.x, self.w, self.target]), direct.blocks, elements)

    def __call__(self) -> None:
        if self.x is not self.lhs:
            np.copyto(self.x, self.lhs)
        self.w[..., :self.plan.out_features] = _kernel(self.rhs, self.plan)
        self.launch()
        if self.target is not self.result:
            np.copyto(self.result, self.target)


def convolution_plan(instr: HloInstruction, direct: bool = True) -> ConvolutionPlan:
    """The library's plan of convolution ``instr`` (with GEMMs only unless ``direct``); ``UnimplementedError`` for
    what the library thunk does not compute."""
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
    return ConvolutionPlan.of(lhs.shape.dimensions, rhs.shape.dimensions, instr.shape.dimensions, dims, window,
                              int(instr.attr("feature_group_count", 1)), int(instr.attr("batch_group_count", 1)),
                              dtype_of(instr.shape), (dtype_of(lhs.shape), dtype_of(rhs.shape)) if direct else ())


def library_thunk(instr: HloInstruction, emitter: ThunkEmitter) -> ConvolutionThunk:
    """The library thunk of convolution ``instr`` over its slices."""
    lhs, rhs = instr.operands
    return ConvolutionThunk(instr.name, emitter.slice(lhs), lhs.shape, emitter.slice(rhs), rhs.shape,
                            emitter.slice(instr), instr.shape, convolution_plan(instr))


# The rule choosing generated code over the library thunk where the library has no direct kernel
# (``generated_code_is_faster``): thin GEMMs (input times output features per group at most this) keep BLAS far
# from its speed while every window position costs a call ...
THIN_CHANNELS = 16
# ... and below this many multiply-adds in all, the GEMM path's fixed costs (layout changes, padding, a GEMM call
# per window position) outweigh the generated loops' slower arithmetic.
SMALL_WORK = 1 << 18


def generated_code_is_faster(instr: HloInstruction) -> bool:
    """Whether convolution ``instr`` runs faster as generated code (its elemental rule, a kernel of one
    instruction) than as the library thunk, by a rule fitted to ``benchmarks/convolution_paths.py``
    (docs/runtime.md has the figures):

    - integer and pred results: generated code (the library sums integers with numpy's loops, not BLAS: 2x to
      24x slower; it computes no pred);
    - those the library's direct kernel takes: the library, thin and small ones too (4 features in and out at
      8x32x32 with a 5x5 window: 0.25 ms against 1.4 ms; at 1x8x8 with a 1x1 window, 15 µs against 12 µs, the
      worst case); its SIMD loops make 60 to 140 multiply-adds per nanosecond on two threads once channels are
      wide, generated code 1 to 2.5;
    - thin ones among the rest (input features per group times output features per group at most
      ``THIN_CHANNELS``: depthwise ones, few output features per group, narrow floats, complex numbers):
      generated code, mostly 1.4x to 19x faster, the library's GEMMs being too thin for BLAS;
    - small ones among the rest, fewer than ``SMALL_WORK`` multiply-adds in all: generated code (about 15 µs
      against the GEMM path's 70 µs of fixed costs);
    - otherwise the library, by far once channels are wide (bf16 with 32 features in and out at 8x8x8, 3x3: 9x).
    """
    if instr.shape.type.kind not in (TypeKind.FLOAT, TypeKind.COMPLEX):
        return True
    lhs, rhs = instr.operands
    window = tuple(instr.attr("window", ()))
    dims = ConvolutionDimensions.parse(str(instr.attr("dim_labels", "")), len(lhs.shape.dimensions) - 2)
    if dims is None or len(window) != len(lhs.shape.dimensions) - 2:
        return False  # the library thunk names what is wrong
    try:
        if convolution_plan(instr).method == "direct":
            return False
    except UnimplementedError:
        return False  # the library thunk names what it does not compute
    groups = int(instr.attr("feature_group_count", 1)) * int(instr.attr("batch_group_count", 1))
    in_features = rhs.shape.dimensions[dims.rhs[1]]
    out_features = instr.shape.dimensions[dims.out[1]] // max(groups, 1)
    work = instr.shape.element_count * math.prod(d.size for d in window) * in_features
    return in_features * out_features <= THIN_CHANNELS or work < SMALL_WORK


def _can_generate(instr: HloInstruction) -> bool:
    """Whether the code generator emits ``instr`` alone: it has the elemental rule, and the layouts (no tiles, one
    element per byte)."""
    try:
        for shape in (*(o.shape for o in instr.operands), instr.shape):
            tensor_type(shape, instr.name)
    except UnimplementedError:
        return False
    return not lone_op_problems(instr)


@thunk_rule("convolution")
def _convolution(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    can_generate = _can_generate(instr)
    if can_generate and generated_code_is_faster(instr):
        return lone_op_kernel(instr, emitter)
    try:
        return [library_thunk(instr, emitter)]
    except UnimplementedError:
        if not can_generate:
            raise
        return lone_op_kernel(instr, emitter)  # what the library does not compute (pred), generated code does
