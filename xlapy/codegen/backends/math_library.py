"""Vectorizable elementwise math functions for the CPU backend (LLVM IR via llvmlite).

DOCSTRING_TABLE_PLACEHOLDER
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from xlapy.errors import UnimplementedError

_F64 = ir.DoubleType()
_F32 = ir.FloatType()
_I64 = ir.IntType(64)
_I1 = ir.IntType(1)

_INF = float("inf")
_NAN = float("nan")


# --- emitter ------------------------------------------------------------------------------------------------------


class _Emitter:
    """Straight-line f64 / i64 arithmetic on top of an IRBuilder: no branches, only intrinsics that lower to
    instructions, so that the vectorizers can widen every function after inlining."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder
        self.module: ir.Module = builder.module

    # values
    def f(self, value: float | ir.Value) -> ir.Value:
        return ir.Constant(_F64, value) if isinstance(value, (float, int)) else value

    def i(self, value: int | ir.Value) -> ir.Value:
        return ir.Constant(_I64, value) if isinstance(value, int) else value

    def _intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        full = f"{name}.f64"
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(_F64, [_F64] * len(args)), full)
        return self.b.call(fn, list(args))

    # float arithmetic (no fast-math flags: the error-free transformations below rely on IEEE rounding)
    def add(self, a, b) -> ir.Value:
        return self.b.fadd(self.f(a), self.f(b))

    def sub(self, a, b) -> ir.Value:
        return self.b.fsub(self.f(a), self.f(b))

    def mul(self, a, b) -> ir.Value:
        return self.b.fmul(self.f(a), self.f(b))

    def div(self, a, b) -> ir.Value:
        return self.b.fdiv(self.f(a), self.f(b))

    def neg(self, a) -> ir.Value:
        return self.b.fneg(self.f(a))

    def fma(self, a, b, c) -> ir.Value:
        """a*b + c rounded once (used where exactness matters)."""
        return self._intrinsic("llvm.fma", self.f(a), self.f(b), self.f(c))

    def mad(self, a, b, c) -> ir.Value:
        """a*b + c, fused when the target has FMA (polynomial steps, where either rounding is fine)."""
        return self._intrinsic("llvm.fmuladd", self.f(a), self.f(b), self.f(c))

    def abs(self, a) -> ir.Value:
        return self._intrinsic("llvm.fabs", self.f(a))

    def floor(self, a) -> ir.Value:
        return self._intrinsic("llvm.floor", self.f(a))

    def rint(self, a) -> ir.Value:
        return self._intrinsic("llvm.roundeven", self.f(a))

    def sqrt(self, a) -> ir.Value:
        return self._intrinsic("llvm.sqrt", self.f(a))

    def copysign(self, magnitude, sign) -> ir.Value:
        return self._intrinsic("llvm.copysign", self.f(magnitude), self.f(sign))

    def horner(self, x: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        """c0 + c1 x + c2 x^2 + ... (coefficients in increasing degree)."""
        result = self.f(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            result = self.mad(result, x, c)
        return result

    # comparisons (ordered: false when an operand is NaN) and selection
    def lt(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("<", self.f(a), self.f(b))

    def le(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("<=", self.f(a), self.f(b))

    def gt(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered(">", self.f(a), self.f(b))

    def ge(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered(">=", self.f(a), self.f(b))

    def eq(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("==", self.f(a), self.f(b))

    def ne(self, a, b) -> ir.Value:
        """a != b, true when either is NaN."""
        return self.b.fcmp_unordered("!=", self.f(a), self.f(b))

    def isnan(self, a) -> ir.Value:
        return self.b.fcmp_unordered("uno", self.f(a), self.f(a))

    def select(self, cond, a, b) -> ir.Value:
        """cond ? a : b; Python numbers become constants of the other operand's type (two ints: i64, else f64)."""
        type = a.type if isinstance(a, ir.Value) else b.type if isinstance(b, ir.Value) else None
        type = type or (_I64 if isinstance(a, int) and isinstance(b, int) else _F64)
        a = a if isinstance(a, ir.Value) else ir.Constant(type, a)
        b = b if isinstance(b, ir.Value) else ir.Constant(type, b)
        return self.b.select(cond, a, b)

    def and_(self, a, b) -> ir.Value:
        return self.b.and_(a, b)

    def or_(self, a, b) -> ir.Value:
        return self.b.or_(a, b)

    def not_(self, a) -> ir.Value:
        return self.b.not_(a)

    def clamp(self, x, low: float, high: float) -> ir.Value:
        """x limited to [low, high]; NaN stays NaN."""
        x = self.select(self.lt(x, low), low, x)
        return self.select(self.gt(x, high), high, x)

    # bits and integers
    def bits(self, x) -> ir.Value:
        return self.b.bitcast(self.f(x), _I64)

    def from_bits(self, i) -> ir.Value:
        return self.b.bitcast(self.i(i), _F64)

    def iadd(self, a, b) -> ir.Value:
        return self.b.add(self.i(a), self.i(b))

    def isub(self, a, b) -> ir.Value:
        return self.b.sub(self.i(a), self.i(b))

    def imul(self, a, b) -> ir.Value:
        return self.b.mul(self.i(a), self.i(b))

    def iand(self, a, b) -> ir.Value:
        return self.b.and_(self.i(a), self.i(b))

    def ior(self, a, b) -> ir.Value:
        return self.b.or_(self.i(a), self.i(b))

    def ixor(self, a, b) -> ir.Value:
        return self.b.xor(self.i(a), self.i(b))

    def shl(self, a, b) -> ir.Value:
        return self.b.shl(self.i(a), self.i(b))

    def lshr(self, a, b) -> ir.Value:
        return self.b.lshr(self.i(a), self.i(b))

    def ashr(self, a, b) -> ir.Value:
        return self.b.ashr(self.i(a), self.i(b))

    def icmp(self, op: str, a, b) -> ir.Value:
        return self.b.icmp_signed(op, self.i(a), self.i(b))

    def itof(self, i) -> ir.Value:
        return self.b.sitofp(self.i(i), _F64)

    def pow2(self, k) -> ir.Value:
        """2**k for an i64 k in [-1022, 1023]."""
        return self.from_bits(self.shl(self.iadd(k, 1023), 52))

    def scale(self, x, k) -> ir.Value:
        """x * 2**k rounded once, for i64 k in [-2044, 2046] (two factors keep each one a normal number)."""
        half = self.ashr(k, 1)
        return self.mul(self.mul(x, self.pow2(half)), self.pow2(self.isub(k, half)))

    def clear_low_word(self, x) -> ir.Value:
        """x with the low 32 bits of its significand zeroed (a value whose products with short constants are
        exact)."""
        return self.from_bits(self.iand(self.bits(x), -(1 << 32)))


# --- constants ----------------------------------------------------------------------------------------------------

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
# ln 2 = _LN2_HI + _LN2_LO with _LN2_HI short enough (29 bits) that k * _LN2_HI is exact for |k| < 2**24
_LN2_HI = float.fromhex("0x1.62e42ff000000p-1")
_LN2_LO = float.fromhex("-0x1.718432a1b0e26p-35")
_LN2_TAIL = float.fromhex("0x1.abc9e3b39803fp-56")  # ln 2 - _LN2
# 1.5 * 2**52: adding it rounds |x| < 2**51 to an integer kept in the low significand bits
_SHIFT = 6755399441055744.0
_SHIFT_BITS = 0x4338000000000000
_IVLN2_HI = float.fromhex("0x1.7154765200000p+0")  # 1/ln 2, 32 bits: products with 21-bit values are exact
_IVLN2_LO = float.fromhex("0x1.705fc2eefa200p-33")
_IVLN10_HI = float.fromhex("0x1.bcb7b15200000p-2")  # 1/ln 10
_IVLN10_LO = float.fromhex("0x1.b9438ca9aadd5p-36")
_LOG10_2_HI = float.fromhex("0x1.3441350a00000p-2")  # log10(2)
_LOG10_2_LO = float.fromhex("-0x1.0c0219dc1da99p-39")
_IVLN2 = 1.4426950408889634
_IVLN10 = 0.4342944819032518
_LOG10_2 = 0.30102999566398120

# Minimax polynomials (tests/codegen/math_fit.py): the name says what they approximate, on which interval, and
# the maximal weighted error.
# exp(r) = 1 + r + r^2 P(r), |r| <= ln2/2; relative error 1.1e-17 (f64) / 5.2e-11 (f32 kernels)
_EXP_P64 = (0.5000000000000011, 0.16666666666666413, 0.041666666666530267, 0.008333333333494338,
            0.0013888888943598065, 0.00019841269506770375, 2.4801493135866572e-05, 2.7557586274836455e-06,
            2.7630234017460517e-07, 2.5000069564747215e-08)  # fmt: skip
_EXP_P32 = (0.5000000067642539, 0.16666665869406094, 0.04166629509343536, 0.008333497011341416,
            0.0013944648610471138, 0.0001979035063732015)  # fmt: skip
# log(1+f) = f - f^2/2 + s (f^2/2 + z P(z)), s = f/(2+f), z = s^2 <= 0.0295; error of z P(z) 3.6e-18 / 9.6e-12
_LOG_P64 = (0.6666666666666734, 0.3999999999941468, 0.28571428742387217, 0.22222198573220373,
            0.1818356432457987, 0.15314050583402056, 0.14795949462346134)  # fmt: skip
_LOG_P32 = (0.6666666564545441, 0.4000033519123921, 0.2853730852252902, 0.23582151632406753)
# sin(r) = r + r^3 P(r^2), |r| <= pi/4; relative error 5.3e-18 / 4.9e-12
_SIN_P64 = (-0.16666666666666632, 0.008333333333322425, -0.00019841269829816934, 2.755731369522104e-06,
            -2.5050758652517138e-08, 1.5896827890713658e-10)  # fmt: skip
_SIN_P32 = (-0.16666666641626868, 0.008333329385934275, -0.0001983933485134541, 2.718311644813566e-06)
# cos(r) = 1 - r^2/2 + r^4 P(r^2), |r| <= pi/4; error 9.1e-19 / 9.9e-14
_COS_P64 = (0.0416666666666666, -0.0013888888888874138, 2.4801587289491864e-05, -2.755731435525229e-07,
            2.0875723685778235e-09, -1.1359669933321675e-11)  # fmt: skip
_COS_P32 = (0.04166666662282832, -0.001388888375343292, 2.479952001485306e-05, -2.7210238276255737e-07)
# atan(t) = t + t^3 P(t^2), |t| <= 7/16; relative error 7.6e-18 / 4.5e-11
_ATAN_P64 = (-0.3333333333333293, 0.1999999999987616, -0.14285714272480554, 0.11111110404607243,
             -0.09090887114434328, 0.07691875937518931, -0.06661070688312042, 0.05833555591511984,
             -0.049768239654463683, 0.03653043138784757, -0.016284773729020343)  # fmt: skip
_ATAN_P32 = (-0.33333331844900205, 0.1999984512196775, -0.14280321621088293, 0.1102385981724292,
             -0.08360628366713731, 0.045071849506981336)  # fmt: skip
# asin(t) = t + t^3 P(t^2), |t| <= 1/2; relative error 2.0e-18 / 1.7e-11
_ASIN_P64 = (0.16666666666666763, 0.07499999999970261, 0.04464285717512177, 0.030381942683571233,
             0.0223722156615558, 0.017351600070124543, 0.013980961703676544, 0.01139777397238759,
             0.010786540167598497, 0.0036830004162484572, 0.021763599677879348, -0.021077433942129742,
             0.032676978116769555)  # fmt: skip
_ASIN_P32 = (0.16666667189843634, 0.07499948155844736, 0.04466016351940723, 0.030110254071493335,
             0.0246183490812619, 0.007469181253680386, 0.034692889842337656)  # fmt: skip


# --- kernels: each takes and returns f64 values -------------------------------------------------------------------

Kernel = Callable[..., ir.Value]


@dataclass(frozen=True)
class _Op:
    arity: int
    f64: Kernel
    f32: Kernel | None  # evaluated in f64 for f32 (and f16/bf16) arguments, then rounded once; None: use f64


_OPS: dict[str, _Op] = {}


def _register(name: str, arity: int = 1, *, f64: Kernel, f32: Kernel | None = None, aliases: tuple[str, ...] = ()):
    for n in (name, *aliases):
        _OPS[n] = _Op(arity, f64, f32)


def _two_sum(e: _Emitter, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(hi, lo) with hi = fl(a + b) and hi + lo = a + b exactly (Knuth's 2Sum)."""
    hi = e.add(a, b)
    bv = e.sub(hi, a)
    return hi, e.add(e.sub(a, e.sub(hi, bv)), e.sub(b, bv))


def _fast_two_sum(e: _Emitter, a, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """2Sum for |a| >= |b| (Dekker)."""
    hi = e.add(a, b)
    return hi, e.sub(b, e.sub(hi, a))


@dataclass
class _ExpParts:
    """exp(x) = 2^k (1 + r + tail), |r| <= ln2/2 (plus rounding); `s` = 2^min(k, 1023), `big` = k > 1023."""

    k: ir.Value  # i64
    r: ir.Value
    tail: ir.Value
    s: ir.Value
    big: ir.Value


def _exp_parts(e: _Emitter, x: ir.Value, precise: bool, extra: ir.Value | None = None) -> _ExpParts:
    """The reduction of exp(x + extra) for |x| < 2**40, |extra| <= ulp(x). precise: ln2 is split in three
    (r + c = x - k ln2 to ~2^-100, folded into tail) and the polynomial is good to 1e-17; else one fma and a
    5e-11 polynomial (f32 kernels, no extra)."""
    t = e.fma(x, _LOG2E, _SHIFT)
    kf = e.sub(t, _SHIFT)
    k = e.isub(e.bits(t), _SHIFT_BITS)
    if precise:
        r1 = e.fma(kf, -_LN2_HI, x)  # exact
        p_hi = e.mul(kf, _LN2_LO)
        r, err = _two_sum(e, r1, e.neg(p_hi))
        c = e.sub(err, e.fma(kf, _LN2_LO, e.neg(p_hi)))
        if extra is not None:
            c = e.add(c, extra)
        tail = e.mul(e.mul(r, r), e.horner(r, _EXP_P64))
        tail = e.add(tail, e.fma(c, e.add(r, tail), c))
    else:
        r = e.fma(kf, -_LN2, x)
        tail = e.mul(e.mul(r, r), e.horner(r, _EXP_P32))
    big = e.icmp(">", k, 1023)
    return _ExpParts(k, r, tail, e.pow2(e.select(big, 1023, k)), big)


def _exp_mantissa(e: _Emitter, p: _ExpParts, precise: bool) -> ir.Value:
    """1 + r + tail (with 1 + r kept exact when precise)."""
    if not precise:
        return e.add(1.0, e.add(p.r, p.tail))
    hi, lo = _fast_two_sum(e, e.f(1.0), p.r)
    return e.add(hi, e.add(lo, p.tail))


def _exp64(e: _Emitter, x: ir.Value) -> ir.Value:
    p = _exp_parts(e, e.clamp(x, -746.0, 710.0), True)
    return e.scale(_exp_mantissa(e, p, True), p.k)


def _exp32(e: _Emitter, x: ir.Value) -> ir.Value:
    # exp(x) overflows f32 above 88.73 and rounds to 0 below -103.98: the clamp keeps k a normal exponent
    p = _exp_parts(e, e.clamp(x, -110.0, 120.0), False)
    return e.mul(_exp_mantissa(e, p, False), p.s)


_register("exp", f64=_exp64, f32=_exp32)


def _exp2_reduce(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x = k + f with |f| <= 1/2; returns (f, k as i64). Needs |x| < 2**50."""
    t = e.add(x, _SHIFT)
    kf = e.sub(t, _SHIFT)
    return e.sub(x, kf), e.isub(e.bits(t), _SHIFT_BITS)


def _exp2_64(e: _Emitter, x: ir.Value) -> ir.Value:
    f, k = _exp2_reduce(e, e.clamp(x, -1080.0, 1030.0))
    # 2^f = e^(r + c) with r + c = f ln2 to ~2^-106
    r = e.mul(f, _LN2)
    c = e.fma(f, _LN2_TAIL, e.fma(f, _LN2, e.neg(r)))
    tail = e.mul(e.mul(r, r), e.horner(r, _EXP_P64))
    tail = e.add(tail, e.fma(c, e.add(r, tail), c))
    hi, lo = _fast_two_sum(e, e.f(1.0), r)
    return e.scale(e.add(hi, e.add(lo, tail)), k)


def _exp2_32(e: _Emitter, x: ir.Value) -> ir.Value:
    f, k = _exp2_reduce(e, e.clamp(x, -160.0, 140.0))
    r = e.mul(f, _LN2)
    return e.mul(e.add(1.0, e.mad(e.mul(r, r), e.horner(r, _EXP_P32), r)), e.pow2(k))


_register("exp2", f64=_exp2_64, f32=_exp2_32)


def _dd_div(e: _Emitter, nh: ir.Value, nl: ir.Value, dh: ir.Value, dl: ir.Value) -> ir.Value:
    """(nh + nl) / (dh + dl) for double-double operands, to ~0.5 ulp: one correction step on the quotient."""
    q = e.div(nh, dh)
    remainder = e.sub(e.add(e.fma(e.neg(q), dh, nh), nl), e.mul(q, dl))
    return e.add(q, e.div(remainder, dh))


def _expm1_pair(e: _Emitter, p: _ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp(x) - 1 = hi + lo for k <= 1023 from precise parts:
    2^k (1 + r + tail) - 1 = (2^k - 1) + 2^k r + 2^k tail, where 2^k - 1 is exact for k >= -53."""
    hi, lo = _two_sum(e, e.sub(p.s, 1.0), e.mul(p.s, p.r))
    return _fast_two_sum(e, hi, e.fma(p.s, p.tail, lo))


def _exp_mantissa_pair(e: _Emitter, p: _ExpParts) -> tuple[ir.Value, ir.Value]:
    """1 + r + tail = hi + lo from precise parts."""
    hi, lo = _fast_two_sum(e, e.f(1.0), p.r)
    return _fast_two_sum(e, hi, e.add(lo, p.tail))


def _exp_pair(e: _Emitter, p: _ExpParts) -> tuple[ir.Value, ir.Value]:
    """exp(x) = hi + lo for k <= 1023 from precise parts."""
    hi, lo = _exp_mantissa_pair(e, p)
    return e.mul(p.s, hi), e.mul(p.s, lo)


def _expm1_core(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    """exp(x) - 1 for x in [-45, 709.8] (more negative x: -1)."""
    p = _exp_parts(e, x, precise)
    if precise:
        hi, lo = _expm1_pair(e, p)
        result = e.add(hi, lo)
    else:
        result = e.fma(p.s, e.add(p.r, p.tail), e.sub(p.s, 1.0))
    return e.mul(result, e.select(p.big, 2.0, 1.0))


def _expm1_64(e: _Emitter, x: ir.Value) -> ir.Value:
    result = _expm1_core(e, e.clamp(x, -45.0, 710.0), True)
    return e.select(e.eq(x, 0.0), x, result)


def _expm1_32(e: _Emitter, x: ir.Value) -> ir.Value:
    result = _expm1_core(e, e.clamp(x, -45.0, 100.0), False)
    return e.select(e.eq(x, 0.0), x, result)


_register("expm1", f64=_expm1_64, f32=_expm1_32)


def _tanh64(e: _Emitter, x: ir.Value) -> ir.Value:
    # t = expm1(-2|x|) in (-1, 0], u = exp(-2|x|) = t + 1, both as double-doubles. Small |x|: tanh = -t / (t + 2)
    # (no cancellation); large |x|: tanh = 1 - 2u / (1 + u) (the quotient is small, so its error shrinks).
    a = e.abs(x)
    p = _exp_parts(e, e.select(e.gt(a, 22.5), -45.0, e.mul(a, -2.0)), True)
    th, tl = _expm1_pair(e, p)
    uh, ul = _exp_pair(e, p)
    large = e.gt(a, 0.55)
    t2h, t2l = _fast_two_sum(e, e.f(2.0), th)
    u1h, u1l = _fast_two_sum(e, e.f(1.0), uh)
    q = _dd_div(
        e,
        e.select(large, e.add(uh, uh), th),
        e.select(large, e.add(ul, ul), tl),
        e.select(large, u1h, t2h),
        e.select(large, e.add(u1l, ul), e.add(t2l, tl)),
    )
    return e.copysign(e.sub(e.select(large, 1.0, 0.0), q), x)


def _tanh32(e: _Emitter, x: ir.Value) -> ir.Value:
    # tanh(a) = a P(a^2) / Q(a^2) on [0, 9.5] (relative error 1.1e-10); tanh rounds to 1 in f32 beyond 9.01.
    # Cheaper than going through expm1 (no integer work, one division): tanh is on the critical path of gelu.
    a = e.abs(x)
    a = e.select(e.gt(a, 9.5), 9.5, a)
    z = e.mul(a, a)
    return e.copysign(e.div(e.mul(a, e.horner(z, _TANH_P32)), e.horner(z, _TANH_Q32)), x)


_register("tanh", f64=_tanh64, f32=_tanh32)


def _logistic64(e: _Emitter, x: ir.Value) -> ir.Value:
    # u = exp(-|x|) never overflows: 1 / (1 + u) for x >= 0, u / (1 + u) below
    p = _exp_parts(e, e.clamp(e.neg(e.abs(x)), -746.0, 0.0), True)
    mh, ml = _fast_two_sum(e, e.f(1.0), p.r)
    mh, ml = _fast_two_sum(e, mh, e.add(ml, p.tail))
    uh, ul = e.scale(mh, p.k), e.scale(ml, p.k)  # scale: u may be subnormal
    dh, dl = _fast_two_sum(e, e.f(1.0), uh)
    negative = e.lt(x, 0.0)
    return _dd_div(e, e.select(negative, uh, 1.0), e.select(negative, ul, 0.0), dh, e.add(dl, ul))


def _logistic32(e: _Emitter, x: ir.Value) -> ir.Value:
    u = _exp32(e, e.neg(e.abs(x)))
    return e.div(e.select(e.lt(x, 0.0), u, 1.0), e.add(1.0, u))


_register("logistic", f64=_logistic64, f32=_logistic32)


def _sinh(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # With t = expm1|x| and u = e^|x|: sinh = (2t - t^2 / (t + 1)) / 2 below 1/2 (the quotient is the small
    # part), (u - 1/u) / 2 up to 22 (little cancellation), and above, e^|x| / 2 scaled without overflowing early.
    a = e.abs(x)
    p = _exp_parts(e, e.select(e.gt(a, 712.0), 712.0, a), precise)
    large = e.scale(_exp_mantissa(e, p, precise), e.isub(p.k, 1))
    if precise:
        th, tl = _expm1_pair(e, p)
        uh, ul = _exp_pair(e, p)
    else:
        th, tl = e.fma(p.s, e.add(p.r, p.tail), e.sub(p.s, 1.0)), e.f(0.0)
        uh, ul = e.mul(p.s, _exp_mantissa(e, p, False)), e.f(0.0)
    small = e.lt(a, 0.5)
    t = e.add(th, tl)
    n = e.select(small, e.neg(e.mul(t, t)), 1.0)
    dh, dl = e.select(small, e.add(t, 1.0), uh), e.select(small, 0.0, ul)
    q = _dd_div(e, n, e.f(0.0), dh, dl) if precise else e.div(n, dh)
    sum_ = e.add(e.select(small, e.add(th, th), uh), e.add(e.select(small, e.add(tl, tl), ul),
                                                           e.select(small, q, e.neg(q))))
    return e.copysign(e.select(e.gt(a, 22.0), large, e.mul(0.5, sum_)), x)


def _cosh(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # (u + 1/u) / 2 with u = e^|x| (a sum of positive terms); above 22: e^|x| / 2 scaled without overflowing early
    a = e.abs(x)
    p = _exp_parts(e, e.clamp(a, 0.0, 712.0), precise)
    large = e.scale(_exp_mantissa(e, p, precise), e.isub(p.k, 1))
    if precise:
        uh, ul = _exp_pair(e, p)
        small = e.add(uh, e.add(ul, _dd_div(e, e.f(1.0), e.f(0.0), uh, ul)))
    else:
        u = e.mul(p.s, _exp_mantissa(e, p, False))
        small = e.add(u, e.div(1.0, u))
    return e.select(e.gt(a, 22.0), large, e.mul(0.5, small))


_register("sinh", f64=lambda e, x: _sinh(e, x, True), f32=lambda e, x: _sinh(e, x, False))
_register("cosh", f64=lambda e, x: _cosh(e, x, True), f32=lambda e, x: _cosh(e, x, False))


# logarithms


@dataclass
class _LogParts:
    """x = 2^k (1 + f); log(1 + f) = f - hfsq + sr."""

    k: ir.Value  # f64
    f: ir.Value
    hfsq: ir.Value
    sr: ir.Value


def _log_parts(e: _Emitter, x: ir.Value, precise: bool, subnormals: bool) -> _LogParts:
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
    r = e.mul(z, e.horner(z, _LOG_P64 if precise else _LOG_P32))
    return _LogParts(k, f, hfsq, e.mul(s, e.add(hfsq, r)))


def _log_specials(e: _Emitter, x: ir.Value, result: ir.Value) -> ir.Value:
    """log-like results for x <= 0, inf and NaN: -inf at 0, NaN below, x itself for +inf and NaN."""
    special = e.select(e.lt(x, 0.0), _NAN, x)
    special = e.select(e.eq(x, 0.0), -_INF, special)
    ok = e.and_(e.gt(x, 0.0), e.lt(x, _INF))
    return e.select(ok, result, special)


def _log64(e: _Emitter, x: ir.Value) -> ir.Value:
    p = _log_parts(e, x, True, True)
    low = e.sub(p.hfsq, e.fma(p.k, _LN2_LO, p.sr))
    return _log_specials(e, x, e.fma(p.k, _LN2_HI, e.sub(p.f, low)))


def _log32(e: _Emitter, x: ir.Value) -> ir.Value:
    p = _log_parts(e, x, False, False)
    return _log_specials(e, x, e.fma(p.k, _LN2, e.add(e.sub(p.f, p.hfsq), p.sr)))


def _log_scaled64(e: _Emitter, x: ir.Value, inv_hi: float, inv_lo: float, k_hi: float, k_lo: float) -> ir.Value:
    """log(x) * (inv_hi + inv_lo) as in fdlibm's log2/log10: hi is short so that hi * inv_hi is exact."""
    p = _log_parts(e, x, True, True)
    hi = e.clear_low_word(e.sub(p.f, p.hfsq))
    lo = e.add(e.sub(e.sub(p.f, hi), p.hfsq), p.sr)
    val_hi = e.mul(hi, inv_hi)
    y2 = e.mul(p.k, k_hi)
    val_lo = e.add(e.mul(p.k, k_lo), e.add(e.mul(e.add(lo, hi), inv_lo), e.mul(lo, inv_hi)))
    w = e.add(y2, val_hi)
    val_lo = e.add(val_lo, e.add(e.sub(y2, w), val_hi))
    return _log_specials(e, x, e.add(val_lo, w))


def _log_scaled32(e: _Emitter, x: ir.Value, scale: float, k_scale: float) -> ir.Value:
    p = _log_parts(e, x, False, False)
    return _log_specials(e, x, e.fma(p.k, k_scale, e.mul(e.add(e.sub(p.f, p.hfsq), p.sr), scale)))


_register("log", f64=_log64, f32=_log32)
_register(
    "log2",
    f64=lambda e, x: _log_scaled64(e, x, _IVLN2_HI, _IVLN2_LO, 1.0, 0.0),
    f32=lambda e, x: _log_scaled32(e, x, _IVLN2, 1.0),
)
_register(
    "log10",
    f64=lambda e, x: _log_scaled64(e, x, _IVLN10_HI, _IVLN10_LO, _LOG10_2_HI, _LOG10_2_LO),
    f32=lambda e, x: _log_scaled32(e, x, _IVLN10, _LOG10_2),
)


def _log1p(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # u = 1 + x rounded, c its rounding error (2Sum); log1p(x) = log(u) + c/u
    u = e.add(1.0, x)
    bv = e.sub(u, 1.0)
    av = e.sub(u, bv)
    c = e.add(e.sub(1.0, av), e.sub(x, bv))
    p = _log_parts(e, u, precise, False)
    correction = e.div(c, u)
    if precise:
        low = e.sub(p.hfsq, e.add(e.fma(p.k, _LN2_LO, p.sr), correction))
        result = e.fma(p.k, _LN2_HI, e.sub(p.f, low))
    else:
        result = e.fma(p.k, _LN2, e.add(e.sub(p.f, p.hfsq), e.add(p.sr, correction)))
    special = e.select(e.lt(x, -1.0), _NAN, x)
    special = e.select(e.eq(x, -1.0), -_INF, special)
    ok = e.and_(e.and_(e.gt(x, -1.0), e.lt(x, _INF)), e.ne(x, 0.0))
    return e.select(ok, result, special)


_register("log1p", f64=lambda e, x: _log1p(e, x, True), f32=lambda e, x: _log1p(e, x, False))


# trigonometric functions

# pi/2 = _PIO2_1 + _PIO2_2 + _PIO2_3 + _PIO2_4 to 2^-160; the first three have 33 bits so that k * part is exact for
# k < 2^20 (Cody & Waite)
_PIO2_1 = float.fromhex("0x1.921fb54400000p+0")
_PIO2_2 = float.fromhex("0x1.0b4611a600000p-34")
_PIO2_3 = float.fromhex("0x1.3198a2e000000p-69")
_PIO2_4 = float.fromhex("0x1.b839a252049c1p-104")
_PIO2_HI = float.fromhex("0x1.921fb54442d18p+0")  # pi/2 = hi + lo to 2^-107
_PIO2_LO = float.fromhex("0x1.1a62633145c07p-54")
_TWO_OVER_PI = float.fromhex("0x1.45f306dc9c883p-1")
_CODY_WAITE_LIMIT = 2.0**19
# floor(2/pi * 2^1216): the bits of 2/pi that Payne & Hanek's reduction of large arguments needs
_TWO_OVER_PI_BITS = int(
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921cfe1deb1cb129"
    "a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980fef2f118b5a0a6d1f6d367ecf"
    "27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d0856033046fc7b6bab",
    16,
)
_TWO_OVER_PI_NBITS = 1216


def _payne_hanek_piece(group_bits: int, group: int, c: int) -> float:
    """Piece c of 2/pi for arguments in [2^(group_bits * group), 2^(group_bits * (group + 1))): its bits
    [group_bits * group - 56 + 53c, +53) (bit j weighs 2^-j), scaled by 2^(group_bits * group) (which makes it
    C * 2^(4 - 53c) for the 53-bit integer C). The bits before the first piece only add multiples of 4 once
    multiplied by such an argument; (x / 2^(group_bits * group)) * piece is an exact double-double."""
    first = group_bits * group - 56 + 53 * c
    chunk = (_TWO_OVER_PI_BITS >> (_TWO_OVER_PI_NBITS - (first + 52))) & ((1 << 53) - 1)
    return float(chunk) * 2.0 ** (4 - 53 * c)


def _payne_hanek_table() -> list[float]:
    """Pieces 0..3 for the 128 groups of 8 exponents of f64 arguments, looked up (gathered) by group."""
    return [_payne_hanek_piece(8, g, c) for g in range(128) for c in range(4)]


def _table(e: _Emitter, name: str, values: Callable[[], list[float]]) -> ir.GlobalVariable:
    existing = e.module.globals.get(name)
    if existing is not None:
        return existing
    data = values()
    array = ir.ArrayType(_F64, len(data))
    table = ir.GlobalVariable(e.module, array, name)
    table.global_constant = True
    table.linkage = "internal"
    table.initializer = ir.Constant(array, data)
    return table


def _trig_reduce(e: _Emitter, a: ir.Value, precise: bool) -> tuple[ir.Value, ir.Value, ir.Value]:
    """a = (q + f) pi/2 for a = |x| (finite: NaN/inf give garbage); returns (rh, rl, q) with rh + rl = f pi/2,
    |f| <= 1/2 (plus rounding), to ~2^-100 relative even for the a closest to multiples of pi/2, and q as i64
    (only q mod 4 matters). precise=False: a is an f32 value (|a| < 2^128, 24 bits)."""
    # Cody-Waite below 2^19 (f64): exact products k * part, 2Sum for the differences
    t = e.fma(a, _TWO_OVER_PI, _SHIFT)
    kf = e.sub(t, _SHIFT)
    r1 = e.fma(kf, -_PIO2_1, a)
    h, e1 = _two_sum(e, r1, e.mul(kf, -_PIO2_2))
    h, e2 = _two_sum(e, h, e.mul(kf, -_PIO2_3))
    cw_h, cw_l = _fast_two_sum(e, h, e.fma(kf, -_PIO2_4, e.add(e1, e2)))
    cw_q = e.bits(t)

    # Payne-Hanek above: a / 2^(Gg) times the pieces of 2/pi for a's exponent group g, reduced modulo 4 piece by
    # piece (x - rint(x) is exact), then the fractions summed with 2Sums (the integer parts give q). f64: groups of
    # G = 8 exponents, four pieces gathered from a table; f32: 4 groups of G = 32, three pieces chosen by selects
    # (gathers are slow).
    group_bits, groups, count = (8, 128, 4) if precise else (32, 4, 3)
    exponent = e.isub(e.lshr(e.bits(a), 52), 1023)
    group = e.ashr(exponent, group_bits.bit_length() - 1)
    group = e.select(e.icmp("<", group, 0), 0, group)
    group = e.select(e.icmp(">", group, groups - 1), groups - 1, group)
    scaled = e.from_bits(e.isub(e.bits(a), e.shl(group, 52 + group_bits.bit_length() - 1)))  # a / 2^(Gg), exact
    pieces = []
    if precise:
        table = _table(e, "xlapy.math.two_over_pi", _payne_hanek_table)
        for c in range(count):
            address = e.b.gep(table, [ir.Constant(_I64, 0), e.iadd(e.shl(group, 2), c)], inbounds=True)
            pieces.append(e.b.load(address))
    else:
        is_group = [e.icmp("==", group, g) for g in range(1, groups)]
        for c in range(count):
            piece = e.f(_payne_hanek_piece(group_bits, 0, c))
            for g in range(1, groups):
                piece = e.select(is_group[g - 1], _payne_hanek_piece(group_bits, g, c), piece)
            pieces.append(piece)
    p0 = e.mul(scaled, pieces[0])
    l0 = e.fma(scaled, pieces[0], e.neg(p0))
    p1 = e.mul(scaled, pieces[1])
    l1 = e.fma(scaled, pieces[1], e.neg(p1))
    p2 = e.mul(scaled, pieces[2])
    l2 = e.fma(scaled, pieces[2], e.neg(p2))
    small_terms = e.add(l2, e.mul(scaled, pieces[3])) if precise else l2
    m0 = e.sub(p0, e.mul(4.0, e.floor(e.mul(p0, 0.25))))  # p0 mod 4, exactly
    n0, n1, n2 = e.rint(m0), e.rint(l0), e.rint(p1)
    # the fractions of m0 and l0 are multiples of 2^-48 in [-1/2, 1/2]: their sum is exact
    fh, fl = _two_sum(e, e.add(e.sub(m0, n0), e.sub(l0, n1)), e.sub(p1, n2))
    n3 = e.rint(fh)
    fh, e3 = _two_sum(e, e.sub(fh, n3), l1)
    fh, e4 = _two_sum(e, fh, p2)
    fh, fl = _fast_two_sum(e, fh, e.add(e.add(e.add(fl, e3), e4), small_terms))
    ph_q = e.bits(e.add(e.add(e.add(n0, n1), e.add(n2, n3)), _SHIFT))
    rh = e.mul(fh, _PIO2_HI)
    rl = e.add(e.fma(fh, _PIO2_HI, e.neg(rh)), e.fma(fh, _PIO2_LO, e.mul(fl, _PIO2_HI)))

    if not precise:  # group 0 covers everything below 2^32 (the first piece is 0 there): no Cody-Waite needed
        return rh, rl, ph_q
    small = e.lt(a, _CODY_WAITE_LIMIT)
    return e.select(small, cw_h, rh), e.select(small, cw_l, rl), e.select(small, cw_q, ph_q)


def _sin_kernel(e: _Emitter, x: ir.Value, y: ir.Value, precise: bool) -> tuple[ir.Value, ir.Value]:
    """sin(x + y) = hi + lo for |x| <= pi/4, |y| <= ulp(x) (after fdlibm's __kernel_sin)."""
    z = e.mul(x, x)
    if not precise:
        return e.add(e.mad(e.mul(x, z), e.horner(z, _SIN_P32), x), y), e.f(0.0)
    v = e.mul(z, x)
    r = e.horner(z, _SIN_P64[1:])
    d = e.sub(e.sub(e.mul(z, e.sub(e.mul(0.5, y), e.mul(v, r))), y), e.mul(v, _SIN_P64[0]))
    return _fast_two_sum(e, x, e.neg(d))


def _cos_kernel(e: _Emitter, x: ir.Value, y: ir.Value, precise: bool) -> tuple[ir.Value, ir.Value]:
    """cos(x + y) = hi + lo for |x| <= pi/4, |y| <= ulp(x) (after fdlibm's __kernel_cos)."""
    z = e.mul(x, x)
    if not precise:
        return e.mad(z, e.mad(z, e.horner(z, _COS_P32), -0.5), 1.0), e.f(0.0)
    r = e.mul(z, e.horner(z, _COS_P64))
    hz = e.mul(0.5, z)
    w = e.sub(1.0, hz)
    return _fast_two_sum(e, w, e.add(e.sub(e.sub(1.0, w), hz), e.sub(e.mul(z, r), e.mul(x, y))))


def _flip_sign(e: _Emitter, value: ir.Value, flip: ir.Value) -> ir.Value:
    """-value where the i1 `flip` is set."""
    return e.from_bits(e.ixor(e.bits(value), e.shl(e.b.zext(flip, _I64), 63)))


def _trig(e: _Emitter, x: ir.Value, op: str, precise: bool) -> ir.Value:
    a = e.abs(x)
    rh, rl, q = _trig_reduce(e, a, precise)
    if not precise:
        rh, rl = e.add(rh, rl), e.f(0.0)
    sh, sl = _sin_kernel(e, rh, rl, precise)
    ch, cl = _cos_kernel(e, rh, rl, precise)
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
        result = _dd_div(e, nh, nl, dh, dl) if precise else e.div(nh, dh)
        flip = e.b.xor(odd, negative)
    result = _flip_sign(e, result, flip)
    return e.select(e.lt(a, _INF), result, _NAN)


for _name in ("sin", "cos", "tan"):
    _register(
        _name,
        f64=lambda e, x, op=_name: _trig(e, x, op, True),
        f32=lambda e, x, op=_name: _trig(e, x, op, False),
    )


# inverse trigonometric functions

# erf(x) = x + x P(x^2), |x| < 0.84375: relative error 2.2e-17
_ERF_P64 = (0.12837916709551256, -0.37612638903183376, 0.11283791670934191, -0.02686617064058085,
            0.005223977574577762, -0.0008548323697516379, 0.00012055196972240435, -1.4922063263689957e-05,
            1.6400937149889671e-06, -1.570990439684421e-07, 1.0713824985165146e-08)  # fmt: skip
# erf(x) = x P(x^2) / Q(x^2), |x| <= 4: relative error 1.3e-11
_ERF_P32 = (1.128379167088802, 0.20177489606452734, 0.058346781213728084, 0.005030254321227503,
            0.0005176578362839374, 2.226154767274734e-05, 7.578578549158039e-07, 2.9785343775528103e-09)  # fmt: skip
_ERF_Q32 = (1.0, 0.5121516785940926, 0.12242571929591695, 0.017860860301926497, 0.001734296095705651,
            0.00011311272418634843, 4.5970042642417165e-06, 7.314649761752818e-08)  # fmt: skip
# erfc(x) = 1 - x - x P(x^2) for the f32 kernels, |x| < 0.84375: relative error 1.2e-10
_ERFC_SMALL_P32 = (0.12837916695746374, -0.3761263703791251, 0.11283750167750596, -0.026862681470018926,
                   0.00520988747597489, -0.0008252238273328364, 8.876226038925111e-05)  # fmt: skip
# (1 + 2x) exp(x^2) erfc(x) = h(t), t = (x - K) / (x + K), x in [0.84375, 27.3] (K = 4) / [0.84375, 10.1]
# (K = 5/2): relative error 5.6e-17 / 6.5e-12
_ERFC_K64 = 4.0
_ERFC_H64_0_LO = -4.954613225319329e-17  # the rest of the first coefficient
_ERFC_H64 = (1.2329951186255526, -0.13962111684056244, 0.015379652102621552, 0.06809705425468354,
             -0.10103906603643868, 0.09373283499878064, -0.06633036580835454, 0.037167515527980276,
             -0.01619773411413258, 0.00503197009521001, -0.000757772817902118, -0.00019925757827004718,
             0.0001506192937541023, -2.4394974713896093e-05, -1.12146454684723e-05, 5.696693367151503e-06,
             2.802899975596369e-07, -8.004209472115218e-07, 8.746938543860905e-08, 8.249585001769563e-08,
             -2.1474411093315317e-08)  # fmt: skip
_ERFC_K32 = 2.5
_ERFC_H32 = (1.264838184367747, -0.12235676326368979, -0.09902453976230714, 0.1576299336647361,
             -0.10296705110499559, 0.03276055697177022, 0.0009318807059945513, -0.004378818526628623,
             0.0004914017594306685, 0.000617245856505484, -8.500131637177369e-05, -8.276673627118038e-05)  # fmt: skip
# tanh(x) = x P(x^2) / Q(x^2), |x| <= 9.5: relative error 1.1e-10
_TANH_P32 = (0.9999999999254663, 0.14082675927548327, 0.004403907005620554, 4.170508235648798e-05,
             1.079077059557626e-07, 3.4705910527013745e-11)  # fmt: skip
_TANH_Q32 = (1.0, 0.4741600918782841, 0.02912393887334036, 0.0004965921325065682, 2.550988672544427e-06,
             2.830018379944241e-09)  # fmt: skip
_TWO_THIRDS_HI = float.fromhex("0x1.5555555555555p-1")
_TWO_THIRDS_LO = float.fromhex("0x1.5555555555555p-55")
# log(1 + f) = 2s + 2s^3/3 + s^5 Q(s^2), s = f/(2+f), s^2 <= 0.0295: error of s^5 Q 2.9e-20 relative to s
_POW_LOG_Q = (0.40000000000002256, 0.2857142857010007, 0.22222222519822793, 0.18181784376743973,
              0.15386756852967018, 0.13256829610622192, 0.13196212529670892)  # fmt: skip
# cbrt(m) on [1, 2): relative error 9.2e-6
_CBRT_P = (0.5069794000346434, 0.71815384404798, -0.3006114288691413, 0.08609127412261168, -0.010603882246618538)
_CBRT2 = float.fromhex("0x1.428a2f98d728bp+0")
_CBRT4 = float.fromhex("0x1.965fea53d6e3dp+0")

_ATAN_HI = (0.0, float.fromhex("0x1.dac670561bb4fp-2"), float.fromhex("0x1.921fb54442d18p-1"),
            float.fromhex("0x1.f730bd281f69bp-1"), _PIO2_HI)  # atan(0), atan(1/2), atan(1), atan(3/2), atan(inf)
_ATAN_LO = (0.0, float.fromhex("0x1.a2b7f222f65e2p-56"), float.fromhex("0x1.1a62633145c07p-55"),
            float.fromhex("0x1.007887af0cbbdp-56"), _PIO2_LO)  # fmt: skip
_PI_MINUS_ATAN_HI = (float.fromhex("0x1.921fb54442d18p+1"), float.fromhex("0x1.56c6e7397f5aep+1"),
                     float.fromhex("0x1.2d97c7f3321d2p+1"), float.fromhex("0x1.145385fa3af71p+1"), _PIO2_HI)  # fmt: skip
_PI_MINUS_ATAN_LO = (float.fromhex("0x1.1a62633145c07p-53"), float.fromhex("0x1.660b64ece6f4bp-53"),
                     float.fromhex("0x1.a79394c9e8a0ap-54"), float.fromhex("0x1.fa53523b6428fp-53"), _PIO2_LO)  # fmt: skip
_PI_HI = float.fromhex("0x1.921fb54442d18p+1")
_PI_LO = float.fromhex("0x1.1a62633145c07p-53")


def _atan_positive(
    e: _Emitter,
    n: ir.Value,
    d: ir.Value | float,
    precise: bool,
    correction: ir.Value | None = None,
    flip: ir.Value | None = None,
) -> ir.Value:
    """atan(n / d) + correction (a tiny term added with the low part), or pi minus that where the i1 `flip` is
    set, for n, d >= 0 (n/d = inf: pi/2), as in fdlibm: n/d is moved next to c = 0, 1/2, 1, 3/2 or inf, where
    atan(c) and pi - atan(c) are known to double-double precision, by one division; then an odd polynomial on
    |t| <= 7/16. d is 1 (exact differences) or f32 values widened to f64 (exact products by 3 and 7/16)."""
    # pieces: t = (n - c d) / (d + c n) for c = 0, 1/2, 1, 3/2, and t = -d/n beyond 39/16
    numerator, denominator = e.neg(d), n
    index = e.i(4)
    n2, d2 = e.add(n, n), e.add(d, d)
    for limit, num, den, i in (
        (39 / 16, lambda: e.sub(n2, e.mul(d, 3.0)), lambda: e.fma(n, 3.0, d2), 3),
        (19 / 16, lambda: e.sub(n, d), lambda: e.add(n, d), 2),
        (11 / 16, lambda: e.sub(n2, d), lambda: e.add(d2, n), 1),
        (7 / 16, lambda: n, lambda: e.f(d), 0),
    ):
        inside = e.lt(n, e.mul(d, limit))
        numerator, denominator = e.select(inside, num(), numerator), e.select(inside, den(), denominator)
        index = e.select(inside, i, index)
    t = e.div(numerator, denominator)
    z = e.mul(t, t)
    ts = e.mul(e.mul(t, z), e.horner(z, _ATAN_P64 if precise else _ATAN_P32))  # atan(t) - t
    # value = hi - ((s ts - lo) + s t) with s = -1 (atan) or +1 (pi - atan, with the constants for pi - atan(c))
    hi, lo = e.f(_ATAN_HI[4]), e.f(_ATAN_LO[4])
    for i in range(4):
        hi = e.select(e.icmp("==", index, i), _ATAN_HI[i], hi)
        lo = e.select(e.icmp("==", index, i), _ATAN_LO[i], lo)
    if correction is not None:
        lo = e.add(lo, correction)
    t, ts = e.neg(t), e.neg(ts)
    if flip is not None:
        pi_hi, pi_lo = e.f(_PI_MINUS_ATAN_HI[4]), e.f(_PI_MINUS_ATAN_LO[4])
        for i in range(4):
            pi_hi = e.select(e.icmp("==", index, i), _PI_MINUS_ATAN_HI[i], pi_hi)
            pi_lo = e.select(e.icmp("==", index, i), _PI_MINUS_ATAN_LO[i], pi_lo)
        if correction is not None:
            pi_lo = e.sub(pi_lo, correction)
        hi, lo = e.select(flip, pi_hi, hi), e.select(flip, pi_lo, lo)
        t, ts = e.select(flip, e.neg(t), t), e.select(flip, e.neg(ts), ts)
    return e.sub(hi, e.add(e.sub(ts, lo), t))


def _atan(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    return e.copysign(_atan_positive(e, e.abs(x), 1.0, precise), x)


def _atan2(e: _Emitter, y: ir.Value, x: ir.Value, precise: bool) -> ir.Value:
    ay, ax = e.abs(y), e.abs(x)
    # both infinite: atan(1); both zero: atan(0); the quadrant then comes from the signs
    both_inf = e.and_(e.eq(ay, _INF), e.eq(ax, _INF))
    both_zero = e.and_(e.eq(ay, 0.0), e.eq(ax, 0.0))
    ay = e.select(both_inf, 1.0, ay)
    ax = e.select(e.or_(both_inf, both_zero), 1.0, ax)
    negative_x = e.icmp("<", e.bits(x), 0)  # x < 0 or -0: pi - atan|y/x|
    if precise:  # q + ql = |y/x|; atan(q + ql) = atan(q) + ql / (1 + q^2)
        q = e.div(ay, ax)
        ql = e.div(e.fma(e.neg(q), ax, ay), ax)
        correction = e.div(ql, e.fma(q, q, 1.0))
        correction = e.select(e.lt(e.abs(correction), 1.0), correction, 0.0)  # x = inf or 0: NaN
        a = _atan_positive(e, q, 1.0, True, correction, negative_x)
    else:  # f32 arguments: the quotient is folded into the reduction
        a = _atan_positive(e, ay, ax, False, flip=negative_x)
    return e.copysign(a, y)


_register("atan", f64=lambda e, x: _atan(e, x, True), f32=lambda e, x: _atan(e, x, False))
_register("atan2", 2, f64=lambda e, y, x: _atan2(e, y, x, True), f32=lambda e, y, x: _atan2(e, y, x, False))


@dataclass
class _AsinParts:
    """asin(|x|) pieces: below 1/2, asin|x| = s + sp with s = |x|; above, asin|x| = pi/2 - 2 asin(s) with
    s = sqrt((1 - |x|) / 2) ~ sqrt(z), asin(s) = s + c + sp, c the rounding error of s."""

    small: ir.Value
    s: ir.Value
    c: ir.Value
    sp: ir.Value


def _asin_parts(e: _Emitter, x: ir.Value, precise: bool) -> _AsinParts:
    a = e.abs(x)
    small = e.lt(a, 0.5)
    z = e.select(small, e.mul(a, a), e.mul(e.sub(1.0, a), 0.5))  # 1 - a is exact above 1/2
    s = e.select(small, a, e.sqrt(z))
    sp = e.mul(s, e.mul(z, e.horner(z, _ASIN_P64 if precise else _ASIN_P32)))
    c = e.f(0.0)
    if precise:  # sqrt(z) = s + c to first order
        c = e.select(e.gt(z, 0.0), e.div(e.fma(e.neg(s), s, z), e.add(s, s)), 0.0)
    return _AsinParts(small, s, c, sp)


def _asin(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    p = _asin_parts(e, x, precise)
    hi, lo = _two_sum(e, e.f(_PIO2_HI), e.mul(p.s, -2.0))
    large = e.add(hi, e.sub(lo, e.sub(e.mul(e.add(p.c, p.sp), 2.0), _PIO2_LO)))
    return e.copysign(e.select(p.small, e.add(p.s, p.sp), large), x)  # |x| > 1: sqrt(negative) = NaN


def _acos(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    p = _asin_parts(e, x, precise)
    # |x| < 1/2: pi/2 - asin(x); x > 1/2: 2 asin(s); x < -1/2: pi - 2 asin(s)
    xp = e.copysign(p.sp, x)
    small = e.sub(_PIO2_HI, e.sub(x, e.sub(_PIO2_LO, xp)))
    positive = e.mul(2.0, e.add(p.s, e.add(p.c, p.sp)))
    hi, lo = _two_sum(e, e.f(_PI_HI), e.mul(p.s, -2.0))
    negative = e.add(hi, e.sub(lo, e.sub(e.mul(e.add(p.c, p.sp), 2.0), _PI_LO)))
    return e.select(p.small, small, e.select(e.lt(x, 0.0), negative, positive))


_register("asin", f64=lambda e, x: _asin(e, x, True), f32=lambda e, x: _asin(e, x, False))
_register("acos", f64=lambda e, x: _acos(e, x, True), f32=lambda e, x: _acos(e, x, False))


# inverse hyperbolic functions, through log1p


def _atanh(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # atanh|x| = log1p(2|x| / (1 - |x|)) / 2, written 2a + 2a^2 / (1 - a) below 1/2 so that 1 - a's rounding
    # only touches the small term
    a = e.abs(x)
    q = e.div(e.add(a, a), e.sub(1.0, a))
    t = e.select(e.lt(a, 0.5), e.fma(q, a, e.add(a, a)), q)
    return e.copysign(e.mul(0.5, _log1p(e, t, precise)), x)  # |x| > 1: log1p(t < -1) = NaN


def _asinh(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # asinh a = log1p(w): w = a + a^2 / (1 + sqrt(1 + a^2)) up to 2, 2a + 1/(sqrt(a^2 + 1) + a) - 1 up to 2^28,
    # beyond log(a) + ln2 = log1p(a - 1) + ln2
    a = e.abs(x)
    aa = e.mul(a, a)
    root = e.sqrt(e.add(aa, 1.0))
    w_small = e.add(a, e.div(aa, e.add(1.0, root)))
    w_mid = e.add(e.sub(e.add(a, a), 1.0), e.div(1.0, e.add(root, a)))
    huge = e.gt(a, 2.0**28)
    w = e.select(e.le(a, 2.0), w_small, e.select(huge, e.sub(a, 1.0), w_mid))
    result = e.add(_log1p(e, w, precise), e.select(huge, _LN2, 0.0))
    return e.copysign(result, x)


def _acosh(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    # acosh x = log1p(w): w = t + sqrt(2t + t^2) (t = x - 1, exact) up to 2, 2x - 1/(x + sqrt(x^2 - 1)) - 1 up to
    # 2^28, beyond log(x) + ln2
    t = e.sub(x, 1.0)
    w_small = e.add(t, e.sqrt(e.fma(t, t, e.add(t, t))))
    w_mid = e.sub(e.sub(e.add(x, x), 1.0), e.div(1.0, e.add(x, e.sqrt(e.fma(x, x, -1.0)))))
    huge = e.gt(x, 2.0**28)
    w = e.select(e.le(x, 2.0), w_small, e.select(huge, t, w_mid))
    result = e.add(_log1p(e, w, precise), e.select(huge, _LN2, 0.0))
    return e.select(e.lt(x, 1.0), _NAN, result)


# f32 arguments in f64: the textbook formulas lose nothing that matters (1 +- a and x^2 - 1 = (x - 1)(x + 1) are
# exact or nearly, and the logarithm's argument stays away from 1 except where the result is ~a)


def _atanh32(e: _Emitter, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    result = e.mul(0.5, _log32(e, e.div(e.add(1.0, a), e.sub(1.0, a))))
    return e.copysign(e.select(e.lt(a, 2.0**-14), a, result), x)  # atanh a = a (1 + a^2/3 + ...)


def _asinh32(e: _Emitter, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    result = _log32(e, e.add(a, e.sqrt(e.fma(a, a, 1.0))))  # a^2 <= 2^256: no overflow
    return e.copysign(e.select(e.lt(a, 2.0**-14), a, result), x)  # asinh a = a (1 - a^2/6 + ...)


def _acosh32(e: _Emitter, x: ir.Value) -> ir.Value:
    result = _log32(e, e.add(x, e.sqrt(e.mul(e.sub(x, 1.0), e.add(x, 1.0)))))
    return e.select(e.lt(x, 1.0), _NAN, result)


_register("atanh", f64=lambda e, x: _atanh(e, x, True), f32=_atanh32)
_register("asinh", f64=lambda e, x: _asinh(e, x, True), f32=_asinh32)
_register("acosh", f64=lambda e, x: _acosh(e, x, True), f32=_acosh32)


# error function


def _erfc_large(e: _Emitter, a: ir.Value, precise: bool) -> ir.Value:
    """erfc(a) for a in [0.84375, 27.3] (f32 kernels: 10.1) as exp(-a^2) h(t) / (1 + 2a) with h a polynomial in
    t = (a - K) / (a + K): (1 + 2a) erfcx(a) is nearly flat in t, so the divisions' roundings barely matter.
    f64: h = h0 + (h(t) - h0) and exp(-a^2) as double-doubles, one double-double quotient, then the scaling."""
    if not precise:
        t = e.div(e.sub(a, _ERFC_K32), e.add(a, _ERFC_K32))
        erfcx = e.div(e.horner(t, _ERFC_H32), e.fma(a, 2.0, 1.0))
        return e.mul(_exp32(e, e.neg(e.mul(a, a))), erfcx)  # a^2 is exact for f32 a
    t = e.div(e.sub(a, _ERFC_K64), e.add(a, _ERFC_K64))
    hh, hl = _fast_two_sum(e, e.f(_ERFC_H64[0]), e.mul(t, e.horner(t, _ERFC_H64[1:])))
    hl = e.add(hl, _ERFC_H64_0_LO)
    square = e.mul(a, a)
    p = _exp_parts(e, e.select(e.gt(square, 746.0), -746.0, e.neg(square)), True, extra=e.fma(e.neg(a), a, square))
    mh, ml = _exp_mantissa_pair(e, p)
    nh = e.mul(mh, hh)
    nl = e.add(e.fma(mh, hh, e.neg(nh)), e.fma(mh, hl, e.mul(ml, hh)))
    dh, dl = _two_sum(e, e.f(1.0), e.add(a, a))
    return e.scale(_dd_div(e, nh, nl, dh, dl), p.k)


def _erf_small(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    """erf(x) - x for |x| < 0.84375."""
    return e.mul(x, e.horner(e.mul(x, x), _ERF_P64 if precise else _ERFC_SMALL_P32))


def _erf64(e: _Emitter, x: ir.Value) -> ir.Value:
    a = e.abs(x)
    small = e.add(a, _erf_small(e, a, True))
    large = e.sub(1.0, _erfc_large(e, e.select(e.gt(a, 6.0), 6.0, a), True))  # erf rounds to 1 beyond 5.93
    return e.copysign(e.select(e.lt(a, _ERF_SMALL), small, large), x)


def _erf32(e: _Emitter, x: ir.Value) -> ir.Value:
    # erf(a) = a P(a^2) / Q(a^2) on [0, 4] (relative error 1.3e-11); erf rounds to 1 in f32 beyond 3.92
    a = e.abs(x)
    a = e.select(e.gt(a, 4.0), 4.0, a)
    z = e.mul(a, a)
    return e.copysign(e.div(e.mul(a, e.horner(z, _ERF_P32)), e.horner(z, _ERF_Q32)), x)


def _erfc(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
    a = e.abs(x)
    # |x| < 0.84375: 1 - erf(x), as 1/2 - ((x - 1/2) + (erf(x) - x)) above 1/4 to keep the cancellation exact
    d = _erf_small(e, x, precise)
    sh, sl = _two_sum(e, e.sub(x, 0.5), d)
    small = e.select(e.lt(x, 0.25), e.sub(1.0, e.add(x, d)), e.sub(e.sub(0.5, sh), sl))
    # erfc underflows beyond 27.3 (f64) / 10.06 (f32)
    large = _erfc_large(e, e.select(e.gt(a, 28.0), 28.0, a), precise)
    large = e.select(e.lt(x, 0.0), e.sub(2.0, large), large)
    return e.select(e.lt(a, _ERF_SMALL), small, large)


_ERF_SMALL = 0.84375
_register("erf", f64=_erf64, f32=_erf32)
_register("erfc", f64=lambda e, x: _erfc(e, x, True), f32=lambda e, x: _erfc(e, x, False))


# roots and powers


def _sqrt(e: _Emitter, x: ir.Value) -> ir.Value:
    return e.sqrt(x)


def _rsqrt(e: _Emitter, x: ir.Value) -> ir.Value:
    return e.div(1.0, e.sqrt(x))


_register("sqrt", f64=_sqrt)
_register("rsqrt", f64=_rsqrt)


def _cbrt(e: _Emitter, x: ir.Value, precise: bool) -> ir.Value:
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
    y = e.mul(e.horner(m, _CBRT_P), e.select(e.eq(rem, 0.0), 1.0, e.select(e.eq(rem, 1.0), _CBRT2, _CBRT4)))
    y3 = e.mul(e.mul(y, y), y)
    y = e.mul(y, e.div(e.add(y3, e.add(t, t)), e.add(e.add(y3, y3), t)))
    if precise:
        y2 = e.mul(y, y)
        y2l = e.fma(y, y, e.neg(y2))
        y3 = e.mul(y2, y)
        y3l = e.fma(y2l, y, e.fma(y2, y, e.neg(y3)))
        residual = e.sub(e.sub(t, y3), y3l)  # t - y3 is exact (Sterbenz)
        y = e.add(y, e.div(residual, e.mul(3.0, y2)))
    scale = e.isub(e.b.fptosi(q, _I64), e.select(tiny, 18, 0))  # q is finite (exponent is)
    result = e.copysign(e.mul(y, e.pow2(scale)), x)
    special = e.or_(e.eq(a, 0.0), e.not_(e.lt(a, _INF)))  # 0, inf, NaN
    return e.select(special, x, result)


_register("cbrt", f64=lambda e, x: _cbrt(e, x, True), f32=lambda e, x: _cbrt(e, x, False))


def _pow_specials(e: _Emitter, x: ir.Value, y: ir.Value, magnitude: ir.Value) -> ir.Value:
    """C99 pow given |x|^y = magnitude for finite nonzero |x| and finite y."""
    ax, ay = e.abs(x), e.abs(y)
    magnitude = e.select(e.eq(ax, 0.0), e.select(e.lt(y, 0.0), _INF, 0.0), magnitude)
    magnitude = e.select(e.eq(ax, _INF), e.select(e.lt(y, 0.0), 0.0, _INF), magnitude)
    grows = e.b.icmp_unsigned("==", e.gt(ax, 1.0), e.gt(y, 0.0))
    magnitude = e.select(e.eq(ay, _INF), e.select(e.eq(ax, 1.0), 1.0, e.select(grows, _INF, 0.0)), magnitude)
    # negative x: an odd integer y keeps the sign, a non-integer y has no real result
    integer = e.eq(e.floor(y), y)
    half = e.mul(y, 0.5)
    odd = e.and_(integer, e.ne(e.floor(half), half))
    result = _flip_sign(e, magnitude, e.and_(odd, e.icmp("<", e.bits(x), 0)))
    finite_negative = e.and_(e.lt(x, 0.0), e.gt(x, -_INF))
    result = e.select(e.and_(finite_negative, e.not_(integer)), _NAN, result)
    result = e.select(e.or_(e.isnan(x), e.isnan(y)), _NAN, result)
    return e.select(e.or_(e.eq(y, 0.0), e.eq(x, 1.0)), 1.0, result)


def _pow64(e: _Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    # log|x| as a double-double (k ln2 + 2s + 2s^3/3 + s^5 Q(s^2), s = f / (2 + f) with its rounding error),
    # times y as a double-double, then exp of a double-double
    ax = e.abs(x)
    tiny = e.lt(ax, 2.0**-1022)
    ax = e.select(tiny, e.mul(ax, 2.0**54), ax)
    hx = e.iadd(e.bits(ax), 0x3FF0000000000000 - 0x3FE6A09E00000000)
    k = e.sub(e.itof(e.isub(e.ashr(hx, 52), 1023)), e.select(tiny, 54.0, 0.0))
    f = e.sub(e.from_bits(e.iadd(e.iand(hx, 0x000FFFFFFFFFFFFF), 0x3FE6A09E00000000)), 1.0)
    dh, dl = _fast_two_sum(e, e.f(2.0), f)
    sh = e.div(f, dh)
    sl = e.div(e.sub(e.fma(e.neg(sh), dh, f), e.mul(sh, dl)), dh)
    s2h = e.mul(sh, sh)
    s2l = e.fma(e.add(sh, sh), sl, e.fma(sh, sh, e.neg(s2h)))
    s3h = e.mul(s2h, sh)
    s3l = e.fma(s2h, sl, e.fma(s2l, sh, e.fma(s2h, sh, e.neg(s3h))))
    t3h = e.mul(s3h, _TWO_THIRDS_HI)
    t3l = e.fma(s3h, _TWO_THIRDS_LO, e.fma(s3l, _TWO_THIRDS_HI, e.fma(s3h, _TWO_THIRDS_HI, e.neg(t3h))))
    tail = e.mul(e.mul(s3h, s2h), e.horner(s2h, _POW_LOG_Q))
    lh, ll = _fast_two_sum(e, e.add(sh, sh), t3h)
    ll = e.add(ll, e.add(e.add(e.add(sl, sl), t3l), tail))
    gh, gl = _two_sum(e, e.mul(k, _LN2_HI), lh)
    gl = e.add(gl, e.fma(k, _LN2_LO, ll))
    gh, gl = _fast_two_sum(e, gh, gl)
    yh = e.mul(y, gh)
    yl = e.fma(y, gl, e.fma(y, gh, e.neg(yh)))
    yl = e.select(e.lt(e.abs(yh), 1000.0), yl, 0.0)  # yh may overflow (yl: NaN); exp saturates anyway
    p = _exp_parts(e, e.clamp(yh, -746.0, 710.0), True, extra=yl)
    magnitude = e.scale(_exp_mantissa(e, p, True), p.k)
    return _pow_specials(e, x, y, magnitude)


def _pow32(e: _Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    p = _log_parts(e, e.abs(x), False, False)
    log = e.fma(p.k, _LN2, e.add(e.sub(p.f, p.hfsq), p.sr))
    return _pow_specials(e, x, y, _exp32(e, e.mul(y, log)))


_register("powf", 2, f64=_pow64, f32=_pow32, aliases=("pow",))


# --- public API ---------------------------------------------------------------------------------------------------

MATH_OPS: tuple[str, ...] = tuple(sorted(_OPS))


def _type_suffix(type: ir.Type) -> str:
    if isinstance(type, ir.DoubleType):
        return "f64"
    if isinstance(type, ir.FloatType):
        return "f32"
    if isinstance(type, ir.HalfType):
        return "f16"
    if str(type) == "bfloat":  # llvmlite has no class for it; the CPU backend defines one
        return "bf16"
    raise UnimplementedError(f"math library: no functions on {type}")


def math_function(module: ir.Module, op: str, type: ir.Type) -> ir.Function:
    """The internal always-inline function computing `op` (a name of MATH_OPS, MLIR's math op names) on scalars
    of the float type `type`; created once per module, named `xlapy.<op>.<f64|f32|f16|bf16>`."""
    suffix = _type_suffix(type)
    name = f"xlapy.{op}.{suffix}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    spec = _OPS.get(op)
    if spec is None:
        raise UnimplementedError(f"math library: no function `{op}` (supported: {', '.join(MATH_OPS)})")
    fn = ir.Function(module, ir.FunctionType(type, [type] * spec.arity), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    e = _Emitter(builder)
    args = list(fn.args)
    if suffix == "f64":
        builder.ret(spec.f64(e, *args))
        return fn
    if suffix != "f32":  # 16-bit floats go through f32: both conversions are exact or single roundings
        args = [builder.fpext(a, _F32) for a in args]
    result = (spec.f32 or spec.f64)(e, *(builder.fpext(a, _F64) for a in args))
    result = builder.fptrunc(result, _F32)
    if suffix != "f32":
        result = builder.fptrunc(result, type)
    builder.ret(result)
    return fn


__all__ = ["MATH_OPS", "math_function"]
