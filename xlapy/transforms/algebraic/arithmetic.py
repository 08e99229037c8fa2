"""Rules for elementwise arithmetic, as XLA's ``HandleAdd``, ``HandleSubtract``,
``HandleMultiply``, ``HandleDivide``, ``HandleNegate`` and ``HandleNot``.

Identities are folded only where they hold bit for bit but for the sign of a
zero: ``A + 0`` is ``A`` for a +0.0 constant (``-0.0 + 0.0`` gives +0.0 while
``A`` may be -0.0, a difference XLA accepts), never for -0.0; ``A * 0`` and
``A - A`` become 0 only for integers (NaN and infinity otherwise).
"""

from __future__ import annotations

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
    return False


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
