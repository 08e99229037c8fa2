"""Conditionals made to return tuples, as XLA's ``ConditionalCanonicalizer``
(``xla/hlo/transforms/simplifiers/conditional_canonicalizer.cc``).

A ``conditional`` whose result is not a tuple is replaced by
``get-tuple-element(conditional'), index=0``, where ``conditional'`` returns
a one-element tuple and calls copies of the branches (``<name>.clone``, as
other instructions may call the originals) whose roots are wrapped in a
``tuple``. Computations are visited from the entry inwards, each
instruction in post order; the branches no longer called go.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import clone_computation, replace_called_computation
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import replace_instruction


def _canonicalize(conditional: HloInstruction) -> HloInstruction:
    computation = conditional.parent
    module = computation.module
    wrapped = conditional.clone(list(conditional.operands))
    wrapped.name = conditional.name
    wrapped.shape = Shape.make_tuple([conditional.shape])
    for position, branch in enumerate(list(wrapped.called_computations)):
        copy = clone_computation(branch, module)
        copy.root = copy.add_instruction(HloInstruction("tuple", "tuple", wrapped.shape, [copy.root]))
        replace_called_computation(wrapped, position, copy)
    wrapped = computation.add_instruction(wrapped, before=conditional)
    element = computation.add_instruction(HloInstruction(
        "get-tuple-element", "get-tuple-element", conditional.shape, [wrapped], {"index": 0}), before=conditional)
    replace_instruction(conditional, element)
    return wrapped


class ConditionalCanonicalizer(HloPass):
    """Gives every ``conditional`` a tuple result."""

    name = "conditional-canonicalizer"

    def run(self, module: HloModule) -> bool:
        if module.entry is None:
            return False
        changed = False
        agenda, visited = [module.entry], set()
        before = {id(c) for c in module.computations}
        while agenda:
            computation = agenda.pop()
            if id(computation) in visited:
                continue
            visited.add(id(computation))
            for instruction in computation.post_order():
                if instruction.opcode == "conditional" and not instruction.shape.is_tuple:
                    if instruction.control_predecessors or instruction.control_successors:
                        continue  # the replacement would drop the order they impose
                    instruction = _canonicalize(instruction)
                    changed = True
                agenda.extend(instruction.called_computations)
        if changed:
            called = {id(c) for i in module.instructions for c in i.called_computations}
            for computation in [c for c in module.computations if id(c) in before and id(c) not in called
                                and c is not module.entry]:
                module.computations.remove(computation)
                for instruction in computation.instructions:
                    module.names.discard(instruction.name)
        return changed
