"""Elementwise ops: ``stablehlo.add %a, %b : tensor<4xf32>`` (one type when
every operand and the result have it, else a function type), compare,
select, clamp, complex, reduce_precision, and the chlo unary functions."""

from __future__ import annotations

from xlapy.frontends.mlir_syntax import (
    DialectAttr,
    IntegerAttr,
    TensorType,
    expect_keyword,
    parse_type,
    read_keyword,
)
from xlapy.frontends.stablehlo_ops.common import I32, element_type_of, enum_attr, enum_value
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register

UNARY = """abs cbrt ceil convert cosine count_leading_zeros exponential exponential_minus_one floor imag is_finite
log log_plus_one logistic negate not popcnt real round_nearest_afz round_nearest_even rsqrt sign sine sqrt tan tanh
""".split()
BINARY = """add and atan2 divide maximum minimum multiply or power remainder shift_left shift_right_arithmetic
shift_right_logical subtract xor""".split()


def parse_same_type(p, d: OpDraft) -> None:
    """``%a, %b {attrs} : type`` or ``... : (types) -> type``."""
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    p.same_type_or_functional(d)


def print_same_type(q, instr) -> str:
    return (f"{q.op_name(instr)} {q.uses(instr.operands)}{q.attr_dict(instr, _default_accuracy(q, instr))} : "
            f"{q.same_or_functional(instr)}")


def _default_accuracy(q, instr) -> tuple[str, ...]:
    """MLIR does not print a result accuracy at its default value."""
    accuracy = q.record(instr).attributes.get("result_accuracy")
    if isinstance(accuracy, DialectAttr) and accuracy.body == "mode = #stablehlo.result_accuracy_mode<DEFAULT>":
        return ("result_accuracy",)
    return ()


def _hlo_name(name: str) -> str:
    return name.replace("_", "-")


def _convert_opcode(d: OpDraft) -> str:
    """HLO's convert, unless it turns complex into real numbers: StableHLO's
    convert then keeps the real part, which HLO's refuses to do."""
    operand = d.operand_types[0] if d.operand_types else None
    result = d.result_types[0] if d.result_types else None
    if not isinstance(operand, TensorType) or not isinstance(result, TensorType):
        return "convert"  # malformed: HLO's rule says why
    to_real = operand.element.startswith("complex") and not result.element.startswith("complex")
    return "stablehlo.convert" if to_real else "convert"


for _name in UNARY + BINARY + ["clamp"]:
    _opcode = _convert_opcode if _name == "convert" else _hlo_name(_name)
    register(OpSpec(f"stablehlo.{_name}", _opcode, parse_same_type, print_same_type))

# bitcast_convert always prints its function type.
register(OpSpec("stablehlo.bitcast_convert", "bitcast-convert", parse_same_type,
                lambda q, i: f"{q.op_name(i)} {q.uses(i.operands)}{q.attr_dict(i)} : {q.functional(i)}"))


# -- select: `%p, %a, %b : pred_type, result_type` ------------------------------------------

def _parse_select(p, d: OpDraft) -> None:
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the select's types")
    if p.peek("("):
        p.functional_type(d)
        return
    pred = p.type()
    p.expect(",", "between the select's predicate and result types")
    result = p.type()
    d.operand_types = [pred, result, result]
    d.result_types = [result]


def _print_select(q, instr) -> str:
    types = [q.value_type(o) for o in instr.operands]
    result = q.result_types(instr)
    if len(types) == 3 and types[1] == types[2] == result[0]:
        type_text = f"{types[0]}, {result[0]}"
    else:
        type_text = q.functional(instr)
    return f"{q.op_name(instr)} {q.uses(instr.operands)}{q.attr_dict(instr)} : {type_text}"


register(OpSpec("stablehlo.select", "select", _parse_select, _print_select))


# -- complex: `%re, %im : complex_type` ------------------------------------------------------

def _parse_complex(p, d: OpDraft) -> None:
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the complex's type")
    if p.peek("("):
        p.functional_type(d)
        return
    result = p.type()
    if not isinstance(result, TensorType) or not result.element.startswith("complex<"):
        raise p.error("expected a complex tensor type")
    part = TensorType(result.dims, result.element[len("complex<"):-1])
    d.operand_types = [part, part]
    d.result_types = [result]


def _print_complex(q, instr) -> str:
    types = [q.value_type(o) for o in instr.operands]
    type_text = str(q.result_types(instr)[0]) if len(types) == 2 and types[0] == types[1] else q.functional(instr)
    return f"{q.op_name(instr)} {q.uses(instr.operands)}{q.attr_dict(instr)} : {type_text}"


register(OpSpec("stablehlo.complex", "complex", _parse_complex, _print_complex))


# -- compare: `GT, %a, %b, FLOAT : (t, t) -> r` ---------------------------------------------

def _parse_compare(p, d: OpDraft) -> None:
    direction = read_keyword(p.cursor, "a comparison direction (EQ, NE, GE, GT, LE, LT)")
    if direction not in ("EQ", "NE", "GE", "GT", "LE", "LT"):
        raise p.error(f"unknown comparison direction '{direction}'", p.cursor.pos - len(direction))
    d.attributes["comparison_direction"] = enum_attr("comparison_direction", direction)
    p.expect(",", "after the comparison direction")
    p.operand(d)
    p.expect(",", "between the compared values")
    p.operand(d)
    if p.eat(","):
        kind = read_keyword(p.cursor, "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)")
        if kind not in ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "NOTYPE"):
            raise p.error(f"unknown comparison type '{kind}'", p.cursor.pos - len(kind))
        d.attributes["compare_type"] = enum_attr("comparison_type", kind)
    p.attr_dict(d)
    p.expect(":", "before the compare's type")
    p.same_type_or_functional(d)


def _print_compare(q, instr) -> str:
    attrs = q.record(instr).attributes
    direction = enum_value(attrs.get("comparison_direction"))
    kind = enum_value(attrs.get("compare_type"))
    kind_text = f", {kind}" if kind else ""
    return (f"{q.op_name(instr)} {direction}, {q.use(instr.operands[0])}, {q.use(instr.operands[1])}{kind_text}"
            f"{q.attr_dict(instr, ('comparison_direction', 'compare_type'))} : {q.functional(instr)}")


def default_compare_type(element: str | None) -> str:
    """The comparison type XLA assumes (and does not print) for an element type."""
    if element is None:
        return "FLOAT"
    if element.startswith(("f", "bf", "complex")):
        return "FLOAT"
    if element == "i1" or element.startswith("ui"):
        return "UNSIGNED"
    return "SIGNED"


def _compare_hlo(d: OpDraft) -> dict:
    hlo = {"direction": enum_value(d.attributes.get("comparison_direction"))}
    kind = enum_value(d.attributes.get("compare_type"))
    element = element_type_of(d.operand_types[0]) if d.operand_types else None
    if kind is not None and kind != "NOTYPE" and kind != default_compare_type(element):
        hlo["type"] = kind
    return hlo


register(OpSpec("stablehlo.compare", "compare", _parse_compare, _print_compare, _compare_hlo,
                elided=("comparison_direction", "compare_type")))


# -- reduce_precision: `%x, format = e5m10 : type` -------------------------------------------

def _parse_reduce_precision(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "after the operand")
    expect_keyword(p.cursor, "format", "in reduce_precision")
    p.expect("=", "after 'format'")
    start = p.cursor.pos
    fmt = read_keyword(p.cursor, "a format like e5m10")
    parts = fmt[1:].split("m") if fmt.startswith("e") else []
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise p.error(f"expected a format like e5m10, got '{fmt}'", start)
    d.attributes["exponent_bits"] = IntegerAttr(int(parts[0]), I32)
    d.attributes["mantissa_bits"] = IntegerAttr(int(parts[1]), I32)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    p.same_type_or_functional(d)


def _print_reduce_precision(q, instr) -> str:
    attrs = q.record(instr).attributes
    fmt = f"e{attrs['exponent_bits'].value}m{attrs['mantissa_bits'].value}"
    return (f"{q.op_name(instr)} {q.use(instr.operands[0])}, format = {fmt}"
            f"{q.attr_dict(instr, ('exponent_bits', 'mantissa_bits'))} : {q.same_or_functional(instr)}")


register(OpSpec("stablehlo.reduce_precision", "reduce-precision", _parse_reduce_precision, _print_reduce_precision,
                lambda d: {"exponent_bits": int(d.attributes["exponent_bits"].value),
                           "mantissa_bits": int(d.attributes["mantissa_bits"].value)},
                elided=("exponent_bits", "mantissa_bits")))


# -- chlo: `chlo.erf %x : tensor<4xf32> -> tensor<4xf32>` ------------------------------------

def _parse_chlo_unary(p, d: OpDraft) -> None:
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    if p.peek("("):
        p.functional_type(d)
        return
    operand = p.type()
    p.expect("->", "in the op's type")
    d.operand_types = [operand]
    d.result_types = [parse_type(p.cursor)]


def _print_chlo_unary(q, instr) -> str:
    operand_types = ", ".join(str(q.value_type(o)) for o in instr.operands)
    results = q.result_types(instr)
    return f"{q.op_name(instr)} {q.uses(instr.operands)}{q.attr_dict(instr)} : {operand_types} -> {results[0]}"


_CHLO_UNARY = {"erf": "erf", "erfc": "", "erf_inv": "", "lgamma": "", "digamma": "", "square": "", "acos": "",
               "acosh": "", "asin": "", "asinh": "", "atan": "", "atanh": "", "cosh": "", "sinh": "", "tan": "tan",
               "conj": "", "is_inf": "", "is_neg_inf": "", "is_pos_inf": "", "bessel_i1e": ""}
for _name, _opcode in _CHLO_UNARY.items():
    register(OpSpec(f"chlo.{_name}", _opcode, _parse_chlo_unary, _print_chlo_unary))
