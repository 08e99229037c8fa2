"""The frame of the passes that expand one kind of instruction into several
simpler ones, as XLA's ``OpExpanderPass``
(``xla/hlo/transforms/expanders/op_expander_pass.cc``).

The matching instructions of every computation but fused ones and those of
composite calls are collected first (in post order), then each is expanded
and the expansion takes its place (XLA's ``ReplaceInstruction``: users, root,
the annotations the expansion lacks; the operands left unused go). An
instruction ordered by control dependencies is left as it is, since the
replacement would drop the order.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from typing import Any

import numpy as np

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    non_fusion_non_composite_computations,
    replace_instruction,
)


def with_element_type(shape: Shape, element_type: str) -> Shape:
    """``shape`` with another element type, dimensions and layout kept (XLA's
    ``ShapeUtil::ChangeElementType``)."""
    return replace(shape, element_type=element_type)


class ExpansionBuilder:
    """Adds the instructions of an expansion to a computation, just before the
    instruction being expanded (so that they follow its operands)."""

    def __init__(self, instruction: HloInstruction) -> None:
        assert instruction.parent is not None, f"{instruction.name} is in no computation"
        self.computation = instruction.parent
        self.before = instruction

    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction],
            attributes: dict[str, Any] | None = None) -> HloInstruction:
        """A new instruction named after its opcode."""
        return self.computation.add_instruction(HloInstruction(opcode, opcode, shape, operands, attributes),
                                                before=self.before)

    def scalar_constant(self, value: Any, element_type: str) -> HloInstruction:
        constant = HloInstruction("constant", "constant", Shape.array(element_type, ()))
        constant.literal = np.asarray(value, dtype=constant.shape.dtype)
        return self.computation.add_instruction(constant, before=self.before)

    def broadcast_scalar(self, scalar: HloInstruction, shape: Shape) -> HloInstruction:
        """``scalar`` broadcast to ``shape`` (its element type taken from ``scalar``)."""
        return self.add("broadcast", with_element_type(shape, scalar.shape.element_type), [scalar],
                        {"dimensions": ()})

    def scalar_like(self, like: HloInstruction, value: Any) -> HloInstruction:
        """``value`` in ``like``'s element type, broadcast to its shape unless it
        is a scalar (XLA's ``MakeScalarLike``)."""
        scalar = self.scalar_constant(value, like.shape.element_type)
        return scalar if like.shape.rank == 0 else self.broadcast_scalar(scalar, like.shape)


class OpExpanderPass(HloPass):
    """Expands every instruction ``matches`` accepts into what ``expand`` builds."""

    @abstractmethod
    def matches(self, instruction: HloInstruction) -> bool:
        """Whether ``instruction`` is one this pass expands."""

    @abstractmethod
    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction | None:
        """Builds the expansion of ``instruction`` with ``builder`` and returns
        its root (None: leave the instruction as it is)."""

    def run(self, module: HloModule) -> bool:
        matching = [instruction for computation in non_fusion_non_composite_computations(module)
                    for instruction in computation.post_order()
                    if self.matches(instruction) and not has_control_dependencies(instruction)]
        changed = False
        for instruction in matching:
            expanded = self.expand(instruction, ExpansionBuilder(instruction))
            if expanded is not None:
                changed |= replace_instruction(instruction, expanded)
        return changed
