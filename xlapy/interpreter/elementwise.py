"""Elementwise ops: one rule per opcode, each on whole arrays.

Narrow floats (bf16, f16, fp8) are computed in f32 and rounded back by the
evaluator after every op; integers wrap; division, remainder and shifts
follow XLA's rules where C leaves them undefined. Complex operands go to
XLA's formulas in ``complex_math.COMPLEX_RULES`` where it has the opcode."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from xlapy.interpreter.complex_math import COMPLEX_RULES
from xlapy.interpreter.numerics import convert, dtype_of, type_of, widen
from xlapy.interpreter.registry import rule
from xlapy.interpreter.xla_cpu_math import exp_f32, tanh_f32
from xlapy.shapes import ELEMENT_TYPES, TypeKind


def _on_widened(opcode: str, function, arity: int):
    """The rule applying ``function`` to the widened operands, or XLA's complex formula to complex ones."""
    complex_function = COMPLEX_RULES.get(opcode)

    def apply(instr, operands, ev):
        args = [widen(o) for o in operands[:arity]]
        if complex_function is not None and args[0].dtype.kind == "c":
            return complex_function(*args)
        return function(*args)

    return apply


def _unary(*opcodes: str):
    """Register ``function(x)`` (on widened values) as the rule of ``opcodes``."""

    def register(function):
        for opcode in opcodes:
            rule(opcode)(_on_widened(opcode, function, 1))
        return function

    return register


def _binary(*opcodes: str):
    def register(function):
        for opcode in opcodes:
            rule(opcode)(_on_widened(opcode, function, 2))
        return function

    return register


def _rounded_once(function):
    """``function`` evaluated on f32 values in f64 and rounded once, so that the
    oracle is (nearly) correctly rounded rather than as good as numpy's f32 libm."""

    def accurate(*args: np.ndarray) -> np.ndarray:
        if args[0].dtype != np.float32:
            return function(*args)
        return function(*(a.astype(np.float64) for a in args)).astype(np.float32)

    return accurate


for _opcode, _ufunc in {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "atan2": _rounded_once(np.arctan2),
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}.items():
    _binary(_opcode)(_ufunc)

for _opcode, _ufunc in {
    "ceil": np.ceil, "floor": np.floor, "round-nearest-even": np.rint, "sqrt": np.sqrt,
    "is-finite": np.isfinite, "real": np.real, "imag": np.imag, "negate": np.negative, "copy": np.copy,
}.items():
    _unary(_opcode)(_ufunc)

for _opcode, _ufunc in {
    "exponential-minus-one": np.expm1, "log": np.log, "log-plus-one": np.log1p,
    "sine": np.sin, "cosine": np.cos, "tan": np.tan,
}.items():
    _unary(_opcode)(_rounded_once(_ufunc))


@_unary("cbrt")
def _cbrt(x: np.ndarray) -> np.ndarray:
    # numpy's f64 cbrt is SVML's on AVX-512 hosts (within 1 ulp) and the C library's elsewhere (glibc's is up to 3
    # ulps off): evaluated in long double (a 64-bit significand on x86) and rounded once, it is nearly correctly
    # rounded on every host. f32: the f64 value rounded once.
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    return np.cbrt(x.astype(wide)).astype(x.dtype)


# f32 (and the narrow floats, computed in f32) as XLA:CPU computes them; f64 numpy's (nearly correctly rounded)
@_unary("tanh")
def _tanh(x: np.ndarray) -> np.ndarray:
    return tanh_f32(x) if x.dtype == np.float32 else np.tanh(x)


@_unary("exponential")
def _exponential(x: np.ndarray) -> np.ndarray:
    return exp_f32(x) if x.dtype == np.float32 else np.exp(x)


@_unary("abs")
def _abs(x: np.ndarray) -> np.ndarray:
    return np.abs(x)


@_unary("rsqrt")
def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


@_unary("logistic")
@_rounded_once
def _logistic(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_erf = np.frompyfunc(math.erf, 1, 1)


@_unary("erf")
def _erf_rule(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(x.astype(np.float64)), np.float64)


@_unary("sign")
def _sign(x: np.ndarray) -> np.ndarray:
    # sign(±0) is ±0 and sign(NaN) is NaN.
    return np.where(x == 0, x, np.sign(x))


@_unary("round-nearest-afz")
def _round_half_away_from_zero(x: np.ndarray) -> np.ndarray:
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


@_unary("not")
def _not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _as_unsigned(x: np.ndarray, bits: int) -> np.ndarray:
    """The two's-complement bit pattern of integer ``x`` as uint64."""
    return x.astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1) if bits < 64 else x.view(np.uint64)


def _bit_width(operands) -> int:
    return type_of(operands[0]).bit_width


@rule("popcnt")
def _popcnt(instr, operands, ev) -> np.ndarray:
    return np.bitwise_count(_as_unsigned(widen(operands[0]), _bit_width(operands)))


@rule("count-leading-zeros")
def _clz(instr, operands, ev) -> np.ndarray:
    bits = _bit_width(operands)
    value = _as_unsigned(widen(operands[0]), bits)
    length = np.zeros(value.shape, np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        high = (value >> np.uint64(step)) != 0
        length += np.where(high, step, 0)
        value = np.where(high, value >> np.uint64(step), value)
    length += (value != 0).astype(np.int64)
    return bits - length


# -- binary ops with XLA-specific corner cases ------------------------------------------


def _ieee_extremum(ufunc: np.ufunc, prefer_negative_zero: bool):
    """maximum/minimum as XLA computes them: NaN propagates and -0 < +0."""

    def extremum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        result = ufunc(a, b)
        if result.dtype.kind == "f":
            negative_first = np.signbit(a) == prefer_negative_zero
            result = np.where(a == b, np.where(negative_first, a, b), result)
        return result

    return extremum


_maximum = _binary("maximum")(_ieee_extremum(np.maximum, prefer_negative_zero=False))
_minimum = _binary("minimum")(_ieee_extremum(np.minimum, prefer_negative_zero=True))


def _integer_division_parts(a: np.ndarray, b: np.ndarray):
    """Masks of XLA's special cases (b == 0; INT_MIN / -1) and a divisor safe to use."""
    by_zero = b == 0
    overflow = np.zeros(np.broadcast(a, b).shape, bool)
    if a.dtype.kind == "i":
        # Sub-byte types arrive widened; their INT_MIN / -1 wraps back to INT_MIN.
        overflow = (a == np.iinfo(a.dtype).min) & (b == -1)
    safe = np.where(by_zero | overflow, 1, b).astype(b.dtype)
    return by_zero, overflow, safe


def _truncating_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    quotient = a // b
    # numpy floors; C (and XLA) truncates toward zero.
    inexact = (quotient * b != a) & ((a < 0) != (b < 0))
    return quotient + inexact.astype(quotient.dtype)


@_binary("divide")
def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return a / b
    by_zero, overflow, safe = _integer_division_parts(a, b)
    quotient = _truncating_divide(a, safe)
    # x / 0 is -1 (all bits set); INT_MIN / -1 is INT_MIN.
    minus_one = np.array(-1).astype(a.dtype) if a.dtype.kind == "i" else np.array(np.iinfo(a.dtype).max, a.dtype)
    return np.where(by_zero, minus_one, np.where(overflow, a, quotient))


@rule("remainder")
def _remainder(instr, operands, ev) -> np.ndarray:
    a, b = widen(operands[0]), widen(operands[1])
    if a.dtype.kind in "f":
        return np.fmod(a, b)
    by_zero, overflow, safe = _integer_division_parts(a, b)
    # x % 0 is x; INT_MIN % -1 is 0.
    return np.where(by_zero, a, np.where(overflow, 0, a - _truncating_divide(a, safe) * safe))


@rule("power")
def _power(instr, operands, ev) -> np.ndarray:
    a, b = widen(operands[0]), widen(operands[1])
    if a.dtype.kind == "f":
        return _rounded_once(np.power)(a, b)
    if a.dtype.kind == "c":
        return COMPLEX_RULES["power"](a, b)
    # XLA squares six times (exponents past 63 overflow anyway), so only the
    # exponent's low six bits count. A negative exponent (as a signed number,
    # even for unsigned types) gives 1 for base 1, ±1 for base -1, else 0.
    bits = _bit_width(operands[1:])
    exponent = _as_unsigned(b, bits)
    result, base = np.ones_like(a), a.copy()
    for i in range(6):
        result = np.where((exponent >> np.uint64(i)) & np.uint64(1) == 1, result * base, result)
        base = base * base
    negative = exponent >= np.uint64(1 << (bits - 1))  # a signed comparison, even for unsigned types
    all_ones = _as_unsigned(a, bits) == np.uint64((1 << bits) - 1)
    odd = (exponent & np.uint64(1)) == 1
    reciprocal = np.where(a == 1, 1, np.where(all_ones, np.where(odd, a, 1), 0)).astype(a.dtype)
    return np.where(negative, reciprocal, result)


def _shift_parts(instr, operands):
    bits = _bit_width(operands)
    a, amount = widen(operands[0]), widen(operands[1])
    # The amount is read as unsigned: negative amounts are past the width too.
    too_far = _as_unsigned(amount, bits) >= np.uint64(bits)
    safe = np.where(too_far, 0, amount).astype(np.int64).astype(np.uint64)
    return bits, a, too_far, safe


@rule("shift-left")
def _shift_left(instr, operands, ev) -> np.ndarray:
    bits, a, too_far, safe = _shift_parts(instr, operands)
    return np.where(too_far, 0, _as_unsigned(a, bits) << safe)


@rule("shift-right-logical")
def _shift_right_logical(instr, operands, ev) -> np.ndarray:
    bits, a, too_far, safe = _shift_parts(instr, operands)
    return np.where(too_far, 0, _as_unsigned(a, bits) >> safe)


@rule("shift-right-arithmetic")
def _shift_right_arithmetic(instr, operands, ev) -> np.ndarray:
    bits, a, too_far, safe = _shift_parts(instr, operands)
    signed = a.astype(np.int64)
    if type_of(operands[0]).kind is TypeKind.UNSIGNED and bits == 64:
        signed = a.view(np.int64)
    elif type_of(operands[0]).kind is TypeKind.UNSIGNED:
        signed = np.where(signed >= 1 << (bits - 1), signed - (1 << bits), signed)
    return np.where(too_far, np.where(signed < 0, -1, 0), signed >> safe.astype(np.int64))


@rule("complex")
def _complex(instr, operands, ev) -> np.ndarray:
    real, imag = np.broadcast_arrays(widen(operands[0]), widen(operands[1]))
    # Assigned part by part: arithmetic would lose the sign of zeros.
    result = np.empty(real.shape, dtype_of(instr.shape.element_type))
    result.real, result.imag = real, imag
    return result


_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
               "GT": np.greater, "GE": np.greater_equal}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """An integer key whose order is IEEE totalOrder on the bit patterns of floats:
    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN, distinct NaNs distinct.

    Keys come from the bits, never from a conversion (which would merge NaN
    payloads). The fnuz types have no -0: their one NaN, 0x80, sorts below every
    number, and f8e8m0fnu has no sign bit, so its bits are ordered as unsigned,
    as XLA:CPU orders them after ``ComparisonExpander``
    (``xla/hlo/transforms/expanders/comparison_expander.cc``)."""
    element = type_of(x)
    if element.dtype.itemsize > 1:
        bits = element.dtype.itemsize * 8
        signed = x.view({16: np.int16, 32: np.int32, 64: np.int64}[bits]).astype(np.int64)
        return np.where(signed < 0, signed ^ ((1 << (bits - 1)) - 1), signed)
    # 1-byte storage; f4e2m1fn uses its low 4 bits.
    raw = x.view(np.uint8).astype(np.int64) & ((1 << element.bit_width) - 1)
    if element.name == "f8e8m0fnu":
        return raw
    sign_bit = 1 << (element.bit_width - 1)
    magnitude = raw & (sign_bit - 1)
    if element.name.endswith("fnuz"):  # the sign bit alone is the NaN
        return np.where(raw & sign_bit, np.where(magnitude == 0, -sign_bit, -magnitude), magnitude)
    return np.where(raw & sign_bit, -magnitude - 1, magnitude)  # -0 just below +0


@rule("compare")
def _compare(instr, operands, ev) -> np.ndarray:
    a, b = np.asarray(operands[0]), np.asarray(operands[1])
    direction = _DIRECTIONS[instr.attr("direction")]
    if instr.attr("type") == "TOTALORDER" and type_of(a).kind is TypeKind.FLOAT:
        return direction(total_order_key(a), total_order_key(b))
    return direction(widen(a), widen(b))


@rule("select")
def _select(instr, operands, ev) -> np.ndarray:
    return np.where(operands[0], operands[1], operands[2])


@rule("clamp")
def _clamp(instr, operands, ev) -> np.ndarray:
    low, x, high = (widen(o) for o in operands)
    return _minimum(_maximum(x, low), high)


@rule("convert")
def _convert(instr, operands, ev) -> np.ndarray:
    return convert(operands[0], dtype_of(instr.shape.element_type))


@rule("stablehlo.convert")
def _stablehlo_convert(instr, operands, ev) -> np.ndarray:
    # From complex to real numbers: the real part.
    return convert(np.real(operands[0]), dtype_of(instr.shape.element_type))


@rule("bitcast-convert")
def _bitcast_convert(instr, operands, ev) -> np.ndarray:
    # ascontiguousarray turns 0-d values into shape (1,); the reshape restores ().
    value = np.ascontiguousarray(operands[0]).reshape(np.shape(operands[0]))
    target = dtype_of(instr.shape.element_type)
    # Shapes follow the value rather than the instruction, so the rule also
    # works on the arrays a scalar computation is applied to.
    if target.itemsize < value.dtype.itemsize:
        # Through a minor dimension of 1: numpy cannot change the item size of a 0-d array.
        parts = value.dtype.itemsize // target.itemsize
        return value.reshape(*value.shape, 1).view(target).reshape(*value.shape, parts)
    if target.itemsize > value.dtype.itemsize:
        return value.reshape(*value.shape[:-1], -1).view(target).reshape(value.shape[:-1])
    return value.view(target)


@rule("map")
def _map(instr, operands, ev):
    # The computation runs on whole arrays; one that ignores its parameters (a constant) gives a scalar,
    # which every element of the map's result takes. The operands' shape, not the instruction's: a map nested in
    # a mapped computation is applied to the outer map's arrays too.
    result = np.asarray(ev.call(instr.called_computations[0], *operands))
    return np.broadcast_to(result, np.shape(operands[0])).copy()


# -- reduce-precision ------------------------------------------------------------------

_FLOAT_FORMATS = {np.dtype(np.float64): (11, 52, np.uint64), np.dtype(np.float32): (8, 23, np.uint32),
                  np.dtype(np.float16): (5, 10, np.uint16)}


@rule("reduce-precision")
def _reduce_precision(instr, operands, ev) -> np.ndarray:
    value = np.asarray(operands[0])
    exponent_bits, mantissa_bits = instr.attr("exponent_bits"), instr.attr("mantissa_bits")
    info = ml_dtypes.finfo(value.dtype)
    has_infinity = bool(np.isinf(np.array(np.inf).astype(value.dtype)))
    # Nothing to round away; types without infinities still overflow to NaN.
    if exponent_bits >= info.nexp and mantissa_bits >= info.nmant and has_infinity:
        return value
    if value.dtype not in _FLOAT_FORMATS:  # bf16 and the fp8 types: exact in f32
        value = value.astype(np.float32)
    return reduce_precision(value, exponent_bits, mantissa_bits)


def reduce_precision(value: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """Round ``value`` to a float with the given exponent and mantissa widths
    (nearest even; overflow to ±inf, underflow to ±0, NaN kept, as XLA does)."""
    source_exponent, source_mantissa, uint = _FLOAT_FORMATS[value.dtype]
    bits = value.view(uint).astype(np.uint64)
    if mantissa_bits < source_mantissa:
        shift = source_mantissa - mantissa_bits
        last_bit = np.uint64(1 << shift)
        bias = ((bits & last_bit) >> np.uint64(shift)) + np.uint64((1 << (shift - 1)) - 1)
        bits = (bits + bias) & ~np.uint64((1 << shift) - 1)
    if exponent_bits < source_exponent:
        exponent_mask = np.uint64(((1 << source_exponent) - 1) << source_mantissa)
        sign = bits & np.uint64(1 << (source_exponent + source_mantissa))
        source_bias = (1 << (source_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exponent_mask
        overflows = exponent > np.uint64((source_bias + reduced_bias) << source_mantissa)
        underflows = exponent <= np.uint64((source_bias - reduced_bias) << source_mantissa)
        bits = np.where(overflows, sign | exponent_mask, np.where(underflows, sign, bits))
    width = np.uint64((1 << (1 + source_exponent + source_mantissa)) - 1)
    result = (bits & width).astype(uint).view(value.dtype)
    # NaN stays NaN, also with no mantissa bit left, as XLA's reducePrecision (mhlo/transforms/
    # transformation_helpers.h) that XLA:CPU runs (the older EmitReducePrecisionIR gave inf or 0 there).
    return np.where(np.isnan(value), value, result)


@rule("stochastic-convert")
def _stochastic_convert(instr, operands, ev) -> np.ndarray:
    """Float → integer rounding the magnitude up when the random bits fall
    below the fraction scaled to their width; saturating, NaN → 0."""
    value, random = widen(operands[0]).astype(np.float64), np.asarray(operands[1])
    bits = ELEMENT_TYPES[instr.operands[1].shape.element_type].bit_width  # u4 and u2 are stored in bytes
    magnitude = np.abs(value)
    whole = np.floor(magnitude)
    # Compared as integers: u64 bits lose their low bits in float64. The scaled
    # fraction is below 2^bits and exact; NaN/inf (fraction NaN) give NaN anyway.
    scaled = np.floor((magnitude - whole) * float(1 << bits))
    threshold = np.where(np.isnan(scaled), 0.0, scaled).astype(random.dtype)
    rounded = whole + (random < threshold)
    return convert(np.copysign(rounded, value), dtype_of(instr.shape.element_type))
