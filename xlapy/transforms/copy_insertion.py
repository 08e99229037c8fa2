"""Copy insertion ("copy-insertion", after XLA's ``xla/service/copy_insertion.cc``).

Adds the ``copy`` instructions that let every value own its buffer where
buffer assignment needs it to:

- the entry's result: an array that is an entry parameter or a constant (or
  a view of one) is copied, so that the result owns its buffers, as is an
  array the result holds more than once (XLA's special-case copies);
- loops: the initial state's arrays that are parameters or constants, that
  are read elsewhere too, or that it holds more than once are copied before
  the loop (but for those the body passes on unchanged, which the loop only
  reads where they are), and each result of the body that is not a new value (an element
  of the state moved to another place, a constant, a value of the enclosing
  computation) or that the root holds twice is copied, so that the loop
  state can live in one buffer and the body's results be computed into it;
- conditionals: likewise for each branch's results that are its parameter's
  arrays or constants.

In-place ops need no copies here: buffer assignment (``xlapy.buffers``)
lets an instruction write over an operand only when nothing reads the
operand afterwards, so no read-after-write hazard can arise.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, while_condition_and_body
from xlapy.transforms.hlo_pass import HloPass

_VIEWS = frozenset({"bitcast", "get-tuple-element", "tuple", "opt-barrier", "add-dependency", "domain"})

Leaf = tuple[int, ...]


def array_leaf_indices(instr: HloInstruction) -> list[Leaf]:
    def walk(shape, prefix: Leaf) -> list[Leaf]:
        if shape.is_tuple:
            return [leaf for i, s in enumerate(shape.tuple_shapes) for leaf in walk(s, (*prefix, i))]
        return [prefix] if shape.is_array else []

    return walk(instr.shape, ())


def source(instr: HloInstruction, index: Leaf = ()) -> tuple[HloInstruction, Leaf]:
    """The instruction (and shape index in it) that defines the array at ``index`` of ``instr``'s value,
    looking through views."""
    while True:
        if instr.opcode == "tuple" and index:
            instr, index = instr.operands[index[0]], index[1:]
        elif instr.opcode == "get-tuple-element":
            instr, index = instr.operands[0], (int(instr.attributes["index"]), *index)
        elif instr.opcode in ("bitcast", "add-dependency", "domain", "opt-barrier") and instr.operands:
            instr = instr.operands[0]
        else:
            return instr, index


def copy_leaves(value: HloInstruction, leaves: set[Leaf], before: HloInstruction | None = None) -> HloInstruction:
    """``value`` with the arrays at ``leaves`` replaced by copies (views of the rest)."""
    return _copy_leaves(value, leaves, (), before)


def _copy_leaves(value: HloInstruction, leaves: set[Leaf], prefix: Leaf,
                 before: HloInstruction | None) -> HloInstruction:
    if not any(leaf[:len(prefix)] == prefix for leaf in leaves):
        return value
    computation = value.parent
    if not value.shape.is_tuple:
        return computation.add_instruction(HloInstruction(f"{value.name}.copy", "copy", value.shape, [value]), before)
    elements = []
    for i, shape in enumerate(value.shape.tuple_shapes):
        element = value.operands[i] if value.opcode == "tuple" else computation.add_instruction(
            HloInstruction(f"{value.name}.element", "get-tuple-element", shape, [value], {"index": i}), before)
        elements.append(_copy_leaves(element, leaves, (*prefix, i), before))
    return computation.add_instruction(HloInstruction(f"{value.name}.copy", "tuple", value.shape, elements), before)


def _is_fixed(defining: HloInstruction) -> bool:
    """Whether a defined value may not be written by anyone else: a parameter or a constant."""
    return defining.opcode in ("parameter", "constant")


def _readers(defining: HloInstruction, index: Leaf) -> list[HloInstruction]:
    """The instructions reading the array ``defining`` defines at ``index``, through views."""
    readers: list[HloInstruction] = []
    pending = [(defining, index)]
    seen: set[tuple[int, Leaf]] = set()
    while pending:
        value, leaf = pending.pop()
        if (id(value), leaf) in seen:
            continue
        seen.add((id(value), leaf))
        for user in value.users:
            if user.opcode == "tuple":
                for position, operand in enumerate(user.operands):
                    if operand is value:
                        pending.append((user, (position, *leaf)))
            elif user.opcode == "get-tuple-element":
                if leaf and leaf[0] == int(user.attributes["index"]):
                    pending.append((user, leaf[1:]))
            elif user.opcode in ("bitcast", "add-dependency", "domain", "opt-barrier") and user.operands[0] is value:
                pending.append((user, leaf))
            else:
                readers.append(user)
    return readers


class CopyInsertion(HloPass):
    name = "copy-insertion"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in list(module.computations):
            for instr in list(computation.instructions):
                if instr.opcode == "while":
                    changed |= self._loop(instr)
                elif instr.opcode == "conditional":
                    changed |= self._conditional(instr)
        if module.entry is not None:
            changed |= self._entry_result(module.entry)
        return changed

    @staticmethod
    def _entry_result(entry: HloComputation) -> bool:
        root = entry.root
        needed: set[Leaf] = set()
        seen: set[tuple[int, Leaf]] = set()
        for leaf in array_leaf_indices(root):
            defining, index = source(root, leaf)
            if _is_fixed(defining) or (id(defining), index) in seen:
                needed.add(leaf)
            seen.add((id(defining), index))
        if not needed:
            return False
        entry.root = copy_leaves(root, needed)
        return True

    @staticmethod
    def _loop(loop: HloInstruction) -> bool:
        changed = False
        initial = loop.operands[0]
        needed: set[Leaf] = set()
        seen: set[tuple[int, Leaf]] = set()
        _, body = while_condition_and_body(loop)
        parameter = body.parameters[0] if body.parameters else None
        for leaf in array_leaf_indices(initial):
            defining, index = source(initial, leaf)
            if source(body.root, leaf) == (parameter, leaf):
                continue  # passed on unchanged: the loop only reads it, wherever it is
            shared = any(r is not loop for r in _readers(defining, index))
            if _is_fixed(defining) or shared or (id(defining), index) in seen:
                needed.add(leaf)
            seen.add((id(defining), index))
        if needed:
            loop.replace_operand(0, copy_leaves(initial, needed, before=loop))
            changed = True
        changed |= _own_results(body, moved_ok=True)
        return changed

    @staticmethod
    def _conditional(conditional: HloInstruction) -> bool:
        changed = False
        for branch in conditional.called_computations:
            changed |= _own_results(branch, moved_ok=False)
        return changed


def _own_results(computation: HloComputation, moved_ok: bool) -> bool:
    """Copy the results of ``computation`` that are not values it defines: its
    parameter's arrays (but, in a loop body, an element left in its place),
    constants, arrays held twice."""
    root = computation.root
    needed: set[Leaf] = set()
    seen: set[tuple[int, Leaf]] = set()
    for leaf in array_leaf_indices(root):
        defining, index = source(root, leaf)
        in_place = moved_ok and defining.opcode == "parameter" and index == leaf
        if (_is_fixed(defining) and not in_place) or (id(defining), index) in seen \
                or defining.parent is not computation:
            needed.add(leaf)
        seen.add((id(defining), index))
    if not needed:
        return False
    computation.root = copy_leaves(root, needed)
    return True
