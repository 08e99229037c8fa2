"""Comparing a compiled result with the interpreter's: integers and pred
exactly; floats and complex numbers within ``ulp_tolerance(module)`` of
``tools/loop_fusion_compare.py`` (0 ulp, or 1 where the module computes a
transcendental op in another type than f32), NaN only against NaN.

A float sum (a reduce or reduce-window whose reducer adds two floats) may be
added up in another order than the interpreter's: the reduction emitter's
partial accumulators do. ``tools/fuzz/error_bounds.py`` bounds how far that
moves each result (two orders of a sum are within ``2 gamma(n) M`` of each
other, Higham's bound, and the ops after the sum carry that bound on), and
``difference`` allows each element its bound (``result_slack``). A worst case
(about 5e-4 of the magnitudes for 4096 f32 terms): it catches sums of the
wrong elements, not one lost term among thousands. A module whose sums reach
an op with no rule there has results no bound covers: ``uncomparable`` says
so, and its callers do not compare values.

That bound was measured on the loop-fusion corpus; on the fuzzer's programs
(600 generated ``compile`` cases, 264 of them compiled and run, the others
refused with an XlapyError) the largest distance was that bound too: 0 ulp
in every result of a module whose tolerance is 0, 1 ulp in f64, f16 and
bf16 results of modules with a transcendental op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import xlapy
from tools.compare import leaves
from tools.fuzz.error_bounds import Unbounded, result_bounds, unbounded
from tools.loop_fusion_compare import ulp_tolerance
from xlapy.hlo import HloModule
from xlapy.runtime.ulps import NAN_MISMATCH, is_float_dtype, max_ulp_difference, ulp_distance


def uncomparable(module: HloModule) -> str:
    """Why the values of ``module``'s compiled results cannot be compared with the interpreter's ('' when they
    can): a float sum whose order no bound covers (see ``tools/fuzz/error_bounds.py``)."""
    reason = unbounded(module)
    return f"{reason}: not compared" if reason else ""


def result_slack(text: str, args: list) -> list[np.ndarray | None] | None:
    """For each result of the module of ``text`` on ``args``, how far the compiled result may be from the
    interpreter's because of the order of its float sums (None for a result no sum reaches); None when the module
    has no float sums, or the bounds cannot be worked out (then the results are compared as they are)."""
    try:
        return result_bounds(xlapy.parse_hlo(text), args)
    except (Unbounded, xlapy.XlapyError):
        return None


def difference(actual: Any, expected: Any, module: HloModule, slack: list[np.ndarray | None] | None = None) -> str:
    """'' when ``actual`` (arrays or tuples) matches ``expected``, the
    interpreter's results of ``module``; else what differs. ``slack``
    (``result_slack``) gives each float result's allowance for the order of
    its sums, beyond which the result may still be one ulp off (its own
    rounding)."""
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
        if slack is not None and slack[i] is not None and float_like and e.dtype.kind != "c":
            if differs := _beyond_slack(a, e, slack[i], allowed + 1):
                return f"output {i}: {differs}"
            continue
        distance = max_ulp_difference(a, e)
        if distance > (allowed if float_like else 0):
            shown = "NaN against a number" if distance == NAN_MISMATCH else f"{distance}{' ulp' if float_like else ''}"
            return f"output {i}: {shown} apart, {allowed if float_like else 0} allowed"
    return ""


def _beyond_slack(actual: np.ndarray, expected: np.ndarray, slack: np.ndarray, ulps: int) -> str:
    """'' when every element of ``actual`` is within ``slack`` (or ``ulps``) of ``expected``'s, NaN only
    against NaN where the slack is finite; else what differs."""
    wide_a, wide_e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(wide_a), np.isnan(wide_e)
    if np.any((nan_a != nan_e) & np.isfinite(slack)):
        return "NaN against a number"
    with np.errstate(invalid="ignore"):
        error = np.where(nan_a | (wide_a == wide_e), 0.0, np.abs(wide_a - wide_e))
    near = (error <= slack) | (ulp_distance(actual, expected) <= ulps)
    if np.all(near):
        return ""
    worst = np.unravel_index(np.argmax(np.where(near, 0.0, error - slack)), error.shape)
    return f"{error[worst]:.3g} apart at {tuple(int(k) for k in worst)}, {slack[worst]:.3g} allowed for the order " \
        f"of its sums"
