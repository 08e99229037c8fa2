"""Small builders the rule families share: shapes of new instructions and
the common instructions XLA's ``hlo_creation_utils`` make (transposes,
reshapes, converts, broadcasts, scalar constants)."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import Shape
from xlapy.transforms.algebraic.registry import Simplifier


def array_shape(like: Shape, element_type: str, dims: Sequence[int]) -> Shape:
    """A new array shape, with the default layout when ``like`` has a layout
    (XLA's ``ShapeUtil::MakeShape`` followed by ``UpdateLayout``)."""
    shape = Shape.array(element_type, tuple(dims))
    return shape if like.layout is None else shape.with_default_layout()


def scalar(s: Simplifier, value: int | float, element_type: str, before: HloInstruction) -> HloInstruction:
    """A scalar constant of ``element_type``."""
    return s.constant(value, Shape.array(element_type, ()), before=before)


def transpose(s: Simplifier, operand: HloInstruction, permutation: Sequence[int],
              before: HloInstruction) -> HloInstruction:
    """``operand`` transposed (result dimension i is operand dimension
    ``permutation[i]``), or ``operand`` itself for the identity."""
    permutation = tuple(permutation)
    if permutation == tuple(range(len(permutation))):
        return operand
    dims = [operand.shape.dimensions[p] for p in permutation]
    shape = array_shape(operand.shape, operand.shape.element_type, dims)
    return s.add("transpose", shape, [operand], {"dimensions": permutation}, before=before)


def reshape(s: Simplifier, operand: HloInstruction, dims: Sequence[int], before: HloInstruction) -> HloInstruction:
    shape = array_shape(operand.shape, operand.shape.element_type, dims)
    return s.add("reshape", shape, [operand], before=before)


def convert(s: Simplifier, operand: HloInstruction, element_type: str, before: HloInstruction) -> HloInstruction:
    """``operand`` in ``element_type`` (itself when it already is)."""
    if operand.shape.element_type == element_type:
        return operand
    shape = array_shape(operand.shape, element_type, operand.shape.dimensions)
    return s.add("convert", shape, [operand], before=before)


def broadcast(s: Simplifier, operand: HloInstruction, shape: Shape, dimensions: Sequence[int],
              before: HloInstruction) -> HloInstruction:
    return s.add("broadcast", shape, [operand], {"dimensions": tuple(dimensions)}, before=before)


def zeros_like(s: Simplifier, instr: HloInstruction) -> HloInstruction:
    """0 in ``instr``'s element type broadcast to its shape (XLA's ``MakeScalarLike(instr, 0)``)."""
    return s.scalar_like(instr, 0)
