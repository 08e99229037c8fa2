"""Copies between buffer slices, as XLA:CPU's ``CopyThunk`` (``xla/backends/cpu/runtime/copy_thunk.cc``).

A ``copy`` that keeps the layout moves bytes; one that changes the layout is a transpose of the physical
buffer, which the loop emitter generates (a kernel, as XLA:CPU emits such copies as loop fusions).
Control flow moves values between slices too (the loop state of a while, a branch's result): ``SliceCopies``
copies several slices at once, as if all were read before any is written."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.memory import buffer_bytes
from xlapy.runtime.native_steps import move
from xlapy.runtime.thunks.base import ExecutionContext, Thunk
from xlapy.runtime.thunks.kernel import lone_op_kernel
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape, default_layout

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.runtime.thunk_emitter import ThunkEmitter


def overlaps(a: BufferSlice, b: BufferSlice) -> bool:
    """Whether two slices share a byte."""
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


@dataclass(eq=False)
class SliceCopies(Thunk):
    """Copies ``nbytes`` from each source slice to its destination slice. Pairs whose source is their
    destination are dropped; when a source overlaps a destination (a swap of loop values, say), every source
    is read into a temporary before anything is written."""

    name: str
    pairs: list[tuple[BufferSlice, BufferSlice, int]]  # source, destination, bytes
    kind: str = field(default="copy", init=False)
    staged: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.pairs = [(s, d, n) for s, d, n in self.pairs if (s.allocation, s.offset) != (d.allocation, d.offset)]
        for source, destination, nbytes in self.pairs:
            if nbytes > source.size or nbytes > destination.size:
                raise VerifyError(f"{self.name}: a copy of {nbytes} bytes between slices of {source.size} and "
                                  f"{destination.size} bytes")
        destinations = [d for _, d, _ in self.pairs]
        self.staged = any(overlaps(s, d) for s, _, _ in self.pairs for d in destinations)

    def run(self, context: ExecutionContext) -> None:
        self.prepare(context)()

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        """The copies as byte moves between addresses resolved (and checked) once; staged copies go through
        temporaries made once too."""
        moves = [(context.bytes(d)[:n], context.bytes(s)[:n]) for s, d, n in self.pairs]
        if self.staged:
            temporaries = [np.empty(n, np.uint8) for _, _, n in self.pairs]
            moves = [*((t, s) for t, (_, s) in zip(temporaries, moves)),
                     *((d, t) for t, (d, _) in zip(temporaries, moves))]
            run = _memmoves(moves)
        else:
            run = _view_copies(moves)
        # The same moves as native steps (the context keeps the slices' memory alive, ``run`` the temporaries).
        run.native_steps = tuple(  # type: ignore[attr-defined]
            move(d.ctypes.data, s.ctypes.data, d.nbytes) for d, s in moves)
        return run

    def __bool__(self) -> bool:
        return bool(self.pairs)


def _view_copies(moves: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[], None]:
    """Each (destination, source) pair's bytes assigned as memoryviews (a memcpy): a few times cheaper per call
    than ctypes' memmove, which matters for a loop's small state values, copied every iteration."""
    views = tuple((memoryview(d), memoryview(s)) for d, s in moves)
    if len(views) == 1:
        ((destination, source),) = views

        def copy_one() -> None:
            destination[:] = source

        return copy_one

    def copy_each() -> None:
        for destination, source in views:
            destination[:] = source

    return copy_each


def _memmoves(moves: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[], None]:
    """memmove between the pairs' addresses, in order: what numpy's copy would do, without its per-call overhead
    (the arrays are kept alive by the context, the temporaries among them by the closure)."""
    steps = tuple(functools.partial(ctypes.memmove, d.ctypes.data, s.ctypes.data, d.nbytes) for d, s in moves)

    def copy_all(steps=steps, moves=moves) -> None:
        for step in steps:
            step()

    return copy_all


def leaf_copies(name: str, sources: list, destinations: list) -> SliceCopies:
    """The copies of array leaves ``sources`` into ``destinations`` (both ``[(shape, slice)]`` in the same
    order, the shapes equal)."""
    if len(sources) != len(destinations):
        raise VerifyError(f"{name}: {len(sources)} values copied into {len(destinations)}")
    pairs = []
    for (shape, source), (other, destination) in zip(sources, destinations):
        nbytes = buffer_bytes(shape)
        if nbytes != buffer_bytes(other):
            raise VerifyError(f"{name}: a value of {shape} copied into one of {other}")
        pairs.append((source, destination, nbytes))
    return SliceCopies(name, pairs)


def same_physical_layout(a: Shape, b: Shape) -> bool:
    """Whether arrays of ``a`` and ``b`` (same dimensions) have the same bytes in the same places."""
    return _physical(a) == _physical(b)


def _physical(shape: Shape) -> tuple:
    layout = shape.layout or default_layout(len(shape.dimensions))
    if not shape.dimensions:
        return ()
    return (layout.minor_to_major, layout.tiles, layout.element_size_in_bits, layout.tail_padding_alignment_in_elements)


@thunk_rule("copy")
def _copy(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    operand = instr.operands[0]
    if instr.shape.is_tuple:
        copies = leaf_copies(instr.name, emitter.leaves(operand), emitter.leaves(instr))
        return [copies] if copies else []
    if same_physical_layout(operand.shape, instr.shape) or buffer_bytes(operand.shape) == 0:
        copies = leaf_copies(instr.name, emitter.leaves(operand), emitter.leaves(instr))
        return [copies] if copies else []
    return lone_op_kernel(instr, emitter)  # a layout change: generated code transposes the buffer
