"""Rules for elementwise unary ops and complex parts, as XLA's ``HandleAbs``,
``HandleExp``, ``HandleReal``, ``HandleImag`` and ``HandleComplex``:

- ``abs(A)`` is ``A`` when ``A`` is known not to be negative (XLA's
  ``IsNonNegative``: an exponential, a square, an unsigned or small signed
  iota, a non-negative scalar constant, ...);
- ``exp(0)`` is 1;
- the real part of a non-complex value is the value, its imaginary part 0;
  the parts of ``complex(r, i)`` are ``r`` and ``i``, and
  ``complex(real(c), imag(c))`` is ``c``.

XLA's rewrites of ``log(exp(A))`` (fast math only), of logarithms of powers
and roots, and of ``rsqrt`` of powers and reciprocals change the rounding
(or the overflow) of the result and are not made.
"""

from __future__ import annotations

import math

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule


def _is_signed_integral(instr: HloInstruction) -> bool:
    return instr.shape.type.kind is TypeKind.SIGNED


def _scalar_constant_value(instr: HloInstruction) -> float | None:
    """The value of a constant with one element, as a real number."""
    if instr.opcode != "constant" or not instr.shape.is_array or instr.shape.element_count != 1:
        return None
    if instr.shape.type.kind not in (TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.FLOAT):
        return None
    return float(np.asarray(instr.literal).reshape(-1)[0])


def is_non_negative(instr: HloInstruction) -> bool:
    """Whether every element of ``instr`` is known to be >= 0 (or NaN for
    operations that propagate it), as XLA's ``IsNonNegative``."""
    if any(o.shape.is_array and o.shape.type.kind is TypeKind.COMPLEX for o in instr.operands):
        return False
    opcode = instr.opcode
    if opcode == "multiply":
        return instr.operands[0] is instr.operands[1] and not _is_signed_integral(instr)
    if opcode == "exponential":
        return True
    if opcode == "iota":
        if not _is_signed_integral(instr):
            return True
        size = instr.shape.dimensions[instr.attr("iota_dimension", 0)]
        return instr.shape.type.bit_width >= 64 or size <= 1 << (instr.shape.type.bit_width - 1)
    if opcode == "abs":
        return not _is_signed_integral(instr) or is_non_negative(instr.operands[0])
    if opcode == "broadcast":
        return is_non_negative(instr.operands[0])
    if opcode == "constant":
        value = _scalar_constant_value(instr)
        return value is not None and not math.isnan(value) and not math.copysign(1.0, value) < 0
    if opcode == "minimum":
        return all(is_non_negative(o) for o in instr.operands)
    if opcode == "maximum":
        return any(is_non_negative(o) for o in instr.operands)
    if opcode == "power":
        return not _is_signed_integral(instr) and is_non_negative(instr.operands[0])
    if opcode == "select":
        return is_non_negative(instr.operands[1]) and is_non_negative(instr.operands[2])
    return False


@rule("abs")
def _abs(abs_: HloInstruction, s: Simplifier) -> bool:
    # abs(A) => A for A >= 0
    operand = abs_.operands[0]
    return is_non_negative(operand) and s.replace(abs_, operand)


@rule("exponential")
def _exponential(exp: HloInstruction, s: Simplifier) -> bool:
    # exp(0) => 1, for a scalar 0 or a broadcast of one.
    operand = exp.operands[0]
    if operand.opcode == "broadcast":
        operand = operand.operands[0]
    if operand.shape.rank != 0 or _scalar_constant_value(operand) != 0:
        return False
    return s.replace(exp, s.scalar_like(exp, 1))


def _is_complex(instr: HloInstruction) -> bool:
    return instr.shape.type.kind is TypeKind.COMPLEX


@rule("real")
def _real(real: HloInstruction, s: Simplifier) -> bool:
    operand = real.operands[0]
    # real(complex(r, i)) => r
    if operand.opcode == "complex":
        return s.replace(real, operand.operands[0])
    # real(A) => A for A not complex
    return not _is_complex(operand) and s.replace(real, operand)


@rule("imag")
def _imag(imag: HloInstruction, s: Simplifier) -> bool:
    operand = imag.operands[0]
    # imag(complex(r, i)) => i
    if operand.opcode == "complex":
        return s.replace(imag, operand.operands[1])
    # imag(A) => 0 for A not complex
    return not _is_complex(operand) and s.replace(imag, building.zeros_like(s, imag))


@rule("complex")
def _complex(complex_: HloInstruction, s: Simplifier) -> bool:
    # complex(real(C), imag(C)) => C
    real, imag = complex_.operands
    if real.opcode == "real" and imag.opcode == "imag" and real.operands[0] is imag.operands[0]:
        return s.replace(complex_, real.operands[0])
    return False
