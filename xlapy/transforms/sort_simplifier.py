"""Removal of the sort operands nobody needs, as XLA's ``SortSimplifier``
(``xla/hlo/transforms/simplifiers/sort_simplifier.cc``).

A multi-operand ``sort`` whose users are all ``get-tuple-element``s keeps
only the operands that are read (through a get-tuple-element) or compared
(the comparator uses parameter ``2i`` or ``2i+1``). The comparator is cloned
without the parameters of the dropped operands, the rest renumbered and named
``p.<i>.lhs`` / ``p.<i>.rhs``; the get-tuple-elements read the new sort (or
are replaced by it when one operand is left). A sort that is a computation's
root, or has another kind of user, is left alone.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import replace_called_computation, unique_computation_name
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import non_fusion_non_composite_computations, remove_instruction_and_unused_operands


def _comparator_without(comparator: HloComputation, kept: list[int], module: HloModule) -> HloComputation:
    """A copy of ``comparator`` taking only the parameter pairs of the operands in ``kept``."""
    copy = HloComputation(unique_computation_name(module, f"{comparator.name}.clone"))
    copy.execution_thread = comparator.execution_thread
    module.add_computation(copy)
    mapping: dict[int, HloInstruction] = {}
    for number, operand in enumerate(kept):
        for side, old_number in (("lhs", 2 * operand), ("rhs", 2 * operand + 1)):
            old = comparator.parameter(old_number)
            parameter = HloInstruction(f"p.{operand}.{side}", "parameter", old.shape)
            parameter.parameter_number = 2 * number + (side == "rhs")
            mapping[id(old)] = copy.add_instruction(parameter)
    for instruction in comparator.instructions:
        if instruction.opcode == "parameter":
            continue
        clone = instruction.clone([mapping[id(o)] for o in instruction.operands])
        mapping[id(instruction)] = copy.add_instruction(clone)
    assert comparator.root is not None
    copy.root = mapping[id(comparator.root)]
    return copy


def remove_unused_operands_from_sort(sort: HloInstruction) -> bool:
    """Drops ``sort``'s unneeded operands; returns whether it did."""
    computation = sort.parent
    assert computation is not None and computation.module is not None
    if not sort.shape.is_tuple or computation.root is sort:
        return False
    if any(user.opcode != "get-tuple-element" for user in sort.users):
        return False
    comparator = sort.called_computations[0]
    count = len(sort.operands)
    used = {int(user.attr("index")) for user in sort.users}
    used |= {i for i in range(count)
             if comparator.parameter(2 * i).users or comparator.parameter(2 * i + 1).users}
    if len(used) == count or not used:
        return False
    kept = sorted(used)
    operands = [sort.operands[i] for i in kept]
    shape = operands[0].shape if len(kept) == 1 else Shape.make_tuple([o.shape for o in operands])
    new_sort = sort.clone(operands)
    new_sort.name, new_sort.shape = sort.name, shape
    new_sort = computation.add_instruction(new_sort, before=sort)
    replace_called_computation(new_sort, 0, _comparator_without(comparator, kept, computation.module))
    results: dict[int, HloInstruction] = {}
    for position, index in enumerate(kept):
        if len(kept) == 1:
            results[index] = new_sort
        else:
            element = HloInstruction("get-tuple-element", "get-tuple-element", operands[position].shape,
                                     [new_sort], {"index": position})
            results[index] = computation.add_instruction(element, before=sort)
    for user in list(sort.users):
        user.replace_all_uses_with(results[int(user.attr("index"))])
        remove_instruction_and_unused_operands(computation, user)
    for result in results.values():
        if result is not new_sort and not result.users and computation.root is not result:
            computation.remove_instruction(result)
    return True


class SortSimplifier(HloPass):
    """Drops the operands of multi-operand sorts that neither the result's
    users nor the comparator need."""

    name = "simplify-sorts"

    def run(self, module: HloModule) -> bool:
        sorts = [instruction for computation in non_fusion_non_composite_computations(module)
                 for instruction in computation.instructions if instruction.opcode == "sort"]
        changed = False
        for sort in sorts:
            changed |= remove_unused_operands_from_sort(sort)
        return changed
