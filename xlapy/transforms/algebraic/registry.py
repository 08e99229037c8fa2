"""The algebraic simplifier's per-opcode rules and the edits they share.

A rule is ``rule(instruction, simplifier) -> bool``: it may replace
``instruction`` through the ``Simplifier``'s helpers and says whether it did.
The helpers follow XLA's ``AlgebraicSimplifierVisitor``
(``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``): a replacement by
an existing value needs the same shape and must not lose a sharding
(``ReplaceInstructionIfCompatible``); the replaced instruction goes, with the
operands it leaves unused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.registry import registrar
from xlapy.shapes import Shape, TypeKind
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    replace_instruction,
    shapes_compatible,
    shapes_equal,
)


@dataclass(frozen=True)
class SimplifierOptions:
    """The options of XLA's ``AlgebraicSimplifierOptions`` the rules here read."""

    # Layouts matter: a replacement must have the same layout, not just the same dimensions.
    is_layout_sensitive: bool = False


class Simplifier:
    """What a rule needs: the computation being simplified, the options, and
    XLA's ways of replacing one instruction by another."""

    def __init__(self, computation: HloComputation, options: SimplifierOptions):
        self.computation = computation
        self.options = options

    def same_shape(self, a: Shape, b: Shape) -> bool:
        return shapes_equal(a, b) if self.options.is_layout_sensitive else shapes_compatible(a, b)

    def replace_if_compatible(self, old: HloInstruction, new: HloInstruction) -> bool:
        """``new`` in place of ``old`` when both have the same shape, ``old``
        has no control predecessors and no sharding would be lost."""
        if old.control_predecessors or not self.same_shape(old.shape, new.shape):
            return False
        return replace_instruction(old, new, preserve_sharding=True)

    def replace(self, old: HloInstruction, new: HloInstruction) -> bool:
        """``new`` in place of ``old`` (XLA's ``ReplaceInstruction``)."""
        return replace_instruction(old, new)

    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction], attributes: dict[str, Any] | None = None,
            before: HloInstruction | None = None) -> HloInstruction:
        """A new instruction named after its opcode, placed before ``before``
        (so that it comes after its operands)."""
        instr = HloInstruction(opcode, opcode, shape, operands, attributes)
        return self.computation.add_instruction(instr, before=before)

    def replace_with_new(self, old: HloInstruction, opcode: str, shape: Shape, operands: list[HloInstruction],
                         attributes: dict[str, Any] | None = None) -> bool:
        """A new instruction in place of ``old`` (XLA's ``ReplaceWithNewInstruction``);
        nothing happens to an instruction ordered by control dependencies."""
        if has_control_dependencies(old):
            return False
        return replace_instruction(old, self.add(opcode, shape, operands, attributes, before=old))

    def constant(self, value: Any, shape: Shape, before: HloInstruction) -> HloInstruction:
        instr = HloInstruction("constant", "constant", shape)
        instr.literal = np.asarray(value, dtype=shape.dtype)
        return self.computation.add_instruction(instr, before=before)

    def scalar_like(self, instr: HloInstruction, value: int) -> HloInstruction:
        """``value`` in ``instr``'s element type, broadcast to its shape (XLA's ``MakeScalarLike``)."""
        scalar = self.constant(value, Shape.array(instr.shape.element_type, ()), before=instr)
        if instr.shape.rank == 0:
            return scalar
        return self.add("broadcast", instr.shape, [scalar], {"dimensions": ()}, before=instr)


def literal_is_all(instr: HloInstruction, value: int) -> bool:
    """Whether every element of constant ``instr`` is ``value``, bit for bit
    (XLA's ``Literal::IsAll``: -0.0 is not 0)."""
    shape, literal = instr.shape, instr.literal
    if not shape.is_array or not isinstance(literal, np.ndarray):
        return False
    kind = shape.type.kind
    if kind is TypeKind.PRED:
        return value in (0, 1) and bool(np.all(literal == bool(value)))
    if kind is TypeKind.UNSIGNED and value < 0:
        return False
    converted = np.asarray(value).astype(shape.dtype)
    if kind in (TypeKind.SIGNED, TypeKind.UNSIGNED) and int(converted) != value:
        return False
    if kind is TypeKind.FLOAT and float(converted) != value:
        return False
    expected = np.full(literal.shape, converted, dtype=shape.dtype)
    return np.ascontiguousarray(literal, dtype=shape.dtype).tobytes() == expected.tobytes()


def is_all(instr: HloInstruction, value: int) -> bool:
    """A constant, or a broadcast (of a broadcast ...) of one, all of whose
    elements are ``value`` (XLA's ``IsAll``)."""
    while instr.opcode == "broadcast":
        instr = instr.operands[0]
    return instr.opcode == "constant" and literal_is_all(instr, value)


Rule = Callable[[HloInstruction, Simplifier], bool]

# opcode -> rule; register with ``@rule("opcode", ...)``.
RULES: dict[str, Rule] = {}

rule = registrar(RULES, "algebraic simplifier rules")
