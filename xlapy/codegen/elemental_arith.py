"""Elemental rules of the arithmetic opcodes: one entry per opcode in
``ELEMENTAL``, with the semantics of xlapy's interpreter (which follows
XLA's): integer division by zero gives -1 (all bits set), ``INT_MIN / -1`` is
``INT_MIN``, ``x % 0`` is ``x``; shifts past the width give 0 (or the sign);
float→int conversion truncates and saturates with NaN → 0; maximum/minimum
propagate NaN. Narrow floats (bf16, f16) are computed in their own type, which
the backend performs in f32 with a rounding after every op, as XLA does. The
8- and 4-bit floats (f8e4m3fn, f8e5m2, ... f4e2m1fn) are extended to f32
(``arith.extf``) before each op and its result rounded back (``arith.truncf``),
as XLA and the interpreter (ml_dtypes) compute them; sub-byte integers are
computed in their own width (i2, i4), wrapping as the interpreter does.
Instructions on complex numbers have their rules in ``elemental_complex``.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerType
from xdsl.ir import Attribute, SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, elemental_rule
from xlapy.codegen.mlir_dialects import LogisticOp, RemFOp
from xlapy.codegen.types import compute_type, element_type, is_float, is_narrow_float, is_unsigned
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction


def _type_name(instr: HloInstruction, k: int = 0) -> str:
    """The element type operand ``k`` is computed in (f32 for the 8- and 4-bit floats)."""
    return compute_type(instr.operands[k].shape.element_type)


def _elementwise(*opcodes: str, in_f32: bool = True):
    """Registers ``build(em, instr, operand values) -> value`` for ``opcodes``. With ``in_f32``, operands of the
    8- and 4-bit float types are extended to f32 first and a float result of such a type is rounded back."""

    def register(build: Callable[[FunctionEmitter, HloInstruction, list[SSAValue]], SSAValue]):
        def rule_(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
            operands = [em.emit(op, indices if op.shape.dimensions else ()) for op in instr.operands]
            if not in_f32:
                return build(em, instr, operands)
            operands = [em.insert(arith.ExtFOp(value, Float32Type())).result
                        if is_narrow_float(op.shape.element_type) else value
                        for op, value in zip(instr.operands, operands)]
            result = build(em, instr, operands)
            if is_narrow_float(instr.shape.element_type) and result.type == Float32Type():
                result = em.insert(arith.TruncFOp(result, element_type(instr.shape.element_type))).result
            return result

        for opcode in opcodes:
            elemental_rule(opcode)(rule_)
        return build

    return register


def _by_kind(float_op=None, signed_op=None, unsigned_op=None, pred_op=None):
    """A binary or unary op chosen by the operand's element type."""

    def build(em: FunctionEmitter, instr: HloInstruction, operands: list[SSAValue]) -> SSAValue:
        name = _type_name(instr)
        if is_float(name):
            op = float_op
        elif name == "pred":
            op = pred_op
        else:
            op = unsigned_op if is_unsigned(name) else signed_op
        if op is None:
            raise UnimplementedError(f"{instr.opcode} ({instr.name}) on {name} is not supported")
        return em.insert(op(*operands)).results[0]

    return build


for _opcode, _ops in {
    # pred: add is or and multiply is and, as XLA:CPU computes them; subtract has no pred form (the interpreter's
    # element kinds refuse it too).
    "add": (arith.AddfOp, arith.AddiOp, arith.AddiOp, arith.OrIOp),
    "subtract": (arith.SubfOp, arith.SubiOp, arith.SubiOp, None),
    "multiply": (arith.MulfOp, arith.MuliOp, arith.MuliOp, arith.AndIOp),
    "maximum": (arith.MaximumfOp, arith.MaxSIOp, arith.MaxUIOp, arith.OrIOp),
    "minimum": (arith.MinimumfOp, arith.MinSIOp, arith.MinUIOp, arith.AndIOp),
    "and": (None, arith.AndIOp, arith.AndIOp, arith.AndIOp),
    "or": (None, arith.OrIOp, arith.OrIOp, arith.OrIOp),
    "xor": (None, arith.XOrIOp, arith.XOrIOp, arith.XOrIOp),
    "atan2": (math.Atan2Op, None, None, None),
}.items():
    _elementwise(_opcode)(_by_kind(*_ops))

for _opcode, _op in {
    "exponential": math.ExpOp, "exponential-minus-one": math.ExpM1Op, "log": math.LogOp,
    "log-plus-one": math.Log1pOp, "sine": math.SinOp, "cosine": math.CosOp, "tan": math.TanOp,
    "tanh": math.TanhOp, "erf": math.ErfOp, "cbrt": math.CbrtOp, "sqrt": math.SqrtOp, "floor": math.FloorOp,
    "ceil": math.CeilOp, "round-nearest-even": math.RoundEvenOp, "round-nearest-afz": math.RoundOp,
}.items():
    _elementwise(_opcode)(_by_kind(float_op=_op))


def _const_like(em: FunctionEmitter, value: float | int, name: str) -> SSAValue:
    return em.constant(value, name)


@_elementwise("negate")
def _negate(em, instr, operands):
    name = _type_name(instr)
    if is_float(name):
        return em.insert(arith.NegfOp(operands[0])).result
    return em.insert(arith.SubiOp(_const_like(em, 0, name), operands[0])).result


@_elementwise("abs")
def _abs(em, instr, operands):
    name = _type_name(instr)
    if is_float(name):
        return em.insert(math.AbsFOp(operands[0])).result
    if is_unsigned(name):
        return operands[0]
    return em.insert(math.AbsIOp(operands[0])).result


@_elementwise("sign")
def _sign(em, instr, operands):
    (x,) = operands
    name = _type_name(instr)
    if is_float(name):
        # sign(±0) = ±0 and sign(NaN) = NaN: keep x unless it is a nonzero number.
        one = em.insert(math.CopySignOp(_const_like(em, 1.0, name), x)).result
        keep = em.insert(arith.CmpfOp(x, _const_like(em, 0.0, name), "ueq")).result
        return em.insert(arith.SelectOp(keep, x, one)).result
    zero = _const_like(em, 0, name)
    positive = em.insert(arith.CmpiOp(x, zero, "ugt" if is_unsigned(name) else "sgt")).result
    as_int = em.insert(arith.ExtUIOp(positive, x.type)).result
    if is_unsigned(name):
        return as_int
    negative = em.insert(arith.CmpiOp(x, zero, "slt")).result
    minus = em.insert(arith.ExtUIOp(negative, x.type)).result
    return em.insert(arith.SubiOp(as_int, minus)).result


@_elementwise("real")
def _real(em, instr, operands):
    return operands[0]  # of a real number (complex numbers have their own rule)


@_elementwise("imag")
def _imag(em, instr, operands):
    return _const_like(em, 0.0, _type_name(instr))


@_elementwise("not")
def _not(em, instr, operands):
    name = _type_name(instr)
    return em.insert(arith.XOrIOp(operands[0], _const_like(em, 1 if name == "pred" else -1, name))).result


@_elementwise("popcnt")
def _popcnt(em, instr, operands):
    return em.insert(math.CtPopOp(operands[0])).result


@_elementwise("count-leading-zeros")
def _clz(em, instr, operands):
    return em.insert(math.CountLeadingZerosOp(operands[0])).result


@_elementwise("rsqrt")
def _rsqrt(em, instr, operands):
    # 1 / sqrt(x), two roundings, as the interpreter computes it.
    root = em.insert(math.SqrtOp(operands[0])).result
    return em.insert(arith.DivfOp(_const_like(em, 1.0, _type_name(instr)), root)).result


@_elementwise("is-finite")
def _is_finite(em, instr, operands):
    magnitude = em.insert(math.AbsFOp(operands[0])).result
    return em.insert(arith.CmpfOp(magnitude, _const_like(em, float("inf"), _type_name(instr)), "one")).result


_WIDER = {"bf16": Float32Type, "f16": Float32Type, "f32": Float64Type}


def _in_wider_type(em: FunctionEmitter, instr: HloInstruction, operands: list[SSAValue],
                   body: Callable[[list[SSAValue]], SSAValue]) -> SSAValue:
    """``body`` (a formula of several roundings) computed in a wider type and
    rounded once at the end, like the interpreter's single rounding: f32 for
    bf16/f16, f64 for f32."""
    wider = _WIDER.get(_type_name(instr))
    if wider is None:
        return body(operands)
    wide = [em.insert(arith.ExtFOp(x, wider())).result for x in operands]
    return em.insert(arith.TruncFOp(body(wide), operands[0].type)).result


@_elementwise("logistic")
def _logistic(em, instr, operands):
    if _type_name(instr) == "f64":
        return _logistic_f64(em, operands[0])

    def body(values: list[SSAValue]) -> SSAValue:
        (x,) = values
        type_name = {Float64Type(): "f64", Float32Type(): "f32"}.get(x.type, _type_name(instr))
        one = _const_like(em, 1.0, type_name)
        minus_x = em.insert(arith.NegfOp(x)).result
        denominator = em.insert(arith.AddfOp(one, em.insert(math.ExpOp(minus_x)).result)).result
        return em.insert(arith.DivfOp(one, denominator)).result

    return _in_wider_type(em, instr, operands, body)


def _logistic_f64(em: FunctionEmitter, x: SSAValue) -> SSAValue:
    """f64 logistic as one ``math.logistic``: the math library computes the interpreter's 1 / (1 + exp(-x)) with
    exp(-x) known to a fraction of an ulp, so that it rounds as the interpreter does (within 1 ulp where
    numpy's exp may round either way). The same formula of f64 ops would land 2 ulps away where exps differ."""
    return em.insert(LogisticOp(x)).result


@_elementwise("divide")
def _divide(em, instr, operands):
    name = _type_name(instr)
    a, b = operands
    if is_float(name):
        return em.insert(arith.DivfOp(a, b)).result
    by_zero, overflow, safe = _division_parts(em, name, a, b)
    quotient = em.insert((arith.DivUIOp if is_unsigned(name) else arith.DivSIOp)(a, safe)).result
    result = em.insert(arith.SelectOp(overflow, a, quotient)).result if overflow is not None else quotient
    return em.insert(arith.SelectOp(by_zero, _const_like(em, -1, name), result)).result


@_elementwise("remainder")
def _remainder(em, instr, operands):
    name = _type_name(instr)
    a, b = operands
    if is_float(name):
        return em.insert(RemFOp(a, b)).result
    by_zero, overflow, safe = _division_parts(em, name, a, b)
    rest = em.insert((arith.RemUIOp if is_unsigned(name) else arith.RemSIOp)(a, safe)).result
    if overflow is not None:
        rest = em.insert(arith.SelectOp(overflow, _const_like(em, 0, name), rest)).result
    return em.insert(arith.SelectOp(by_zero, a, rest)).result


def _division_parts(em: FunctionEmitter, name: str, a: SSAValue, b: SSAValue):
    """(b == 0, INT_MIN / -1 or None for unsigned types, a divisor safe to use)."""
    zero = _const_like(em, 0, name)
    by_zero = em.insert(arith.CmpiOp(b, zero, "eq")).result
    unsafe = by_zero
    overflow = None
    if not is_unsigned(name):
        width = a.type.width.data
        is_min = em.insert(arith.CmpiOp(a, _const_like(em, -(1 << (width - 1)), name), "eq")).result
        is_minus_one = em.insert(arith.CmpiOp(b, _const_like(em, -1, name), "eq")).result
        overflow = em.insert(arith.AndIOp(is_min, is_minus_one)).result
        unsafe = em.insert(arith.OrIOp(by_zero, overflow)).result
    safe = em.insert(arith.SelectOp(unsafe, _const_like(em, 1, name), b)).result
    return by_zero, overflow, safe


def _shift(kind: str):
    def build(em, instr, operands):
        name = _type_name(instr)
        a, amount = operands
        width = a.type.width.data
        # The amount is read as unsigned: negative amounts are past the width too.
        too_far = em.insert(arith.CmpiOp(amount, _const_like(em, width, name), "uge")).result
        safe = em.insert(arith.SelectOp(too_far, _const_like(em, 0, name), amount)).result
        if kind == "left":
            shifted, past = em.insert(arith.ShLIOp(a, safe)).result, _const_like(em, 0, name)
        elif kind == "logical":
            shifted, past = em.insert(arith.ShRUIOp(a, safe)).result, _const_like(em, 0, name)
        else:
            shifted = em.insert(arith.ShRSIOp(a, safe)).result
            past = em.insert(arith.ShRSIOp(a, _const_like(em, width - 1, name))).result
        return em.insert(arith.SelectOp(too_far, past, shifted)).result

    return build


_elementwise("shift-left")(_shift("left"))
_elementwise("shift-right-logical")(_shift("logical"))
_elementwise("shift-right-arithmetic")(_shift("arithmetic"))

_FLOAT_PREDICATES = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
_INT_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


@_elementwise("compare")
def _compare(em, instr, operands):
    direction = instr.attr("direction")
    name = _type_name(instr)
    a, b = operands
    if is_float(name) and instr.attr("type") == "TOTALORDER":
        a, b = (_total_order_key(em, x) for x in (a, b))
        name = "s64"
    if is_float(name):
        return em.insert(arith.CmpfOp(a, b, _FLOAT_PREDICATES[direction])).result
    predicate = _INT_PREDICATES[direction]
    if predicate not in ("eq", "ne"):
        predicate = ("u" if is_unsigned(name) else "s") + predicate
    return em.insert(arith.CmpiOp(a, b, predicate)).result


def _total_order_key(em: FunctionEmitter, x: SSAValue) -> SSAValue:
    """An integer whose signed order is IEEE totalOrder on the float ``x``."""
    width = x.type.bitwidth
    int_type = IntegerType(width)
    bits = em.insert(arith.BitcastOp(x, int_type)).result
    sign = em.insert(arith.ShRSIOp(bits, em.insert(arith.ConstantOp.from_int_and_width(width - 1, width)).result))
    mask = em.insert(arith.ConstantOp.from_int_and_width((1 << (width - 1)) - 1, width)).result
    flip = em.insert(arith.AndIOp(sign.result, mask)).result
    return em.insert(arith.XOrIOp(bits, flip)).result


@_elementwise("select")
def _select(em, instr, operands):
    return em.insert(arith.SelectOp(*operands)).result


@_elementwise("clamp")
def _clamp(em, instr, operands):
    low, x, high = operands
    name = _type_name(instr, 1)
    if is_float(name):
        bigger = em.insert(arith.MaximumfOp(x, low)).result
        return em.insert(arith.MinimumfOp(bigger, high)).result
    max_op, min_op = (arith.MaxUIOp, arith.MinUIOp) if is_unsigned(name) else (arith.MaxSIOp, arith.MinSIOp)
    return em.insert(min_op(em.insert(max_op(x, low)).result, high)).result


@_elementwise("power")
def _power(em, instr, operands):
    name = _type_name(instr)
    if is_float(name):
        return _in_wider_type(em, instr, operands, lambda v: em.insert(math.PowFOp(*v)).result)
    return _integer_power(em, name, *operands)


def _integer_power(em: FunctionEmitter, name: str, base: SSAValue, exponent: SSAValue) -> SSAValue:
    """XLA's integer power: six squarings (only the exponent's low six bits
    count); a negative exponent gives 1 for base 1, ±1 for base -1, else 0."""
    one, zero = _const_like(em, 1, name), _const_like(em, 0, name)
    result, power = one, base
    for i in range(6):
        bit = em.insert(arith.AndIOp(em.insert(arith.ShRUIOp(exponent, _const_like(em, i, name))).result, one)).result
        is_set = em.insert(arith.CmpiOp(bit, zero, "ne")).result
        result = em.insert(arith.SelectOp(is_set, em.insert(arith.MuliOp(result, power)).result, result)).result
        power = em.insert(arith.MuliOp(power, power)).result
    negative = em.insert(arith.CmpiOp(exponent, zero, "slt")).result
    base_is_one = em.insert(arith.CmpiOp(base, one, "eq")).result
    minus_one = _const_like(em, -1, name)
    base_is_minus_one = em.insert(arith.CmpiOp(base, minus_one, "eq")).result
    odd = em.insert(arith.CmpiOp(em.insert(arith.AndIOp(exponent, one)).result, zero, "ne")).result
    minus_result = em.insert(arith.SelectOp(odd, minus_one, one)).result
    negative_result = em.insert(arith.SelectOp(base_is_one, one, zero)).result
    if not is_unsigned(name):
        negative_result = em.insert(arith.SelectOp(base_is_minus_one, minus_result, negative_result)).result
    return em.insert(arith.SelectOp(negative, negative_result, result)).result


@_elementwise("convert")
def _convert(em, instr, operands):
    return convert(em, operands[0], _type_name(instr), instr.shape.element_type)


def convert(em: FunctionEmitter, x: SSAValue, source: str, target: str) -> SSAValue:
    """XLA's ``convert`` from HLO type ``source`` to ``target``."""
    if source == target:
        return x
    if is_narrow_float(source):
        x, source = em.insert(arith.ExtFOp(x, Float32Type())).result, "f32"
    if target == "bf16" and source not in ("f32", "bf16"):
        # XLA's elemental emitter rounds to f32 first (then EmitF32ToBF16), as ml_dtypes and the interpreter do:
        # from f64 and from integers of more than 24 bits that is two roundings, not one.
        x, source = convert(em, x, source, "f32"), "f32"
    target_type = element_type(target)
    if target == "pred":
        zero = _const_like(em, 0 if not is_float(source) else 0.0, source)
        op = arith.CmpfOp(x, zero, "une") if is_float(source) else arith.CmpiOp(x, zero, "ne")
        return em.insert(op).result
    if is_narrow_float(target):
        # One rounding from any float (the backend rounds f64 to odd on the way through f32); integers through
        # f64, exact up to 2^53.
        if not is_float(source):
            x = convert(em, x, source, "f64")
        return em.insert(arith.TruncFOp(x, target_type)).result
    if is_float(source) and is_float(target):
        return _float_to_float(em, x, source, target)
    if is_float(target):
        op = arith.UIToFPOp if is_unsigned(source) else arith.SIToFPOp
        return em.insert(op(x, target_type)).result
    if is_float(source):
        return _float_to_int(em, x, source, target)
    source_width, target_width = x.type.width.data, target_type.width.data
    if source_width == target_width:
        return x
    if source_width > target_width:
        return em.insert(arith.TruncIOp(x, target_type)).result
    op = arith.ExtUIOp if is_unsigned(source) else arith.ExtSIOp
    return em.insert(op(x, target_type)).result


def _width(name: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[name]


def _float_to_float(em: FunctionEmitter, x: SSAValue, source: str, target: str) -> SSAValue:
    if {source, target} == {"f16", "bf16"}:
        x = _float_to_float(em, x, source, "f32")
        source = "f32"
    op = arith.ExtFOp if _width(target) > _width(source) else arith.TruncFOp
    return em.insert(op(x, element_type(target))).result


def _float_to_int(em: FunctionEmitter, x: SSAValue, source: str, target: str) -> SSAValue:
    """Truncation toward zero, saturating at the target's bounds, NaN → 0."""
    target_type = element_type(target)
    width = target_type.width.data
    unsigned = is_unsigned(target)
    low, high = (0, (1 << width) - 1) if unsigned else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    converted = em.insert((arith.FPToUIOp if unsigned else arith.FPToSIOp)(x, target_type)).result
    # fl(high) is the first float >= high, so x >= fl(high) means trunc(x) >= high. A bound past the source's
    # range (f16 to 32 bits and more) rounds to ±inf, which only ±inf reaches.
    from xlapy.shapes import ELEMENT_TYPES

    largest = float(ml_dtypes.finfo(ELEMENT_TYPES[source].dtype).max)
    above_at, below_at = (bound if abs(bound) <= largest else np.copysign(np.inf, bound)
                          for bound in (float(high), float(low)))
    above = em.insert(arith.CmpfOp(x, _const_like(em, above_at, source), "oge")).result
    below = em.insert(arith.CmpfOp(x, _const_like(em, below_at, source), "ole")).result
    is_nan = em.insert(arith.CmpfOp(x, x, "uno")).result
    result = em.insert(arith.SelectOp(above, _const_like(em, high, target), converted)).result
    result = em.insert(arith.SelectOp(below, _const_like(em, low, target), result)).result
    return em.insert(arith.SelectOp(is_nan, _const_like(em, 0, target), result)).result


# (exponent bits, mantissa bits) of the float formats reduce-precision rounds in. The others are rounded in f32,
# which holds them exactly, and rounded back to their type after, as XLA:CPU and the interpreter do (a bf16 NaN
# comes back as the canonical one).
_FLOAT_FORMATS = {"f16": (5, 10), "f32": (8, 23), "f64": (11, 52)}


def _keeps_every_value(type_name: str, exponent_bits: int, mantissa_bits: int) -> bool:
    """Whether reducing ``type_name`` to these widths changes nothing: no bit to round away, no exponent out of
    range, and an infinity to overflow to (the types without one overflow to NaN through f32)."""
    from xlapy.shapes import ELEMENT_TYPES

    dtype = ELEMENT_TYPES[type_name].dtype
    info = ml_dtypes.finfo(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        has_infinity = bool(np.isinf(np.array(np.inf).astype(dtype)))
    return exponent_bits >= info.nexp and mantissa_bits >= info.nmant and has_infinity


@_elementwise("reduce-precision", in_f32=False)
def _reduce_precision(em, instr, operands):
    """XLA's ``EmitReducePrecisionIR`` (``xla/service/elemental_ir_emitter.cc``) on the value's bits: the
    mantissa rounded to nearest even by adding a bias and masking, then exponents past the reduced range forced
    to ±inf (overflow) or ±0 (underflow, denormals included); a NaN is kept (also with no mantissa bit left, as
    XLA's ``reducePrecision`` in ``mlir_hlo/mhlo/transforms/transformation_helpers.h``, which XLA:CPU runs)."""
    (x,) = operands
    name = instr.shape.element_type
    exponent_bits, mantissa_bits = instr.attr("exponent_bits"), instr.attr("mantissa_bits")
    if _keeps_every_value(name, exponent_bits, mantissa_bits):
        return x
    if name in _FLOAT_FORMATS:
        return _reduce_precision_bits(em, x, name, exponent_bits, mantissa_bits)
    wide = em.insert(arith.ExtFOp(x, Float32Type())).result
    reduced = _reduce_precision_bits(em, wide, "f32", exponent_bits, mantissa_bits)
    result = em.insert(arith.TruncFOp(reduced, x.type)).result
    if name != "bf16":
        return result
    # XLA:CPU rounds bf16 in f32 and gives back the quiet NaN of the input's sign (0x7fc0 or 0xffc0), not the
    # payload a truncation keeps.
    sign = em.insert(arith.AndIOp(em.insert(arith.BitcastOp(x, IntegerType(16))).result,
                                  _const_like(em, 0x8000, "u16"))).result
    quiet_nan = em.insert(arith.BitcastOp(em.insert(arith.OrIOp(sign, _const_like(em, 0x7FC0, "u16"))).result,
                                          x.type)).result
    is_nan = em.insert(arith.CmpfOp(x, x, "uno")).result
    return em.insert(arith.SelectOp(is_nan, quiet_nan, result)).result


def _reduce_precision_bits(em: FunctionEmitter, x: SSAValue, name: str, exponent_bits: int,
                           mantissa_bits: int) -> SSAValue:
    source_exponent, source_mantissa = _FLOAT_FORMATS[name]
    width = 1 + source_exponent + source_mantissa
    int_name = f"u{width}"

    def const(value: int) -> SSAValue:
        return _const_like(em, value, int_name)

    bits = em.insert(arith.BitcastOp(x, IntegerType(width))).result
    if mantissa_bits < source_mantissa:
        shift = source_mantissa - mantissa_bits
        last_kept = em.insert(arith.ShRUIOp(em.insert(arith.AndIOp(bits, const(1 << shift))).result,
                                            const(shift))).result
        bias = em.insert(arith.AddiOp(last_kept, const((1 << (shift - 1)) - 1))).result
        rounded = em.insert(arith.AddiOp(bits, bias)).result
        bits = em.insert(arith.AndIOp(rounded, const(~((1 << shift) - 1)))).result
    if exponent_bits < source_exponent:
        exponent_mask = ((1 << source_exponent) - 1) << source_mantissa
        source_bias = (1 << (source_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = em.insert(arith.AndIOp(bits, const(exponent_mask))).result
        overflows = em.insert(arith.CmpiOp(exponent, const((source_bias + reduced_bias) << source_mantissa),
                                           "ugt")).result
        underflows = em.insert(arith.CmpiOp(exponent, const((source_bias - reduced_bias) << source_mantissa),
                                            "ule")).result
        signed_zero = em.insert(arith.AndIOp(bits, const(1 << (width - 1)))).result
        signed_inf = em.insert(arith.OrIOp(signed_zero, const(exponent_mask))).result
        bits = em.insert(arith.SelectOp(overflows, signed_inf, bits)).result
        bits = em.insert(arith.SelectOp(underflows, signed_zero, bits)).result
    result = em.insert(arith.BitcastOp(bits, x.type)).result
    is_nan = em.insert(arith.CmpfOp(x, x, "uno")).result
    return em.insert(arith.SelectOp(is_nan, x, result)).result


@elemental_rule("bitcast-convert")
def _bitcast_convert(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """The same bits in another type. Between widths, as XLA: the narrower side has one more, minor, dimension
    that numbers the parts of a wider element from its least significant bits up (little-endian)."""
    source, target = instr.operands[0].shape.element_type, instr.shape.element_type
    target_type: Attribute = element_type(target, instr.name)
    source_bits, target_bits = _bits(source), _bits(target)
    operand_indices = indices if instr.operands[0].shape.dimensions else ()
    if source_bits == target_bits:
        return em.insert(arith.BitcastOp(em.operand(instr, 0, operand_indices), target_type)).result
    if min(source_bits, target_bits) < 8 or "pred" in (source, target):
        raise UnimplementedError(f"bitcast-convert ({instr.name}) from {source} to {target}: between widths only "
                                 "for types of whole bytes")
    if source_bits > target_bits:
        # Part indices[-1] of the operand's element: shift it down to the low bits and keep those.
        wide = _as_integer(em, em.operand(instr, 0, indices[:-1]), source_bits)
        part = em.insert(arith.IndexCastOp(indices[-1], IntegerType(source_bits))).result
        shift = em.insert(arith.MuliOp(part, _const_like(em, target_bits, f"u{source_bits}"))).result
        low = em.insert(arith.TruncIOp(em.insert(arith.ShRUIOp(wide, shift)).result, IntegerType(target_bits)))
        return em.insert(arith.BitcastOp(low.result, target_type)).result
    # The element is made of the operand's parts along its minor dimension, part k shifted up by k widths.
    value = None
    for k in range(target_bits // source_bits):
        part = _as_integer(em, em.operand(instr, 0, (*indices, em.index(k))), source_bits)
        part = em.insert(arith.ExtUIOp(part, IntegerType(target_bits))).result
        if k:
            part = em.insert(arith.ShLIOp(part, _const_like(em, k * source_bits, f"u{target_bits}"))).result
        value = part if value is None else em.insert(arith.OrIOp(value, part)).result
    return em.insert(arith.BitcastOp(value, target_type)).result


def _as_integer(em: FunctionEmitter, value: SSAValue, bits: int) -> SSAValue:
    if isinstance(value.type, IntegerType):
        return value
    return em.insert(arith.BitcastOp(value, IntegerType(bits))).result


def _bits(name: str) -> int:
    from xlapy.shapes import ELEMENT_TYPES

    return ELEMENT_TYPES[name].bit_width
