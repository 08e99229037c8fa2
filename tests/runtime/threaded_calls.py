"""Calls of one executable from several threads at once, each result checked against its expected value."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import xlapy
from tools.compare import assert_same


def call_from_threads(executable: xlapy.Executable, cases: Sequence[tuple], expected: Sequence,
                      workers: int, rounds: int) -> dict[int, object]:
    """Runs ``executable`` on every case ``rounds`` times over, case ``n`` from thread ``n % workers`` (all
    threads start together), comparing each result with ``expected[n]`` bit for bit; returns each case's last
    result, checked again once every thread has finished."""
    got: dict[int, object] = {}
    barrier = threading.Barrier(workers)

    def work(worker: int) -> None:
        barrier.wait()
        for _ in range(rounds):
            for number in range(worker, len(cases), workers):
                got[number] = executable(*cases[number])
                assert_same(got[number], expected[number], exact_bits=True)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == list(range(len(cases)))
    for number, value in got.items():
        assert_same(value, expected[number], exact_bits=True)
    return got
