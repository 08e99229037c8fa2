"""Shape rules of elementwise ops: unary and binary arithmetic, comparison,
conversions, select, clamp and map (XLA's InferUnaryOpShape and
InferBinaryOpShape)."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    ARRAY_TYPES,
    FLOAT,
    FLOAT_OR_COMPLEX,
    INTEGRAL,
    NUMBERS,
    PRED_OR_INTEGRAL,
    SIGNED_NUMBERS,
    array_operand,
    array_shape,
    at_least,
    braces,
    callees,
    check_parameters,
    component_type,
    declared_array,
    element_kind,
    fail,
    int_attr,
    ints_attr,
    operand_count,
    require_kind,
    root_shape,
    same_dims,
    show,
    union_dynamic,
    without_layout,
    word_attr,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape, TypeKind

# Element types each unary op accepts (XLA's InferUnaryOpShape).
_UNARY_KINDS = {
    **dict.fromkeys(["floor", "ceil", "round-nearest-afz", "round-nearest-even", "erf"], FLOAT),
    **dict.fromkeys(["cosine", "sine", "tan", "tanh", "exponential", "exponential-minus-one", "log",
                     "log-plus-one", "logistic", "rsqrt", "sqrt", "cbrt", "real", "imag"], FLOAT_OR_COMPLEX),
    **dict.fromkeys(["abs", "sign"], SIGNED_NUMBERS),
    "negate": NUMBERS,
    "not": PRED_OR_INTEGRAL,
    **dict.fromkeys(["count-leading-zeros", "popcnt"], INTEGRAL),
    "is-finite": FLOAT,
}


@shape_rule(*_UNARY_KINDS)
def _unary(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    require_kind(instr, operand, _UNARY_KINDS[instr.opcode])
    element_type = operand.element_type
    if instr.opcode == "is-finite":
        element_type = "pred"
    elif instr.opcode in ("abs", "real", "imag") and operand.type.is_complex:
        element_type = component_type(element_type)
    return array_shape(element_type, operand.dimensions, operand.dynamic_dimensions)


@shape_rule("convert")
def _convert(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    target = declared_array(instr).type
    # XLA's convert refuses complex to real (StableHLO's keeps the real part: stablehlo.convert).
    if operand.type.is_complex and not target.is_complex:
        fail(f"convert cannot turn complex {operand.element_type} into non-complex {target.name}; "
              "use real, imag or abs")
    return array_shape(target.name, operand.dimensions, operand.dynamic_dimensions)


@shape_rule("bitcast-convert")
def _bitcast_convert(instr: HloInstruction) -> Shape:
    # Reinterprets the bits: a narrower target splits each element into a new
    # minor dimension, a wider one merges the (then required) minor dimension.
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    target = declared_array(instr).type
    if operand.type.is_complex != target.is_complex:
        fail(f"bitcast-convert cannot reinterpret {operand.element_type} as {target.name}: "
              "one is complex and the other is not")
    old_bits, new_bits = operand.type.bit_width, target.bit_width
    dims, dynamic = list(operand.dimensions), list(operand.dynamic_dimensions)
    if old_bits > new_bits:
        if old_bits % new_bits:
            fail(f"bitcast-convert from {operand.element_type} to {target.name}: bit widths do not divide")
        dims.append(old_bits // new_bits)
        dynamic.append(False)
    elif old_bits < new_bits:
        ratio = new_bits // old_bits
        if new_bits % old_bits or not dims or dims[-1] != ratio:
            fail(f"bitcast-convert from {show(operand)} to {target.name} needs a minor dimension of size {ratio}")
        dims.pop()
        dynamic.pop()
    return array_shape(target.name, dims, dynamic)


@shape_rule("reduce-precision")
def _reduce_precision(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    require_kind(instr, operand, FLOAT)
    if int_attr(instr, "exponent_bits") < 1:
        fail("reduce-precision needs exponent_bits >= 1")
    if int_attr(instr, "mantissa_bits") < 0:
        fail("reduce-precision needs mantissa_bits >= 0")
    return without_layout(operand)


@shape_rule("stochastic-convert")
def _stochastic_convert(instr: HloInstruction) -> Shape:
    # stochastic-convert(operand, random): random holds unsigned bits of the operand's width.
    operand_count(instr, 2)
    operand, random = array_operand(instr, 0), array_operand(instr, 1, "the random operand")
    require_kind(instr, operand, FLOAT)
    if element_kind(random) is not TypeKind.UNSIGNED or random.type.bit_width != operand.type.bit_width:
        fail(f"the random operand of stochastic-convert must be unsigned with the operand's bit width, "
              f"got {show(random)} for {show(operand)}")
    same_dims(instr, [operand, random], "operands")
    return array_shape(declared_array(instr).element_type, operand.dimensions, operand.dynamic_dimensions)


_BINARY_KINDS = {
    **dict.fromkeys(["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
                     "compare"], ARRAY_TYPES),
    **dict.fromkeys(["and", "or", "xor"], PRED_OR_INTEGRAL),
    **dict.fromkeys(["shift-left", "shift-right-arithmetic", "shift-right-logical"], INTEGRAL),
    **dict.fromkeys(["atan2", "complex"], FLOAT_OR_COMPLEX),
}


_COMPARISON_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}


_COMPARISON_TYPES = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}


def _elementwise_operands(instr: HloInstruction) -> list[Shape]:
    # HLO has no implicit broadcasting: operands of elementwise ops agree in dimensions and type.
    shapes = [array_operand(instr, i) for i in range(len(instr.operands))]
    for shape in shapes[1:]:
        if shape.dimensions != shapes[0].dimensions:
            fail(f"operands of {instr.opcode} must have the same shape, got {show(shapes[0])} and {show(shape)}")
        if shape.element_type != shapes[0].element_type:
            fail(f"operands of {instr.opcode} must have the same element type, "
                  f"got {show(shapes[0])} and {show(shape)}")
    return shapes


@shape_rule(*_BINARY_KINDS)
def _binary(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    shapes = _elementwise_operands(instr)
    lhs = shapes[0]
    require_kind(instr, lhs, _BINARY_KINDS[instr.opcode])
    element_type = lhs.element_type
    if instr.opcode == "compare":
        direction = word_attr(instr, "direction")
        if direction not in _COMPARISON_DIRECTIONS:
            fail(f"compare direction must be one of {', '.join(sorted(_COMPARISON_DIRECTIONS))}, got {direction}")
        kind = word_attr(instr, "type", "FLOAT")
        if kind not in _COMPARISON_TYPES:
            fail(f"compare type must be one of {', '.join(sorted(_COMPARISON_TYPES))}, got {kind}")
        element_type = "pred"
    elif instr.opcode == "complex":
        if element_type not in ("f32", "f64"):
            fail(f"complex needs f32 or f64 operands, got {show(lhs)}")
        element_type = "c64" if element_type == "f32" else "c128"
    return array_shape(element_type, lhs.dimensions, union_dynamic(shapes))


@shape_rule("select")
def _select(instr: HloInstruction) -> Shape:
    operand_count(instr, 3)
    pred = array_operand(instr, 0, "the predicate")
    on_true, on_false = array_operand(instr, 1), array_operand(instr, 2)
    if on_true.dimensions != on_false.dimensions or on_true.element_type != on_false.element_type:
        fail(f"on_true and on_false of select must have the same shape, got {show(on_true)} and {show(on_false)}")
    if pred.element_type != "pred":
        fail(f"the predicate of select must be pred, got {show(pred)}")
    if pred.rank and pred.dimensions != on_true.dimensions:
        fail(f"the predicate of select must be a scalar or have the dimensions of the values, "
              f"got {show(pred)} for {show(on_true)}")
    shapes = [on_true, on_false] + ([pred] if pred.rank else [])
    return array_shape(on_true.element_type, on_true.dimensions, union_dynamic(shapes))


@shape_rule("clamp")
def _clamp(instr: HloInstruction) -> Shape:
    # clamp(min, operand, max); the bounds may be scalars.
    operand_count(instr, 3)
    low, operand, high = array_operand(instr, 0, "min"), array_operand(instr, 1), array_operand(instr, 2, "max")
    for bound in (low, high):
        if bound.element_type != operand.element_type:
            fail(f"bounds of clamp must have the operand's element type, got {show(bound)} for {show(operand)}")
        if bound.rank and bound.dimensions != operand.dimensions:
            fail(f"bounds of clamp must be scalars or have the operand's dimensions, "
                  f"got {show(bound)} for {show(operand)}")
    return without_layout(operand)


@shape_rule("map")
def _map(instr: HloInstruction) -> Shape:
    at_least(instr, 1)
    shapes = [array_operand(instr, i) for i in range(len(instr.operands))]
    same_dims(instr, shapes, "operands")
    dims = ints_attr(instr, "dimensions", tuple(range(shapes[0].rank)))
    if list(dims) != list(range(shapes[0].rank)):
        fail(f"dimensions={braces(dims)} of map must be all dimensions of {show(shapes[0])} in order")
    (computation,) = callees(instr, 1, "to_apply")
    check_parameters(instr, computation, [Shape(s.element_type) for s in shapes], "to_apply computation")
    root = root_shape(computation)
    if not root.is_array or root.rank:
        fail(f"to_apply computation {computation.name} of map must return a scalar, returns {show(root)}")
    return array_shape(root.element_type, shapes[0].dimensions, union_dynamic(shapes))
