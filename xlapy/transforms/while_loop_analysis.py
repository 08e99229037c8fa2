"""The trip count of a while loop from its induction variable, as XLA's ``ComputeWhileLoopTripCount``
(``xla/hlo/analysis/while_loop_analysis.cc``) finds it in the common case: a tuple element that starts as an
integer constant, that the body advances by a positive constant (``add(get-tuple-element(param), constant)``,
in either order) and that the condition compares with a constant (``i < n``, ``i <= n``, or the same written
``n > i``, ``n >= i``)."""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, while_condition_and_body


def integer_constant(instruction: HloInstruction) -> int | None:
    if instruction.opcode != "constant" or instruction.shape.is_tuple or instruction.shape.rank != 0:
        return None
    value = np.asarray(instruction.literal)
    if value.dtype.kind not in "iu":
        return None
    return int(value)


def _element_of_parameter(instruction: HloInstruction, computation: HloComputation) -> int | None:
    """``k`` when ``instruction`` is ``get-tuple-element(parameter(0)), index=k``."""
    if instruction.opcode != "get-tuple-element":
        return None
    operand = instruction.operands[0]
    if operand.opcode != "parameter" or operand.parent is not computation:
        return None
    return int(instruction.attr("index"))


def induction_bound(condition: HloComputation) -> tuple[int, int, str] | None:
    """(state index, constant, direction as ``i <direction> constant``) of the condition's root."""
    root = condition.root
    if root is None or root.opcode != "compare":
        return None
    lhs, rhs = root.operands
    direction = str(root.attr("direction"))
    flipped = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}
    index, constant = _element_of_parameter(lhs, condition), integer_constant(rhs)
    if index is None or constant is None:
        index, constant, direction = _element_of_parameter(rhs, condition), integer_constant(lhs), flipped.get(
            direction, "")
    if index is None or constant is None or direction not in ("LT", "LE"):
        return None
    return index, constant, direction


def induction_step(body: HloComputation, index: int) -> int | None:
    """The constant the body adds to state element ``index``, if that is all it does."""
    root = body.root
    if root is None or root.opcode != "tuple" or index >= len(root.operands):
        return None
    update = root.operands[index]
    if update.opcode != "add":
        return None
    for variable, step in (update.operands, reversed(update.operands)):
        if _element_of_parameter(variable, body) == index:
            value = integer_constant(step)
            return value if value is not None and value > 0 else None
    return None


def induction_start(loop: HloInstruction, index: int) -> HloInstruction | None:
    """The instruction giving state element ``index`` its initial value (through copy insertion's copies)."""
    init = loop.operands[0]
    if init.opcode != "tuple" or index >= len(init.operands):
        return None
    initial = init.operands[index]
    while initial.opcode == "copy":
        initial = initial.operands[0]
    return initial


def trip_count(loop: HloInstruction) -> int | None:
    """How many times ``loop`` runs its body, when its induction variable says so."""
    condition, body = while_condition_and_body(loop)
    bound = induction_bound(condition)
    init = loop.operands[0]
    if bound is None or init.opcode != "tuple":
        return None
    index, limit, direction = bound
    initial = induction_start(loop, index)
    start = integer_constant(initial) if initial is not None else None
    step = induction_step(body, index)
    if initial is None or start is None or step is None:
        return None
    end = limit if direction == "LT" else limit + 1
    # Each element type wraps; bounds that do not fit it are left to XLA's general analysis.
    dtype = np.asarray(initial.literal).dtype
    info = np.iinfo(dtype)
    if not info.min <= end <= info.max:
        return None
    trips = max(0, -(-(end - start) // step))
    # The last step must not wrap: a wrapped variable would pass the test again.
    return trips if start + trips * step <= info.max else None
