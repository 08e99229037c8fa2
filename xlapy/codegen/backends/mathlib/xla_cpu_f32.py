"""f32 tanh and exp as XLA:CPU computes them, in LLVM IR: the interpreter's `xlapy/interpreter/xla_cpu_math.py`
(which explains both approximations and holds their constants), vectorizable.

Every step rounds as the interpreter's does: `llvm.fma` for each multiply-add (the same results on every host, and
XLA:CPU's on hosts with FMA, where LLVM fuses its contractible steps), and plain f32 multiplications, additions and
the division. Per 16 lanes tanh costs a division, two multiplications and 9 fused multiply-adds; exp a floor, a
conversion, two multiplications, an addition and 9 fused multiply-adds. NaN stays NaN: the clamps keep it, and
the arithmetic propagates it.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.codegen.backends.mathlib.emitter import clamp_in_type, declared
from xlapy.interpreter.xla_cpu_math import (
    EXP_CLAMP,
    EXP_LN2_HIGH,
    EXP_LN2_LOW,
    EXP_LOG2E,
    EXP_N_CLAMP,
    EXP_POLYNOMIAL,
    TANH_CLAMP,
    TANH_DENOMINATOR,
    TANH_IDENTITY_BELOW,
    TANH_NUMERATOR,
    TANH_ONE_FROM,
)


class _F32:
    """f32 (scalar or vector) arithmetic on an IRBuilder: splatted constants and the intrinsics used here."""

    def __init__(self, builder: ir.IRBuilder, type: ir.Type):
        self.b, self.type = builder, type
        self.lanes = type.count if isinstance(type, ir.VectorType) else None
        self.suffix = f"v{self.lanes}f32" if self.lanes else "f32"
        self.i32 = ir.VectorType(ir.IntType(32), self.lanes) if self.lanes else ir.IntType(32)

    def f(self, value: float) -> ir.Constant:
        return self._splat(self.type, value)

    def i(self, value: int) -> ir.Constant:
        return self._splat(self.i32, value)

    def _splat(self, type: ir.Type, value: float | int) -> ir.Constant:
        if isinstance(type, ir.VectorType):
            return ir.Constant(type, [ir.Constant(type.element, value)] * type.count)
        return ir.Constant(type, value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fn = declared(self.b.module, f"llvm.{name}.{self.suffix}", self.type, [self.type] * len(args))
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("fma", a, b, c)

    def horner(self, x: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        """The polynomial (highest degree first) at ``x``, a fused multiply-add per step."""
        result = self.f(coefficients[0])
        for c in coefficients[1:]:
            result = self.fma(x, result, self.f(c))
        return result


def tanh32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh of ``x`` (an f32, or a vector of f32) as XLA:CPU computes it."""
    e = _F32(b, x.type)
    clamped = clamp_in_type(b, x, -TANH_CLAMP, TANH_CLAMP)
    square = b.fmul(clamped, clamped)
    quotient = b.fdiv(b.fmul(clamped, e.horner(square, TANH_NUMERATOR)), e.horner(square, TANH_DENOMINATOR))
    magnitude = e.intrinsic("fabs", x)
    result = b.select(b.fcmp_ordered("<", magnitude, e.f(TANH_IDENTITY_BELOW)), x, quotient)
    one = e.intrinsic("copysign", e.f(1.0), x)
    return b.select(b.fcmp_ordered(">=", magnitude, e.f(TANH_ONE_FROM)), one, result)


def exp32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp of ``x`` (an f32, or a vector of f32) as XLA:CPU computes it (subnormal results are not flushed)."""
    e = _F32(b, x.type)
    x = clamp_in_type(b, x, *EXP_CLAMP)
    n = clamp_in_type(b, e.intrinsic("floor", e.fma(x, e.f(EXP_LOG2E), e.f(0.5))), *EXP_N_CLAMP)
    r = e.fma(e.f(-EXP_LN2_HIGH), n, x)
    r = e.fma(e.f(EXP_LN2_LOW), n, r)
    z = e.fma(e.horner(r, EXP_POLYNOMIAL), b.fmul(r, r), r)
    # 2^n from its exponent bits, n + 127 in [0, 254]; for NaN (which would convert to poison) 2^0: z stays NaN
    n = b.select(b.fcmp_unordered("uno", n, n), e.f(0.0), n)
    power = b.bitcast(b.shl(b.add(b.fptosi(n, e.i32), e.i(127)), e.i(23)), e.type)
    return b.fmul(b.fadd(e.f(1.0), z), power)
