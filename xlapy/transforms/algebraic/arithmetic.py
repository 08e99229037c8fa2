"""Rules for elementwise arithmetic, as XLA's ``HandleAdd``, ``HandleSubtract``,
``HandleMultiply``, ``HandleDivide``, ``HandleNegate`` and ``HandleNot``.

Identities are folded only where they hold bit for bit but for the sign of a
zero: ``A + 0`` is ``A`` for a +0.0 constant (``-0.0 + 0.0`` gives +0.0 while
``A`` may be -0.0, a difference XLA accepts), never for -0.0; ``A * 0`` and
``A - A`` become 0 only for integers (NaN and infinity otherwise).
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic.registry import Simplifier, is_all, rule


def _is_integral(instr: HloInstruction) -> bool:
    return instr.shape.type.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED)


@rule("add")
def _add(add: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = add.operands
    # A + 0 => A, 0 + A => A
    if is_all(rhs, 0) and s.replace_if_compatible(add, lhs):
        return True
    if is_all(lhs, 0) and s.replace_if_compatible(add, rhs):
        return True
    # Constants go to the right, so that later rules need look there only.
    if lhs.opcode == "constant" and rhs.opcode != "constant":
        return s.replace_with_new(add, "add", add.shape, [rhs, lhs])
    # (A + C1) + C2 => A + (C1 + C2) and (C1 - A) + C2 => (C1 + C2) - A, so that
    # the constants fold. XLA reassociates floats too; that changes rounding,
    # so here only integers, whose addition wraps and is associative.
    if _is_integral(add) and lhs.opcode in ("add", "subtract"):
        inner_lhs, inner_rhs = lhs.operands
        if lhs.opcode == "add":
            a, c1 = inner_lhs, _constant_term(inner_rhs, rhs)
        else:
            a, c1 = inner_rhs, _constant_term(inner_lhs, rhs)
        if c1 is not None and a.opcode != "constant":
            c2 = _constant_term(rhs, rhs)
            total = s.add("add", c1.shape, [c1, c2], before=add)
            if total.shape.rank == 0 and add.shape.rank != 0:
                total = s.add("broadcast", add.shape, [total], {"dimensions": ()}, before=add)
            if lhs.opcode == "add":
                return s.replace_with_new(add, "add", add.shape, [a, total])
            return s.replace_with_new(add, "subtract", add.shape, [total, a])
    return False


def _constant_term(term: HloInstruction, other: HloInstruction) -> HloInstruction | None:
    """The constant of ``term`` when ``term`` and ``other`` are both constants,
    or both broadcasts of scalar constants (XLA's reassociation patterns)."""
    if term.opcode == "constant" and other.opcode == "constant":
        return term
    if term.opcode == "broadcast" and other.opcode == "broadcast":
        inner, other_inner = term.operands[0], other.operands[0]
        if inner.opcode == "constant" and other_inner.opcode == "constant" and inner.shape.rank == 0 \
                and other_inner.shape.rank == 0:
            return inner
    return None


@rule("subtract")
def _subtract(sub: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = sub.operands
    # A - A => 0 for integers.
    if lhs is rhs and _is_integral(sub):
        return s.replace(sub, s.scalar_like(sub, 0))
    # A - 0 => A
    if is_all(rhs, 0) and s.replace_if_compatible(sub, lhs):
        return True
    # A - C => A + (-C): additions of constants reassociate and fold.
    constant = rhs.operands[0] if rhs.opcode == "broadcast" else rhs
    if lhs.opcode != "constant" and constant.opcode == "constant":
        negated = s.add("negate", constant.shape, [constant], before=sub)
        if rhs is not constant:
            negated = s.add("broadcast", rhs.shape, [negated], {"dimensions": rhs.attr("dimensions", ())}, before=sub)
        return s.replace_with_new(sub, "add", sub.shape, [lhs, negated])
    return False


@rule("multiply")
def _multiply(multiply: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = multiply.operands
    # A * 1 => A, 1 * A => A
    if is_all(rhs, 1) and s.replace_if_compatible(multiply, lhs):
        return True
    if is_all(lhs, 1) and s.replace_if_compatible(multiply, rhs):
        return True
    # 0 * A => 0, A * 0 => 0 for integers (for floats, A may be NaN or infinite).
    if _is_integral(multiply):
        if is_all(lhs, 0) and s.replace_if_compatible(multiply, lhs):
            return True
        if is_all(rhs, 0) and s.replace_if_compatible(multiply, rhs):
            return True
    return False


@rule("divide")
def _divide(divide: HloInstruction, s: Simplifier) -> bool:
    # A / 1 => A
    lhs, rhs = divide.operands
    return is_all(rhs, 1) and s.replace_if_compatible(divide, lhs)


@rule("negate")
def _negate(negate: HloInstruction, s: Simplifier) -> bool:
    # negate(negate(A)) => A
    operand = negate.operands[0]
    return operand.opcode == "negate" and s.replace_if_compatible(negate, operand.operands[0])


@rule("not")
def _not(logical_not: HloInstruction, s: Simplifier) -> bool:
    # not(not(A)) => A
    operand = logical_not.operands[0]
    return operand.opcode == "not" and s.replace_if_compatible(logical_not, operand.operands[0])


def _is_all_extreme(instr: HloInstruction, lowest: bool) -> bool:
    """Whether ``instr`` is a constant, or a broadcast of one, all of whose
    elements are its type's smallest (``lowest``) or largest value: -inf or
    +inf for floats (XLA's ``LiteralUtil::MinValue``/``MaxValue``)."""
    while instr.opcode == "broadcast":
        instr = instr.operands[0]
    if instr.opcode != "constant" or not isinstance(instr.literal, np.ndarray):
        return False
    kind = instr.shape.type.kind
    if kind in (TypeKind.SIGNED, TypeKind.UNSIGNED):
        info = np.iinfo(instr.shape.dtype)
        extreme = info.min if lowest else info.max
    elif kind is TypeKind.FLOAT:
        extreme = -np.inf if lowest else np.inf
    else:
        return False
    return bool(np.all(instr.literal == extreme))


def _min_max(instr: HloInstruction, s: Simplifier, maximum: bool) -> bool:
    lhs, rhs = instr.operands
    # max(A, A) => A
    if lhs is rhs:
        return s.replace(instr, lhs)
    # max(A, lowest) => A, min(A, largest) => A: for floats only because
    # maximum and minimum propagate NaN (XLA's default minmax_propagate_nan).
    kind = instr.shape.type.kind
    element_type = instr.shape.element_type
    if kind in (TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.FLOAT):
        if rhs.shape.element_type == element_type and _is_all_extreme(lhs, lowest=maximum):
            return s.replace(instr, rhs)
        if lhs.shape.element_type == element_type and _is_all_extreme(rhs, lowest=maximum):
            return s.replace(instr, lhs)
    # max(max(A, B), B) => max(A, B), and so with A on the right.
    if lhs.opcode == instr.opcode and any(op is rhs for op in lhs.operands):
        return s.replace(instr, lhs)
    # max(A, max(A, B)) => max(A, B)
    if rhs.opcode == instr.opcode and rhs.operands[0] is lhs:
        return s.replace(instr, rhs)
    return False


@rule("maximum")
def _maximum(maximum: HloInstruction, s: Simplifier) -> bool:
    return _min_max(maximum, s, maximum=True)


@rule("minimum")
def _minimum(minimum: HloInstruction, s: Simplifier) -> bool:
    return _min_max(minimum, s, maximum=False)


@rule("power")
def _power(power: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = power.operands
    # pow(A, 0) => 1
    if is_all(rhs, 0):
        return s.replace(power, s.scalar_like(power, 1))
    # pow(A, 1) => A
    if is_all(rhs, 1) and s.replace_if_compatible(power, lhs):
        return True
    # pow(A, 2) => A * A
    if is_all(rhs, 2):
        return s.replace_with_new(power, "multiply", power.shape, [lhs, lhs])
    # pow(A, 3) => A * (A * A)
    if is_all(rhs, 3):
        if power.control_predecessors or power.control_successors:
            return False
        square = s.add("multiply", power.shape, [lhs, lhs], before=power)
        return s.replace_with_new(power, "multiply", power.shape, [lhs, square])
    # pow(A, -1) => 1 / A
    if is_all(rhs, -1):
        if power.control_predecessors or power.control_successors:
            return False
        return s.replace_with_new(power, "divide", power.shape, [s.scalar_like(power, 1), lhs])
    return False
