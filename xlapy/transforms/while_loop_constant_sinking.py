"""Constants sunk into while loops, as XLA's ``WhileLoopConstantSinking``
(``xla/service/while_loop_constant_sinking.cc``) with its default options.

When a state element the body returns unchanged (``while_util.invariant_elements``)
starts as a constant (operand of the loop's initial ``tuple``), the body's
and condition's reads of it can use a copy of that constant instead
(``<constant>.sunk``), which later passes can fold. The body keeps returning
the element (the root's use stays), so the state is unchanged. The loop gets
copies of its body and condition (``<name>.sunk``) before any edit, as other
loops may share them; the old ones go once nothing calls them.

Loops are visited from the entry inwards, so a constant sunk into an outer
loop can be sunk into an inner one in the same run. With
``sink_broadcast_of_constants`` a broadcast of a constant is sunk too; with
``sink_only_scalar_constants`` only scalars are.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, while_condition_and_body
from xlapy.transforms.call_graph import clone_computation, clone_instruction, replace_called_computation
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.while_util import condition_elements, invariant_elements

_SUFFIX = "sunk"


def _copy_into(value: HloInstruction, computation: HloComputation) -> HloInstruction:
    """A copy of the constant (or broadcast of a constant) ``value`` at the start of ``computation``."""
    module = computation.module
    first = computation.instructions[0]
    if value.opcode == "constant":
        return computation.add_instruction(clone_instruction(value, [], module, suffix=_SUFFIX), before=first)
    operand = _copy_into(value.operands[0], computation)
    return computation.add_instruction(clone_instruction(value, [operand], module, suffix=None), before=first)


def _called_computations(module: HloModule) -> set[int]:
    return {id(c) for i in module.instructions for c in i.called_computations}


class WhileLoopConstantSinking(HloPass):
    """Replaces reads of loop-invariant constant state elements by the constants."""

    name = "while-loop-constant-sinking"

    def __init__(self, sink_broadcast_of_constants: bool = False, sink_only_scalar_constants: bool = False) -> None:
        self.sink_broadcast_of_constants = sink_broadcast_of_constants
        self.sink_only_scalar_constants = sink_only_scalar_constants

    def _sinkable(self, value: HloInstruction) -> bool:
        if value.opcode != "constant" and not (
                self.sink_broadcast_of_constants and value.opcode == "broadcast"
                and value.operands[0].opcode == "constant"):
            return False
        return not self.sink_only_scalar_constants or value.shape.is_scalar

    def run(self, module: HloModule) -> bool:
        if module.entry is None:
            return False
        changed = False
        replaced: list[HloComputation] = []
        agenda, visited = [module.entry], set()
        while agenda:
            computation = agenda.pop()
            if id(computation) in visited:
                continue
            visited.add(id(computation))
            for instruction in list(computation.instructions):
                # Sinking gives the loop new computations: visit those.
                if instruction.opcode == "while":
                    old = while_condition_and_body(instruction)
                    if self._sink_into(instruction):
                        changed = True
                        replaced.extend(old)
                agenda.extend(instruction.called_computations)
        called = _called_computations(module)
        for computation in replaced:
            if id(computation) not in called and computation in module.computations:
                module.computations.remove(computation)
                for instruction in computation.instructions:
                    module.names.discard(instruction.name)
        return changed

    def _sink_into(self, loop: HloInstruction) -> bool:
        init = loop.operands[0]
        if init.opcode != "tuple":
            return False
        condition, body = while_condition_and_body(loop)
        condition_reads = condition_elements(condition)
        module = loop.parent.module
        body_copy: dict[int, HloInstruction] | None = None
        condition_copy: dict[int, HloInstruction] | None = None
        new_body = new_condition = None
        for read in invariant_elements(body):
            index = int(read.attr("index"))
            value = init.operands[index]
            if not self._sinkable(value):
                continue
            # Worth it only with a user besides the root, which keeps returning the element.
            if len(read.users) > 1:
                if body_copy is None:
                    new_body, body_copy = _clone(body, module)
                    replace_called_computation(loop, loop.called_computations.index(body), new_body)
                constant = _copy_into(value, new_body)
                _replace_uses_but_the_root_element(body_copy[id(read)], constant, new_body.root, index)
            for condition_read in condition_reads.get(index, []):
                if not condition_read.users:
                    continue
                if condition_copy is None:
                    new_condition, condition_copy = _clone(condition, module)
                    replace_called_computation(loop, loop.called_computations.index(condition), new_condition)
                constant = _copy_into(value, new_condition)
                copied_read = condition_copy[id(condition_read)]
                copied_read.replace_all_uses_with(constant)
                new_condition.remove_instruction(copied_read)
        return body_copy is not None or condition_copy is not None


def _clone(computation: HloComputation, module: HloModule) -> tuple[HloComputation, dict[int, HloInstruction]]:
    """A copy named ``<name>.sunk``, and the map from id of each instruction to its copy."""
    copy = clone_computation(computation, module, suffix=_SUFFIX)
    return copy, {id(old): new for old, new in zip(computation.instructions, copy.instructions, strict=True)}


def _replace_uses_but_the_root_element(old: HloInstruction, new: HloInstruction, root: HloInstruction,
                                       index: int) -> None:
    for user in list(old.users):
        for position, operand in enumerate(user.operands):
            if operand is old and not (user is root and position == index):
                user.replace_operand(position, new)
