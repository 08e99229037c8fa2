"""Rules for ``and`` and ``or``, as XLA's ``HandleAnd`` and ``HandleOr``: an
all-false (all-zero) operand decides an ``and`` and is the identity of an
``or``; for predicates, an all-true operand is the identity of an ``and`` and
decides an ``or``."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic.registry import Simplifier, is_all, rule


def _both_predicates(instr: HloInstruction) -> bool:
    return all(op.shape.is_array and op.shape.type.kind is TypeKind.PRED for op in instr.operands)


@rule("and")
def _and(logical_and: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = logical_and.operands
    if _both_predicates(logical_and):
        # A && true => A, true && A => A
        if is_all(rhs, 1) and s.replace_if_compatible(logical_and, lhs):
            return True
        if is_all(lhs, 1) and s.replace_if_compatible(logical_and, rhs):
            return True
    # A && false => false, A & 0 => 0 (and with the constant on the left)
    if is_all(rhs, 0) and s.replace_if_compatible(logical_and, rhs):
        return True
    return is_all(lhs, 0) and s.replace_if_compatible(logical_and, lhs)


@rule("or")
def _or(logical_or: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = logical_or.operands
    if _both_predicates(logical_or):
        # A || true => true, true || A => true
        if is_all(rhs, 1) and s.replace_if_compatible(logical_or, rhs):
            return True
        if is_all(lhs, 1) and s.replace_if_compatible(logical_or, lhs):
            return True
    # A || false => A, A | 0 => A (and with the constant on the left)
    if is_all(rhs, 0) and s.replace_if_compatible(logical_or, lhs):
        return True
    return is_all(lhs, 0) and s.replace_if_compatible(logical_or, rhs)
