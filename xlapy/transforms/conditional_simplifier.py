"""Conditional simplification, as XLA's ``ConditionalSimplifier``
(``xla/service/conditional_simplifier.cc``).

For each ``conditional`` (but those with a sharding or that reach channel
instructions, which copying computations would duplicate), in order:

- tuple elements that every branch returns from the same instruction are
  merged: readers of the later one read the first;
- tuple elements nobody reads are dropped from the result (all users must be
  ``get-tuple-element``s and the conditional not a root): each branch is
  copied (``<name>.clone``) and returns a tuple of the elements kept;
- a conditional nobody uses (kept by its side effects) returns ``()``;
- the conditional itself goes when it has no side effects nor control
  dependencies and either has one branch, or a constant branch index or
  predicate (an index out of range picks the last branch): that branch's
  instructions take its place, inlined through a ``call``. A two-branch
  conditional on a predicate whose branches hold only cheap instructions
  (elementwise ops, broadcasts, concatenations, dynamic slices, pads,
  reduces, reshapes, slices, tuples and their elements) runs both branches
  and picks each result element with a ``select`` (``after-all`` for
  tokens), unless a branch does nothing but pass arrays through, which is
  cheaper than selecting.

Then each branch computation whose parameter is a tuple read only by
``get-tuple-element``s, some elements unread, is copied with a parameter of
the read elements alone, and every conditional calling it passes a tuple of
those.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import clone_computation, replace_called_computation
from xlapy.transforms.call_inliner import inline
from xlapy.transforms.fusible_ops import is_elementwise
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    calls_any,
    has_control_dependencies,
    has_side_effect,
    replace_instruction,
    shapes_compatible,
    sharding_of,
)

# Instructions that talk over channels (XLA's ``HloChannelInstruction``s).
_CHANNEL_OPCODES = frozenset({
    "send", "send-done", "recv", "recv-done", "all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
    "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start", "collective-broadcast",
    "reduce-scatter",
})
# Not expensive, besides elementwise ops, when deciding to run both branches and select.
_CHEAP_OPCODES = frozenset({"broadcast", "concatenate", "dynamic-slice", "get-tuple-element", "reduce", "reshape",
                            "pad", "parameter", "slice", "tuple"})
_PASS_THROUGH_OPCODES = frozenset({"tuple", "get-tuple-element", "parameter"})


def _reaches_channel_instructions(instruction: HloInstruction) -> bool:
    return calls_any(instruction, lambda nested: nested.opcode in _CHANNEL_OPCODES)


def _is_root(instruction: HloInstruction) -> bool:
    return instruction.parent is not None and instruction.parent.root is instruction


def _all_users_read_elements(conditional: HloInstruction) -> bool:
    return bool(conditional.users) and not _is_root(conditional) and conditional.shape.is_tuple and all(
        user.opcode == "get-tuple-element" for user in conditional.users)


def _set_branch(conditional: HloInstruction, position: int, branch: HloComputation) -> None:
    replace_called_computation(conditional, position, branch)


def merge_duplicate_tuple_elements(conditional: HloInstruction) -> bool:
    """Readers of an element that every branch returns from the same
    instruction as an earlier element read the earlier one."""
    if not _all_users_read_elements(conditional):
        return False
    if any(branch.root.opcode != "tuple" for branch in conditional.called_computations):
        return False
    first_with: dict[tuple[int, ...], int] = {}
    changed = False
    for index in range(len(conditional.shape.tuple_shapes)):
        sources = tuple(id(branch.root.operands[index]) for branch in conditional.called_computations)
        earlier = first_with.setdefault(sources, index)
        if earlier == index:
            continue
        for user in conditional.users:
            if user.attr("index") == index:
                user.attributes["index"] = earlier
                changed = True
    return changed


def remove_unused_tuple_elements(conditional: HloInstruction) -> bool:
    """Drops the result elements no ``get-tuple-element`` reads."""
    if not _all_users_read_elements(conditional):
        return False
    old_shape = conditional.shape
    used = sorted({int(user.attr("index")) for user in conditional.users})
    if len(used) == len(old_shape.tuple_shapes):
        return False
    if any(not b.root.shape.is_tuple or not shapes_compatible(b.root.shape, old_shape)
           for b in conditional.called_computations):
        return False
    new_shape = Shape.make_tuple([old_shape.tuple_shapes[i] for i in used])
    for position, branch in enumerate(list(conditional.called_computations)):
        copy = clone_computation(branch, conditional.parent.module)
        _set_branch(conditional, position, copy)
        old_root = copy.root
        parts = [copy.add_instruction(HloInstruction("get-tuple-element", "get-tuple-element",
                                                     old_shape.tuple_shapes[i], [old_root], {"index": i}))
                 for i in used]
        copy.root = copy.add_instruction(HloInstruction("tuple", "tuple", new_shape, parts))
    conditional.shape = new_shape
    for user in conditional.users:
        user.attributes["index"] = used.index(int(user.attr("index")))
    return True


def replace_root_with_empty_tuple_if_no_users(conditional: HloInstruction) -> bool:
    """A conditional nobody uses returns ``()``, its branches copied to return it."""
    empty = Shape.make_tuple([])
    if conditional.users or _is_root(conditional) or shapes_compatible(conditional.shape, empty):
        return False
    for position, branch in enumerate(list(conditional.called_computations)):
        copy = clone_computation(branch, conditional.parent.module)
        _set_branch(conditional, position, copy)
        copy.root = copy.add_instruction(HloInstruction("tuple", "tuple", empty, []))
    conditional.shape = empty
    return True


def _is_expensive(instruction: HloInstruction) -> bool:
    return instruction.opcode not in _CHEAP_OPCODES and not is_elementwise(instruction)


def _only_passes_arrays_through(computation: HloComputation) -> bool:
    """Only parameters, tuples and their elements, and some array in the
    result (``ComputationIsEmptyWithArrayRoot``)."""
    def has_array(shape: Shape) -> bool:
        return shape.is_array or (shape.is_tuple and any(has_array(s) for s in shape.tuple_shapes))

    return all(i.opcode in _PASS_THROUGH_OPCODES for i in computation.instructions) and has_array(
        computation.root.shape)


def _branch_of_constant(conditional: HloInstruction) -> int | None:
    selector = conditional.operands[0]
    if selector.opcode != "constant":
        return None
    value = np.asarray(selector.literal)
    count = len(conditional.called_computations)
    if value.dtype == np.bool_:
        return 0 if bool(value) else 1
    index = int(value)
    return index if 0 <= index < count else count - 1


def _call_of_branch(conditional: HloInstruction, position: int) -> HloInstruction:
    branch = conditional.called_computations[position]
    call = HloInstruction("call", "call", conditional.shape, [conditional.operands[1 + position]],
                          {"to_apply": branch.name}, [branch])
    for attribute in ("metadata", "frontend_attributes", "sharding"):
        if attribute in conditional.attributes:
            call.attributes[attribute] = conditional.attributes[attribute]
    call.sdy_sharding = conditional.sdy_sharding
    return conditional.parent.add_instruction(call, before=conditional)


def try_remove_conditional(conditional: HloInstruction) -> bool:
    """Replaces the conditional by the branch it always takes, or by both
    branches and selects (see the module's docstring)."""
    if has_control_dependencies(conditional) or has_side_effect(conditional):
        return False
    computation = conditional.parent
    count = len(conditional.called_computations)
    chosen = 0 if count == 1 else _branch_of_constant(conditional)
    if chosen is not None:
        call = _call_of_branch(conditional, chosen)
        replace_instruction(conditional, call)
        inline(call)
        return True
    branches = conditional.called_computations
    if (count != 2 or conditional.operands[0].shape.element_type != "pred"
            or any(_is_expensive(i) for b in branches for i in b.instructions)):
        return False
    if any(_only_passes_arrays_through(b) for b in branches):
        return False
    predicate = conditional.operands[0]
    on_true, on_false = _call_of_branch(conditional, 0), _call_of_branch(conditional, 1)

    def add(instruction: HloInstruction) -> HloInstruction:
        return computation.add_instruction(instruction, before=conditional)

    def element(value: HloInstruction, index: int) -> HloInstruction:
        return add(HloInstruction("get-tuple-element", "get-tuple-element", value.shape.tuple_shapes[index], [value],
                                  {"index": index}))

    def select(if_true: HloInstruction, if_false: HloInstruction) -> HloInstruction:
        shape = if_false.shape
        if shape.is_token:
            return add(HloInstruction("after-all", "after-all", shape, [if_true, if_false]))
        if shape.is_array:
            mask = predicate if shape.is_scalar else add(HloInstruction(
                "broadcast", "broadcast", Shape("pred", shape.dimensions, shape.layout), [predicate],
                {"dimensions": ()}))
            return add(HloInstruction("select", "select", shape, [mask, if_true, if_false]))
        parts = [select(element(if_true, i), element(if_false, i)) for i in range(len(shape.tuple_shapes))]
        return add(HloInstruction("tuple", "tuple", shape, parts))

    replace_instruction(conditional, select(on_true, on_false))
    inline(on_false)
    inline(on_true)
    return True


def try_remove_unused_operands(computation: HloComputation, callers: list[HloInstruction]) -> bool:
    """Gives a branch computation a parameter of only the tuple elements it
    reads (a copy, as other instructions may call it), and its calling
    conditionals operands to match."""
    parameter = computation.parameter(0)
    if parameter is computation.root or not parameter.shape.is_tuple:
        return False
    if any(user.opcode != "get-tuple-element" for user in parameter.users):
        return False
    kept = sorted({int(user.attr("index")) for user in parameter.users})
    old_shape = parameter.shape
    if len(kept) == len(old_shape.tuple_shapes):
        return False
    module = computation.module
    copy = clone_computation(computation, module)
    new_parameter = copy.parameter(0)
    new_parameter.shape = Shape.make_tuple([old_shape.tuple_shapes[i] for i in kept])
    for user in new_parameter.users:
        user.attributes["index"] = kept.index(int(user.attr("index")))
    for conditional in callers:
        if sharding_of(conditional) is not None:
            continue
        for position, branch in enumerate(list(conditional.called_computations)):
            if branch is not computation:
                continue
            _set_branch(conditional, position, copy)
            operand = conditional.operands[1 + position]
            parent = conditional.parent
            parts = [parent.add_instruction(HloInstruction(
                "get-tuple-element", "get-tuple-element", old_shape.tuple_shapes[i], [operand], {"index": i}),
                before=conditional) for i in kept]
            narrowed = parent.add_instruction(HloInstruction("tuple", "tuple", new_parameter.shape, parts),
                                              before=conditional)
            conditional.replace_operand(1 + position, narrowed)
    return True


class ConditionalSimplifier(HloPass):
    """Simplifies conditionals (see the module's docstring)."""

    name = "simplify-conditional"

    def run(self, module: HloModule) -> bool:
        conditionals = [instruction for computation in list(module.computations)
                        for instruction in computation.post_order()
                        if instruction.opcode == "conditional" and sharding_of(instruction) is None
                        and not _reaches_channel_instructions(instruction)]
        changed = False
        removed: set[int] = set()
        for conditional in conditionals:
            changed |= merge_duplicate_tuple_elements(conditional)
            changed |= remove_unused_tuple_elements(conditional)
            changed |= replace_root_with_empty_tuple_if_no_users(conditional)
            if try_remove_conditional(conditional):
                removed.add(id(conditional))
                changed = True
        callers: dict[int, list[HloInstruction]] = {}
        branches: list[HloComputation] = []
        for conditional in conditionals:
            if id(conditional) in removed:
                continue
            for branch in conditional.called_computations:
                if id(branch) not in callers:
                    callers[id(branch)] = []
                    branches.append(branch)
                if not any(c is conditional for c in callers[id(branch)]):
                    callers[id(branch)].append(conditional)
        for branch in branches:
            changed |= try_remove_unused_operands(branch, callers[id(branch)])
        return changed
