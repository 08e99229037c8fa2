"""Control flow: while, conditional and call run the thunk sequences of the computations they call, as
XLA:CPU's ``WhileThunk``, ``ConditionalThunk`` and ``CallThunk`` (``xla/backends/cpu/runtime/``).

The called computations' parameters are views of the caller's slices (the buffer assignment makes them so):
a while's condition and body read the while's own slices, a branch reads its operand's, a callee its call's
operands'. Results move only where the assignment put them elsewhere: the while's initial state into its
slices, the body's result back into them after each iteration, a branch's or callee's result into the
caller's slices."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloInstruction, while_condition_and_body
from xlapy.runtime import native_steps
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, ThunkSequence, run_in_turn
from xlapy.runtime.thunks.copy import SliceCopies, leaf_copies
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape
from xlapy.transforms.hlo_rewrites import has_side_effect
from xlapy.transforms.while_loop_analysis import trip_count

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.runtime.thunk_emitter import ThunkEmitter


@dataclass(eq=False)
class WhileThunk(Thunk):
    """``initial`` copies the loop's initial state into its slices; then, while the condition's predicate
    holds, the body runs and ``back`` copies its result into the state slices."""

    name: str
    initial: SliceCopies
    condition: ThunkSequence
    predicate: BufferSlice
    body: ThunkSequence
    back: SliceCopies
    # The number of iterations when the loop's induction variable gives it: the condition is then not run (XLA's
    # WhileThunk with a known trip count).
    trips: int | None = None
    kind: str = field(default="control-flow", init=False)

    @property
    def nested(self) -> tuple[ThunkSequence, ...]:
        return self.condition, self.body

    def run(self, context: ExecutionContext) -> None:
        context.prepared(self)()

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        initial = context.prepared(self.initial)
        # The body's thunks and the copies back, as one flat tuple of calls: an iteration of a loop of small
        # kernels costs a few microseconds, of which nested calls through the sequence would be a tenth.
        steps = tuple(context.prepared(thunk) for thunk in self.body.thunks) + \
            ((context.prepared(self.back),) if self.back else ())
        iteration = run_in_turn(steps)
        trips = self.trips
        if trips is not None:
            native = native_steps.counted_loop(initial, iteration, trips)
            if native is not None:
                return native

            def run_counted() -> None:
                initial()
                for _ in range(trips):
                    for step in steps:
                        step()

            return run_counted
        condition = context.prepared(self.condition)
        # The predicate's byte read through a memoryview: a Python int per test, no numpy scalar.
        flag = context.array(self.predicate, _PRED).view(np.uint8)
        native = native_steps.tested_loop(initial, condition, flag.ctypes.data, iteration)
        if native is not None:
            return native
        predicate = memoryview(flag)

        def run_loop() -> None:
            initial()
            condition()
            while predicate[0]:
                iteration()
                condition()

        return run_loop


@dataclass(eq=False)
class ConditionalThunk(Thunk):
    """Runs the branch the selector picks (a pred: true picks branch 0, false branch 1; an s32 index: that
    branch, the last one when out of range, as XLA), then copies its result into the conditional's slices."""

    name: str
    selector: BufferSlice
    selector_shape: Shape
    branches: list[tuple[ThunkSequence, SliceCopies]]
    kind: str = field(default="control-flow", init=False)

    @property
    def nested(self) -> tuple[ThunkSequence, ...]:
        return tuple(sequence for sequence, _ in self.branches)

    def run(self, context: ExecutionContext) -> None:
        context.prepared(self)()

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        branches = [run_in_turn([context.prepared(sequence)] + ([context.prepared(result)] if result else []))
                    for sequence, result in self.branches]
        selector = context.array(self.selector, self.selector_shape)
        if self.selector_shape.element_type == "pred":
            flag = memoryview(selector.view(np.uint8))
            if_true, if_false = branches[0], branches[-1]

            def run_predicated() -> None:
                (if_true if flag[0] else if_false)()

            return run_predicated
        index = memoryview(selector)
        last = len(branches) - 1

        def run_indexed() -> None:
            chosen = index[0]
            branches[chosen if 0 <= chosen < last else last]()

        return run_indexed


@dataclass(eq=False)
class CallThunk(Thunk):
    """Runs the callee's sequence, then copies its result into the call's slices where they differ."""

    name: str
    callee: ThunkSequence
    result: SliceCopies
    kind: str = field(default="control-flow", init=False)

    @property
    def nested(self) -> tuple[ThunkSequence, ...]:
        return (self.callee,)

    def run(self, context: ExecutionContext) -> None:
        context.prepared(self)()

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        return run_in_turn([context.prepared(self.callee)] + ([context.prepared(self.result)] if self.result else []))


_PRED = Shape("pred", ())


@thunk_rule("while")
def _while(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    condition, body = while_condition_and_body(instr)
    state = emitter.leaves(instr)
    initial = leaf_copies(f"{instr.name} (initial state)", emitter.leaves(instr.operands[0]), state)
    condition_thunks = emitter.emit_computation(condition)
    body_thunks = emitter.emit_computation(body)
    back = leaf_copies(f"{instr.name} (loop state)", emitter.leaves(body.root), state)
    return [WhileThunk(instr.name, initial, condition_thunks, emitter.slice(condition.root), body_thunks, back,
                       _checked_trip_count(instr))]


def _checked_trip_count(loop: HloInstruction) -> int | None:
    """The loop's trip count when its induction variable shows it. A ``known_trip_count`` in the loop's
    ``backend_config`` (the trip-count annotator's, or a file's) is only a claim: one the loop contradicts is an
    error, and one that cannot be checked (the induction variable's update fused away) is not used."""
    condition, _ = while_condition_and_body(loop)
    if any(has_side_effect(i) for i in condition.instructions):
        return None  # the condition must run, every time
    trips = trip_count(loop)
    claimed = _claimed_trip_count(loop)
    if trips is not None and claimed is not None and claimed != trips:
        raise VerifyError(f"while {loop.name}: backend_config says known_trip_count n={claimed}, but its induction "
                          f"variable runs it {trips} times")
    return trips


def _claimed_trip_count(loop: HloInstruction) -> int | None:
    try:
        config = json.loads(loop.attr("backend_config") or "{}")
        return int(config["known_trip_count"]["n"])
    except (ValueError, TypeError, KeyError):
        return None


@thunk_rule("conditional")
def _conditional(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    selector = instr.operands[0]
    if selector.shape.element_type not in ("pred", "s32") or selector.shape.dimensions:
        raise UnimplementedError(f"conditional ({instr.name}) selected by {selector.shape}")
    result = emitter.leaves(instr)
    branches = []
    for number, branch in enumerate(instr.called_computations):
        sequence = emitter.emit_computation(branch)
        copies = leaf_copies(f"{instr.name} (branch {number})", emitter.leaves(branch.root), result)
        branches.append((sequence, copies))
    return [ConditionalThunk(instr.name, emitter.slice(selector), selector.shape, branches)]


@thunk_rule("call")
def _call(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    (callee,) = instr.called_computations
    sequence = emitter.emit_computation(callee)
    result = leaf_copies(f"{instr.name} (result)", emitter.leaves(callee.root), emitter.leaves(instr))
    return [CallThunk(instr.name, sequence, result)]
