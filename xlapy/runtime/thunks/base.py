"""What every thunk is built on: the execution context (one byte array per buffer allocation) and the
``Thunk`` interface, as XLA:CPU's ``xla/backends/cpu/runtime/thunk.h`` splits a program into thunks that run
one after another over buffer slices."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import VerifyError, XlapyError
from xlapy.memory import buffer_bytes
from xlapy.shapes import ELEMENT_TYPES, Shape, from_physical, to_physical

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice

# Allocations start on this many bytes, as XLA:CPU aligns its buffers (``cpu_function_runtime.h``'s
# ``Align()``), so vectorised kernels and BLAS see aligned data.
ALIGNMENT = 64


def allocate(nbytes: int, what: str = "a buffer") -> np.ndarray:
    """``nbytes`` uninitialised bytes starting on an ``ALIGNMENT``-byte boundary, for ``what``."""
    try:
        raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    except (MemoryError, ValueError) as error:
        raise XlapyError(f"cannot allocate {what} ({nbytes} bytes): {str(error) or 'out of memory'}") from None
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes]


def dtype_of(shape: Shape) -> np.dtype:
    """The numpy dtype of one element of ``shape`` in a buffer (sub-byte types take a whole byte)."""
    return np.dtype(ELEMENT_TYPES[shape.element_type].dtype)


def is_default_layout(shape: Shape) -> bool:
    """Whether ``shape``'s physical buffer is its logical array in row-major order."""
    layout = shape.layout
    rank = len(shape.dimensions)
    return layout is None or (not layout.tiles and tuple(layout.minor_to_major) == tuple(range(rank - 1, -1, -1)))


def to_buffer(array: np.ndarray, shape: Shape, out: np.ndarray) -> None:
    """Writes the logical ``array`` (of ``shape``'s dimensions and dtype) into the flat physical ``out``."""
    if is_default_layout(shape):
        out[...] = np.asarray(array).reshape(-1)
    else:
        out[...] = to_physical(np.asarray(array), shape)


def from_buffer(data: np.ndarray, shape: Shape) -> np.ndarray:
    """A fresh logical array read out of the flat physical ``data`` of ``shape``."""
    if is_default_layout(shape):
        return data.reshape(shape.dimensions).copy()
    return from_physical(data, shape)


@functools.lru_cache(maxsize=4096)
def _view_of(shape: Shape) -> tuple[int, np.dtype]:
    # Thunks view the same few shapes on every run (and every loop iteration): worth remembering.
    return buffer_bytes(shape), dtype_of(shape)


class ExecutionContext:
    """The memory of one run: ``allocations[i]`` holds the bytes of buffer allocation ``i``.

    A context can serve many runs (an executable keeps its contexts between calls): whatever depends only on
    where the buffers are — views of slices, the checks that a slice holds its array, kernel pointers — is
    worked out once per context and remembered (``array``, ``prepared``), never once per loop iteration."""

    def __init__(self, allocations: Sequence[np.ndarray]):
        self.allocations = list(allocations)
        self._views: dict[tuple[BufferSlice, Shape], np.ndarray] = {}
        # id(thunk) -> (thunk, its prepared run): the thunk is kept so that its id is never reused.
        self._prepared: dict[int, tuple[object, Callable[[], None]]] = {}

    def array(self, slice: BufferSlice, shape: Shape) -> np.ndarray:
        """The flat physical view (layout order, dtype of ``shape``) of the array ``slice`` holds."""
        key = (slice, shape)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self._view(slice, shape)
        return view

    def _view(self, slice: BufferSlice, shape: Shape) -> np.ndarray:
        nbytes, dtype = _view_of(shape)
        if nbytes > slice.size:
            raise VerifyError(f"a slice of {slice.size} bytes cannot hold {shape} ({nbytes} bytes)")
        return self.bytes(slice)[:nbytes].view(dtype)

    def bytes(self, slice: BufferSlice) -> np.ndarray:
        """The raw bytes of ``slice``."""
        data = self.allocations[slice.allocation][slice.offset:slice.offset + slice.size]
        if data.nbytes != slice.size:
            raise VerifyError(f"slice at byte {slice.offset} of allocation {slice.allocation} runs past its end")
        return data

    def prepared(self, thunk: Thunk | ThunkSequence) -> Callable[[], None]:
        """``thunk``'s run in this context as a callable of no arguments (``thunk.prepare(self)``, made on the
        first request and remembered)."""
        entry = self._prepared.get(id(thunk))
        if entry is None:
            entry = self._prepared[id(thunk)] = (thunk, thunk.prepare(self))
        return entry[1]

    def forget(self) -> None:
        """Drops what was prepared (prepared runs may refer back to the context)."""
        self._prepared.clear()
        self._views.clear()


class Thunk(ABC):
    """One step of a compiled computation. ``name`` is the instruction it runs; ``kind`` is one of
    ``"kernel"`` (generated code), ``"library"`` (a library call such as BLAS), ``"copy"`` or
    ``"control-flow"``.

    ``prepare(context)`` gives the run as a callable of no arguments with everything that depends only on the
    context's allocations done beforehand (views resolved, slices checked): what a loop iteration repeats is
    then only the work. A thunk must not change once it has been prepared in a context."""

    name: str
    kind: str

    @abstractmethod
    def run(self, context: ExecutionContext) -> None:
        """Reads the thunk's operand slices and writes its result slices in ``context``."""

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        """``run`` in ``context`` as a callable of no arguments (thunks with per-context work override this)."""
        return functools.partial(self.run, context)


@dataclass
class ThunkSequence:
    """The thunks of one computation in schedule order; running it runs each in turn."""

    thunks: list[Thunk] = field(default_factory=list)

    def run(self, context: ExecutionContext) -> None:
        context.prepared(self)()

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        """The sequence as one callable: the prepared runs of its thunks, one after another."""
        steps = tuple(context.prepared(thunk) for thunk in self.thunks)
        return run_in_turn(steps)

    def __iter__(self) -> Iterator[Thunk]:
        return iter(self.thunks)

    def __len__(self) -> int:
        return len(self.thunks)

    def walk(self) -> Iterator[Thunk]:
        """Every thunk, including those nested in control-flow thunks (which list theirs in ``nested``)."""
        for thunk in self.thunks:
            yield thunk
            for inner in getattr(thunk, "nested", ()):
                yield from inner.walk()


def _nothing() -> None:
    pass


def run_in_turn(steps: Sequence[Callable[[], None]]) -> Callable[[], None]:
    """One callable that calls each of ``steps`` in order."""
    if not steps:
        return _nothing
    if len(steps) == 1:
        return steps[0]

    def run_steps() -> None:
        for step in steps:
            step()

    return run_steps
