"""Rule of ``convolution``: any dimension labels, strides, padding (negative
too), base and window dilation, window reversal, feature and batch groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.interpreter.numerics import dtype_of, is_narrow_float, widen
from xlapy.interpreter.registry import Value, rule
from xlapy.shapes import TypeKind, element_type_of_dtype

if TYPE_CHECKING:
    from xlapy.hlo import HloInstruction
    from xlapy.interpreter.evaluator import Evaluator

_LETTERS = "abcdefghijklmnopqrstuvwxyz"  # the fixed axes use capitals


def _label_positions(labels: str, first: str, second: str) -> list[int]:
    """Positions of the ``first`` and ``second`` labelled dimensions, then of
    spatial dimensions 0, 1, ... (labelled by their number)."""
    spatial = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
    if len(spatial) != len(labels) - 2 or first not in labels or second not in labels:
        raise XlapyError(f"bad convolution dimension labels '{labels}'")
    return [labels.index(first), labels.index(second), *(i for _, i in spatial)]


def accumulation_dtype(result: np.dtype) -> np.dtype:
    """Sums are taken in f32 for narrow floats; integers in 64 bits, which
    wraps to the same result as wrapping arithmetic in the result type."""
    kind = element_type_of_dtype(result).kind
    if kind in (TypeKind.PRED, TypeKind.SIGNED, TypeKind.UNSIGNED):
        return np.dtype(np.int64)
    if is_narrow_float(result):
        return np.dtype(np.float32)
    return result


def _dilate_and_pad(x: np.ndarray, window) -> np.ndarray:
    """The spatial dimensions (2, 3, ...) of ``x`` base-dilated with zeros,
    then padded (or cropped, for negative padding)."""
    for axis, dim in enumerate(window, start=2):
        if dim.base_dilation > 1 and x.shape[axis] > 0:
            shape = list(x.shape)
            shape[axis] = (x.shape[axis] - 1) * dim.base_dilation + 1
            dilated = np.zeros(shape, x.dtype)
            dilated[(slice(None),) * axis + (slice(None, None, dim.base_dilation),)] = x
            x = dilated
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(dim.padding_low, 0), max(dim.padding_high, 0))
        x = np.pad(x, widths)
        crop_low, crop_high = max(-dim.padding_low, 0), max(-dim.padding_high, 0)
        x = x[(slice(None),) * axis + (slice(crop_low, x.shape[axis] - crop_high),)]
    return x


@rule("convolution")
def convolution(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    lhs, rhs = (np.asarray(o) for o in operands)
    labels = instr.attributes.get("dim_labels")
    if labels is None:
        raise XlapyError(f"convolution {instr.name} has no dim_labels")
    lhs_labels, rest = labels.split("_", 1)
    rhs_labels, out_labels = rest.split("->")
    spatial_rank = len(lhs_labels) - 2
    window = tuple(instr.attributes.get("window", ()))
    if len(window) != spatial_rank:
        raise XlapyError(f"convolution {instr.name} has {len(window)} window dimensions for {spatial_rank} spatial")
    feature_groups = instr.attributes.get("feature_group_count", 1)
    batch_groups = instr.attributes.get("batch_group_count", 1)
    out_dtype = dtype_of(instr.shape.element_type)
    acc = accumulation_dtype(out_dtype)
    # Work in [batch, feature, spatial...] and [out feature, in feature, spatial...].
    x = widen(np.transpose(lhs, _label_positions(lhs_labels, "b", "f"))).astype(acc)
    w = widen(np.transpose(rhs, _label_positions(rhs_labels, "o", "i"))).astype(acc)
    out_positions = _label_positions(out_labels, "b", "f")
    out_dims = [instr.shape.dimensions[p] for p in out_positions]
    reversed_axes = tuple(2 + i for i, d in enumerate(window) if d.window_reversal)
    if reversed_axes:
        w = np.flip(w, reversed_axes)
    x = _dilate_and_pad(x, window)
    spatial_out = out_dims[2:]
    extents = [(d.size - 1) * d.window_dilation + 1 for d in window]
    result = np.zeros(out_dims, acc)
    if 0 not in out_dims and 0 not in w.shape and 0 not in x.shape:
        # patches: [batch, feature, out spatial..., window spatial...]
        patches = np.lib.stride_tricks.sliding_window_view(x, extents, axis=tuple(range(2, 2 + spatial_rank)))
        strided = tuple(slice(0, (n - 1) * d.stride + 1, d.stride) for n, d in zip(spatial_out, window))
        dilated = tuple(slice(None, None, d.window_dilation) for d in window)
        patches = patches[(slice(None), slice(None), *strided, *dilated)]
        batch = x.shape[0]
        out_features, in_features = w.shape[:2]
        # lhs [batch groups, batch, feature groups, features in group, ...];
        # rhs [batch groups, feature groups, out features in group, features in group, ...].
        patches = patches.reshape(batch_groups, batch // batch_groups, feature_groups, in_features,
                                  *patches.shape[2:])
        w = w.reshape(batch_groups, feature_groups, out_features // (batch_groups * feature_groups), in_features,
                      *w.shape[2:])
        s, k = _LETTERS[:spatial_rank], _LETTERS[spatial_rank:2 * spatial_rank]
        summed = np.einsum(f"ABGI{s}{k},AGOI{k}->BAGO{s}", patches, w, optimize=True)
        result = summed.reshape(out_dims)
    # Back from [batch, feature, spatial...] to the output's labels.
    perm = [0] * len(out_positions)
    for axis, position in enumerate(out_positions):
        perm[position] = axis
    return np.transpose(result, perm)
