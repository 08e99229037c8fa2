"""tanh of f32 values as XLA:CPU computes it, in LLVM IR: the interpreter's `xlapy/interpreter/xla_tanh.py` (which
explains the approximation and holds its constants), vectorizable.

Every step rounds as the interpreter's does: `llvm.fma` for the Horner steps (the same results on every host, and
XLA:CPU's on hosts with FMA, where LLVM fuses its contractible steps), one f32 multiply, one f32 division. NaN stays
NaN: the clamp keeps it and the quotient propagates it. A vector of 16 lanes costs one division, two
multiplications and 9 fused multiply-adds.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.codegen.backends.mathlib.emitter import declared
from xlapy.interpreter.xla_tanh import CLAMP, DENOMINATOR, IDENTITY_BELOW, NUMERATOR, ONE_FROM


def tanh32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh of ``x`` (an f32, or a vector of f32) as XLA:CPU computes it."""
    type = x.type
    suffix = f"v{type.count}f32" if isinstance(type, ir.VectorType) else "f32"
    fma = declared(b.module, f"llvm.fma.{suffix}", type, [type] * 3)
    fabs = declared(b.module, f"llvm.fabs.{suffix}", type, [type])
    copysign = declared(b.module, f"llvm.copysign.{suffix}", type, [type] * 2)

    def f(value: float) -> ir.Constant:
        if isinstance(type, ir.VectorType):
            return ir.Constant(type, [ir.Constant(type.element, value)] * type.count)
        return ir.Constant(type, value)

    def horner(square: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        result = f(coefficients[0])
        for c in coefficients[1:]:
            result = b.call(fma, [square, result, f(c)])
        return result

    clamped = b.select(b.fcmp_ordered("<", x, f(-CLAMP)), f(-CLAMP), x)
    clamped = b.select(b.fcmp_ordered(">", clamped, f(CLAMP)), f(CLAMP), clamped)
    square = b.fmul(clamped, clamped)
    quotient = b.fdiv(b.fmul(clamped, horner(square, NUMERATOR)), horner(square, DENOMINATOR))
    magnitude = b.call(fabs, [x])
    result = b.select(b.fcmp_ordered("<", magnitude, f(IDENTITY_BELOW)), x, quotient)
    return b.select(b.fcmp_ordered(">=", magnitude, f(ONE_FROM)), b.call(copysign, [f(1.0), x]), result)
