"""Comparing a compiled result with the interpreter's: integers and pred
exactly; floats and complex numbers within ``ulp_tolerance(module)`` of
``tools/loop_fusion_compare.py`` (0 ulp, or 1 where the module computes a
transcendental op in another type than f32), NaN only against NaN.

A float sum (a reduce or reduce-window whose reducer adds two floats) may be
added up in another order than the interpreter's: the reduction emitter's
partial accumulators do. Each order is within ``gamma(n) * M`` of the exact
sum of ``n`` terms whose magnitudes add up to ``M`` (Higham, Accuracy and
Stability of Numerical Algorithms, 4.2), so two orders are within twice
that, plus the last rounding of each result: ``M`` is the result of the same
module with every such reducer adding the magnitudes of its operands
(``magnitude_module``), evaluated on the same arguments. A worst case (about
5e-4 of the magnitudes for 4096 f32 terms): it catches sums of the wrong
elements, not one lost term among thousands. That holds where the
sums reach the results through ops that carry their error unchanged
(``_CARRYING``); a module whose sums feed other ops, or whose reducers do
other float arithmetic, has results no bound of this kind covers:
``uncomparable`` says so, and its callers do not compare values.

That bound was measured on the loop-fusion corpus; on the fuzzer's programs
(600 generated ``compile`` cases, 264 of them compiled and run, the others
refused with an XlapyError) the largest distance was that bound too: 0 ulp
in every result of a module whose tolerance is 0, 1 ulp in f64, f16 and
bf16 results of modules with a transcendental op.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

import xlapy
from tools.compare import leaves
from tools.loop_fusion_compare import ulp_tolerance
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.runtime.ulps import NAN_MISMATCH, is_float_dtype, max_ulp_difference, ulp_distance
from xlapy.shapes import ELEMENT_TYPES
from xlapy.transforms.call_graph import CallGraph

_SUMMING = ("reduce", "reduce-window")
# Ops through which a sum reaches a result with its error unchanged in size (relabelled, copied, gathered into
# a tuple, or widened).
_CARRYING = frozenset({"bitcast", "broadcast", "concatenate", "copy", "dynamic-slice", "get-tuple-element",
                       "reshape", "slice", "transpose", "tuple"})
# Float arithmetic a reducer may do in another order than the interpreter's (max, min, select and compares are
# exact in any order).
_INEXACT = frozenset({"add", "subtract", "multiply", "divide", "power", "atan2", "remainder"})


def _is_float(instr: HloInstruction) -> bool:
    element = ELEMENT_TYPES.get(instr.shape.element_type)
    return element is not None and element.is_floating_point


def _float_sum(reducer: HloComputation) -> bool:
    """Whether ``reducer`` is ``add(p0, p1)`` of two float scalars."""
    root = reducer.root
    operands = root.operands
    return root.opcode == "add" and _is_float(root) and operands[0] is not operands[1] and \
        all(o.opcode == "parameter" for o in operands)


def _inexact(reducer: HloComputation) -> bool:
    return any(i.opcode in _INEXACT and _is_float(i) for i in reducer.instructions)


def _summing_ops(module: HloModule) -> list[HloInstruction]:
    """The reduces and reduce-windows of ``module`` whose reducers do float arithmetic."""
    return [i for c in module.computations for i in c.instructions
            if i.opcode in _SUMMING and i.called_computations and _inexact(i.called_computations[0])]


def _reaches_results_unchanged(instr: HloInstruction) -> bool:
    """Whether every path from ``instr`` to the entry's results passes only ``_CARRYING`` ops (through the roots
    of fused computations to their fusions)."""
    pending, seen = [instr], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        computation = current.parent
        if current is computation.root:
            if computation.is_entry:
                continue
            if computation.fusion_instruction is None:
                return False  # a loop body, a branch, a called computation: followed no further
            pending.append(computation.fusion_instruction)
        for user in current.users:
            if user.opcode not in _CARRYING and not (user.opcode == "convert" and _widens(current, user)):
                return False
            pending.append(user)
    return True


def _widens(source: HloInstruction, convert: HloInstruction) -> bool:
    """Whether ``convert`` turns ``source``'s floats into floats at least as wide (no rounding)."""
    before, after = ELEMENT_TYPES.get(source.shape.element_type), ELEMENT_TYPES.get(convert.shape.element_type)
    return before is not None and after is not None and before.is_floating_point and after.is_floating_point and \
        after.bit_width >= before.bit_width


def uncomparable(module: HloModule) -> str:
    """Why the values of ``module``'s compiled results cannot be compared with the interpreter's ('' when they
    can): a float reduction whose order no bound covers (see the module docstring)."""
    callers = CallGraph(module).callers
    for instr in _summing_ops(module):
        reducer = instr.called_computations[0]
        if not _float_sum(reducer):
            return f"{instr.opcode} {instr.name} reduces with other float arithmetic than one add: not compared"
        if not _reaches_results_unchanged(instr):
            return f"the float sums of {instr.opcode} {instr.name} feed other ops: not compared"
        if any(site.instruction.opcode not in _SUMMING for site in callers[id(reducer)]):
            return f"the reducer of {instr.name} is called by other ops too: not compared"
    return ""


def magnitude_module(text: str) -> HloModule:
    """The module of ``text`` with every float-sum reducer adding the magnitudes of its operands."""
    module = xlapy.parse_hlo(text)
    reducers = {id(i.called_computations[0]): i.called_computations[0] for i in _summing_ops(module)}
    for reducer in reducers.values():
        root = reducer.root
        # Both: which operand is the term depends on how the interpreter pairs them (an accumulated magnitude
        # is its own magnitude).
        for index, operand in enumerate(list(root.operands)):
            magnitude = HloInstruction(f"magnitude{index}", "abs", operand.shape, [operand])
            root.replace_operand(index, reducer.add_instruction(magnitude, before=root))
    return module


def _terms(module: HloModule) -> tuple[int, float]:
    """The most terms one float sum of ``module`` adds (its init value included) and the largest unit roundoff of
    the types they are added in (0 terms: no sums)."""
    terms, roundoff = 0, 0.0
    for instr in _summing_ops(module):
        if instr.opcode == "reduce":
            operand = instr.operands[0].shape.dimensions
            count = math.prod(operand[d] for d in instr.attr("dimensions", ()))
        else:
            count = math.prod(d.size for d in instr.attr("window", ()))
        terms = max(terms, count + 1)
        element = ELEMENT_TYPES[instr.called_computations[0].root.shape.element_type]
        roundoff = max(roundoff, float(ml_dtypes.finfo(element.dtype).eps) / 2)
    return terms, roundoff


def summation_slack(text: str, args: list) -> list[np.ndarray] | None:
    """For each result of the module of ``text`` on ``args``, how far the compiled result may be from the
    interpreter's because of the order of its float sums; None when it has none (or the magnitudes cannot be
    evaluated, then the results are compared as they are)."""
    module = xlapy.parse_hlo(text)
    terms, u = _terms(module)
    if not terms:
        return None
    try:
        magnitudes = leaves(xlapy.evaluate(magnitude_module(text), *args))
    except xlapy.XlapyError:
        return None
    gamma = terms * u / (1 - terms * u) if terms * u < 1 else math.inf
    return [2 * gamma * np.abs(np.asarray(m, np.float64)) for m in magnitudes]


def difference(actual: Any, expected: Any, module: HloModule, slack: list[np.ndarray] | None = None) -> str:
    """'' when ``actual`` (arrays or tuples) matches ``expected``, the
    interpreter's results of ``module``; else what differs. ``slack``
    (``summation_slack``) gives each float result's allowance for the order of
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
        if slack is not None and float_like and e.dtype.kind != "c":
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
    against NaN; else what differs."""
    wide_a, wide_e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(wide_a), np.isnan(wide_e)
    if np.any(nan_a != nan_e):
        return "NaN against a number"
    with np.errstate(invalid="ignore"):
        error = np.where(nan_a | (wide_a == wide_e), 0.0, np.abs(wide_a - wide_e))
    near = (error <= slack) | (ulp_distance(actual, expected) <= ulps)
    if np.all(near):
        return ""
    worst = np.unravel_index(np.argmax(np.where(near, 0.0, error - slack)), error.shape)
    return f"{error[worst]:.3g} apart at {tuple(int(k) for k in worst)}, {slack[worst]:.3g} allowed for the order " \
        f"of its sums"
