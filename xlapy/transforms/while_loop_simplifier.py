"""The parts of XLA's ``WhileLoopSimplifier`` (``xla/service/while_loop_simplifier.cc``) xlapy has:

- ``TryRemoveWhileLoop``: a loop without side effects and without control dependencies whose trip count
  (``while_loop_analysis.trip_count``) is 0 is replaced by its initial value; one of a single trip by a copy
  of its body applied to the initial value (a ``call`` of the body, then inlined, as XLA does).
- ``TryRemoveConstantParams``: a state element that starts as a constant and that the body sets to an equal
  constant is no longer carried; the condition, the body and the loop's users read the constant.
- ``TryRemoveRepeatedWhileTupleIndices``: state elements that start as the same instruction and that the body
  passes through unchanged are carried once.
- ``TryRemoveDeadWhileParams``: a state element the loop does not read (not the condition, and in the body
  nothing but the computation of its own next value) is no longer carried, with that computation: when the
  body passes it through unchanged, the loop's users read its initial value instead; otherwise only when
  nothing reads it after the loop.

Each of the last three narrows the loop with ``while_util.narrow_loop``. Left out of XLA's pass: flattening
nested state tuples, merging induction variables, repeated elements updated by dynamic-update-slices, and
propagating constants into the condition.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, while_condition_and_body
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import clone_instruction
from xlapy.transforms.call_inliner import inline
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    has_side_effect,
    non_fusion_non_composite_computations,
    replace_instruction,
)
from xlapy.transforms.while_loop_analysis import trip_count
from xlapy.transforms.while_util import StandIn, element, narrow_loop


class WhileLoopSimplifier(HloPass):
    """Replaces while loops of zero or one trips by what they compute, and stops carrying the state elements
    they do not need to carry."""

    name = "simplify-while-loops"

    def run(self, module: HloModule) -> bool:
        loops = [instruction for computation in non_fusion_non_composite_computations(module)
                 for instruction in computation.instructions if instruction.opcode == "while"]
        changed = False
        for loop in loops:
            if loop.parent is None or has_control_dependencies(loop):
                continue
            if not has_side_effect(loop):
                trips = trip_count(loop)
                if trips == 0:
                    changed |= replace_instruction(loop, loop.operands[0])
                    continue
                if trips == 1:
                    _, body = while_condition_and_body(loop)
                    call = HloInstruction("call", "call", loop.shape, [loop.operands[0]], {"to_apply": body.name},
                                          [body])
                    call = loop.parent.add_instruction(call, before=loop)
                    replace_instruction(loop, call)
                    inline(call)
                    changed = True
                    continue
            stand_ins, outside = removable_state(loop)
            if stand_ins:
                narrow_loop(loop, stand_ins, outside)
                changed = True
        return changed


def removable_state(loop: HloInstruction) -> tuple[dict[int, StandIn], dict[int, StandIn]]:
    """The state elements of ``loop`` it need not carry, each with what stands for it in the loop and, where
    that differs, after it (``while_util.narrow_loop``'s arguments): constants, repeats of an element passed
    through, and elements the loop does not read (see the module's docstring). Nothing unless the initial state
    and the body's result are ``tuple`` instructions."""
    _, body = while_condition_and_body(loop)
    init, root = loop.operands[0], body.root
    if not loop.shape.is_tuple or init.opcode != "tuple" or root is None or root.opcode != "tuple":
        return {}, {}
    parameter = body.parameter(0)
    stand_ins: dict[int, StandIn] = {}
    for index, (start, update) in enumerate(zip(init.operands, root.operands)):
        if _same_constant(start, update):
            stand_ins[index] = _constant_stand_in(start)
    first_of: dict[int, int] = {}  # id of an initial value -> the first element passing it through
    repeated: set[int] = set()
    for index, start in enumerate(init.operands):
        if index in stand_ins or not _is_element(root.operands[index], parameter, index):
            continue
        first = first_of.setdefault(id(start), index)
        if first != index:
            stand_ins[index] = _repeat_stand_in(first, stand_ins)
            repeated.add(first)
    outside: dict[int, StandIn] = {}
    read_after = _read_after(loop)
    for index in _unread_elements(loop):
        if index in stand_ins or index in repeated:  # others read a repeated one (a later run comes back to it)
            continue
        if _is_element(root.operands[index], parameter, index):  # after the loop: its initial value
            outside[index] = _value_stand_in(init.operands[index])
        elif read_after is None or index in read_after:
            continue
        stand_ins[index] = _placeholder_stand_in(loop.shape.tuple_shapes[index])
    if stand_ins and len(stand_ins) == len(loop.shape.tuple_shapes):
        # Nothing left to carry: one element is kept, so that the loop still runs its condition and body.
        kept = min(stand_ins)
        stand_ins.pop(kept)
        outside.pop(kept, None)
    return stand_ins, outside


def _read_after(loop: HloInstruction) -> set[int] | None:
    """The state elements read after ``loop`` (None: all of them, when it is read whole)."""
    if loop is loop.parent.root or any(user.opcode != "get-tuple-element" for user in loop.users):
        return None
    return {int(user.attr("index")) for user in loop.users}


def _same_constant(start: HloInstruction, update: HloInstruction) -> bool:
    """Whether both are constants of one shape with the same bits (XLA compares literals so)."""
    if not (start.opcode == update.opcode == "constant" and start.shape == update.shape):
        return False
    a, b = np.asarray(start.literal), np.asarray(update.literal)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _is_element(instruction: HloInstruction, state: HloInstruction, index: int) -> bool:
    return (instruction.opcode == "get-tuple-element" and instruction.operands[0] is state
            and int(instruction.attr("index")) == index)


def _constant_stand_in(constant: HloInstruction) -> StandIn:
    def stand_in(state: HloInstruction, before: HloInstruction | None) -> HloInstruction:
        computation = state.parent
        return computation.add_instruction(clone_instruction(constant, [], computation.module, suffix=None),
                                           before=before)

    return stand_in


def _repeat_stand_in(first: int, stand_ins: dict[int, StandIn]) -> StandIn:
    def stand_in(state: HloInstruction, before: HloInstruction | None) -> HloInstruction:
        # ``first`` is kept: its place in the narrowed state counts the kept elements before it.
        return element(state, first - sum(1 for i in stand_ins if i < first), before)

    return stand_in


def _value_stand_in(value: HloInstruction) -> StandIn:
    return lambda state, before: value


def _placeholder_stand_in(shape: Shape) -> StandIn:
    """A value of ``shape`` for an element nobody reads: zeros (a broadcast constant, or a tuple of them)."""
    def build(computation: HloComputation, shape: Shape, before: HloInstruction | None) -> HloInstruction:
        if shape.is_tuple:
            parts = [build(computation, s, before) for s in shape.tuple_shapes]
            return computation.add_instruction(HloInstruction("tuple", "tuple", shape, parts), before=before)
        zero = HloInstruction("constant", "constant", Shape.array(shape.element_type, ()))
        zero.literal = np.zeros((), zero.shape.dtype)
        zero = computation.add_instruction(zero, before=before)
        return computation.add_instruction(
            HloInstruction("broadcast", "broadcast", shape, [zero], {"dimensions": ()}), before=before)

    return lambda state, before: build(state.parent, shape, before)


def _unread_elements(loop: HloInstruction) -> list[int]:
    """The state elements the loop does not read: not the condition, and in the body only instructions without
    side effects whose values reach the body's result at that element alone."""
    condition, body = while_condition_and_body(loop)
    state = condition.parameter(0)
    if state is condition.root or any(user.opcode != "get-tuple-element" for user in state.users):
        return []
    read_by_condition = {int(user.attr("index")) for user in state.users}
    parameter, root = body.parameter(0), body.root
    if parameter in root.operands or any(user.opcode != "get-tuple-element" for user in parameter.users):
        return []
    reads: dict[int, list[HloInstruction]] = {}
    for user in parameter.users:
        reads.setdefault(int(user.attr("index")), []).append(user)
    return [index for index in range(len(loop.shape.tuple_shapes))
            if index not in read_by_condition and _reaches_only(reads.get(index, []), root, index)]


def _reaches_only(starts: list[HloInstruction], root: HloInstruction, index: int) -> bool:
    """Whether every value computed from ``starts`` reaches ``root`` only as its operand ``index``, through
    instructions without side effects."""
    seen: set[int] = set()
    stack = list(starts)
    while stack:
        instruction = stack.pop()
        if id(instruction) in seen:
            continue
        seen.add(id(instruction))
        if has_side_effect(instruction) or has_control_dependencies(instruction):
            return False
        for user in instruction.users:
            if user is root:
                if any(operand is instruction and position != index
                       for position, operand in enumerate(root.operands)):
                    return False
                continue
            stack.append(user)
    return True
