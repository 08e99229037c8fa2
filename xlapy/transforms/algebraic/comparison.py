"""Rules for comparisons and selects, as XLA's ``HandleCompare`` and
``HandleSelect``: comparisons whose outcome the operands decide (an unsigned
value against 0, an iota against 0, an integer against itself) become
constants, and selects whose predicate is a constant, or whose two choices
are the same value, become the value they choose."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic.registry import Simplifier, is_all, rule

# The outcome of comparing an integer with itself, by direction.
_SELF_COMPARISON = {"EQ": True, "GE": True, "LE": True, "NE": False, "GT": False, "LT": False}


def _is_unsigned_comparison(compare: HloInstruction) -> bool:
    """XLA's comparison type: given by the ``type`` attribute, else by the
    operands' element type."""
    explicit = compare.attr("type", None)
    if explicit is not None:
        return str(explicit).upper() == "UNSIGNED"
    return compare.operands[0].shape.type.kind is TypeKind.UNSIGNED


def _is_integral(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.type.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED)


@rule("compare")
def _compare(compare: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = compare.operands
    direction = str(compare.attr("direction"))
    outcome: bool | None = None
    if _is_unsigned_comparison(compare):
        # x < 0 and 0 > x never hold for unsigned x; x >= 0 and 0 <= x always do.
        if direction in ("LT", "GE") and is_all(rhs, 0):
            outcome = direction == "GE"
        elif direction in ("GT", "LE") and is_all(lhs, 0):
            outcome = direction == "LE"
    if outcome is None:
        # An iota counts up from 0.
        if direction in ("LT", "GE") and lhs.opcode == "iota" and is_all(rhs, 0):
            outcome = direction == "GE"
        elif direction in ("GT", "LE") and is_all(lhs, 0) and rhs.opcode == "iota":
            outcome = direction == "LE"
    if outcome is None and lhs is rhs and _is_integral(lhs):
        outcome = _SELF_COMPARISON.get(direction)
    if outcome is None:
        return False
    return s.replace(compare, s.scalar_like(compare, int(outcome)))


@rule("select")
def _select(select: HloInstruction, s: Simplifier) -> bool:
    predicate, on_true, on_false = select.operands
    # select(p, A, A) => A
    if on_true is on_false and s.replace_if_compatible(select, on_true):
        return True
    # select(true, A, B) => A; select(false, A, B) => B
    if is_all(predicate, 1) and s.replace_if_compatible(select, on_true):
        return True
    return is_all(predicate, 0) and s.replace_if_compatible(select, on_false)
