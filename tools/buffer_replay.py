"""Replays a scheduled module over its buffer assignment with the reference
interpreter: each instruction reads its operands out of the allocations and
writes its value into its own slices, control flow copies values as the
runtime's thunks do. If two values that are needed at the same time were
given overlapping bytes, the result differs from the interpreter's, which is
what the buffer tests compare with. Besides, every read checks that the
bytes are still those last written for that value (a value overwritten while
still needed fails there, whatever the op computes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tools.compare import assert_same
from xlapy.buffers.assignment import BufferAssignment, BufferSlice
from xlapy.buffers.liveness import FORWARDING_OPCODES, array_leaves
from xlapy.buffers.schedule import ModuleSchedule
from xlapy.hlo.arguments import check_arguments
from xlapy.hlo.ir import HloComputation, HloInstruction, while_condition_and_body
from xlapy.interpreter.evaluator import Evaluator, evaluate
from xlapy.shapes import ELEMENT_TYPES, Shape, from_physical, to_physical

# What unwritten bytes hold, so that reading a value nobody wrote shows.
GARBAGE = 0xA5


class BufferReplay:
    def __init__(self, schedule: ModuleSchedule, assignment: BufferAssignment, seed: int = 0) -> None:
        self.schedule = schedule
        self.assignment = assignment
        self.evaluator = Evaluator(schedule.module, seed=seed, max_while_iterations=10_000)
        self.memory = [np.full(a.size, GARBAGE, dtype=np.uint8) for a in assignment.allocations]
        # LogicalBuffer id -> the bytes last written for it.
        self.written: dict[int, bytes] = {}

    def raw(self, piece: BufferSlice) -> np.ndarray:
        return self.memory[piece.allocation][piece.offset:piece.offset + piece.size]

    def check(self, instr: HloInstruction, index: tuple[int, ...]) -> None:
        buffer = self.assignment.liveness.buffer(instr, index)
        expected = self.written.get(buffer.id)
        if expected is None:
            raise AssertionError(f"{instr.name}{list(index)} is read before anything was written to it")
        if self.raw(self.assignment.buffer_slices[buffer.id]).tobytes() != expected:
            raise AssertionError(f"{instr.name}{list(index)} ({buffer.instruction.name}) was overwritten while needed")

    def note(self, instr: HloInstruction, index: tuple[int, ...]) -> None:
        buffer = self.assignment.liveness.buffer(instr, index)
        self.written[buffer.id] = self.raw(self.assignment.buffer_slices[buffer.id]).tobytes()

    def view(self, piece: BufferSlice, shape: Shape) -> np.ndarray:
        dtype = ELEMENT_TYPES[shape.element_type].dtype
        raw = self.memory[piece.allocation][piece.offset:piece.offset + piece.size]
        return raw.view(dtype) if piece.size else np.zeros(0, dtype)

    def read(self, instr: HloInstruction, shape: Shape | None = None, index: tuple[int, ...] = ()) -> Any:
        shape = instr.shape if shape is None else shape
        if shape.is_tuple:
            return tuple(self.read(instr, element, (*index, i)) for i, element in enumerate(shape.tuple_shapes))
        if not shape.is_array:
            return ()
        self.check(instr, index)
        return from_physical(self.view(self.assignment.slice(instr, index), shape).copy(), shape)

    def write(self, instr: HloInstruction, value: Any) -> None:
        for index, shape in array_leaves(instr.shape):
            leaf = value
            for i in index:
                leaf = leaf[i]
            dtype = ELEMENT_TYPES[shape.element_type].dtype
            self.view(self.assignment.slice(instr, index), shape)[:] = to_physical(np.asarray(leaf, dtype), shape)
            self.note(instr, index)

    def copy_leaves(self, source: HloInstruction, target: HloInstruction) -> None:
        """Every array of ``source``'s value into ``target``'s slices, all read before any is written."""
        values = []
        for (index, s), (_, t), (_, shape) in zip(self.assignment.leaf_slices(source),
                                                  self.assignment.leaf_slices(target),
                                                  array_leaves(target.shape), strict=True):
            self.check(source, index)
            values.append((self.view(s, shape).copy(), t, shape, index))
        for data, t, shape, index in values:
            self.view(t, shape)[:] = data
            self.note(target, index)

    def run(self, *args: Any) -> Any:
        module = self.schedule.module
        entry = module.entry
        for allocation in self.assignment.allocations:
            if allocation.kind == "constant":
                self.write_constant(allocation.constant)
        for parameter, value in zip(entry.parameters, check_arguments(args, entry.parameters, entry.name)):
            self.write(parameter, value)
        self.run_computation(entry)
        return self.read(entry.root)

    def write_constant(self, instr: HloInstruction) -> None:
        self.write(instr, self.evaluator.apply(instr, []))

    def run_computation(self, computation: HloComputation) -> None:
        for instr in self.schedule.sequence(computation):
            opcode = instr.opcode
            if opcode in FORWARDING_OPCODES or opcode in ("parameter", "constant"):
                continue
            if opcode == "while":
                condition, body = while_condition_and_body(instr)
                self.copy_leaves(instr.operands[0], instr)
                while True:
                    self.run_computation(condition)
                    if not bool(self.read(condition.root)):
                        break
                    self.run_computation(body)
                    self.copy_leaves(body.root, instr)
            elif opcode == "conditional":
                selector = self.read(instr.operands[0])
                branches = instr.called_computations
                if selector.dtype == np.bool_:
                    branch = branches[0] if bool(selector) else branches[1]
                else:
                    choice = int(selector)
                    branch = branches[choice if 0 <= choice < len(branches) else len(branches) - 1]
                self.run_computation(branch)
                self.copy_leaves(branch.root, instr)
            elif opcode == "call":
                self.run_computation(instr.called_computations[0])
            else:
                operands = [self.read(o) for o in instr.operands]
                self.write(instr, self.evaluator.apply(instr, operands))


def replay(schedule: ModuleSchedule, assignment: BufferAssignment, *args: Any, seed: int = 0) -> Any:
    """The entry's value, computed in ``assignment``'s buffers in ``schedule``'s order."""
    return BufferReplay(schedule, assignment, seed).run(*args)


def assert_replay_matches_interpreter(schedule: ModuleSchedule, assignment: BufferAssignment,
                                      arguments: Sequence[Any], context: str = "") -> Any:
    """Replays ``schedule``'s module over ``assignment`` on ``arguments`` and
    compares with the interpreter's values, unless the module has dots or
    convolutions: their sums may round differently on operands laid out
    differently in memory (the replay itself still checks that no value is
    overwritten while needed). Returns the replayed value."""
    module = schedule.module
    got = replay(schedule, assignment, *arguments)
    if not any(i.opcode in ("dot", "convolution") for i in module.instructions):
        assert_same(got, evaluate(module, *arguments), context=context)
    return got
