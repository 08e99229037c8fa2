"""log, log2, log10, log1p, the inverse hyperbolic functions and pow."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xlapy.codegen.backends.mathlib.constants import (
    IVLN2_HI,
    IVLN2_LO,
    IVLN10_HI,
    IVLN10_LO,
    LN2,
    LN2_HI,
    LN2_LO,
    LOG10_2_HI,
    LOG10_2_LO,
    LOG_P64,
    POW_LOG_Q,
    TWO_THIRDS_HI,
    TWO_THIRDS_LO,
)
from xlapy.codegen.backends.mathlib.emitter import INF, NAN, Emitter, fast_two_sum, flip_sign, register, two_sum
from xlapy.codegen.backends.mathlib.exponential import exp_mantissa, exp_parts


@dataclass
class LogParts:
    """x = 2^k (1 + f); log(1 + f) = f - hfsq + sr."""

    k: ir.Value  # f64
    f: ir.Value
    hfsq: ir.Value
    sr: ir.Value


def log_parts(e: Emitter, x: ir.Value, subnormals: bool) -> LogParts:
    """fdlibm's decomposition of a finite x > 0 (garbage otherwise): 1 + f in [sqrt(2)/2, sqrt(2)),
    s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2)). subnormals: scale those first
    (f64; f32 values are normal in f64)."""
    k_adjust: ir.Value = e.f(0.0)
    if subnormals:
        tiny = e.lt(x, 2.0**-1022)
        x = e.select(tiny, e.mul(x, 2.0**54), x)
        k_adjust = e.select(tiny, -54.0, 0.0)
    # offset the bits so that the exponent field rounds: 1 + f in [sqrt(2)/2, sqrt(2))
    hx = e.iadd(e.bits(x), 0x3FF0000000000000 - 0x3FE6A09E00000000)
    k = e.add(e.itof(e.isub(e.ashr(hx, 52), 1023)), k_adjust)
    m = e.from_bits(e.iadd(e.iand(hx, 0x000FFFFFFFFFFFFF), 0x3FE6A09E00000000))
    f = e.sub(m, 1.0)
    hfsq = e.mul(e.mul(0.5, f), f)
    s = e.div(f, e.add(2.0, f))
    z = e.mul(s, s)
    r = e.mul(z, e.horner(z, LOG_P64))
    return LogParts(k, f, hfsq, e.mul(s, e.add(hfsq, r)))


def log_specials(e: Emitter, x: ir.Value, result: ir.Value) -> ir.Value:
    """log-like results for x <= 0, inf and NaN: -inf at 0, NaN below, x itself for +inf and NaN."""
    special = e.select(e.lt(x, 0.0), NAN, x)
    special = e.select(e.eq(x, 0.0), -INF, special)
    ok = e.and_(e.gt(x, 0.0), e.lt(x, INF))
    return e.select(ok, result, special)


def log64(e: Emitter, x: ir.Value) -> ir.Value:
    p = log_parts(e, x, True)
    low = e.sub(p.hfsq, e.fma(p.k, LN2_LO, p.sr))
    return log_specials(e, x, e.fma(p.k, LN2_HI, e.sub(p.f, low)))


def log32(e: Emitter, x: ir.Value) -> ir.Value:
    # log64 without the scaling of subnormals (f32 values are normal in f64)
    p = log_parts(e, x, False)
    low = e.sub(p.hfsq, e.fma(p.k, LN2_LO, p.sr))
    return log_specials(e, x, e.fma(p.k, LN2_HI, e.sub(p.f, low)))


def log_scaled64(e: Emitter, x: ir.Value, inv_hi: float, inv_lo: float, k_hi: float, k_lo: float) -> ir.Value:
    """log(x) * (inv_hi + inv_lo) as in fdlibm's log2/log10: hi is short so that hi * inv_hi is exact."""
    p = log_parts(e, x, True)
    hi = e.clear_low_word(e.sub(p.f, p.hfsq))
    lo = e.add(e.sub(e.sub(p.f, hi), p.hfsq), p.sr)
    val_hi = e.mul(hi, inv_hi)
    y2 = e.mul(p.k, k_hi)
    val_lo = e.add(e.mul(p.k, k_lo), e.add(e.mul(e.add(lo, hi), inv_lo), e.mul(lo, inv_hi)))
    w = e.add(y2, val_hi)
    val_lo = e.add(val_lo, e.add(e.sub(y2, w), val_hi))
    return log_specials(e, x, e.add(val_lo, w))


register("log", f64=log64, f32=log32)
register("log2", f64=lambda e, x: log_scaled64(e, x, IVLN2_HI, IVLN2_LO, 1.0, 0.0))
register("log10", f64=lambda e, x: log_scaled64(e, x, IVLN10_HI, IVLN10_LO, LOG10_2_HI, LOG10_2_LO))


def log1p(e: Emitter, x: ir.Value) -> ir.Value:
    # u = 1 + x rounded, c its rounding error (2Sum); log1p(x) = log(u) + c/u
    u = e.add(1.0, x)
    bv = e.sub(u, 1.0)
    av = e.sub(u, bv)
    c = e.add(e.sub(1.0, av), e.sub(x, bv))
    p = log_parts(e, u, False)
    correction = e.div(c, u)
    low = e.sub(p.hfsq, e.add(e.fma(p.k, LN2_LO, p.sr), correction))
    result = e.fma(p.k, LN2_HI, e.sub(p.f, low))
    special = e.select(e.lt(x, -1.0), NAN, x)
    special = e.select(e.eq(x, -1.0), -INF, special)
    ok = e.and_(e.and_(e.gt(x, -1.0), e.lt(x, INF)), e.ne(x, 0.0))
    return e.select(ok, result, special)


register("log1p", f64=log1p)


# inverse hyperbolic functions, through log1p


def atanh(e: Emitter, x: ir.Value) -> ir.Value:
    # atanh|x| = log1p(2|x| / (1 - |x|)) / 2, written 2a + 2a^2 / (1 - a) below 1/2 so that 1 - a's rounding
    # only touches the small term
    a = e.abs(x)
    q = e.div(e.add(a, a), e.sub(1.0, a))
    t = e.select(e.lt(a, 0.5), e.fma(q, a, e.add(a, a)), q)
    return e.copysign(e.mul(0.5, log1p(e, t)), x)  # |x| > 1: log1p(t < -1) = NaN


def asinh(e: Emitter, x: ir.Value) -> ir.Value:
    # asinh a = log1p(w): w = a + a^2 / (1 + sqrt(1 + a^2)) up to 2, 2a + 1/(sqrt(a^2 + 1) + a) - 1 up to 2^28,
    # beyond log(a) + ln2 = log1p(a - 1) + ln2
    a = e.abs(x)
    aa = e.mul(a, a)
    root = e.sqrt(e.add(aa, 1.0))
    w_small = e.add(a, e.div(aa, e.add(1.0, root)))
    w_mid = e.add(e.sub(e.add(a, a), 1.0), e.div(1.0, e.add(root, a)))
    huge = e.gt(a, 2.0**28)
    w = e.select(e.le(a, 2.0), w_small, e.select(huge, e.sub(a, 1.0), w_mid))
    result = e.add(log1p(e, w), e.select(huge, LN2, 0.0))
    return e.copysign(result, x)


def acosh(e: Emitter, x: ir.Value) -> ir.Value:
    # acosh x = log1p(w): w = t + sqrt(2t + t^2) (t = x - 1, exact) up to 2, 2x - 1/(x + sqrt(x^2 - 1)) - 1 up to
    # 2^28, beyond log(x) + ln2
    t = e.sub(x, 1.0)
    w_small = e.add(t, e.sqrt(e.fma(t, t, e.add(t, t))))
    w_mid = e.sub(e.sub(e.add(x, x), 1.0), e.div(1.0, e.add(x, e.sqrt(e.fma(x, x, -1.0)))))
    huge = e.gt(x, 2.0**28)
    w = e.select(e.le(x, 2.0), w_small, e.select(huge, t, w_mid))
    result = e.add(log1p(e, w), e.select(huge, LN2, 0.0))
    return e.select(e.lt(x, 1.0), NAN, result)


register("atanh", f64=atanh)
register("asinh", f64=asinh)
register("acosh", f64=acosh)


def pow_specials(e: Emitter, x: ir.Value, y: ir.Value, magnitude: ir.Value) -> ir.Value:
    """C99 pow given |x|^y = magnitude for finite nonzero |x| and finite y."""
    ax, ay = e.abs(x), e.abs(y)
    magnitude = e.select(e.eq(ax, 0.0), e.select(e.lt(y, 0.0), INF, 0.0), magnitude)
    magnitude = e.select(e.eq(ax, INF), e.select(e.lt(y, 0.0), 0.0, INF), magnitude)
    grows = e.b.icmp_unsigned("==", e.gt(ax, 1.0), e.gt(y, 0.0))
    magnitude = e.select(e.eq(ay, INF), e.select(e.eq(ax, 1.0), 1.0, e.select(grows, INF, 0.0)), magnitude)
    # negative x: an odd integer y keeps the sign, a non-integer y has no real result
    integer = e.eq(e.floor(y), y)
    half = e.mul(y, 0.5)
    odd = e.and_(integer, e.ne(e.floor(half), half))
    result = flip_sign(e, magnitude, e.and_(odd, e.icmp("<", e.bits(x), 0)))
    finite_negative = e.and_(e.lt(x, 0.0), e.gt(x, -INF))
    result = e.select(e.and_(finite_negative, e.not_(integer)), NAN, result)
    result = e.select(e.or_(e.isnan(x), e.isnan(y)), NAN, result)
    return e.select(e.or_(e.eq(y, 0.0), e.eq(x, 1.0)), 1.0, result)


def pow64(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    # log|x| as a double-double (k ln2 + 2s + 2s^3/3 + s^5 Q(s^2), s = f / (2 + f) with its rounding error),
    # times y as a double-double, then exp of a double-double
    ax = e.abs(x)
    tiny = e.lt(ax, 2.0**-1022)
    ax = e.select(tiny, e.mul(ax, 2.0**54), ax)
    hx = e.iadd(e.bits(ax), 0x3FF0000000000000 - 0x3FE6A09E00000000)
    k = e.sub(e.itof(e.isub(e.ashr(hx, 52), 1023)), e.select(tiny, 54.0, 0.0))
    f = e.sub(e.from_bits(e.iadd(e.iand(hx, 0x000FFFFFFFFFFFFF), 0x3FE6A09E00000000)), 1.0)
    dh, dl = fast_two_sum(e, e.f(2.0), f)
    sh = e.div(f, dh)
    sl = e.div(e.sub(e.fma(e.neg(sh), dh, f), e.mul(sh, dl)), dh)
    s2h = e.mul(sh, sh)
    s2l = e.fma(e.add(sh, sh), sl, e.fma(sh, sh, e.neg(s2h)))
    s3h = e.mul(s2h, sh)
    s3l = e.fma(s2h, sl, e.fma(s2l, sh, e.fma(s2h, sh, e.neg(s3h))))
    t3h = e.mul(s3h, TWO_THIRDS_HI)
    t3l = e.fma(s3h, TWO_THIRDS_LO, e.fma(s3l, TWO_THIRDS_HI, e.fma(s3h, TWO_THIRDS_HI, e.neg(t3h))))
    tail = e.mul(e.mul(s3h, s2h), e.horner(s2h, POW_LOG_Q))
    lh, ll = fast_two_sum(e, e.add(sh, sh), t3h)
    ll = e.add(ll, e.add(e.add(e.add(sl, sl), t3l), tail))
    gh, gl = two_sum(e, e.mul(k, LN2_HI), lh)
    gl = e.add(gl, e.fma(k, LN2_LO, ll))
    gh, gl = fast_two_sum(e, gh, gl)
    yh = e.mul(y, gh)
    yl = e.fma(y, gl, e.fma(y, gh, e.neg(yh)))
    yl = e.select(e.lt(e.abs(yh), 1000.0), yl, 0.0)  # yh may overflow (yl: NaN); exp saturates anyway
    p = exp_parts(e, e.clamp(yh, -746.0, 710.0), extra=yl)
    magnitude = e.scale(exp_mantissa(e, p), p.k)
    return pow_specials(e, x, y, magnitude)


register("powf", 2, f64=pow64, aliases=("pow",))
