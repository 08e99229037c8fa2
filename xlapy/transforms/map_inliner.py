"""Map inlining, as XLA's ``MapInliner`` (``xla/hlo/transforms/simplifiers/map_inliner.cc``): a ``map``
whose computation is one operation on its parameters becomes that operation on the map's operands.

- The computation returns one of its parameters: the map is that operand.
- It returns a constant: the map is the constant broadcast to the map's shape.
- It returns an elementwise op whose operands are all parameters: the map is that op, over the operands
  the parameters stand for, in the map's shape.

Any other computation keeps its ``map``, which the loop emitter computes by calling the computation per element.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass


def _inlinable_root(map_: HloInstruction) -> HloInstruction | None:
    root = map_.called_computations[0].root if len(map_.called_computations) == 1 else None
    if root is None or any(operand.opcode != "parameter" for operand in root.operands):
        return None
    if root.opcode in ("parameter", "constant"):
        return root
    spec = OPCODES.get(root.opcode)
    return root if spec is not None and spec.is_elementwise else None


class MapInliner(OpExpanderPass):
    """Replaces every ``map`` of a single parameter, constant or elementwise op by that op."""

    name = "map-inline"

    def matches(self, instruction: HloInstruction) -> bool:
        return instruction.opcode == "map" and _inlinable_root(instruction) is not None

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        root = _inlinable_root(instruction)
        assert root is not None
        if root.opcode == "parameter":
            return instruction.operands[root.parameter_number]
        if root.opcode == "constant":
            scalar = builder.scalar_constant(root.literal, root.shape.element_type)
            return scalar if instruction.shape.rank == 0 else builder.broadcast_scalar(scalar, instruction.shape)
        operands = [instruction.operands[operand.parameter_number] for operand in root.operands]
        return builder.add(root.opcode, instruction.shape, operands, dict(root.attributes))
