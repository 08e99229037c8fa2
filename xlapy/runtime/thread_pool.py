"""Blocks of a kernel spread over all cores.

Kernels' launches go to the native pool (``runtime/native_pool.py``: workers in generated code that claim
chunks of blocks, dispatch in about a microsecond) where the host has it. Other callables ``call(begin, end)``
(and kernels on other hosts) run once per contiguous range of blocks on a ``ThreadPoolExecutor``; ctypes
releases the GIL during a kernel's call, so the ranges run in parallel on the pool's threads.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from xlapy.codegen.launch import host_cores
from xlapy.runtime import native_pool

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None

# Below this many elements a callable runs on the calling thread: handing work to Python threads (tens of
# microseconds) costs more than it saves.
SERIAL_ELEMENTS = 1 << 15
# The same for a kernel on the native pool, in elements of a cheap op (a kernel's ``pool_work``: the thunk emitter
# weighs transcendental ops as ``TRANSCENDENTAL_WORK`` elements more). Its hand-off costs about a microsecond, so
# the limit is no longer the dispatch but the other core: when it is free, two threads pay from 4,096 elements for
# a transcendental (tanh 1.1x to 1.6x from 2^12 to 2^14), from 2^16 to 2^17 for an add whose operands are in the
# caller's cache (the other core fetches its half from there). When other processes share the cores, a worker
# pre-empted in the middle of a chunk makes the launch wait.
NATIVE_SERIAL_ELEMENTS = 1 << 15
# The fewest elements in a chunk of blocks the native pool's threads claim at a time.
MIN_CHUNK_ELEMENTS = 1 << 12


def worker_count() -> int:
    """The threads a launch spreads over: one per core."""
    return host_cores()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="xlapy-call")
        return _pool


def runs_serially(blocks: int, elements: int, native: bool = False) -> bool:
    """Whether ``blocks`` blocks over ``elements`` elements run on the calling thread alone: for a kernel's launch
    (``native``, a launch made by ``CpuKernel.bind``) when the native pool would take it, else for a callable."""
    threshold = NATIVE_SERIAL_ELEMENTS if native and native_pool.supported() else SERIAL_ELEMENTS
    return worker_count() == 1 or blocks <= 1 or elements < threshold


def run_blocks(call: Callable[[int, int], None], blocks: int, elements: int) -> None:
    """``call(begin, end)`` over ``[0, blocks)`` spread over the cores."""
    block_launcher(call, blocks, elements)()


def block_launcher(call: Callable[[int, int], None], blocks: int, elements: int) -> Callable[[], None]:
    """``run_blocks(call, blocks, elements)`` as a callable of no arguments, with the choice between the
    calling thread and the pools (and the split into ranges or chunks) made once. A kernel's launch (with the
    ``native`` attribute ``CpuKernel.bind`` gives it) goes to the native pool, anything else to Python threads."""
    native = getattr(call, "native", None)
    if native is not None and native_pool.supported():
        function, arguments, kernel_blocks = native
        if not 0 < blocks <= kernel_blocks:
            return functools.partial(call, 0, blocks)  # refused by ``call`` (or nothing to run)
        # The launches keep ``call`` alive: its pointer array (``arguments``) and the buffers it points to.
        if runs_serially(blocks, elements, native=True):
            return native_pool.alone(function, arguments, blocks, owner=call)
        workers = worker_count()
        # Chunks small enough to balance the threads, large enough that claiming one (a compare-and-swap on a
        # cache line the threads share) costs little next to running it.
        chunk = max(1, blocks // (workers * native_pool.CHUNKS_PER_THREAD), -(-MIN_CHUNK_ELEMENTS * blocks // elements))
        return native_pool.launcher(function, arguments, blocks, chunk, workers, functools.partial(call, 0, blocks),
                                    owner=call)
    if runs_serially(blocks, elements):
        return functools.partial(call, 0, blocks)
    parts = min(blocks, worker_count())
    bounds = [blocks * i // parts for i in range(parts + 1)]
    first = (bounds[0], bounds[1])
    others = [(bounds[i], bounds[i + 1]) for i in range(1, parts)]

    def run_on_pool() -> None:
        pool = _executor()
        futures = [pool.submit(call, begin, end) for begin, end in others]
        try:
            call(*first)
        finally:
            for future in futures:
                future.result()

    return run_on_pool
