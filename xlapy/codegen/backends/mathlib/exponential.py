"""exp, exp2, expm1 and the functions built on them: tanh, logistic, sinh, cosh."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xlapy.codegen.backends.mathlib.constants import (
    EXP_P64,
    LN2,
    LN2_HI,
    LN2_LO,
    LN2_TAIL,
    LOG2E,
    SHIFT,
    SHIFT_BITS,
    TANH_P32,
    TANH_Q32,
)
from xlapy.codegen.backends.mathlib.emitter import Emitter, dd_div, fast_two_sum, register, two_sum


@dataclass
class ExpParts:
    """exp(x) = 2^k (1 + r + tail), |r| <= ln2/2 (plus rounding); `s` = 2^min(k, 1023), `big` = k > 1023."""

    k: ir.Value  # i64
    r: ir.Value
    tail: ir.Value
    s: ir.Value
    big: ir.Value


def exp_parts(e: Emitter, x: ir.Value, precise: bool, extra: ir.Value | None = None) -> ExpParts:
    """The reduction of exp(x + extra) for |x| < 2**40, |extra| <= ulp(x). precise: ln2 is split in three
    (r + c = x - k ln2 to ~2^-100, folded into tail) and the polynomial is good to 1e-17; else (f32 kernels,
    |x| < 200, no extra) ln2 in two parts (r to ~1e-19 absolute) and the same polynomial, without the
    double-double steps: ~3e-16 relative once rounded."""
    t = e.fma(x, LOG2E, SHIFT)
    kf = e.sub(t, SHIFT)
    k = e.isub(e.bits(t), SHIFT_BITS)
    if precise:
        r1 = e.fma(kf, -LN2_HI, x)  # exact
        p_hi = e.mul(kf, LN2_LO)
        r, err = two_sum(e, r1, e.neg(p_hi))
        c = e.sub(err, e.fma(kf, LN2_LO, e.neg(p_hi)))
        if extra is not None:
            c = e.add(c, extra)
        tail = e.mul(e.mul(r, r), e.horner(r, EXP_P64))
        tail = e.add(tail, e.fma(c, e.add(r, tail), c))
    else:
        r = e.fma(kf, -LN2_LO, e.fma(kf, -LN2_HI, x))
        tail = e.mul(e.mul(r, r), e.horner(r, EXP_P64))
    big = e.icmp(">", k, 1023)
    return ExpParts(k, r, tail, e.pow2(e.select(big, 1023, k)), big)


def exp_mantissa(e: Emitter, p: ExpParts, precise: bool) -> ir.Value:
    """1 + r + tail (with 1 + r kept exact when precise)."""
    if not precise:
        return e.add(1.0, e.add(p.r, p.tail))
    hi, lo = fast_two_sum(e, e.f(1.0), p.r)
    return e.add(hi, e.add(lo, p.tail))


def exp64(e: Emitter, x: ir.Value) -> ir.Value:
    p = exp_parts(e, e.clamp(x, -746.0, 710.0), True)
    return e.scale(exp_mantissa(e, p, True), p.k)


def exp32(e: Emitter, x: ir.Value) -> ir.Value:
    # exp(x) overflows f32 above 88.73 and rounds to 0 below -103.98: the clamp keeps k a normal exponent
    p = exp_parts(e, e.clamp(x, -110.0, 120.0), False)
    return e.mul(exp_mantissa(e, p, False), p.s)


register("exp", f64=exp64, f32=exp32)


def exp2_reduce(e: Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x = k + f with |f| <= 1/2; returns (f, k as i64). Needs |x| < 2**50."""
    t = e.add(x, SHIFT)
    kf = e.sub(t, SHIFT)
    return e.sub(x, kf), e.isub(e.bits(t), SHIFT_BITS)


def exp2_64(e: Emitter, x: ir.Value) -> ir.Value:
    f, k = exp2_reduce(e, e.clamp(x, -1080.0, 1030.0))
    # 2^f = e^(r + c) with r + c = f ln2 to ~2^-106
    r = e.mul(f, LN2)
    c = e.fma(f, LN2_TAIL, e.fma(f, LN2, e.neg(r)))
    tail = e.mul(e.mul(r, r), e.horner(r, EXP_P64))
    tail = e.add(tail, e.fma(c, e.add(r, tail), c))
    hi, lo = fast_two_sum(e, e.f(1.0), r)
    return e.scale(e.add(hi, e.add(lo, tail)), k)


register("exp2", f64=exp2_64)


def expm1_pair(e: Emitter, p: ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp(x) - 1 = hi + lo for k <= 1023 from precise parts:
    2^k (1 + r + tail) - 1 = (2^k - 1) + 2^k r + 2^k tail, where 2^k - 1 is exact for k >= -53."""
    hi, lo = two_sum(e, e.sub(p.s, 1.0), e.mul(p.s, p.r))
    return fast_two_sum(e, hi, e.fma(p.s, p.tail, lo))


def exp_mantissa_pair(e: Emitter, p: ExpParts) -> tuple[ir.Value, ir.Value]:
    """1 + r + tail = hi + lo from precise parts."""
    hi, lo = fast_two_sum(e, e.f(1.0), p.r)
    return fast_two_sum(e, hi, e.add(lo, p.tail))


def exp_pair(e: Emitter, p: ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp(x) = hi + lo for k <= 1023 from precise parts."""
    hi, lo = exp_mantissa_pair(e, p)
    return e.mul(p.s, hi), e.mul(p.s, lo)


def expm1_core(e: Emitter, x: ir.Value) -> ir.Value:
    """exp(x) - 1 for x in [-45, 709.8] (more negative x: -1)."""
    p = exp_parts(e, x, True)
    hi, lo = expm1_pair(e, p)
    return e.mul(e.add(hi, lo), e.select(p.big, 2.0, 1.0))


def expm1_64(e: Emitter, x: ir.Value) -> ir.Value:
    result = expm1_core(e, e.clamp(x, -45.0, 710.0))
    return e.select(e.eq(x, 0.0), x, result)


register("expm1", f64=expm1_64)


def tanh64(e: Emitter, x: ir.Value) -> ir.Value:
    # t = expm1(-2|x|) in (-1, 0], u = exp(-2|x|) = t + 1, both as double-doubles. Small |x|: tanh = -t / (t + 2)
    # (no cancellation); large |x|: tanh = 1 - 2u / (1 + u) (the quotient is small, so its error shrinks).
    a = e.abs(x)
    p = exp_parts(e, e.select(e.gt(a, 22.5), -45.0, e.mul(a, -2.0)), True)
    th, tl = expm1_pair(e, p)
    uh, ul = exp_pair(e, p)
    large = e.gt(a, 0.55)
    t2h, t2l = fast_two_sum(e, e.f(2.0), th)
    u1h, u1l = fast_two_sum(e, e.f(1.0), uh)
    q = dd_div(
        e,
        e.select(large, e.add(uh, uh), th),
        e.select(large, e.add(ul, ul), tl),
        e.select(large, u1h, t2h),
        e.select(large, e.add(u1l, ul), e.add(t2l, tl)),
    )
    return e.copysign(e.sub(e.select(large, 1.0, 0.0), q), x)


def tanh32(e: Emitter, x: ir.Value) -> ir.Value:
    # tanh(a) = a P(a^2) / Q(a^2) on [0, 9.5] (relative error 1.2e-16, far below the 2^-45 that rounding once to f32
    # needs to agree with the f64 tanh almost always); tanh rounds to 1 in f32 beyond 9.01.
    # Cheaper than going through expm1 (no integer work, one division): tanh is on the critical path of gelu.
    a = e.abs(x)
    a = e.select(e.gt(a, 9.5), 9.5, a)
    z = e.mul(a, a)
    return e.copysign(e.div(e.mul(a, e.horner(z, TANH_P32)), e.horner(z, TANH_Q32)), x)


register("tanh", f64=tanh64, f32=tanh32)


# numpy's f64 exp is up to 0.68 ulp off (measured): it may return the neighbour of the correctly rounded exp(-x)
# when the exact value is at least 0.32 ulp away from that double. exp_mantissa_pair is good to 0.16 ulp, so from
# this share of an ulp away (as it measures), both doubles are treated as possible.
AMBIGUOUS_FROM = 0.125


def logistic64(e: Emitter, x: ir.Value) -> ir.Value:
    # XLA's 1 / (1 + u), u = e^-x, rounded as the interpreter rounds it: u to a double, 1 + u, the quotient. u is a
    # double-word mantissa m (to ~0.16 ulp) times 2^k; rounded to the nearest double it gives the interpreter's
    # result, unless u may be far enough from that double for numpy's exp to return the other neighbour: then the
    # results of both (at most 2 ulps apart) are averaged, which is within 1 ulp of either. u overflows
    # (x < -709.78) to inf, giving 0; for x > 37, 1 + u rounds to 1.
    p = exp_parts(e, e.clamp(e.neg(x), -746.0, 710.0), True)
    mh, ml = exp_mantissa_pair(e, p)
    other = e.from_bits(e.iadd(e.bits(mh), e.select(e.gt(ml, 0.0), 1, -1)))  # mh's neighbour on ml's side
    ambiguous = e.gt(e.abs(ml), e.mul(e.abs(e.sub(other, mh)), AMBIGUOUS_FROM))
    nearest = e.div(1.0, e.add(1.0, e.scale(mh, p.k)))
    neighbour = e.div(1.0, e.add(1.0, e.scale(other, p.k)))
    return e.select(ambiguous, e.mul(e.add(nearest, neighbour), 0.5), nearest)


def logistic32(e: Emitter, x: ir.Value) -> ir.Value:
    u = exp32(e, e.neg(e.abs(x)))
    return e.div(e.select(e.lt(x, 0.0), u, 1.0), e.add(1.0, u))


register("logistic", f64=logistic64, f32=logistic32)


def sinh(e: Emitter, x: ir.Value) -> ir.Value:
    # With t = expm1|x| and u = e^|x|: sinh = (2t - t^2 / (t + 1)) / 2 below 1/2 (the quotient is the small
    # part), (u - 1/u) / 2 up to 22 (little cancellation), and above, e^|x| / 2 scaled without overflowing early.
    a = e.abs(x)
    p = exp_parts(e, e.select(e.gt(a, 712.0), 712.0, a), True)
    large = e.scale(exp_mantissa(e, p, True), e.isub(p.k, 1))
    th, tl = expm1_pair(e, p)
    uh, ul = exp_pair(e, p)
    small = e.lt(a, 0.5)
    t = e.add(th, tl)
    n = e.select(small, e.neg(e.mul(t, t)), 1.0)
    dh, dl = e.select(small, e.add(t, 1.0), uh), e.select(small, 0.0, ul)
    q = dd_div(e, n, e.f(0.0), dh, dl)
    sum_ = e.add(
        e.select(small, e.add(th, th), uh), e.add(e.select(small, e.add(tl, tl), ul), e.select(small, q, e.neg(q)))
    )
    return e.copysign(e.select(e.gt(a, 22.0), large, e.mul(0.5, sum_)), x)


def cosh(e: Emitter, x: ir.Value) -> ir.Value:
    # (u + 1/u) / 2 with u = e^|x| (a sum of positive terms); above 22: e^|x| / 2 scaled without overflowing early
    a = e.abs(x)
    p = exp_parts(e, e.clamp(a, 0.0, 712.0), True)
    large = e.scale(exp_mantissa(e, p, True), e.isub(p.k, 1))
    uh, ul = exp_pair(e, p)
    small = e.add(uh, e.add(ul, dd_div(e, e.f(1.0), e.f(0.0), uh, ul)))
    return e.select(e.gt(a, 22.0), large, e.mul(0.5, small))


register("sinh", f64=sinh)
register("cosh", f64=cosh)
