"""Complex arithmetic on the real and imaginary parts, as arith and math ops on floats: the formulas shared by
the elemental rules of complex instructions (``elemental_complex``) and by ``lower-complex``, which computes every
op of the ``complex`` dialect with them (its docstring says which formula each op follows and why)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, FloatAttr
from xdsl.ir import Attribute, Operation, SSAValue

Pair = tuple[SSAValue, SSAValue]


class Parts:
    """Builds arith and math ops on floats of the type ``type_``; ``insert`` places each op and returns it."""

    def __init__(self, insert: Callable[[Operation], Operation], type_: Attribute):
        self.insert = insert
        self.type = type_

    def value(self, op: Operation) -> SSAValue:
        return self.insert(op).results[0]

    def constant(self, number: float) -> SSAValue:
        return self.value(arith.ConstantOp(FloatAttr(number, self.type)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.DivfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.value(arith.NegfOp(a))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self.value(math.FmaOp(a, b, c))

    def abs(self, a: SSAValue) -> SSAValue:
        return self.value(math.AbsFOp(a))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.value(math.SqrtOp(a))

    def copysign(self, magnitude: SSAValue, sign: SSAValue) -> SSAValue:
        return self.value(math.CopySignOp(magnitude, sign))

    def compare(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.CmpfOp(a, b, predicate))

    def is_finite(self, a: SSAValue) -> SSAValue:
        return self.compare("one", self.abs(a), self.constant(float("inf")))

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.SelectOp(condition, a, b))

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.AndIOp(a, b))

    def either(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.OrIOp(a, b))


# --- the formulas ---


def product(p: Parts, a: Pair, b: Pair) -> Pair:
    """XLA:CPU's complex multiplication: (ar br - ai bi, ai br + ar bi) with the sums contracted."""
    (ar, ai), (br, bi) = a, b
    return p.fma(ar, br, p.neg(p.mul(ai, bi))), p.fma(ai, br, p.mul(ar, bi))


def quotient(p: Parts, a: Pair, b: Pair) -> Pair:
    """HLO's complex divide as XLA:CPU computes it: Smith's algorithm with fused multiply-adds, and XLA's results
    where it gives NaN in both parts."""
    (ar, ai), (br, bi) = a, b
    ratio = p.div(br, bi)
    denominator = p.fma(ratio, br, bi)
    by_imag = p.div(p.fma(ar, ratio, ai), denominator), p.div(p.fma(ai, ratio, p.neg(ar)), denominator)
    ratio = p.div(bi, br)
    denominator = p.fma(ratio, bi, br)
    by_real = p.div(p.fma(ai, ratio, ar), denominator), p.div(p.fma(p.neg(ar), ratio, ai), denominator)
    real_smaller = p.compare("olt", p.abs(br), p.abs(bi))
    real, imag = (p.select(real_smaller, i, r) for i, r in zip(by_imag, by_real))

    one, zero, inf = p.constant(1.0), p.constant(0.0), p.constant(float("inf"))

    def is_inf(x: SSAValue) -> SSAValue:
        return p.compare("oeq", p.abs(x), inf)

    def is_nan(x: SSAValue) -> SSAValue:
        return p.compare("uno", x, x)

    def unit(x: SSAValue) -> SSAValue:  # ±1 where x is infinite, else ±0, with x's sign
        return p.copysign(p.select(is_inf(x), one, zero), x)

    finite_dividend = p.both(p.is_finite(ar), p.is_finite(ai))
    finite_divisor = p.both(p.is_finite(br), p.is_finite(bi))
    zero_divisor = p.both(p.both(p.compare("oeq", br, zero), p.compare("oeq", bi, zero)),
                          p.either(p.compare("ord", ar, ar), p.compare("ord", ai, ai)))
    signed_inf = p.copysign(inf, br)
    (ar_unit, ai_unit), (br_unit, bi_unit) = (unit(ar), unit(ai)), (unit(br), unit(bi))
    cases = [  # by priority, lowest first
        (p.both(finite_dividend, p.either(is_inf(br), is_inf(bi))),
         p.mul(zero, p.add(p.mul(ar, br_unit), p.mul(ai, bi_unit))),
         p.mul(zero, p.sub(p.mul(ai, br_unit), p.mul(ar, bi_unit)))),
        (p.both(p.either(is_inf(ar), is_inf(ai)), finite_divisor),
         p.mul(inf, p.add(p.mul(ar_unit, br), p.mul(ai_unit, bi))),
         p.mul(inf, p.sub(p.mul(ai_unit, br), p.mul(ar_unit, bi)))),
        (zero_divisor, p.mul(signed_inf, ar), p.mul(signed_inf, ai)),
    ]
    smith_failed = p.both(is_nan(real), is_nan(imag))
    special_real, special_imag = real, imag
    for condition, case_real, case_imag in cases:
        special_real = p.select(condition, case_real, special_real)
        special_imag = p.select(condition, case_imag, special_imag)
    return p.select(smith_failed, special_real, real), p.select(smith_failed, special_imag, imag)


def larger_and_smaller(p: Parts, z: Pair) -> tuple[SSAValue, SSAValue]:
    """The larger and the smaller magnitude of the parts (NaN if either is NaN)."""
    re, im = p.abs(z[0]), p.abs(z[1])
    return p.value(arith.MaximumfOp(re, im)), p.value(arith.MinimumfOp(re, im))


def one_plus_square(p: Parts, larger: SSAValue, smaller: SSAValue) -> SSAValue:
    """1 + (smaller / larger)^2, rounded once."""
    ratio = p.div(smaller, larger)
    return p.fma(ratio, ratio, p.constant(1.0))


def magnitude(p: Parts, z: Pair) -> SSAValue:
    """XLA's |z|: larger * sqrt(1 + (smaller / larger)^2), or smaller where that is NaN (zeros, two infinities)."""
    larger, smaller = larger_and_smaller(p, z)
    value = p.mul(larger, p.sqrt(one_plus_square(p, larger, smaller)))
    return p.select(p.compare("uno", value, value), smaller, value)


def real_rsqrt(p: Parts, x: SSAValue) -> SSAValue:
    return p.div(p.constant(1.0), p.sqrt(x))


def _split(p: Parts, x: SSAValue) -> Pair:
    """Veltkamp's split of x into two halves of its significand (their products are exact)."""
    bits = 24 if isinstance(p.type, Float32Type) else 53
    scaled = p.mul(x, p.constant(float(2 ** ((bits + 1) // 2) + 1)))
    high = p.add(scaled, p.sub(x, scaled))
    return high, p.sub(x, high)


def square_error(p: Parts, x: SSAValue, square: SSAValue) -> SSAValue:
    """x * x - square exactly, ``square`` being x * x rounded (Dekker)."""
    high, low = _split(p, x)
    cross = p.mul(high, low)
    error = p.add(p.add(p.add(p.neg(square), p.mul(high, high)), cross), cross)
    return p.add(error, p.mul(low, low))


def sum_error(p: Parts, total: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
    """a + b - total exactly, ``total`` being a + b rounded (Knuth's two-sum)."""
    b_part = p.sub(total, a)
    return p.add(p.sub(a, p.sub(total, b_part)), p.sub(b, b_part))
