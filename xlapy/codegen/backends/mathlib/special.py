"""erf, erfc, cbrt, sqrt and rsqrt."""

from __future__ import annotations

from llvmlite import ir

from xlapy.codegen.backends.mathlib.constants import (
    CBRT2,
    CBRT4,
    CBRT_P,
    ERF_P32,
    ERF_P64,
    ERF_Q32,
    ERFC_H64,
    ERFC_H64_0_LO,
    ERFC_K64,
)
from xlapy.codegen.backends.mathlib.emitter import INF, Emitter, dd_div, fast_two_sum, register, two_sum
from xlapy.codegen.backends.mathlib.exponential import exp_mantissa_pair, exp_parts

# error function


def erfc_large(e: Emitter, a: ir.Value) -> ir.Value:
    """erfc(a) for a in [0.84375, 27.3] as exp(-a^2) h(t) / (1 + 2a) with h a polynomial in t = (a - K) / (a + K):
    (1 + 2a) erfcx(a) is nearly flat in t, so the divisions' roundings barely matter. h = h0 + (h(t) - h0) and
    exp(-a^2) as double-doubles, one double-double quotient, then the scaling."""
    t = e.div(e.sub(a, ERFC_K64), e.add(a, ERFC_K64))
    hh, hl = fast_two_sum(e, e.f(ERFC_H64[0]), e.mul(t, e.horner(t, ERFC_H64[1:])))
    hl = e.add(hl, ERFC_H64_0_LO)
    square = e.mul(a, a)
    p = exp_parts(e, e.select(e.gt(square, 746.0), -746.0, e.neg(square)), extra=e.fma(e.neg(a), a, square))
    mh, ml = exp_mantissa_pair(e, p)
    nh = e.mul(mh, hh)
    nl = e.add(e.fma(mh, hh, e.neg(nh)), e.fma(mh, hl, e.mul(ml, hh)))
    dh, dl = two_sum(e, e.f(1.0), e.add(a, a))
    return e.scale(dd_div(e, nh, nl, dh, dl), p.k)


def erf_small(e: Emitter, x: ir.Value) -> ir.Value:
    """erf(x) - x for |x| < 0.84375."""
    return e.mul(x, e.horner(e.mul(x, x), ERF_P64))


def erf64(e: Emitter, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    small = e.add(a, erf_small(e, a))
    large = e.sub(1.0, erfc_large(e, e.select(e.gt(a, 6.0), 6.0, a)))  # erf rounds to 1 beyond 5.93
    return e.copysign(e.select(e.lt(a, ERF_SMALL), small, large), x)


def erf32(e: Emitter, x: ir.Value) -> ir.Value:
    # erf(a) = a P(a^2) / Q(a^2) on [0, 4] (relative error 2.6e-17); erf rounds to 1 in f32 beyond 3.92
    a = e.abs(x)
    a = e.select(e.gt(a, 4.0), 4.0, a)
    z = e.mul(a, a)
    return e.copysign(e.div(e.mul(a, e.horner(z, ERF_P32)), e.horner(z, ERF_Q32)), x)


def erfc(e: Emitter, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    # |x| < 0.84375: 1 - erf(x), as 1/2 - ((x - 1/2) + (erf(x) - x)) above 1/4 to keep the cancellation exact
    d = erf_small(e, x)
    sh, sl = two_sum(e, e.sub(x, 0.5), d)
    small = e.select(e.lt(x, 0.25), e.sub(1.0, e.add(x, d)), e.sub(e.sub(0.5, sh), sl))
    # erfc underflows beyond 27.3
    large = erfc_large(e, e.select(e.gt(a, 28.0), 28.0, a))
    large = e.select(e.lt(x, 0.0), e.sub(2.0, large), large)
    # NaN: x itself; the arithmetic's NaN has the sign of whichever NaN operand (x or a negation of it) x86 sees
    # first, which differs between the vector and scalar forms
    return e.select(e.isnan(x), x, e.select(e.lt(a, ERF_SMALL), small, large))


ERF_SMALL = 0.84375
register("erf", f64=erf64, f32=erf32)
register("erfc", f64=erfc)


# roots and powers


def sqrt(e: Emitter, x: ir.Value) -> ir.Value:
    return e.sqrt(x)


def rsqrt(e: Emitter, x: ir.Value) -> ir.Value:
    return e.div(1.0, e.sqrt(x))


register("sqrt", f64=sqrt)
register("rsqrt", f64=rsqrt)


def cbrt(e: Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # |x| = 2^(3q + rem) m, m in [1, 2): cbrt = 2^q cbrt(2^rem m); a polynomial start (9e-6), one Halley step
    # (~1e-15), and for f64 one Newton step with an exact residual
    a = e.abs(x)
    tiny = e.lt(a, 2.0**-1022)
    a = e.select(tiny, e.mul(a, 2.0**54), a)
    bits = e.bits(a)
    exponent = e.itof(e.isub(e.lshr(bits, 52), 1023))
    q = e.floor(e.mul(e.add(exponent, 0.5), 1 / 3))
    rem = e.sub(exponent, e.mul(q, 3.0))
    m = e.from_bits(e.ior(e.iand(bits, 0x000FFFFFFFFFFFFF), 0x3FF0000000000000))
    t = e.mul(m, e.select(e.eq(rem, 0.0), 1.0, e.select(e.eq(rem, 1.0), 2.0, 4.0)))
    y = e.mul(e.horner(m, CBRT_P), e.select(e.eq(rem, 0.0), 1.0, e.select(e.eq(rem, 1.0), CBRT2, CBRT4)))
    y3 = e.mul(e.mul(y, y), y)
    y = e.mul(y, e.div(e.add(y3, e.add(t, t)), e.add(e.add(y3, y3), t)))
    if precise:
        y2 = e.mul(y, y)
        y2l = e.fma(y, y, e.neg(y2))
        y3 = e.mul(y2, y)
        y3l = e.fma(y2l, y, e.fma(y2, y, e.neg(y3)))
        residual = e.sub(e.sub(t, y3), y3l)  # t - y3 is exact (Sterbenz)
        y = e.add(y, e.div(residual, e.mul(3.0, y2)))
    scale = e.isub(e.b.fptosi(q, e.I64), e.select(tiny, 18, 0))  # q is finite (exponent is)
    result = e.copysign(e.mul(y, e.pow2(scale)), x)
    special = e.or_(e.eq(a, 0.0), e.not_(e.lt(a, INF)))  # 0, inf, NaN
    return e.select(special, x, result)


register("cbrt", f64=lambda e, x: cbrt(e, x, True), f32=lambda e, x: cbrt(e, x, False))
