"""The rule for ``remainder``, as XLA's ``HandleRemainder``:

- ``(A % B) % B`` is ``A % B``;
- for integers and a constant power of two ``B``, ``A % B`` is
  ``A & (B - 1)`` (for signed ``A``, taken of ``|A|`` and given ``A``'s
  sign back, as ``remainder`` truncates toward zero);
- an iota counting up to at most ``N`` is its own remainder by ``N``, and
  ``(iota + N) % N`` is ``iota % N`` when the sum cannot overflow.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule


def _effective_scalar_constant(instr: HloInstruction) -> HloInstruction | None:
    """The constant of one element ``instr`` is, or a broadcast of one
    (XLA's ``ConstantEffectiveScalar`` patterns)."""
    if instr.opcode == "broadcast":
        instr = instr.operands[0]
    if instr.opcode == "constant" and instr.shape.is_array and instr.shape.element_count == 1:
        return instr
    return None


def _integer_value(constant: HloInstruction) -> int:
    return int(np.asarray(constant.literal).reshape(-1)[0])


def _is_integral(instr: HloInstruction) -> bool:
    return instr.shape.type.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED)


@rule("remainder")
def _remainder(remainder: HloInstruction, s: Simplifier) -> bool:
    a, b = remainder.operands
    # (A % B) % B => A % B
    if a.opcode == "remainder" and a.operands[1] is b:
        return s.replace(remainder, a)
    if not _is_integral(remainder):
        return False
    divisor = _effective_scalar_constant(b)
    if divisor is None:
        return False
    value = _integer_value(divisor)
    if value > 0 and value & (value - 1) == 0:
        return _remainder_to_and(remainder, s, a, b, value)
    if b.opcode != "broadcast":
        return False
    # iota % N => iota when the iota counts below N.
    if a.opcode == "iota":
        if value >= a.shape.dimensions[a.attr("iota_dimension", 0)]:
            return s.replace(remainder, a)
        return False
    # (iota + N) % N => iota % N when iota + N cannot overflow.
    if a.opcode == "add":
        iotas = [o for o in a.operands if o.opcode == "iota"]
        others = [o for o in a.operands if o.opcode != "iota"]
        if len(iotas) != 1 or len(others) != 1 or others[0].opcode != "broadcast":
            return False
        if _effective_scalar_constant(others[0]) is not divisor or value <= 0:
            return False  # (a negative N can change the sign of the sum)
        iota = iotas[0]
        largest = value + iota.shape.dimensions[iota.attr("iota_dimension", 0)]
        if largest > np.iinfo(iota.shape.dtype).max:
            return False
        return s.replace_with_new(remainder, "remainder", remainder.shape, [iota, b])
    return False


def _remainder_to_and(remainder: HloInstruction, s: Simplifier, a: HloInstruction, b: HloInstruction,
                      value: int) -> bool:
    element_type = remainder.shape.element_type
    if remainder.shape.type.kind is TypeKind.UNSIGNED:
        mask = building.scalar(s, value - 1, element_type, remainder)
        if b.shape.rank != 0:
            mask = building.broadcast(s, mask, b.shape, (), remainder)
        return s.replace_with_new(remainder, "and", remainder.shape, [a, mask])
    # Signed: the remainder has the dividend's sign, so mask |A| and negate back where A < 0.
    if remainder.control_predecessors or remainder.control_successors:
        return False
    shape = a.shape
    predicate_shape = building.array_shape(shape, "pred", shape.dimensions)
    zeros = s.scalar_like(a, 0)
    negative = s.add("compare", predicate_shape, [a, zeros], {"direction": "LT"}, before=remainder)
    negated = s.add("negate", shape, [a], before=remainder)
    magnitude = s.add("select", shape, [negative, negated, a], before=remainder)
    mask = s.scalar_like(magnitude, value - 1)
    masked = s.add("and", remainder.shape, [magnitude, mask], before=remainder)
    negated_masked = s.add("negate", remainder.shape, [masked], before=remainder)
    return s.replace_with_new(remainder, "select", remainder.shape, [negative, negated_masked, masked])


