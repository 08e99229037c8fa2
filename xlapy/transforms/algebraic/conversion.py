"""Rules for ``convert``, as XLA's ``HandleConvert``: a convert to the type it
already has goes, and so does a round trip through a type that holds every
value of the original one (XLA's ``IsConvertPairNoOp`` with
``primitive_util::CastPreservesValues``)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import ELEMENT_TYPES, TypeKind
from xlapy.transforms.algebraic.registry import Simplifier, rule


def _float_range(name: str) -> tuple[int, int, int, bool, bool]:
    """Mantissa bits, largest and smallest exponents (subnormals included),
    and whether float type ``name`` has infinities and NaNs."""
    info = ml_dtypes.finfo(ELEMENT_TYPES[name].dtype)
    return (int(info.nmant), int(info.maxexp), int(info.minexp) - int(info.nmant),
            _represents(name, math.inf), _represents(name, math.nan))


def _represents(name: str, value: float) -> bool:
    converted = float(np.array(value).astype(ELEMENT_TYPES[name].dtype))
    return math.isnan(converted) if math.isnan(value) else converted == value


def cast_preserves_values(source: str, target: str) -> bool:
    """Whether every value of element type ``source`` converts to ``target``
    and back unchanged."""
    if source == target:
        return True
    from_type, to_type = ELEMENT_TYPES[source], ELEMENT_TYPES[target]
    if from_type.kind is TypeKind.PRED:
        return True
    if to_type.kind is TypeKind.PRED or (from_type.kind is TypeKind.COMPLEX and to_type.kind is not TypeKind.COMPLEX):
        return False
    if from_type.kind is TypeKind.COMPLEX:
        return from_type.bit_width <= to_type.bit_width
    if from_type.kind is TypeKind.FLOAT:
        if to_type.kind is TypeKind.COMPLEX:
            return cast_preserves_values(source, "f32" if target == "c64" else "f64")
        if to_type.kind is not TypeKind.FLOAT:
            return False
        mantissa, largest, smallest, infinity, nan = _float_range(source)
        to_mantissa, to_largest, to_smallest, to_infinity, to_nan = _float_range(target)
        signed = ml_dtypes.finfo(from_type.dtype).min < 0
        to_signed = ml_dtypes.finfo(to_type.dtype).min < 0
        return (to_mantissa >= mantissa and to_largest >= largest and to_smallest <= smallest
                and (to_infinity or not infinity) and (to_nan or not nan) and (to_signed or not signed))
    # An integer: the target must hold all its values.
    signed = from_type.kind is TypeKind.SIGNED
    value_bits = from_type.bit_width - int(signed)
    if to_type.kind in (TypeKind.FLOAT, TypeKind.COMPLEX):
        part = "f32" if target == "c64" else "f64" if target == "c128" else target
        return _float_range(part)[0] + 1 >= value_bits
    if to_type.kind is TypeKind.UNSIGNED:
        return not signed and to_type.bit_width >= from_type.bit_width
    return to_type.bit_width - 1 >= value_bits


@rule("convert")
def _convert(convert: HloInstruction, s: Simplifier) -> bool:
    operand = convert.operands[0]
    # A convert to the operand's own type does nothing.
    if operand.shape.element_type == convert.shape.element_type:
        return s.replace(convert, operand)
    # convert(convert(A)) => A when A's type is the result's and the middle
    # type holds every value of A's.
    if operand.opcode == "convert":
        source = operand.operands[0]
        if (source.shape.element_type == convert.shape.element_type
                and cast_preserves_values(source.shape.element_type, operand.shape.element_type)):
            return s.replace(convert, source)
    return False
