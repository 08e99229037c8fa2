"""Edits of while loops that several passes make, after XLA's ``WhileUtil``
(``xla/service/while_util.cc``) and ``TupleUtil`` (``xla/service/tuple_util.cc``):
the loop-state elements the body passes through unchanged, a bound on the
trip count, and widening a loop with more state elements so that values
computed before it can be read inside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, while_condition_and_body
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.call_inliner import inline
from xlapy.transforms.while_loop_analysis import trip_count


def is_element_of(instruction: HloInstruction, tuple_value: HloInstruction, index: int | None = None) -> bool:
    """Whether ``instruction`` is ``get-tuple-element(tuple_value)`` (at ``index``, if given)."""
    return (instruction.opcode == "get-tuple-element" and instruction.operands[0] is tuple_value
            and (index is None or instruction.attr("index") == index))


def invariant_elements(body: HloComputation) -> list[HloInstruction]:
    """The ``get-tuple-element``s of the body's parameter that read a state
    element the body returns unchanged (XLA's ``GetInvariantGTEsForWhileBody``):
    operand ``i`` of the root is ``get-tuple-element(parameter, i)``, and every
    other read of such an element. Only a ``tuple`` root says which element is
    which."""
    root, parameter = body.root, body.parameter(0)
    if root is None or root.opcode != "tuple":
        return []
    found = [operand for index, operand in enumerate(root.operands) if is_element_of(operand, parameter, index)]
    indices = {operand.attr("index") for operand in found}
    for instruction in body.instructions:
        if is_element_of(instruction, parameter) and instruction.attr("index") in indices and not any(
                instruction is f for f in found):
            found.append(instruction)
    return found


def condition_elements(condition: HloComputation) -> dict[int, list[HloInstruction]]:
    """The condition's reads of each state element, by index (XLA's ``GetGTEsMapForWhileConditional``)."""
    reads: dict[int, list[HloInstruction]] = {}
    for user in condition.parameter(0).users:
        if user.opcode == "get-tuple-element":
            reads.setdefault(int(user.attr("index")), []).append(user)
    return reads


def trip_count_upper_bound(loop: HloInstruction) -> int | None:
    """At most how many times ``loop`` runs its body, when the induction
    variable tells (``while_loop_simplifier.trip_count``) or the condition is a
    constant false; else None. XLA's ``ComputeWhileLoopTripCountUpperBound``
    finds more bounds."""
    exact = trip_count(loop)
    if exact is not None:
        return exact
    condition, _ = while_condition_and_body(loop)
    root = condition.root
    if root is not None and root.opcode == "constant" and root.shape.is_scalar and not bool(np.asarray(root.literal)):
        return 0
    return None


def _add(computation: HloComputation, instruction: HloInstruction, before: HloInstruction | None) -> HloInstruction:
    return computation.add_instruction(instruction, before=before)


def element(value: HloInstruction, index: int, before: HloInstruction | None = None) -> HloInstruction:
    """A new ``get-tuple-element(value), index=index`` in ``value``'s computation."""
    return _add(value.parent, HloInstruction("get-tuple-element", "get-tuple-element",
                                             value.shape.tuple_shapes[index], [value], {"index": index}), before)


def make_tuple(computation: HloComputation, parts: list[HloInstruction],
               before: HloInstruction | None = None) -> HloInstruction:
    shape = Shape.make_tuple([p.shape for p in parts])
    return _add(computation, HloInstruction("tuple", "tuple", shape, list(parts)), before)


def extract_prefix(value: HloInstruction, count: int, before: HloInstruction | None = None) -> HloInstruction:
    """``tuple`` of the first ``count`` elements of ``value`` (``TupleUtil::ExtractPrefix``)."""
    return make_tuple(value.parent, [element(value, i, before) for i in range(count)], before)


def append_suffix(value: HloInstruction, suffix: list[HloInstruction],
                  before: HloInstruction | None = None) -> HloInstruction:
    """``tuple`` of every element of ``value``, then ``suffix`` (``TupleUtil::AppendSuffix``)."""
    parts = [element(value, i, before) for i in range(len(value.shape.tuple_shapes))]
    return make_tuple(value.parent, parts + list(suffix), before)


def _new_computation(module: HloModule, name: str, parameter_shape: Shape,
                     parameter_name: str = "wide_param") -> tuple[HloComputation, HloInstruction]:
    computation = HloComputation(unique_computation_name(module, name))
    module.add_computation(computation)
    parameter = HloInstruction(parameter_name, "parameter", parameter_shape)
    parameter.parameter_number = 0
    computation.add_instruction(parameter)
    return computation, parameter


def _call(computation: HloComputation, shape: Shape, operand: HloInstruction, callee: HloComputation) -> HloInstruction:
    return computation.add_instruction(
        HloInstruction("call", "call", shape, [operand], {"to_apply": callee.name}, [callee]))


@dataclass
class WidenedLoop:
    """What ``make_instructions_live_in`` made: the new loop, what stands for
    the old loop's value, the body's reads of the added elements, and the map
    from id of each old body instruction to its copy in the new body."""

    loop: HloInstruction
    replacement: HloInstruction
    live_in_values: list[HloInstruction]
    body_copies: dict[int, HloInstruction]


def make_instructions_live_in(loop: HloInstruction, values: list[HloInstruction]) -> WidenedLoop:
    """A copy of ``loop`` whose state carries ``values`` (of the loop's
    computation) after its own elements, unchanged by the body, so that the
    body can read them (XLA's ``WhileUtil::MakeInstructionsLiveIn``). The new
    condition and body (``wide.<name>``) call the old ones on the first
    elements, inlined; the old loop is replaced by a tuple of the new one's
    first elements and removed."""
    computation, module = loop.parent, loop.parent.module
    condition, body = while_condition_and_body(loop)
    count = len(loop.shape.tuple_shapes)
    wide_shape = Shape.make_tuple([*loop.shape.tuple_shapes, *(v.shape for v in values)])

    wide_condition, parameter = _new_computation(module, f"wide.{condition.name}", wide_shape)
    call = _call(wide_condition, condition.root.shape, extract_prefix(parameter, count), condition)
    wide_condition.root = call
    inline(call)

    wide_body, parameter = _new_computation(module, f"wide.{body.name}", wide_shape)
    call = _call(wide_body, loop.shape, extract_prefix(parameter, count), body)
    live_through = [element(parameter, i) for i in range(count, len(wide_shape.tuple_shapes))]
    wide_body.root = append_suffix(call, live_through)
    body_copies = inline(call)

    init = append_suffix(loop.operands[0], values, before=loop)
    attributes = {"condition": wide_condition.name, "body": wide_body.name}
    # Called computations in XLA's order, body first (``call_graph.replace_called_computation`` relies on it).
    new_loop = _add(computation, HloInstruction("while", "while", wide_shape, [init], attributes,
                                                [wide_body, wide_condition]), loop)
    replacement = extract_prefix(new_loop, count, before=loop)
    # The old loop goes even when it has side effects: the new one does the same work.
    loop.replace_all_uses_with(replacement)
    computation.remove_instruction(loop)
    # Right after the parameter, so that the instructions stay in an order where operands come first.
    first = wide_body.instructions[1]
    live_in = [element(wide_body.parameter(0), i, before=first) for i in range(count, len(wide_shape.tuple_shapes))]
    return WidenedLoop(new_loop, replacement, live_in, body_copies)


# How a removed state element is rebuilt from the narrowed state (a value of the new loop's shape) in the
# computation that holds it, before a given instruction (None: at the end).
StandIn = Callable[[HloInstruction, "HloInstruction | None"], HloInstruction]


def narrow_loop(loop: HloInstruction, stand_ins: dict[int, StandIn],
                outside: dict[int, StandIn] | None = None) -> HloInstruction:
    """Replaces ``loop`` by a copy without the state elements ``stand_ins`` names, each of which the loop
    never needs to carry: wherever the old condition or body read element ``i``, they read ``stand_ins[i]`` of
    the narrowed state instead, and the loop's users read ``outside[i]`` (default ``stand_ins[i]``) of the new
    loop's value (the part of XLA's ``RemoveDeadTupleIndices`` that ``WhileLoopSimplifier`` shares among its
    rewrites). The new condition and body (``narrow.<name>``) call the old ones on the rebuilt state, inlined.
    Returns the new loop."""
    computation, module = loop.parent, loop.parent.module
    condition, body = while_condition_and_body(loop)
    count = len(loop.shape.tuple_shapes)
    kept = [i for i in range(count) if i not in stand_ins]
    narrow_shape = Shape.make_tuple([loop.shape.tuple_shapes[i] for i in kept])

    def rebuilt(state: HloInstruction, before: HloInstruction | None = None,
                rebuild: dict[int, StandIn] = stand_ins) -> HloInstruction:
        parts = [rebuild[i](state, before) if i in rebuild else element(state, kept.index(i), before)
                 for i in range(count)]
        return make_tuple(state.parent, parts, before)

    narrow_condition, parameter = _new_computation(module, f"narrow.{condition.name}", narrow_shape, "narrow_param")
    call = _call(narrow_condition, condition.root.shape, rebuilt(parameter), condition)
    narrow_condition.root = call
    inline(call)

    narrow_body, parameter = _new_computation(module, f"narrow.{body.name}", narrow_shape, "narrow_param")
    call = _call(narrow_body, loop.shape, rebuilt(parameter), body)
    narrow_body.root = make_tuple(narrow_body, [element(call, i) for i in kept])
    inline(call)

    init = make_tuple(computation, [element(loop.operands[0], i, before=loop) for i in kept], before=loop)
    # The trip-count annotation names a state index and a sharding covers every element: neither fits the new
    # loop (the annotator runs again later).
    attributes = {key: value for key, value in loop.attributes.items() if key not in ("backend_config", "sharding")}
    attributes.update(condition=narrow_condition.name, body=narrow_body.name)
    new_loop = _add(computation, HloInstruction("while", "while", narrow_shape, [init], attributes,
                                                [narrow_body, narrow_condition]), loop)
    loop.replace_all_uses_with(rebuilt(new_loop, loop, {**stand_ins, **(outside or {})}))
    computation.remove_instruction(loop)
    return new_loop
