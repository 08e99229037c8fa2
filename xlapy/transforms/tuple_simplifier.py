"""Tuple simplification, as XLA's ``TupleSimplifier``
(``xla/hlo/transforms/simplifiers/tuple_simplifier.cc``).

Two rewrites, over every instruction of every computation in post order:

- a chain of ``get-tuple-element``s that reaches into ``tuple`` instructions
  all the way (``get-tuple-element(tuple(a, b), 1)``, or nested,
  ``get-tuple-element(get-tuple-element(tuple(tuple(a, b), c), 0), 1)``) is
  replaced by the element it selects (``b``);
- a ``tuple`` whose operands are ``get-tuple-element(x, 0)``,
  ``get-tuple-element(x, 1)``, ... of one ``x``, in order, with a shape
  compatible with ``x``'s, is replaced by ``x``.

Replacing follows XLA's ``ReplaceInstruction`` (see ``hlo_rewrites.py``):
nothing is replaced when the two carry different shardings; the replacement
inherits the annotations it lacks; the replaced instruction goes, with the
operands it leaves unused. Control dependencies move as XLA moves them: the
replaced instruction's control predecessors come before its users (or, if it
has none, before its control successors), and its control successors after
the replacement.

In a module read from StableHLO, ``tuple`` and ``get-tuple-element``
instructions that encode MLIR structure (an op's several results, a
region's several return values) are not ops of the program: they are left
as they are, and so is a chain through one, so that the module still prints
as the same MLIR structure. Real ``stablehlo.tuple`` and
``stablehlo.get_tuple_element`` ops are simplified like HLO's.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import drop_control_dependencies, replace_instruction, shapes_compatible


def _relay_control_dependencies(instruction: HloInstruction, replacement: HloInstruction) -> None:
    """Move ``instruction``'s control edges before it is replaced by the
    earlier ``replacement``, keeping every order they imposed (XLA's
    ``RelayControlDependenciesSafely``)."""
    for predecessor in instruction.control_predecessors:
        targets = instruction.users if instruction.users else instruction.control_successors
        for target in targets:
            if target is not predecessor:
                predecessor.add_control_dependency_to(target)
    for successor in instruction.control_successors:
        if successor is not replacement:
            replacement.add_control_dependency_to(successor)
    drop_control_dependencies(instruction)


def _whole_tuple_source(tuple_instr: HloInstruction) -> HloInstruction | None:
    """``x`` if ``tuple_instr`` is ``tuple(gte(x, 0), gte(x, 1), ...)`` of all
    of ``x``'s elements in order (compatible shapes), else None."""
    source = None
    for number, operand in enumerate(tuple_instr.operands):
        if (operand.opcode != "get-tuple-element" or operand.attributes.get("index") != number
                or encodes_mlir_structure(operand)):
            return None
        if source is None:
            source = operand.operands[0]
            if not shapes_compatible(source.shape, tuple_instr.shape):
                return None
        elif operand.operands[0] is not source:
            return None
    return source


def _selected_element(instruction: HloInstruction) -> HloInstruction | None:
    """What a chain of ``get-tuple-element``s ending at ``instruction``
    selects, when every step reaches into a ``tuple``; else None."""
    indices: list[int] = []
    ancestor = instruction
    while ancestor.opcode == "get-tuple-element":
        if encodes_mlir_structure(ancestor):
            return None
        indices.append(ancestor.attributes["index"])
        ancestor = ancestor.operands[0]
    if ancestor is instruction:
        return None
    selected = ancestor
    for index in reversed(indices):
        if selected.opcode != "tuple" or encodes_mlir_structure(selected):
            return None
        selected = selected.operands[index]
    return selected


class TupleSimplifier(HloPass):
    """Folds ``get-tuple-element`` of ``tuple`` and ``tuple`` of all
    ``get-tuple-element``s. With ``exclude_entry_computation`` the entry
    computation is left as it is."""

    name = "tuple-simplifier"

    def __init__(self, exclude_entry_computation: bool = False) -> None:
        self.exclude_entry_computation = exclude_entry_computation

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in list(module.computations):
            if self.exclude_entry_computation and computation is module.entry:
                continue
            for instruction in computation.post_order():
                if instruction.parent is not computation:
                    continue  # removed as an unused operand of an earlier replacement
                if instruction.opcode == "tuple":
                    if encodes_mlir_structure(instruction):
                        continue
                    replacement = _whole_tuple_source(instruction)
                else:
                    replacement = _selected_element(instruction)
                if replacement is None:
                    continue
                _relay_control_dependencies(instruction, replacement)
                changed |= replace_instruction(instruction, replacement, preserve_sharding=True)
        return changed
