"""Blocks of a kernel spread over all cores.

A kernel is called once per contiguous range of blocks; ctypes releases the
GIL during the call, so the ranges run in parallel on the pool's threads.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None

# Below this many elements a kernel runs on the calling thread: handing work
# to the pool costs more than it saves.
SERIAL_ELEMENTS = 1 << 15


@functools.cache
def worker_count() -> int:
    # Asked once: the question is a system call, and kernels are launched many times per loop.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="xlapy-kernel")
        return _pool


def runs_serially(blocks: int, elements: int) -> bool:
    """Whether a kernel of ``blocks`` blocks over ``elements`` elements runs on the calling thread alone."""
    return worker_count() == 1 or blocks <= 1 or elements < SERIAL_ELEMENTS


def run_blocks(call: Callable[[int, int], None], blocks: int, elements: int) -> None:
    """``call(begin, end)`` over ``[0, blocks)`` split into one range per core."""
    if runs_serially(blocks, elements):
        call(0, blocks)
    else:
        block_launcher(call, blocks, elements)()


def block_launcher(call: Callable[[int, int], None], blocks: int, elements: int) -> Callable[[], None]:
    """``run_blocks(call, blocks, elements)`` as a callable of no arguments, with the choice between the
    calling thread and the pool (and the split into ranges) made once."""
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
