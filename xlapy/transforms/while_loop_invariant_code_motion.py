"""Loop-invariant code motion out of while bodies, as XLA's
``WhileLoopInvariantCodeMotion`` (``xla/service/while_loop_invariant_code_motion.cc``)
with its default options (constants and reshapes are not hoisted on their
own, everything else is, whatever its size).

A value of the body is invariant when it is a constant, a read of a state
element the body returns unchanged (``while_util.invariant_elements``), or an
instruction without side effects or control dependencies whose operands are
all invariant. Body instructions are visited in post order; an invariant one
is copied before the loop, with the invariant operands it needs (a read of
the state becomes a read of the loop's initial value), and the loop is
widened to carry the copy in as one more state element, which the body reads
in place of the instruction (``while_util.make_instructions_live_in``).
Constants, reshapes, bitcasts, broadcasts, iotas, reverses, slices,
transposes, tuples and ``Sharding`` custom calls are not worth a state
element of their own: they move only as operands of something that does.

Loops are left alone when their state is not a tuple, when they run at most
once (``while_util.trip_count_upper_bound``), when their body has a
``domain`` or an SPMD shape custom call, or when the frontend attribute
``_xla_disable_loop_instr_hoisting`` is set. Loops are visited callees
first, so an inner loop's hoisted values can leave the outer one too. When
anything moved, dead code elimination and the tuple simplifier clean up, as
in XLA.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction, HloModule, while_condition_and_body
from xlapy.transforms.call_graph import clone_instruction
from xlapy.transforms.call_inliner import frontend_attributes
from xlapy.transforms.dce import HloDCE
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import has_control_dependencies, has_side_effect, replace_instruction
from xlapy.transforms.tuple_simplifier import TupleSimplifier
from xlapy.transforms.while_util import invariant_elements, make_instructions_live_in, trip_count_upper_bound

# Worth hoisting only to let a user of theirs be hoisted (``NotWorthHoistingIndividually``).
_NOT_WORTH_HOISTING_ALONE = frozenset({"bitcast", "broadcast", "iota", "reverse", "slice", "transpose", "tuple"})
_BODIES_NOT_TOUCHED = frozenset({"SPMDFullToShardShape", "SPMDShardShapeToFull"})
DISABLE_ATTRIBUTE = "_xla_disable_loop_instr_hoisting"


def _custom_call_target(instruction: HloInstruction) -> str | None:
    if instruction.opcode != "custom-call":
        return None
    return str(instruction.attr("custom_call_target", "")).strip('"')


class WhileLoopInvariantCodeMotion(HloPass):
    """Hoists loop-invariant instructions out of while bodies."""

    name = "while-loop-invariant-code-motion"

    def __init__(self, hoist_constants: bool = False, hoist_reshapes: bool = False, hoist_other: bool = True) -> None:
        self.hoist_constants = hoist_constants
        self.hoist_reshapes = hoist_reshapes
        self.hoist_other = hoist_other

    def _not_worth_hoisting_alone(self, instruction: HloInstruction) -> bool:
        if _custom_call_target(instruction) == "Sharding":
            return True
        if instruction.opcode == "constant":
            return not self.hoist_constants
        if instruction.opcode == "reshape":
            return not self.hoist_reshapes
        return instruction.opcode in _NOT_WORTH_HOISTING_ALONE

    def run(self, module: HloModule) -> bool:
        loops = [instruction for computation in module.computation_post_order()
                 for instruction in computation.instructions if instruction.opcode == "while"]
        changed = False
        for loop in loops:
            if loop.parent is None or DISABLE_ATTRIBUTE in frontend_attributes(loop):
                continue
            changed |= self._hoist_from(loop)
        if changed:
            HloDCE().run(module)
            TupleSimplifier().run(module)
        return changed

    def _hoist_from(self, loop: HloInstruction) -> bool:
        if not loop.shape.is_tuple:
            return False
        bound = trip_count_upper_bound(loop)
        if bound is not None and bound <= 1:
            return False
        _, body = while_condition_and_body(loop)
        parameter = body.parameter(0)
        # Invariant values left in the body for now; ids -> instruction.
        unhoisted = {id(i): i for i in invariant_elements(body) if i.shape.is_array}
        if not unhoisted and not self.hoist_constants:
            return False
        if any(i.opcode == "domain" or _custom_call_target(i) in _BODIES_NOT_TOUCHED for i in body.instructions):
            return False
        hoisted: dict[int, HloInstruction] = {}  # id of a body instruction -> its copy before the loop

        def is_invariant(operand: HloInstruction) -> bool:
            return operand.opcode == "constant" or id(operand) in hoisted or id(operand) in unhoisted

        def copy_before_loop(instruction: HloInstruction) -> None:
            # Operands first, depth first; the parameter stands for the loop's initial value.
            stack = [(instruction, 0)]
            while stack:
                current, position = stack.pop()
                if position < len(current.operands):
                    stack.append((current, position + 1))
                    operand = current.operands[position]
                    if operand is not parameter and id(operand) not in hoisted:
                        stack.append((operand, 0))
                    continue
                operands = [loop.operands[0] if o is parameter else hoisted[id(o)] for o in current.operands]
                copy = clone_instruction(current, operands, loop.parent.module, suffix=None)
                hoisted[id(current)] = loop.parent.add_instruction(copy, before=loop)
                unhoisted.pop(id(current), None)

        to_replace: list[HloInstruction] = []
        for instruction in body.post_order():
            if (instruction.opcode in ("parameter", "after-all") or has_side_effect(instruction)
                    or has_control_dependencies(instruction)):
                continue
            if not self.hoist_other and instruction.opcode not in ("constant", "reshape"):
                continue
            if not all(is_invariant(o) for o in instruction.operands):
                continue
            if self._not_worth_hoisting_alone(instruction):
                if instruction.opcode != "constant":
                    unhoisted[id(instruction)] = instruction
                continue
            copy_before_loop(instruction)
            to_replace.append(instruction)
        if not to_replace:
            return False
        widened = make_instructions_live_in(loop, [hoisted[id(i)] for i in to_replace])
        for instruction, value in zip(to_replace, widened.live_in_values, strict=True):
            replace_instruction(widened.body_copies[id(instruction)], value)
        return True
