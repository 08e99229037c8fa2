"""Prepared steps run in native code: a run of kernel launches and copies, and whole loops of them, in one call.

A prepared step (``ExecutionContext.prepared``) is a Python callable; each call through ctypes costs about a
microsecond, which a loop of small kernels pays several times per iteration (a ``fori_loop`` step: the counter's
add, the carried values' copies, the step's kernel). XLA:CPU's thunks run in C++ (``WhileThunk`` loops over its
body's thunks without returning to any interpreter). Here a step that is a kernel launch or a byte move says so
in its ``native_steps`` attribute (records of ``native_pool.STEP_WORDS`` words: kind, a, b, c), and

- ``in_turn`` runs consecutive such steps as one call of ``xlapy_pool_run_steps`` (``runtime/native_pool.py``);
- ``counted_loop`` and ``tested_loop`` run a while loop whose body (and condition) are all such steps in native
  code, the condition's predicate read by a test step.

A loop calls the native code in slices of ``SLICE_SECONDS`` (the native loop returns once its cycle budget is
spent at the end of an iteration), so that a signal (Ctrl-C) is seen between two slices as it would be between
two steps. Every address in a record comes from a prepared step that has already checked its buffers; the
callables made here keep those steps (and so their jobs, pointer arrays and buffers) alive."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

from xlapy.runtime import native_pool

Record = tuple[int, int, int, int]

# The longest a native call of a loop runs before it returns to Python (at the end of an iteration).
SLICE_SECONDS = 0.01
# The iterations of a loop whose trip count is not known: the native loop stops at its test or its budget.
_UNBOUNDED = (1 << 62)


def native_records(run: Callable[[], None]) -> tuple[Record, ...] | None:
    """The native steps ``run`` is made of, or None when it is (partly) Python."""
    return getattr(run, "native_steps", None)


def move(destination: int, source: int, nbytes: int) -> Record:
    """A step moving ``nbytes`` bytes from address ``source`` to ``destination`` (they may overlap)."""
    return (native_pool.STEP_MOVE, destination, source, nbytes)


def _array(records: Sequence[Record]) -> ctypes.Array:
    return (ctypes.c_int64 * (native_pool.STEP_WORDS * len(records)))(*(word for r in records for word in r))


def _runner() -> tuple[Callable[[int, int, int, int], int], int]:
    run_steps, ticks_per_second = native_pool.steps_runner()
    return run_steps, max(1, int(ticks_per_second * SLICE_SECONDS))


def in_turn(runs: Sequence[Callable[[], None]]) -> list[Callable[[], None]]:
    """``runs`` with each stretch of two or more consecutive native steps replaced by one callable running them
    in one native call (which has ``native_steps`` itself)."""
    if not native_pool.supported():
        return list(runs)
    merged: list[Callable[[], None]] = []
    stretch: list[Callable[[], None]] = []

    def close() -> None:
        if len(stretch) > 1:
            merged.append(_native_run(stretch))
        else:
            merged.extend(stretch)
        stretch.clear()

    for run in runs:
        if native_records(run) is None:
            close()
            merged.append(run)
        else:
            stretch.append(run)
    close()
    return merged


def _native_run(runs: Sequence[Callable[[], None]]) -> Callable[[], None]:
    records = tuple(record for run in runs for record in native_records(run))
    array = _array(records)
    run_steps, _ = _runner()
    address, count = ctypes.addressof(array), len(records)

    def run_natively() -> None:
        run_steps(address, count, 1, _UNBOUNDED)

    run_natively.native_steps = records  # type: ignore[attr-defined]
    run_natively.owners = (array, tuple(runs))  # type: ignore[attr-defined]  # jobs, pointers, buffers alive
    return run_natively


def counted_loop(initial: Callable[[], None], body: Callable[[], None], trips: int) -> Callable[[], None] | None:
    """``initial()``, then ``body()`` ``trips`` times, in native code; None when ``body`` is not all native."""
    records = native_records(body)
    if records is None or not native_pool.supported():
        return None
    array = _array(records)
    run_steps, budget = _runner()
    address, count = ctypes.addressof(array), len(records)

    def run_counted() -> None:
        initial()
        left = trips
        while left > 0:
            left -= run_steps(address, count, left, budget)

    run_counted.owners = (array, body)  # type: ignore[attr-defined]
    return run_counted


def tested_loop(initial: Callable[[], None], condition: Callable[[], None], predicate: int,
                body: Callable[[], None]) -> Callable[[], None] | None:
    """``initial()``, then ``condition()`` and, while the byte at address ``predicate`` is not 0, ``body()`` and
    ``condition()`` again, in native code; None when the condition or the body is not all native."""
    condition_records, body_records = native_records(condition), native_records(body)
    if condition_records is None or body_records is None or not native_pool.supported():
        return None
    records = (*condition_records, (native_pool.STEP_TEST, predicate, 0, 0), *body_records)
    array = _array(records)
    run_steps, budget = _runner()
    address, count = ctypes.addressof(array), len(records)

    def run_tested() -> None:
        initial()
        while run_steps(address, count, _UNBOUNDED, budget) >= 0:
            pass

    run_tested.owners = (array, condition, body)  # type: ignore[attr-defined]
    return run_tested
