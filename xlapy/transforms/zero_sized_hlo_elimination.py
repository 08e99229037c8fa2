"""Zero-sized array elimination, as XLA's ``ZeroSizedHloElimination``
(``xla/hlo/transforms/simplifiers/zero_sized_hlo_elimination.cc``).

An array of no elements has one value, so an instruction producing one
(static shape, no side effects, not already a constant) is replaced by an
empty constant of its shape (printed ``f32[0]{0} constant({})``; given the
default layout if it has none), which takes its annotations; the
instruction goes with the operands it leaves unused. A parameter cannot go:
its users (and the root, if it is) use a new empty constant instead, unless
it has control dependencies. Instructions with control dependencies stay.

Fused computations and computations of composite calls are left alone, as
in XLA. So are instructions that only encode MLIR structure and ops HLO has
no opcode for (in a module read from StableHLO).
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    has_side_effect,
    is_dead,
    is_hlo_op,
    is_safely_removable,
    non_fusion_non_composite_computations,
    replace_instruction,
)


def _empty_constant(shape: Shape) -> HloInstruction:
    constant = HloInstruction("constant", "constant", shape)
    constant.literal = np.zeros(shape.dimensions, dtype=shape.dtype)
    return constant


def _is_eliminable(instruction: HloInstruction) -> bool:
    shape = instruction.shape
    if not shape.is_array or shape.is_dynamic or shape.element_count != 0:
        return False
    return instruction.opcode != "constant" and is_hlo_op(instruction) and not has_side_effect(instruction)


class ZeroSizedHloElimination(HloPass):
    """Replaces the values of arrays of no elements by empty constants."""

    name = "zero-sized-hlo-elimination"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in non_fusion_non_composite_computations(module):
            for instruction in computation.post_order():
                if instruction.parent is not computation or not _is_eliminable(instruction):
                    continue
                if is_safely_removable(instruction):
                    constant = _empty_constant(instruction.shape.with_default_layout())
                    computation.add_instruction(constant, before=instruction)
                    changed |= replace_instruction(instruction, constant)
                elif (instruction.opcode == "parameter" and not has_control_dependencies(instruction)
                      and not is_dead(instruction)):
                    constant = _empty_constant(instruction.shape)
                    computation.add_instruction(constant, before=instruction)
                    instruction.replace_all_uses_with(constant)
                    changed = True
        return changed
