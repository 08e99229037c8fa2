"""Which logical buffers share bytes: groups of buffers that get one slice.

An instruction may write its result over an operand's buffer when that
buffer dies there and the instruction reads each element before writing the
same element (XLA's ``CanShareOperandBufferWithUser``,
``xla/service/hlo_dataflow_analysis.cc``): elementwise ops on operands of the
result's shape and layout, ``dynamic-update-slice`` on the array it updates,
``scatter`` on each array it updates (result ``i`` over operand ``i`` of a
variadic scatter), loop fusions that use a parameter only that way on the
path to their root, and loop fusions whose root is a scatter on a parameter
that nothing else in the fusion reads (the scatter emitter then skips its
initial copy, ``xlapy/codegen/emitters/scatter.py``). Control flow keeps its values in place: a while's state takes the
buffers of its initial value when that dies at the loop, each result of the
body takes the loop state's buffer when the body no longer reads the old
state there, and each result of a conditional's branch takes the
conditional's buffer. An entry result takes the buffer of the parameter the
module's ``input_output_alias`` lets it alias, when nothing reads the
parameter afterwards. Entry parameters and constants are never written over.

Where XLA's copy insertion copies the operand of an in-place op that cannot
be shared (an entry parameter, a constant, a value read later) and then
updates the copy in place, xlapy adds no copy instruction: the result gets a
buffer of its own and the kernel (the dynamic-update-slice's loop fusion,
the scatter emitter's first step) copies the operand into it itself, the
same bytes moved without a kernel launch or a buffer more. (A scatter on one
thread with a large operand is the exception: the thunk emitter copies the
operand into the output with a kernel on the pool first,
``split_scatter_operand``.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xlapy.buffers.liveness import Liveness, LogicalBuffer, ShapeIndex
from xlapy.hlo.ir import HloInstruction, HloModule, while_condition_and_body
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import ELEMENT_TYPES, Shape


@dataclass(eq=False)
class BufferGroup:
    """Buffers that share one slice, and the span over which any of them is live."""

    members: list[LogicalBuffer]
    start: int
    end: int
    size: int
    is_output: bool = False
    anchor: LogicalBuffer | None = None  # the entry parameter or constant whose allocation it is
    first_definition: int = 0
    member_ids: set[int] = field(default_factory=set)


class _Groups:
    """Union-find over logical buffers, keeping each group's facts at its root."""

    def __init__(self, liveness: Liveness) -> None:
        self.liveness = liveness
        self.parent = list(range(len(liveness.buffers)))
        self.groups = {b.id: BufferGroup([b], b.defined_at, b.last_use, b.size, b.id in liveness.outputs,
                                         b if b.is_entry_parameter or b.is_constant else None, b.defined_at, {b.id})
                       for b in liveness.buffers}

    def find(self, buffer: LogicalBuffer) -> BufferGroup:
        root = buffer.id
        while self.parent[root] != root:
            self.parent[root] = self.parent[self.parent[root]]
            root = self.parent[root]
        return self.groups[root]

    def merge(self, a: LogicalBuffer, b: LogicalBuffer) -> None:
        first, second = self.find(a), self.find(b)
        if first is second:
            return
        keep, gone = first.members[0].id, second.members[0].id
        root_keep, root_gone = self._root(keep), self._root(gone)
        self.parent[root_gone] = root_keep
        first.members.extend(second.members)
        first.member_ids |= second.member_ids
        first.start, first.end = min(first.start, second.start), max(first.end, second.end)
        first.first_definition = min(first.first_definition, second.first_definition)
        first.size = max(first.size, second.size)
        first.is_output = first.is_output or second.is_output
        first.anchor = first.anchor or second.anchor
        del self.groups[root_gone]
        self.groups[root_keep] = first

    def _root(self, index: int) -> int:
        while self.parent[index] != index:
            index = self.parent[index]
        return index

    def result(self) -> list[BufferGroup]:
        return sorted(self.groups.values(), key=lambda g: min(m.id for m in g.members))


def colocated_groups(module: HloModule, liveness: Liveness, in_place: bool = True) -> list[BufferGroup]:
    """The groups of buffers that share a slice; every buffer is in exactly one
    (alone in its group without ``in_place``)."""
    groups = _Groups(liveness)
    if not in_place:
        return groups.result()
    for buffer in liveness.buffers:
        instr = buffer.instruction
        if instr.opcode == "while":
            _take_dying_initial_state(groups, liveness, instr)
        elif (buffer.index == () and not instr.shape.is_tuple) or (len(buffer.index) == 1 and _is_scatter(instr)):
            _write_over_dying_operand(groups, liveness, buffer)
    control_flow: dict[int, HloInstruction] = {}
    for buffer in liveness.buffers:
        if buffer.instruction.opcode in ("while", "conditional"):
            control_flow.setdefault(id(buffer.instruction), buffer.instruction)
    for instr in control_flow.values():
        if instr.opcode == "while":
            _keep_loop_results_in_place(groups, liveness, instr)
        else:
            _keep_branch_results_in_place(groups, liveness, instr)
    _alias_outputs_with_parameters(module, groups, liveness)
    return groups.result()


def _is_free(group: BufferGroup) -> bool:
    """Whether a group's bytes may be written by an instruction that did not define them."""
    return group.anchor is None


def _write_over_dying_operand(groups: _Groups, liveness: Liveness, result: LogicalBuffer) -> None:
    instr = result.instruction
    step = liveness.steps[id(instr)]
    for number, operand in enumerate(instr.operands):
        leaves = liveness.leaves[id(operand)]
        if () not in leaves or len(leaves) != 1:
            continue
        candidate = leaves[()]
        group = groups.find(candidate)
        if (not _is_free(group) or group.end != step or candidate.size != result.size
                or group is groups.find(result) or not can_share_operand(instr, number, result.index)):
            continue
        # Every read of the group here must be one that reads an element before writing it.
        readers = [n for n, o in enumerate(instr.operands)
                   if any(b.id in group.member_ids for b in liveness.leaves[id(o)].values())]
        if all(can_share_operand(instr, n, result.index) for n in readers):
            groups.merge(candidate, result)
            return


def _take_dying_initial_state(groups: _Groups, liveness: Liveness, instr: HloInstruction) -> None:
    step = liveness.steps[id(instr)]
    state = liveness.leaves[id(instr)]
    initial = liveness.leaves[id(instr.operands[0])]
    taken: set[int] = set()
    for index, buffer in state.items():
        source = initial.get(index)
        if source is None:
            continue
        group = groups.find(source)
        if not _is_free(group) or group.end != step or source.size != buffer.size or id(group) in taken:
            continue
        taken.add(id(group))
        groups.merge(buffer, source)


def _unread_after(groups: _Groups, storage: BufferGroup, newcomer: BufferGroup, window: tuple[int, int]) -> bool:
    """Whether ``newcomer`` may be written into ``storage``'s bytes: within
    ``window`` no member of ``storage`` is read once ``newcomer``'s first member
    is defined, but by that member's own definer reading each element before
    writing it."""
    first = newcomer.first_definition
    definers = [(m.instruction, m.index) for m in newcomer.members if m.defined_at == first]
    for member in storage.members:
        for step, reader, operand in member.uses:
            if not window[0] <= step <= window[1] or step < first:
                continue
            if step > first or operand is None or not any(reader is d for d, _ in definers):
                return False
            if not any(reader is d and can_share_operand(reader, operand, index) for d, index in definers):
                return False
    return True


def _defined_within(group: BufferGroup, window: tuple[int, int]) -> bool:
    return all(window[0] <= m.defined_at <= window[1] for m in group.members)


def _keep_loop_results_in_place(groups: _Groups, liveness: Liveness, instr: HloInstruction) -> None:
    _, body = while_condition_and_body(instr)
    window = liveness.spans[id(body)]
    state = liveness.leaves[id(instr)]
    results = liveness.leaves[id(body.root)]
    for index, slot in state.items():
        result = results.get(index)
        if result is None:
            continue
        storage, newcomer = groups.find(slot), groups.find(result)
        # The state's old value may still be copied into another element after the body ran.
        copied_elsewhere = any(groups.find(other) is storage for i, other in results.items() if i != index)
        if (storage is newcomer or copied_elsewhere or not _is_free(newcomer) or newcomer.is_output
                or result.size != slot.size or not _defined_within(newcomer, window)
                or not _unread_after(groups, storage, newcomer, window)):
            continue
        groups.merge(slot, result)


def _keep_branch_results_in_place(groups: _Groups, liveness: Liveness, instr: HloInstruction) -> None:
    result_leaves = liveness.leaves[id(instr)]
    for branch in instr.called_computations:
        window = liveness.spans[id(branch)]
        taken: set[int] = set()
        for index, value in liveness.leaves[id(branch.root)].items():
            slot = result_leaves.get(index)
            if slot is None:
                continue
            storage, newcomer = groups.find(slot), groups.find(value)
            if (storage is newcomer or id(newcomer) in taken or not _is_free(newcomer) or newcomer.is_output
                    or value.size != slot.size or not _defined_within(newcomer, window)):
                continue
            taken.add(id(newcomer))
            groups.merge(slot, value)


_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def parse_input_output_alias(text: str) -> list[tuple[ShapeIndex, int, ShapeIndex]]:
    """(output index, parameter number, parameter index) of each entry of an
    ``input_output_alias`` attribute, e.g. ``{ {0}: (0, {}, may-alias) }``."""

    def index(part: str) -> ShapeIndex:
        return tuple(int(x) for x in part.replace(" ", "").split(",") if x)

    return [(index(m.group(1)), int(m.group(2)), index(m.group(3))) for m in _ALIAS_ENTRY.finditer(text)]


def _alias_outputs_with_parameters(module: HloModule, groups: _Groups, liveness: Liveness) -> None:
    text = module.attributes.get("input_output_alias")
    if not text or module.entry is None:
        return
    entry = module.entry
    outputs = liveness.leaves[id(entry.root)]
    parameters = {p.parameter_number: liveness.leaves.get(id(p), {}) for p in entry.parameters}
    for output_index, number, parameter_index in parse_input_output_alias(str(text)):
        result, parameter = outputs.get(output_index), parameters.get(number, {}).get(parameter_index)
        if result is None or parameter is None:
            continue
        storage, newcomer = groups.find(parameter), groups.find(result)
        if (storage is newcomer or not _is_free(newcomer) or result.size != parameter.size
                or not _unread_after(groups, storage, newcomer, (0, liveness.end))):
            continue
        groups.merge(parameter, result)


# -- which operands an instruction may overwrite ------------------------------------------------------------

def _same_bytes_per_element(a: Shape, b: Shape) -> bool:
    return (a.is_array and b.is_array and a.dimensions == b.dimensions
            and a.layout_or_default == b.layout_or_default
            and ELEMENT_TYPES[a.element_type].dtype.itemsize == ELEMENT_TYPES[b.element_type].dtype.itemsize)


def _is_elementwise(instr: HloInstruction) -> bool:
    spec = OPCODES.get(instr.opcode)
    return spec is not None and spec.is_elementwise


def _is_loop_fusion(instr: HloInstruction) -> bool:
    return (instr.opcode == "fusion" and instr.attributes.get("kind", "kLoop") == "kLoop"
            and len(instr.called_computations) == 1)


def _is_scatter(instr: HloInstruction) -> bool:
    """A scatter, or a loop fusion whose root is one (the scatter emitter's)."""
    if instr.opcode == "scatter":
        return True
    return _is_loop_fusion(instr) and instr.fused_computation.root is not None \
        and instr.fused_computation.root.opcode == "scatter"


def _scatter_updates_in_place(scatter: HloInstruction, value: HloInstruction, position: int) -> bool:
    """Whether ``scatter`` reads ``value`` only as the array it updates into its result ``position``: it then
    reads each element of it at most once, before writing the same element (XLA's
    ``CanShareOperandBufferWithUser`` lets a scatter write over its operands)."""
    count = (len(scatter.operands) - 1) // 2
    return position < count and [k for k, o in enumerate(scatter.operands) if o is value] == [position]


def _leaf_shape(shape: Shape, index: ShapeIndex) -> Shape | None:
    for i in index:
        if not shape.is_tuple or i >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def can_share_operand(instr: HloInstruction, number: int, index: ShapeIndex = ()) -> bool:
    """Whether ``instr`` may write its result's array at ``index`` over its
    operand ``number``: it reads each element of that operand only to compute
    the same element of that array, which has the same dimensions, layout
    and element width."""
    operand = instr.operands[number]
    result = _leaf_shape(instr.shape, index)
    if result is None or not _same_bytes_per_element(operand.shape, result):
        return False
    if instr.shape.is_tuple and len(index) != 1:
        return False
    position = index[0] if index else 0
    if instr.opcode == "scatter":
        return _scatter_updates_in_place(instr, operand, position)
    if instr.shape.is_tuple and not _is_scatter(instr):
        return False
    if _is_elementwise(instr):
        return True
    if instr.opcode == "dynamic-update-slice":
        return number == 0
    if _is_loop_fusion(instr):
        fused = instr.fused_computation
        root = fused.root
        parameter = next((p for p in fused.parameters if p.parameter_number == number), None)
        if root is None or parameter is None:
            return False
        if root.opcode == "scatter":
            # The parameter must be the updated array itself: read by anything else in the fusion (the indices,
            # the updates, another op), its elements could be read after the scatter wrote them.
            return all(u is root for u in parameter.users) and _scatter_updates_in_place(root, parameter, position)
        return not root.shape.is_tuple and _in_place_to_root(parameter, root, set())
    return False


def _in_place_to_root(value: HloInstruction, root: HloInstruction, checked: set[int]) -> bool:
    """Whether every use of ``value`` inside a fused computation leads to the
    root through elementwise ops of the root's dimensions and the updated
    operand of dynamic-update-slices."""
    if id(value) in checked:
        return True
    checked.add(id(value))
    if value is root:
        return not value.users
    if not value.users or value.shape.dimensions != root.shape.dimensions:
        return False
    for user in value.users:
        if reads_update_window(user, value):
            continue
        elementwise = _is_elementwise(user) and user.shape.dimensions == root.shape.dimensions
        updated = user.opcode == "dynamic-update-slice" and all(o is not value for o in user.operands[1:])
        if not (elementwise or updated) or not _in_place_to_root(user, root, checked):
            return False
    return True


def _without_unit_dimensions(shape: Shape) -> list[int]:
    return [d for d in shape.dimensions if d != 1]


def reads_update_window(read: HloInstruction, value: HloInstruction) -> bool:
    """Whether ``read`` is a dynamic-slice of ``value`` at the start indices (the same instructions) of the one
    dynamic-update-slice of ``value`` whose update has its dimensions, and its elements reach nothing but that
    update, through elementwise ops and reshapes that only add or drop dimensions of size 1: each element of the
    window is then read only to compute the element replacing it (a scatter's combiner; XLA:GPU's
    ``CanEmitFusedDynamicUpdateSliceInPlaceForGpu`` lets such reads stay in an in-place fusion)."""
    if read.opcode != "dynamic-slice" or read.operands[0] is not value or any(o is value for o in read.operands[1:]):
        return False
    starts = read.operands[1:]
    updates = [u for u in value.users if u.opcode == "dynamic-update-slice" and u.operands[0] is value
               and len(u.operands) == len(starts) + 2 and all(a is b for a, b in zip(u.operands[2:], starts))
               and u.operands[1].shape.dimensions == read.shape.dimensions]
    if len(updates) != 1:
        return False
    (update,) = updates
    window = _without_unit_dimensions(read.shape)
    pending, seen = [read], {id(read)}
    while pending:
        current = pending.pop()
        for user in current.users:
            if user is update:
                if any(o is current for i, o in enumerate(update.operands) if i != 1):
                    return False
                continue
            same_element = _is_elementwise(user) or user.opcode == "reshape"
            if not (same_element and _without_unit_dimensions(user.shape) == window):
                return False
            if id(user) not in seen:
                seen.add(id(user))
                pending.append(user)
    return True
