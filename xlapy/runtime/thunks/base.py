"""What every thunk is built on: the execution context (one byte array per buffer allocation) and the
``Thunk`` interface, as XLA:CPU's ``xla/backends/cpu/runtime/thunk.h`` splits a program into thunks that run
one after another over buffer slices."""

from __future__ import annotations

import ctypes
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import VerifyError, XlapyError
from xlapy.memory import buffer_bytes
from xlapy.runtime import native_steps
from xlapy.shapes import ELEMENT_TYPES, Shape, from_physical, to_physical

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice

# Allocations start on this many bytes, as XLA:CPU aligns its buffers (``cpu_function_runtime.h``'s
# ``Align()``), so vectorised kernels and BLAS see aligned data.
ALIGNMENT = 64


def allocate(nbytes: int, what: str = "a buffer") -> np.ndarray:
    """``nbytes`` uninitialised bytes starting on an ``ALIGNMENT``-byte boundary, for ``what``."""
    return allocate_at(nbytes, what)[0]


def allocate_at(nbytes: int, what: str = "a buffer") -> tuple[np.ndarray, int]:
    """``allocate``, and the address of the first byte (worked out anyway, and worth not asking numpy again)."""
    try:
        raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    except (MemoryError, ValueError) as error:
        raise XlapyError(f"cannot allocate {what} ({nbytes} bytes): {str(error) or 'out of memory'}") from None
    address = address_of(raw)
    start = -address % ALIGNMENT
    return raw[start:start + nbytes], address + start


def address_of(data: np.ndarray) -> int:
    """The address of the first byte of the contiguous array ``data``. A writable one's comes from ctypes' view of
    its buffer, two calls into C, where numpy's ``data.ctypes.data`` runs Python code: about 2 against 12
    microseconds when a kernel has just evicted the caches, which every call of an executable pays."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(data))
    except (TypeError, ValueError, BufferError):  # read-only, or empty
        return data.ctypes.data


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
    worked out once per context and remembered (``array``, ``prepared``), never once per loop iteration.

    An allocation can be replaced between runs (``bind``: an executable runs on its caller's arguments and
    hands its result allocations over): what was worked out over the old bytes is then dropped, and only that.
    A prepared run depends on the allocations its thunk reads (``allocations``, ``array``, ``bytes``) while it
    is prepared, and on those of every run prepared for it (a loop's body, a sequence's thunks)."""

    def __init__(self, allocations: Sequence[np.ndarray | None]):
        # One set per preparation in progress (innermost last): the allocations it has read.
        self._preparing: list[set[int]] = []
        self.allocations = _Allocations(allocations, self._preparing)
        # The address of each allocation's first byte (None: unbound), so that binding the memory already bound
        # costs no look-up through numpy (a few microseconds each when a kernel has just evicted the caches).
        self._addresses: list[int | None] = [None if data is None else address_of(data) for data in allocations]
        self._views: dict[int, dict[tuple[BufferSlice, Shape], np.ndarray]] = {}
        # id(thunk) -> (thunk, its prepared run): the thunk is kept so that its id is never reused.
        self._prepared: dict[int, tuple[object, Callable[[], None], frozenset[int]]] = {}
        # allocation -> ids of the prepared runs that depend on it.
        self._dependents: dict[int, set[int]] = {}
        # allocation -> id of a prepared run -> how that run follows the allocation to new memory (``follow``).
        self._followers: dict[int, dict[int, Callable[[np.ndarray | None, int | None], bool]]] = {}
        # The ids of the thunks being prepared (innermost last), alongside ``_preparing``.
        self._preparing_ids: list[int] = []

    def array(self, slice: BufferSlice, shape: Shape) -> np.ndarray:
        """The flat physical view (layout order, dtype of ``shape``) of the array ``slice`` holds."""
        if self._preparing:
            self._preparing[-1].add(slice.allocation)
        views = self._views.get(slice.allocation)
        if views is None:
            views = self._views[slice.allocation] = {}
        key = (slice, shape)
        view = views.get(key)
        if view is None:
            view = views[key] = self._view(slice, shape)
        return view

    def _view(self, slice: BufferSlice, shape: Shape) -> np.ndarray:
        nbytes, dtype = _view_of(shape)
        if nbytes > slice.size:
            raise VerifyError(f"a slice of {slice.size} bytes cannot hold {shape} ({nbytes} bytes)")
        return self.bytes(slice)[:nbytes].view(dtype)

    def bytes(self, slice: BufferSlice) -> np.ndarray:
        """The raw bytes of ``slice``."""
        data = self.allocations[slice.allocation]
        if data is None:
            raise VerifyError(f"allocation {slice.allocation} is not bound to any memory")
        data = data[slice.offset:slice.offset + slice.size]
        if data.nbytes != slice.size:
            raise VerifyError(f"slice at byte {slice.offset} of allocation {slice.allocation} runs past its end")
        return data

    def holds(self, index: int, address: int, nbytes: int) -> bool:
        """Whether allocation ``index`` is bound to the ``nbytes`` bytes at ``address``."""
        current = self.allocations.get(index)
        return current is not None and self._addresses[index] == address and current.nbytes == nbytes

    def bind(self, index: int, data: np.ndarray | None, address: int | None = None) -> None:
        """Makes ``data`` (flat bytes, or None for none) allocation ``index``, dropping the views and prepared runs
        that depend on it unless ``data`` is the same memory (same first byte and size) as before. ``address``
        is that of ``data``'s first byte when the caller knows it."""
        current = self.allocations.get(index)
        if current is data:
            return
        if data is not None:
            if address is None:
                address = address_of(data)
            if self.holds(index, address, data.nbytes):
                return
        list.__setitem__(self.allocations, index, data)
        self._addresses[index] = address if data is not None else None
        self._views.pop(index, None)
        for key in self._dependents.pop(index, ()):
            self._drop(key)
        for repoint in list(self._followers.get(index, {}).values()):
            if not repoint(data, address):
                self.forget()  # a run that cannot follow: everything is prepared again, and checked again
                return

    def follow(self, index: int, repoint: Callable[[np.ndarray | None, int | None], bool]) -> None:
        """Called while a thunk is prepared: its run does not depend on allocation ``index`` staying where it is,
        because ``repoint(data, address)`` moves it to the memory ``data`` (first byte at ``address``) the
        allocation is bound to next (None: no memory; the run must not be called until it is bound again).
        ``repoint`` returns False when it cannot follow (then everything prepared is dropped). Results handed to
        the caller, and arguments used where they are, are bound to new memory on every call: their kernels
        follow them instead of being prepared again (XLA's thunks take their buffer addresses at each execution
        alike)."""
        self._preparing[-1].discard(index)
        self._followers.setdefault(index, {})[self._preparing_ids[-1]] = repoint

    def _drop(self, key: int) -> None:
        self._prepared.pop(key, None)
        for followers in self._followers.values():
            followers.pop(key, None)

    def prepared(self, thunk: Thunk | ThunkSequence) -> Callable[[], None]:
        """``thunk``'s run in this context as a callable of no arguments (``thunk.prepare(self)``, made on the
        first request and remembered until an allocation it depends on is bound elsewhere)."""
        entry = self._prepared.get(id(thunk))
        if entry is None:
            self._preparing.append(set())
            self._preparing_ids.append(id(thunk))
            try:
                run = thunk.prepare(self)
            finally:
                used = frozenset(self._preparing.pop())
                self._preparing_ids.pop()
            entry = self._prepared[id(thunk)] = (thunk, run, used)
            for index in used:
                self._dependents.setdefault(index, set()).add(id(thunk))
        if self._preparing:
            self._preparing[-1].update(entry[2])
        return entry[1]

    def forget(self) -> None:
        """Drops what was prepared (prepared runs may refer back to the context)."""
        self._prepared.clear()
        self._dependents.clear()
        self._followers.clear()
        self._views.clear()


class _Allocations(list):
    """A context's allocations: reading one while a run is being prepared records that the run depends on it.
    Replacing one goes through ``ExecutionContext.bind``."""

    def __init__(self, allocations: Sequence[np.ndarray | None], preparing: list[set[int]]):
        super().__init__(allocations)
        self._preparing = preparing

    def __getitem__(self, index):
        if self._preparing:
            self._preparing[-1].update(range(len(self))[index] if isinstance(index, slice)
                                       else (index % len(self),))
        return super().__getitem__(index)

    def __iter__(self):
        if self._preparing:
            self._preparing[-1].update(range(len(self)))
        return super().__iter__()

    def __setitem__(self, index, value) -> None:
        raise TypeError("an execution context's allocations are replaced with ExecutionContext.bind")

    def get(self, index: int) -> np.ndarray | None:
        """Allocation ``index``, read without recording a dependency."""
        return super().__getitem__(index)


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
    """One callable that calls each of ``steps`` in order (consecutive kernel launches and copies in one native
    call: ``native_steps.in_turn``)."""
    steps = native_steps.in_turn(steps)
    if not steps:
        return _nothing
    if len(steps) == 1:
        return steps[0]

    def run_steps() -> None:
        for step in steps:
            step()

    return run_steps
