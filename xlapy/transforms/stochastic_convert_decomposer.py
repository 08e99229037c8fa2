"""Stochastic-convert decomposition, as XLA's ``StochasticConvertDecomposer``
(``xla/hlo/transforms/expanders/stochastic_convert_decomposer.cc``).

``stochastic-convert(x, random)`` to a signed integer type becomes::

    negative   = sign(x) < 0
    whole      = floor(|x|)
    fraction   = |x| - whole                   (in f32 when x is f16)
    round_up   = random < convert(fraction * 2^bits(random))
    magnitude  = select(round_up, convert(whole) + 1, convert(whole))
    result     = select(negative, -magnitude, magnitude)

then clamped to the result type's bounds where ``x`` is at or beyond them.
Each step is exact (the fraction has fewer significant bits than ``x``, and
scaling by a power of two only moves the exponent), so the expansion rounds
exactly as the op does. XLA defines no expansion to other result types and
reports them as an error; xlapy does so for unsigned results and leaves float
results to the code generator's elemental rule.
"""

from __future__ import annotations

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.shapes.element_types import element_type
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type


def _float_bound_like(builder: ExpansionBuilder, operand: HloInstruction, bound: int) -> HloInstruction:
    """An integer bound rounded to the float ``operand``'s type (to infinity
    when beyond it, as XLA's ``MakeScalarLike`` does)."""
    with np.errstate(over="ignore"):
        return builder.scalar_like(operand, np.float64(bound).astype(operand.shape.dtype))


class StochasticConvertDecomposer(OpExpanderPass):
    """Rewrites every ``stochastic-convert`` with elementwise integer and float ops."""

    name = "stochastic_convert_decomposer"

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "stochastic-convert":
            return False
        # Checked while matching, so an unsupported op fails before anything is rewritten. A float result is
        # left to the code generator's elemental rule (``xlapy/codegen/elemental_stochastic_convert.py``).
        result_type = instruction.shape.element_type
        if element_type(result_type).kind is TypeKind.FLOAT:
            return False
        if element_type(result_type).kind is not TypeKind.SIGNED:
            operand_type = instruction.operands[0].shape.element_type
            raise UnimplementedError(f"{instruction.name}: stochastic-convert from {operand_type} to "
                                     f"{result_type} has no decomposition (only signed integer results)")
        return True

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        operand, random = instruction.operands
        shape = operand.shape
        result_type = instruction.shape.element_type
        result_shape = with_element_type(shape, result_type)
        pred_shape = with_element_type(shape, "pred")

        sign = builder.add("sign", shape, [operand])
        negative = builder.add("compare", pred_shape, [sign, builder.scalar_like(sign, 0)], {"direction": "LT"})
        magnitude = builder.add("abs", shape, [operand])
        whole = builder.add("floor", shape, [magnitude])
        fraction = builder.add("subtract", shape, [magnitude, whole])
        if shape.element_type == "f16":
            # 2^16 is beyond f16's largest finite value.
            fraction = builder.add("convert", with_element_type(shape, "f32"), [fraction])
        random_bits = element_type(random.shape.element_type).bit_width
        scaled = builder.add("multiply", fraction.shape,
                             [fraction, builder.scalar_like(fraction, float(2 ** random_bits))])
        threshold = builder.add("convert", random.shape, [scaled])
        round_up = builder.add("compare", pred_shape, [random, threshold], {"direction": "LT"})
        truncated = builder.add("convert", result_shape, [whole])
        incremented = builder.add("add", result_shape, [truncated, builder.scalar_like(truncated, 1)])
        rounded = builder.add("select", result_shape, [round_up, incremented, truncated])
        negated = builder.add("negate", result_shape, [rounded])
        result = builder.add("select", result_shape, [negative, negated, rounded])

        low, high = _bounds(result_type)
        at_low = builder.add("compare", pred_shape, [operand, _float_bound_like(builder, operand, low)],
                             {"direction": "LE"})
        result = builder.add("select", result_shape, [at_low, builder.scalar_like(result, low), result])
        at_high = builder.add("compare", pred_shape, [operand, _float_bound_like(builder, operand, high)],
                              {"direction": "GE"})
        return builder.add("select", result_shape, [at_high, builder.scalar_like(result, high), result])


def _bounds(signed_type: str) -> tuple[int, int]:
    bits = element_type(signed_type).bit_width
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
