"""Comparing a compiled result with the interpreter's, independently of
xlapy's own ulp helper: floats (and each part of complex numbers) within a
few dozen ulps relative to the result's magnitude, NaNs in the same places,
integers exactly."""

from __future__ import annotations

import numpy as np


def leaves(value) -> list:
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in leaves(item)]
    return [np.asarray(value)]


def _float_parts(array: np.ndarray) -> list[np.ndarray]:
    if array.dtype.kind == "c":
        return [array.real.astype(np.float64), array.imag.astype(np.float64)]
    return [array.astype(np.float64)]


def _epsilon(dtype: np.dtype) -> float:
    try:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)
    except (ValueError, TypeError):
        return float(np.finfo(np.float64).eps)


def difference(actual, expected) -> str:
    """'' when ``actual`` matches ``expected``, else what differs."""
    actual_leaves, expected_leaves = leaves(actual), leaves(expected)
    if len(actual_leaves) != len(expected_leaves):
        return f"{len(actual_leaves)} outputs, expected {len(expected_leaves)}"
    for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        if a.shape != e.shape:
            return f"output {i}: shape {a.shape}, expected {e.shape}"
        if e.size == 0:
            continue
        floating = e.dtype.kind in "fc" or e.dtype.kind == "V" or "float" in e.dtype.name
        if not floating:
            if not np.array_equal(a.astype(np.int64) if a.dtype.kind in "biu" else a, e.astype(np.int64)
                                  if e.dtype.kind in "biu" else e):
                return f"output {i}: integers differ"
            continue
        tolerance = 64 * _epsilon(e.dtype if e.dtype.kind != "c" else np.dtype(np.float32 if e.itemsize == 8 else
                                                                                   np.float64))
        for a_part, e_part in zip(_float_parts(a), _float_parts(e)):
            a_nan, e_nan = np.isnan(a_part), np.isnan(e_part)
            if np.any(a_nan != e_nan):
                return f"output {i}: NaN in different places"
            keep = ~e_nan
            a_part, e_part = a_part[keep], e_part[keep]
            if np.any(np.isinf(a_part) != np.isinf(e_part)) or np.any(np.isinf(e_part) & (a_part != e_part)):
                return f"output {i}: infinities differ"
            finite = ~np.isinf(e_part)
            scale = np.max(np.abs(e_part[finite]), initial=0.0)
            error = np.abs(a_part[finite] - e_part[finite])
            bound = tolerance * (np.abs(e_part[finite]) + scale * 1e-3) + 1e-300
            if np.any(error > bound):
                worst = int(np.argmax(error - bound))
                return f"output {i}: {a_part[finite][worst]!r} vs {e_part[finite][worst]!r}"
    return ""
