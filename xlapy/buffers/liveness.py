"""The logical buffers of a scheduled module and when each is live.

Every array leaf of every instruction of a sequenced computation is either a
new logical buffer or a view of one (XLA's ``HloDataflowAnalysis`` with its
buffer-forwarding ops): a bitcast is its operand's bytes, a get-tuple-element
its operand's element, a tuple its operands, a parameter of a while's
condition or body the while's own value, a parameter of a conditional branch
the conditional's operand for that branch, a parameter of a call target the
call's operand, and a call the root of its target. The asynchronous pairs
alias as in XLA's dataflow analysis: a start holds its operands in element
{0} of its value (a copy-start in {1}) and defines its result and contexts
(an async-start's result is the root of the computation it wraps, whose
parameters are its operands); a done's value is its start's result element
(an all-reduce-done's, its start's whole value), an async-update's its
operand's.

Liveness is measured on one timeline for the whole module: the entry's
schedule with each control-flow instruction's computations spliced in where
it runs (a while's condition and body, each branch of a conditional in turn,
a call's target). A buffer lives from the step that defines it to the last
step that reads it; a buffer of the enclosing program that a loop reads
lives to the loop's end (the next iteration reads it again); entry parameters
and the entry's results live throughout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction, while_condition_and_body
from xlapy.shapes import Shape
from xlapy.transforms.copy_insertion import source

if TYPE_CHECKING:
    from xlapy.buffers.schedule import ModuleSchedule

ShapeIndex = tuple[int, ...]

# Ops whose value is (part of) their operands' bytes, without a buffer of their own.
FORWARDING_OPCODES = frozenset({"bitcast", "get-tuple-element", "tuple", "add-dependency", "opt-barrier", "domain"})

# The ends of asynchronous pairs, whose value is the element at this index of their operand's (the start's).
ASYNC_RESULT_ELEMENT: dict[str, ShapeIndex] = {
    "all-reduce-done": (), "all-gather-done": (1,), "collective-permute-done": (1,), "copy-done": (0,),
    "async-update": (), "async-done": (1,),
}
# Starts that hold their operands in an element of their value: the element's index.
OPERANDS_ELEMENT: dict[str, ShapeIndex] = {
    "all-gather-start": (0,), "collective-permute-start": (0,), "async-start": (0,), "copy-start": (1,),
}


def array_leaves(shape: Shape, prefix: ShapeIndex = ()) -> list[tuple[ShapeIndex, Shape]]:
    """(index, shape) of every array inside ``shape``, depth first (tokens have no bytes)."""
    if shape.is_tuple:
        return [leaf for i, element in enumerate(shape.tuple_shapes) for leaf in array_leaves(element, (*prefix, i))]
    return [(prefix, shape)] if shape.is_array else []


def loop_invariant_leaves(loop: HloInstruction) -> set[ShapeIndex]:
    """The shape indices of the arrays a while's body passes on unchanged (its
    root's array there is its parameter's array at the same index)."""
    _, body = while_condition_and_body(loop)
    if body.root is None or not body.parameters:
        return set()
    parameter = body.parameters[0]
    invariant = set()
    for index, _ in array_leaves(loop.shape):
        defining, at = source(body.root, index)
        if defining is parameter and at == index:
            invariant.add(index)
    return invariant


def _subtree(leaves: dict[ShapeIndex, LogicalBuffer], prefix: ShapeIndex) -> dict[ShapeIndex, LogicalBuffer]:
    return {index[len(prefix):]: buffer for index, buffer in leaves.items() if index[:len(prefix)] == prefix}


@dataclass(eq=False)
class LogicalBuffer:
    """An array some instruction defines: ``instruction``'s leaf at ``index``."""

    id: int
    instruction: HloInstruction
    index: ShapeIndex
    shape: Shape
    size: int
    defined_at: int = 0
    last_use: int = 0
    # Every read: (step, reader, operand number); the operand number is None for the copies control flow
    # makes (a while's initial state, a body's or branch's results).
    uses: list[tuple[int, HloInstruction, int | None]] = field(default_factory=list)

    @property
    def is_entry_parameter(self) -> bool:
        computation = self.instruction.parent
        return self.instruction.opcode == "parameter" and computation is not None and computation.is_entry

    @property
    def is_constant(self) -> bool:
        return self.instruction.opcode == "constant"

    def __repr__(self) -> str:
        where = f"{self.instruction.name}{list(self.index)}"
        return f"<LogicalBuffer {self.id} {where} [{self.defined_at}, {self.last_use}]>"


@dataclass
class Liveness:
    """The logical buffers of a module and the leaves each instruction's value is made of."""

    schedule: ModuleSchedule
    buffers: list[LogicalBuffer] = field(default_factory=list)
    # id(instruction) -> {index: buffer} for every array leaf of its value.
    leaves: dict[int, dict[ShapeIndex, LogicalBuffer]] = field(default_factory=dict)
    # id(instruction) -> its step on the timeline.
    steps: dict[int, int] = field(default_factory=dict)
    end: int = 0
    # id(computation) -> (first, last) step of its instructions, for the computations control flow runs.
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    outputs: set[int] = field(default_factory=set)  # ids of the buffers the entry returns

    def buffers_of(self, instr: HloInstruction) -> dict[ShapeIndex, LogicalBuffer]:
        try:
            return self.leaves[id(instr)]
        except KeyError:
            raise VerifyError(f"{instr.name} is not in a computation that runs as a sequence of thunks") from None

    def buffer(self, instr: HloInstruction, index: ShapeIndex = ()) -> LogicalBuffer:
        found = self.buffers_of(instr).get(tuple(index))
        if found is None:
            raise VerifyError(f"{instr.name} has no array at shape index {list(index)} (its shape is {instr.shape})")
        return found


def analyze_liveness(schedule: ModuleSchedule, buffer_size: Callable[[Shape], int]) -> Liveness:
    """The logical buffers of ``schedule``'s module and their live ranges;
    ``buffer_size(shape)`` gives a buffer's bytes."""
    return _Walker(schedule, buffer_size).run()


class _Walker:
    def __init__(self, schedule: ModuleSchedule, buffer_size: Callable[[Shape], int]) -> None:
        self.liveness = Liveness(schedule)
        self.schedule = schedule
        self.buffer_size = buffer_size
        self.step = 0
        # Buffers read inside each loop being walked, innermost last.
        self.loops: list[set[int]] = []
        self.by_id: dict[int, LogicalBuffer] = {}

    def run(self) -> Liveness:
        entry = self.schedule.module.entry
        self.walk(entry, {})
        self.step += 1
        liveness = self.liveness
        liveness.end = self.step
        for buffer in liveness.buffers_of(entry.root).values():
            liveness.outputs.add(buffer.id)
        for buffer in liveness.buffers:
            if buffer.is_entry_parameter:
                buffer.defined_at = 0
            if buffer.is_entry_parameter or buffer.id in liveness.outputs:
                buffer.last_use = liveness.end
        return liveness

    def define(self, instr: HloInstruction, index: ShapeIndex, shape: Shape) -> LogicalBuffer:
        buffer = LogicalBuffer(len(self.liveness.buffers), instr, index, shape, self.buffer_size(shape),
                               defined_at=self.step, last_use=self.step)
        self.liveness.buffers.append(buffer)
        self.by_id[buffer.id] = buffer
        return buffer

    def bind(self, instr: HloInstruction, leaves: dict[ShapeIndex, LogicalBuffer]) -> None:
        self.liveness.leaves[id(instr)] = leaves
        self.liveness.steps[id(instr)] = self.step

    def use(self, leaves: dict[ShapeIndex, LogicalBuffer], reader: HloInstruction, operand: int | None) -> None:
        for buffer in leaves.values():
            buffer.last_use = max(buffer.last_use, self.step)
            buffer.uses.append((self.step, reader, operand))
            if self.loops:
                self.loops[-1].add(buffer.id)

    def walk(self, computation: HloComputation, parameters: dict[int, dict[ShapeIndex, LogicalBuffer]]) -> None:
        """Walk ``computation``'s schedule; ``parameters`` gives the buffers of
        its parameters when another instruction's value is what they hold."""
        first = self.step + 1
        for instr in self.schedule.sequence(computation):
            self.step += 1
            operands = [self.liveness.buffers_of(o) for o in instr.operands]
            if instr.opcode not in FORWARDING_OPCODES and instr.opcode != "call":
                # Views read nothing: their readers read the buffers they show.
                for number, leaves in enumerate(operands):
                    self.use(leaves, instr, None if instr.opcode in ("while", "conditional") else number)
            opcode = instr.opcode
            if opcode == "parameter" and id(instr) in parameters:
                self.bind(instr, parameters[id(instr)])
            elif opcode in ("bitcast", "add-dependency", "domain", "opt-barrier"):
                self.bind(instr, operands[0])
            elif opcode == "get-tuple-element":
                self.bind(instr, _subtree(operands[0], (int(instr.attributes["index"]),)))
            elif opcode == "tuple":
                self.bind(instr, {(i, *index): b for i, leaves in enumerate(operands) for index, b in leaves.items()})
            elif opcode == "call":
                self.call(instr, operands)
            elif opcode in ASYNC_RESULT_ELEMENT:
                self.bind(instr, _subtree(operands[0], ASYNC_RESULT_ELEMENT[opcode]))
            elif opcode in OPERANDS_ELEMENT:
                self.start(instr, operands)
            elif opcode == "while":
                # An element the body passes on unchanged is never written: the loop keeps it where it was.
                invariant = loop_invariant_leaves(instr)
                self.bind(instr, {index: operands[0][index] if index in invariant and index in operands[0]
                                  else self.define(instr, index, leaf) for index, leaf in array_leaves(instr.shape)})
                self.run_while(instr)
            else:
                self.bind(instr, {index: self.define(instr, index, leaf) for index, leaf in array_leaves(instr.shape)})
                if opcode == "conditional":
                    self.run_conditional(instr, operands)
        self.liveness.spans[id(computation)] = (first, self.step)

    def call(self, instr: HloInstruction, operands: list[dict[ShapeIndex, LogicalBuffer]]) -> None:
        callee = instr.called_computations[0]
        self.walk(callee, {id(p): operands[p.parameter_number] for p in callee.parameters})
        self.step += 1
        self.bind(instr, self.liveness.buffers_of(callee.root))

    def start(self, instr: HloInstruction, operands: list[dict[ShapeIndex, LogicalBuffer]]) -> None:
        """An asynchronous start: its operands' buffers in their element (each operand at its number below it
        when the element is a tuple of them: always for async-start, for several operands otherwise), an
        async-start's result the root of the computation it runs (walked here, as a call's), the rest defined."""
        element = OPERANDS_ELEMENT[instr.opcode]
        numbered = instr.opcode == "async-start" or len(operands) > 1
        held = {(*element, *((number,) if numbered else ()), *index): buffer
                for number, leaves in enumerate(operands) for index, buffer in leaves.items()}
        if instr.opcode == "async-start":
            callee = instr.called_computations[0]
            self.walk(callee, {id(p): operands[p.parameter_number] for p in callee.parameters})
            self.step += 1
            held.update({(1, *index): buffer for index, buffer in self.liveness.buffers_of(callee.root).items()})
        self.bind(instr, {index: held[index] if index in held and held[index].shape == leaf else
                          self.define(instr, index, leaf) for index, leaf in array_leaves(instr.shape)})

    def run_while(self, instr: HloInstruction) -> None:
        condition, body = while_condition_and_body(instr)
        state = self.liveness.leaves[id(instr)]
        self.loops.append(set())
        self.walk(condition, {id(p): state for p in condition.parameters})
        self.walk(body, {id(p): state for p in body.parameters})
        self.step += 1  # the body's results become the loop state
        self.use(self.liveness.buffers_of(body.root), instr, None)
        self.use(state, instr, None)
        read = self.loops.pop()
        state_ids = {b.id for b in state.values()}
        for buffer_id in read:
            buffer = self.by_id[buffer_id]
            if buffer.defined_at < self.liveness.steps[id(instr)] or buffer.id in state_ids:
                buffer.last_use = max(buffer.last_use, self.step)
        if self.loops:
            self.loops[-1].update(read)

    def run_conditional(self, instr: HloInstruction, operands: list[dict[ShapeIndex, LogicalBuffer]]) -> None:
        result = self.liveness.leaves[id(instr)]
        for position, branch in enumerate(instr.called_computations):
            self.walk(branch, {id(p): operands[position + 1] for p in branch.parameters})
            self.step += 1  # the branch's results become the conditional's
            self.use(self.liveness.buffers_of(branch.root), instr, None)
            self.use(result, instr, None)
