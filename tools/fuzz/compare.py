"""Comparing a compiled result with the interpreter's: integers and pred
exactly; floats and complex numbers within ``ulp_tolerance(module)`` of
``tools/loop_fusion_compare.py`` (0 ulp, or 1 where the module computes a
transcendental op in another type than f32), NaN only against NaN.

That bound was measured on the loop-fusion corpus; on the fuzzer's programs
(600 generated ``compile`` cases, 264 of them compiled and run, the others
refused with an XlapyError) the largest distance was that bound too: 0 ulp
in every result of a module whose tolerance is 0, 1 ulp in f64, f16 and
bf16 results of modules with a transcendental op.
"""

from __future__ import annotations

from typing import Any

from tools.compare import leaves
from tools.loop_fusion_compare import ulp_tolerance
from xlapy.hlo import HloModule
from xlapy.runtime.ulps import NAN_MISMATCH, is_float_dtype, max_ulp_difference


def difference(actual: Any, expected: Any, module: HloModule) -> str:
    """'' when ``actual`` (arrays or tuples) matches ``expected``, the
    interpreter's results of ``module``; else what differs."""
    allowed = ulp_tolerance(module)
    actual_leaves, expected_leaves = leaves(actual), leaves(expected)
    if len(actual_leaves) != len(expected_leaves):
        return f"{len(actual_leaves)} outputs, expected {len(expected_leaves)}"
    for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        if a.shape != e.shape:
            return f"output {i}: shape {a.shape}, expected {e.shape}"
        if a.dtype != e.dtype:
            if a.dtype.itemsize != e.dtype.itemsize:
                return f"output {i}: dtype {a.dtype}, expected {e.dtype}"
            a = a.view(e.dtype)  # ml_dtypes floats read back from .npz files as raw bytes
        float_like = e.dtype.kind == "c" or is_float_dtype(e.dtype)
        distance = max_ulp_difference(a, e)
        if distance > (allowed if float_like else 0):
            shown = "NaN against a number" if distance == NAN_MISMATCH else f"{distance}{' ulp' if float_like else ''}"
            return f"output {i}: {shown} apart, {allowed if float_like else 0} allowed"
    return ""
