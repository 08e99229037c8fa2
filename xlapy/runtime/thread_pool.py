"""Blocks of a kernel spread over all cores.

A kernel is called once per contiguous range of blocks; ctypes releases the
GIL during the call, so the ranges run in parallel on the pool's threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None

# Below this many elements a kernel runs on the calling thread: handing work
# to the pool costs more than it saves.
SERIAL_ELEMENTS = 1 << 15


def worker_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="xlapy-kernel")
        return _pool


def run_blocks(call: Callable[[int, int], None], blocks: int, elements: int) -> None:
    """``call(begin, end)`` over ``[0, blocks)`` split into one range per core."""
    workers = worker_count()
    if workers == 1 or blocks == 1 or elements < SERIAL_ELEMENTS:
        call(0, blocks)
        return
    parts = min(blocks, workers)
    bounds = [blocks * i // parts for i in range(parts + 1)]
    pool = _executor()
    futures = [pool.submit(call, bounds[i], bounds[i + 1]) for i in range(1, parts)]
    call(bounds[0], bounds[1])
    for future in futures:
        future.result()
