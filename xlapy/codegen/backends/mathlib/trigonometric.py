"""sin, cos, tan (Cody-Waite and Payne-Hanek reductions) and atan, atan2, asin, acos."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from xlapy.codegen.backends.mathlib.constants import (
    ASIN_P64,
    ATAN_HI,
    ATAN_LO,
    ATAN_P64,
    CODY_WAITE_LIMIT,
    COS_P64,
    PI_HI,
    PI_LO,
    PI_MINUS_ATAN_HI,
    PI_MINUS_ATAN_LO,
    PIO2_1,
    PIO2_2,
    PIO2_3,
    PIO2_4,
    PIO2_HI,
    PIO2_LO,
    SHIFT,
    SIN_P64,
    TWO_OVER_PI,
    TWO_OVER_PI_BITS,
    TWO_OVER_PI_NBITS,
)
from xlapy.codegen.backends.mathlib.emitter import (
    INF,
    NAN,
    Emitter,
    constant_table,
    dd_div,
    fast_two_sum,
    flip_sign,
    register,
    two_sum,
)


def payne_hanek_piece(group_bits: int, group: int, c: int) -> float:
    """Piece c of 2/pi for arguments in [2^(group_bits * group), 2^(group_bits * (group + 1))): its bits
    [group_bits * group - 56 + 53c, +53) (bit j weighs 2^-j), scaled by 2^(group_bits * group) (which makes it
    C * 2^(4 - 53c) for the 53-bit integer C). The bits before the first piece only add multiples of 4 once
    multiplied by such an argument; (x / 2^(group_bits * group)) * piece is an exact double-double."""
    first = group_bits * group - 56 + 53 * c
    chunk = (TWO_OVER_PI_BITS >> (TWO_OVER_PI_NBITS - (first + 52))) & ((1 << 53) - 1)
    return float(chunk) * 2.0 ** (4 - 53 * c)


def payne_hanek_table() -> list[float]:
    """Pieces 0..3 for the 128 groups of 8 exponents of f64 arguments, looked up (gathered) by group."""
    return [payne_hanek_piece(8, g, c) for g in range(128) for c in range(4)]


def trig_reduce(e: Emitter, a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """a = (q + f) pi/2 for a = |x| (finite: NaN/inf give garbage); returns (rh, rl, q) with rh + rl = f pi/2,
    |f| <= 1/2 (plus rounding), to ~2^-100 relative even for the a closest to multiples of pi/2, and q as i64
    (only q mod 4 matters)."""
    # Cody-Waite below 2^19 (f64): exact products k * part, 2Sum for the differences
    t = e.fma(a, TWO_OVER_PI, SHIFT)
    kf = e.sub(t, SHIFT)
    r1 = e.fma(kf, -PIO2_1, a)
    h, e1 = two_sum(e, r1, e.mul(kf, -PIO2_2))
    h, e2 = two_sum(e, h, e.mul(kf, -PIO2_3))
    cw_h, cw_l = fast_two_sum(e, h, e.fma(kf, -PIO2_4, e.add(e1, e2)))
    cw_q = e.bits(t)

    # Payne-Hanek above: a / 2^(Gg) times the pieces of 2/pi for a's exponent group g (groups of G = 8
    # exponents), reduced modulo 4 piece by piece (x - rint(x) is exact), then the fractions summed with 2Sums (the
    # integer parts give q). The four pieces of each group are gathered from a table.
    group_bits, groups = 8, 128
    exponent = e.isub(e.lshr(e.bits(a), 52), 1023)
    group = e.ashr(exponent, group_bits.bit_length() - 1)
    group = e.select(e.icmp("<", group, 0), 0, group)
    group = e.select(e.icmp(">", group, groups - 1), groups - 1, group)
    scaled = e.from_bits(e.isub(e.bits(a), e.shl(group, 52 + group_bits.bit_length() - 1)))  # a / 2^(Gg), exact
    table = constant_table(e, "xlapy.math.two_over_pi", payne_hanek_table)
    pieces = [e.gather(table, e.iadd(e.shl(group, 2), c)) for c in range(4)]
    p0 = e.mul(scaled, pieces[0])
    l0 = e.fma(scaled, pieces[0], e.neg(p0))
    p1 = e.mul(scaled, pieces[1])
    l1 = e.fma(scaled, pieces[1], e.neg(p1))
    p2 = e.mul(scaled, pieces[2])
    l2 = e.fma(scaled, pieces[2], e.neg(p2))
    small_terms = e.add(l2, e.mul(scaled, pieces[3]))
    m0 = e.sub(p0, e.mul(4.0, e.floor(e.mul(p0, 0.25))))  # p0 mod 4, exactly
    n0, n1, n2 = e.rint(m0), e.rint(l0), e.rint(p1)
    # the fractions of m0 and l0 are multiples of 2^-48 in [-1/2, 1/2]: their sum is exact
    fh, fl = two_sum(e, e.add(e.sub(m0, n0), e.sub(l0, n1)), e.sub(p1, n2))
    n3 = e.rint(fh)
    fh, e3 = two_sum(e, e.sub(fh, n3), l1)
    fh, e4 = two_sum(e, fh, p2)
    fh, fl = fast_two_sum(e, fh, e.add(e.add(e.add(fl, e3), e4), small_terms))
    ph_q = e.bits(e.add(e.add(e.add(n0, n1), e.add(n2, n3)), SHIFT))
    rh = e.mul(fh, PIO2_HI)
    rl = e.add(e.fma(fh, PIO2_HI, e.neg(rh)), e.fma(fh, PIO2_LO, e.mul(fl, PIO2_HI)))

    small = e.lt(a, CODY_WAITE_LIMIT)
    return e.select(small, cw_h, rh), e.select(small, cw_l, rl), e.select(small, cw_q, ph_q)


def sin_kernel(e: Emitter, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """sin(x + y) = hi + lo for |x| <= pi/4, |y| <= ulp(x) (after fdlibm's __kernel_sin)."""
    z = e.mul(x, x)
    v = e.mul(z, x)
    r = e.horner(z, SIN_P64[1:])
    d = e.sub(e.sub(e.mul(z, e.sub(e.mul(0.5, y), e.mul(v, r))), y), e.mul(v, SIN_P64[0]))
    return fast_two_sum(e, x, e.neg(d))


def cos_kernel(e: Emitter, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """cos(x + y) = hi + lo for |x| <= pi/4, |y| <= ulp(x) (after fdlibm's __kernel_cos)."""
    z = e.mul(x, x)
    r = e.mul(z, e.horner(z, COS_P64))
    hz = e.mul(0.5, z)
    w = e.sub(1.0, hz)
    return fast_two_sum(e, w, e.add(e.sub(e.sub(1.0, w), hz), e.sub(e.mul(z, r), e.mul(x, y))))


def trig(e: Emitter, x: ir.Value, op: str) -> ir.Value:
    a = e.abs(x)
    rh, rl, q = trig_reduce(e, a)
    sh, sl = sin_kernel(e, rh, rl)
    ch, cl = cos_kernel(e, rh, rl)
    odd = e.icmp("!=", e.iand(q, 1), 0)
    negative = e.icmp("<", e.bits(x), 0)
    if op == "sin":  # sin, cos, -sin, -cos by quadrant; odd in x
        result = e.add(e.select(odd, ch, sh), e.select(odd, cl, sl))
        flip = e.b.xor(e.icmp("!=", e.iand(q, 2), 0), negative)
    elif op == "cos":  # cos, -sin, -cos, sin; even in x
        result = e.add(e.select(odd, sh, ch), e.select(odd, sl, cl))
        flip = e.icmp("!=", e.iand(e.iadd(q, 1), 2), 0)
    else:  # tan: sin/cos, -cos/sin; odd in x
        nh, nl, dh, dl = e.select(odd, ch, sh), e.select(odd, cl, sl), e.select(odd, sh, ch), e.select(odd, sl, cl)
        result = dd_div(e, nh, nl, dh, dl)
        flip = e.b.xor(odd, negative)
    result = flip_sign(e, result, flip)
    return e.select(e.lt(a, INF), result, NAN)


for op_name in ("sin", "cos", "tan"):
    register(
        op_name,
        f64=lambda e, x, op=op_name: trig(e, x, op),
    )


# inverse trigonometric functions


def atan_positive(
    e: Emitter,
    x: ir.Value,
    correction: ir.Value | None = None,
    flip: ir.Value | None = None,
) -> ir.Value:
    """atan(x) + correction (a tiny term added with the low part), or pi minus that where the i1 `flip` is set, for
    x >= 0 (inf: pi/2), as in fdlibm: x is moved next to c = 0, 1/2, 1, 3/2 or inf, where atan(c) and pi - atan(c)
    are known to double-double precision, by one division with exact differences; then an odd polynomial on
    |t| <= 7/16."""
    # pieces: t = (x - c) / (1 + c x) for c = 0, 1/2, 1, 3/2, and t = -1/x beyond 39/16
    numerator, denominator = e.f(-1.0), x
    index = e.i(4)
    x2 = e.add(x, x)
    for limit, num, den, i in (
        (39 / 16, lambda: e.sub(x2, 3.0), lambda: e.fma(x, 3.0, 2.0), 3),
        (19 / 16, lambda: e.sub(x, 1.0), lambda: e.add(x, 1.0), 2),
        (11 / 16, lambda: e.sub(x2, 1.0), lambda: e.add(2.0, x), 1),
        (7 / 16, lambda: x, lambda: e.f(1.0), 0),
    ):
        inside = e.lt(x, limit)
        numerator, denominator = e.select(inside, num(), numerator), e.select(inside, den(), denominator)
        index = e.select(inside, i, index)
    t = e.div(numerator, denominator)
    z = e.mul(t, t)
    ts = e.mul(e.mul(t, z), e.horner(z, ATAN_P64))  # atan(t) - t
    # value = hi - ((s ts - lo) + s t) with s = -1 (atan) or +1 (pi - atan, with the constants for pi - atan(c))
    hi, lo = e.f(ATAN_HI[4]), e.f(ATAN_LO[4])
    for i in range(4):
        hi = e.select(e.icmp("==", index, i), ATAN_HI[i], hi)
        lo = e.select(e.icmp("==", index, i), ATAN_LO[i], lo)
    if correction is not None:
        lo = e.add(lo, correction)
    t, ts = e.neg(t), e.neg(ts)
    if flip is not None:
        pi_hi, pi_lo = e.f(PI_MINUS_ATAN_HI[4]), e.f(PI_MINUS_ATAN_LO[4])
        for i in range(4):
            pi_hi = e.select(e.icmp("==", index, i), PI_MINUS_ATAN_HI[i], pi_hi)
            pi_lo = e.select(e.icmp("==", index, i), PI_MINUS_ATAN_LO[i], pi_lo)
        if correction is not None:
            pi_lo = e.sub(pi_lo, correction)
        hi, lo = e.select(flip, pi_hi, hi), e.select(flip, pi_lo, lo)
        t, ts = e.select(flip, e.neg(t), t), e.select(flip, e.neg(ts), ts)
    return e.sub(hi, e.add(e.sub(ts, lo), t))


def atan(e: Emitter, x: ir.Value) -> ir.Value:
    return e.copysign(atan_positive(e, e.abs(x)), x)


def atan2(e: Emitter, y: ir.Value, x: ir.Value) -> ir.Value:
    ay, ax = e.abs(y), e.abs(x)
    # both infinite: atan(1); both zero: atan(0); the quadrant then comes from the signs
    both_inf = e.and_(e.eq(ay, INF), e.eq(ax, INF))
    both_zero = e.and_(e.eq(ay, 0.0), e.eq(ax, 0.0))
    ay = e.select(both_inf, 1.0, ay)
    ax = e.select(e.or_(both_inf, both_zero), 1.0, ax)
    negative_x = e.icmp("<", e.bits(x), 0)  # x < 0 or -0: pi - atan|y/x|
    # q + ql = |y/x|; atan(q + ql) = atan(q) + ql / (1 + q^2)
    q = e.div(ay, ax)
    ql = e.div(e.fma(e.neg(q), ax, ay), ax)
    correction = e.div(ql, e.fma(q, q, 1.0))
    correction = e.select(e.lt(e.abs(correction), 1.0), correction, 0.0)  # x = inf or 0: NaN
    return e.copysign(atan_positive(e, q, correction, negative_x), y)


register("atan", f64=atan)
register("atan2", 2, f64=atan2)


@dataclass
class AsinParts:
    """asin(|x|) pieces: below 1/2, asin|x| = s + sp with s = |x|; above, asin|x| = pi/2 - 2 asin(s) with
    s = sqrt((1 - |x|) / 2) ~ sqrt(z), asin(s) = s + c + sp, c the rounding error of s."""

    small: ir.Value
    s: ir.Value
    c: ir.Value
    sp: ir.Value


def asin_parts(e: Emitter, x: ir.Value) -> AsinParts:
    a = e.abs(x)
    small = e.lt(a, 0.5)
    z = e.select(small, e.mul(a, a), e.mul(e.sub(1.0, a), 0.5))  # 1 - a is exact above 1/2
    s = e.select(small, a, e.sqrt(z))
    sp = e.mul(s, e.mul(z, e.horner(z, ASIN_P64)))
    c = e.select(e.gt(z, 0.0), e.div(e.fma(e.neg(s), s, z), e.add(s, s)), 0.0)  # sqrt(z) = s + c to first order
    return AsinParts(small, s, c, sp)


def asin(e: Emitter, x: ir.Value) -> ir.Value:
    p = asin_parts(e, x)
    hi, lo = two_sum(e, e.f(PIO2_HI), e.mul(p.s, -2.0))
    large = e.add(hi, e.sub(lo, e.sub(e.mul(e.add(p.c, p.sp), 2.0), PIO2_LO)))
    return e.copysign(e.select(p.small, e.add(p.s, p.sp), large), x)  # |x| > 1: sqrt(negative) = NaN


def acos(e: Emitter, x: ir.Value) -> ir.Value:
    p = asin_parts(e, x)
    # |x| < 1/2: pi/2 - asin(x); x > 1/2: 2 asin(s); x < -1/2: pi - 2 asin(s)
    xp = e.copysign(p.sp, x)
    small = e.sub(PIO2_HI, e.sub(x, e.sub(PIO2_LO, xp)))
    positive = e.mul(2.0, e.add(p.s, e.add(p.c, p.sp)))
    hi, lo = two_sum(e, e.f(PI_HI), e.mul(p.s, -2.0))
    negative = e.add(hi, e.sub(lo, e.sub(e.mul(e.add(p.c, p.sp), 2.0), PI_LO)))
    return e.select(p.small, small, e.select(e.lt(x, 0.0), negative, positive))


register("asin", f64=asin)
register("acos", f64=acos)
