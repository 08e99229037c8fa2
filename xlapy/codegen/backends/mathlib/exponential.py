"""exp, exp2, expm1 and the functions built on them: tanh, logistic, sinh, cosh."""

from __future__ import annotations

import decimal
import struct
from dataclasses import dataclass

from llvmlite import ir

from xlapy.codegen.backends.mathlib import xla_cpu_f32
from xlapy.codegen.backends.mathlib.constants import (
    EXP32_P,
    EXP_P64,
    LN2,
    LN2_HI,
    LN2_LO,
    LN2_TAIL,
    LOG2E,
    SHIFT,
    SHIFT_BITS,
)
from xlapy.codegen.backends.mathlib.emitter import (
    REGISTER_TABLE_SIZE,
    Emitter,
    dd_div,
    fast_two_sum,
    register,
    register_table,
    two_sum,
)


@dataclass
class ExpParts:
    """exp(x) = 2^k (1 + r + tail), |r| <= ln2/2 (plus rounding); `s` = 2^min(k, 1023), `big` = k > 1023."""

    k: ir.Value  # i64
    r: ir.Value
    tail: ir.Value
    s: ir.Value
    big: ir.Value


def exp_parts(e: Emitter, x: ir.Value, extra: ir.Value | None = None) -> ExpParts:
    """The reduction of exp(x + extra) for |x| < 2**40, |extra| <= ulp(x): ln2 is split in three (r + c = x - k ln2
    to ~2^-100, folded into tail) and the polynomial is good to 1e-17."""
    t = e.fma(x, LOG2E, SHIFT)
    kf = e.sub(t, SHIFT)
    k = e.isub(e.bits(t), SHIFT_BITS)
    r1 = e.fma(kf, -LN2_HI, x)  # exact
    p_hi = e.mul(kf, LN2_LO)
    r, err = two_sum(e, r1, e.neg(p_hi))
    c = e.sub(err, e.fma(kf, LN2_LO, e.neg(p_hi)))
    if extra is not None:
        c = e.add(c, extra)
    tail = e.mul(e.mul(r, r), e.horner(r, EXP_P64))
    tail = e.add(tail, e.fma(c, e.add(r, tail), c))
    big = e.icmp(">", k, 1023)
    return ExpParts(k, r, tail, e.pow2(e.select(big, 1023, k)), big)


def exp_mantissa(e: Emitter, p: ExpParts) -> ir.Value:
    """1 + r + tail, with 1 + r kept exact."""
    hi, lo = fast_two_sum(e, e.f(1.0), p.r)
    return e.add(hi, e.add(lo, p.tail))


def exp64(e: Emitter, x: ir.Value) -> ir.Value:
    p = exp_parts(e, e.clamp(x, -746.0, 710.0))
    return e.scale(exp_mantissa(e, p), p.k)


# f32 exp: 2^(j / EXP_TABLE_SIZE) from a table that fits in two AVX-512 registers
EXP_TABLE_SIZE = REGISTER_TABLE_SIZE
# The bits of 2^(j/16) (exponent and high significand bits) that j occupies in n << EXP_SCALE_SHIFT, n = 16m + j
EXP_SCALE_SHIFT = 52 - (EXP_TABLE_SIZE.bit_length() - 1)


def exp_table() -> list[float]:
    """2^(j / EXP_TABLE_SIZE) rounded to the nearest double, for j < EXP_TABLE_SIZE: powers of 2^(1 / EXP_TABLE_SIZE)
    in 40-digit decimal arithmetic (relative error below 1e-37), rounded once (tools/fit_math_coefficients.py
    checks every entry against mpmath)."""
    context = decimal.Context(prec=40)
    step = context.power(decimal.Decimal(2), context.divide(decimal.Decimal(1), decimal.Decimal(EXP_TABLE_SIZE)))
    power, values = decimal.Decimal(1), []
    for _ in range(EXP_TABLE_SIZE):
        values.append(float(power))
        power = context.multiply(power, step)
    return values


def exp_scale_table() -> list[float]:
    """The doubles whose bits are those of exp_table()[j] minus j << EXP_SCALE_SHIFT: adding n << EXP_SCALE_SHIFT
    (an integer addition) to entry n mod 16 gives the bits of 2^m 2^(j/16) for n = 16 m + j."""
    powers = exp_table()
    bits = struct.unpack(f"<{EXP_TABLE_SIZE}q", struct.pack(f"<{EXP_TABLE_SIZE}d", *powers))
    adjusted = [b - (j << EXP_SCALE_SHIFT) for j, b in enumerate(bits)]
    return list(struct.unpack(f"<{EXP_TABLE_SIZE}d", struct.pack(f"<{EXP_TABLE_SIZE}q", *adjusted)))


# exp overflows f32 above 88.73 and rounds to 0 below -103.98: arguments clamped to this interval give the same f32
# results, and keep the scale s below a normal double.
EXP32_DOMAIN = (-110.0, 120.0)


def exp32(e: Emitter, x: ir.Value) -> ir.Value:
    """exp of an f64 value computed from an f32 argument, rounded once to f32 by the caller (f32 logistic's; f32 exp
    itself is XLA:CPU's approximation, `xla_cpu_f32.exp32`)."""
    return exp32_in_domain(e, e.clamp(x, *EXP32_DOMAIN))


def exp32_in_domain(e: Emitter, x: ir.Value) -> ir.Value:
    # x = n ln2/16 + r with n = 16 m + j the integer nearest to x 16/ln2, |r| <= ln2/32 (plus 1e-14): exp(x) = s e^r
    # with s = 2^m 2^(j/16), exact (a table entry plus n << 48 as integers, see exp_scale_table), and
    # e^r - 1 = r + r^2 P(r) (degree 6, minimax, 1.2e-17), so exp(x) = s + s (e^r - 1) rounded once. Relative error
    # 2.0e-16 at most (measured against mpmath on 200,000 arguments). Sixteen entries fit in two AVX-512 registers
    # (`register_table`: a permute per 8 lanes): the former table of 2^(j/256) took a gather from memory and, with
    # a degree-4 polynomial and the multiplication by 2^m, 10-20% more time. x lies in EXP32_DOMAIN.
    t = e.fma(x, LOG2E * EXP_TABLE_SIZE, SHIFT)
    kf = e.sub(t, SHIFT)
    n = e.bits(t)  # SHIFT_BITS + n: the table reads the low 4 bits, the shift by 48 pushes SHIFT_BITS out
    r = e.fma(kf, -LN2_LO / EXP_TABLE_SIZE, e.fma(kf, -LN2_HI / EXP_TABLE_SIZE, x))  # the first product is exact
    # NaN: the low bits of the NaN's significand pick some entry; r, and so the result, stay NaN
    entry = register_table(e, "xlapy.math.exp_scale_table", exp_scale_table, n)
    scale = e.from_bits(e.iadd(e.bits(entry), e.shl(n, EXP_SCALE_SHIFT)))
    expm1_r = e.fma(e.mul(r, r), e.horner(r, EXP32_P), r)
    return e.fma(scale, expm1_r, scale)


register("exp", f64=exp64, f32_native=xla_cpu_f32.exp32)


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
    """exp(x) - 1 = hi + lo for k <= 1023 from the parts:
    2^k (1 + r + tail) - 1 = (2^k - 1) + 2^k r + 2^k tail, where 2^k - 1 is exact for k >= -53."""
    hi, lo = two_sum(e, e.sub(p.s, 1.0), e.mul(p.s, p.r))
    return fast_two_sum(e, hi, e.fma(p.s, p.tail, lo))


def exp_mantissa_pair(e: Emitter, p: ExpParts) -> tuple[ir.Value, ir.Value]:
    """1 + r + tail = hi + lo from the parts."""
    hi, lo = fast_two_sum(e, e.f(1.0), p.r)
    return fast_two_sum(e, hi, e.add(lo, p.tail))


def exp_pair(e: Emitter, p: ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp(x) = hi + lo for k <= 1023 from the parts."""
    hi, lo = exp_mantissa_pair(e, p)
    return e.mul(p.s, hi), e.mul(p.s, lo)


def expm1_core(e: Emitter, x: ir.Value) -> ir.Value:
    """exp(x) - 1 for x in [-45, 709.8] (more negative x: -1)."""
    p = exp_parts(e, x)
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
    p = exp_parts(e, e.select(e.gt(a, 22.5), -45.0, e.mul(a, -2.0)))
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


register("tanh", f64=tanh64, f32_native=xla_cpu_f32.tanh32)


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
    p = exp_parts(e, e.clamp(e.neg(x), -746.0, 710.0))
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
    p = exp_parts(e, e.select(e.gt(a, 712.0), 712.0, a))
    large = e.scale(exp_mantissa(e, p), e.isub(p.k, 1))
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
    p = exp_parts(e, e.clamp(a, 0.0, 712.0))
    large = e.scale(exp_mantissa(e, p), e.isub(p.k, 1))
    uh, ul = exp_pair(e, p)
    small = e.add(uh, e.add(ul, dd_div(e, e.f(1.0), e.f(0.0), uh, ul)))
    return e.select(e.gt(a, 22.0), large, e.mul(0.5, small))


register("sinh", f64=sinh)
register("cosh", f64=cosh)
