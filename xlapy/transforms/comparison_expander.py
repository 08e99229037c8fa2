"""Total-order float comparison expansion, as XLA's ``ComparisonExpander``
(``xla/hlo/transforms/expanders/comparison_expander.cc``).

``compare(a, b), type=TOTALORDER`` on floats becomes a signed integer compare
of keys made from the bit patterns: with ``x = bitcast-convert(f)`` to the
signed integer of the same width, the key is ``x`` for ``x >= 0`` and
``x xor INT_MAX`` for ``x < 0``, which orders -NaN < -inf < ... < -0 < +0 <
... < inf < NaN. Types without a negative zero (the ``fnuz`` float8 types)
use ``INT_MIN - x`` instead, with their one NaN (bit pattern ``INT_MIN``)
mapped to ``INT_MIN``, the smallest key. ``f8e8m0fnu`` has no sign bit, so
the trick would misorder it: its compares are left as they are. ``upcasts`` lists element types
to convert first (XLA's ``expand_via_upcast``; none by default).
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind, element_type
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type

_SIGNED_TYPE_OF_WIDTH = {4: "s4", 8: "s8", 16: "s16", 32: "s32", 64: "s64"}


def _has_negative_zero(type_name: str) -> bool:
    # XLA's primitive_util::HasNegativeZero for the types expanded here.
    return not type_name.endswith("fnuz")


class ComparisonExpander(OpExpanderPass):
    """Rewrites float compares of type TOTALORDER as signed integer compares."""

    name = "comparison-expander"

    def __init__(self, upcasts: dict[str, str] | None = None) -> None:
        self.upcasts = dict(upcasts or {})

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "compare" or instruction.attributes.get("type") != "TOTALORDER":
            return False
        operand_type = instruction.operands[0].shape.element_type
        return element_type(operand_type).kind is TypeKind.FLOAT and operand_type != "f8e8m0fnu"

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        lhs, rhs = instruction.operands
        compare_type = lhs.shape.element_type
        if compare_type in self.upcasts:
            compare_type = self.upcasts[compare_type]
            lhs = builder.add("convert", with_element_type(lhs.shape, compare_type), [lhs])
            rhs = builder.add("convert", with_element_type(rhs.shape, compare_type), [rhs])
        bits = element_type(compare_type).bit_width
        signed_type = _SIGNED_TYPE_OF_WIDTH[bits]
        signed_shape = with_element_type(lhs.shape, signed_type)
        minimum, maximum = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        zero = builder.broadcast_scalar(builder.scalar_constant(0, signed_type), signed_shape)
        min_value = builder.broadcast_scalar(builder.scalar_constant(minimum, signed_type), signed_shape)
        max_value = builder.broadcast_scalar(builder.scalar_constant(maximum, signed_type), signed_shape)
        has_negative_zero = _has_negative_zero(compare_type)
        pred_shape = with_element_type(signed_shape, "pred")

        def total_order_key(value: HloInstruction) -> HloInstruction:
            signed = builder.add("bitcast-convert", signed_shape, [value])
            if has_negative_zero:
                flipped = builder.add("xor", signed_shape, [max_value, signed])
            else:
                # No -0: the smallest negative takes its place just below +0.
                flipped = builder.add("subtract", signed_shape, [min_value, signed])
                is_nan = builder.add("compare", pred_shape, [signed, min_value], {"direction": "EQ"})
                flipped = builder.add("select", signed_shape, [is_nan, min_value, flipped])
            is_negative = builder.add("compare", pred_shape, [signed, zero], {"direction": "LT"})
            return builder.add("select", signed_shape, [is_negative, flipped, signed])

        lhs_key, rhs_key = total_order_key(lhs), total_order_key(rhs)
        return builder.add("compare", instruction.shape, [lhs_key, rhs_key],
                           {"direction": instruction.attributes["direction"], "type": "SIGNED"})
