"""Dead code elimination, as XLA's ``HloDCE``
(``xla/hlo/transforms/simplifiers/hlo_dce.cc``).

An instruction is dead when nothing uses it and it is not its computation's
root. A dead instruction goes unless it is a parameter (removing one would
change the computation's signature), has control dependencies (they order it
against others), or has a side effect (``HasSideEffect`` in
``xla/hlo/ir/hlo_instruction.cc``: sends, receives, feeds, random numbers,
asynchronous collectives, layout-constrained or channel collectives,
custom-calls declaring ``custom_call_has_side_effect=true``, and any
instruction calling a computation with such an instruction). Computations
are visited callers first, so that removing a caller's dead uses of a
multi-output fusion lets the fusion drop the outputs nobody reads. Then the
computations no longer reachable from the entry are removed.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import has_side_effect


def _can_remove(instruction: HloInstruction) -> bool:
    computation = instruction.parent
    if computation is None or instruction.users or instruction is computation.root:
        return False
    if instruction.opcode == "parameter" or instruction.control_predecessors or instruction.control_successors:
        return False
    # A value that only encodes the structure of an MLIR op (one result of a
    # multi-result op) goes with that op, never alone.
    if instruction.encodes_mlir_structure:
        return False
    if instruction.opcode == "custom-call" and instruction.attr("custom_call_target") == "Sharding":
        # Removing it would lose the sharding of a value still in use.
        operand = instruction.operands[0] if instruction.operands else None
        if operand is None or operand is computation.root or operand.opcode == "parameter" or len(operand.users) != 1:
            return False
    # Ops of an MLIR dialect that HLO lacks are not known to be pure.
    return instruction.opcode in OPCODES and not has_side_effect(instruction)


def _remove_unused_fusion_outputs(computation: HloComputation) -> bool:
    """Drop the outputs of a multi-output fusion that no get-tuple-element
    of the fusion reads (XLA's ``RemoveMultiOutputFusionsUnusedOutputs``)."""
    fusion = computation.fusion_instruction
    root = computation.root
    if fusion is None or root is None or root.opcode != "tuple" or "sharding" in root.attributes:
        return False
    if fusion.attr("output_to_operand_aliasing") is not None or fusion.attr("kind") == "kCustom":
        return False
    if fusion.control_predecessors or fusion.control_successors or not fusion.users:
        return False
    if fusion.parent is not None and fusion is fusion.parent.root:
        return False
    if any(user.opcode != "get-tuple-element" for user in fusion.users):
        return False
    used = {user.attr("index") for user in fusion.users}
    used |= {i for i, output in enumerate(root.operands) if has_side_effect(output)}
    if len(used) == len(root.operands):
        return False
    kept = sorted(used)
    shapes = [fusion.shape.tuple_shapes[i] for i in kept]
    if len(kept) > 1:
        fusion.shape = Shape("tuple", tuple_shapes=tuple(shapes))
        for user in fusion.users:
            user.attributes["index"] = kept.index(user.attr("index"))
        new_root = computation.add_instruction(HloInstruction(
            root.name, "tuple", fusion.shape, [root.operands[i] for i in kept]))
        computation.root = new_root
    else:
        fusion.shape = shapes[0]
        for user in list(fusion.users):
            # The fusion's value is now the element the user read; its control
            # edges move to the fusion.
            for predecessor in user.control_predecessors:
                predecessor.add_control_dependency_to(fusion)
            for successor in user.control_successors:
                fusion.add_control_dependency_to(successor)
            user.replace_all_uses_with(fusion)
            user.parent.remove_instruction(user)
        computation.root = root.operands[kept[0]]
    return True


def _remove_dead_instructions(computation: HloComputation) -> bool:
    """Remove every removable dead instruction; users come before their
    operands in reverse post order, so operands left dead go in the same walk."""
    changed = False
    for instruction in reversed(computation.post_order()):
        if _can_remove(instruction):
            computation.remove_instruction(instruction)
            changed = True
    return changed


class HloDCE(HloPass):
    """Removes dead instructions and, with ``remove_dead_computations``, the
    computations the entry no longer reaches."""

    name = "dce"

    def __init__(self, remove_dead_computations: bool = True) -> None:
        self.remove_dead_computations = remove_dead_computations

    def run(self, module: HloModule) -> bool:
        changed = False
        if module.entry is None:
            return False
        agenda, visited = [module.entry], {id(module.entry)}
        while agenda:
            computation = agenda.pop()
            changed |= _remove_unused_fusion_outputs(computation)
            changed |= _remove_dead_instructions(computation)
            for instruction in computation.instructions:
                for callee in instruction.called_computations:
                    if id(callee) not in visited:
                        visited.add(id(callee))
                        agenda.append(callee)
        if self.remove_dead_computations:
            changed |= _remove_unreachable_computations(module)
        return changed


def _remove_unreachable_computations(module: HloModule) -> bool:
    reachable, pending = {id(module.entry)}, [module.entry]
    while pending:
        for callee in pending.pop().called_computations():
            if id(callee) not in reachable:
                reachable.add(id(callee))
                pending.append(callee)
    dead = [c for c in module.computations if id(c) not in reachable]
    for computation in dead:
        module.computations.remove(computation)
        for instruction in computation.instructions:
            module.names.discard(instruction.name)
    return bool(dead)
