"""The worker process: reads pickled ``(entry, case)`` requests on stdin and
answers each with a pickled Outcome on the file descriptor given as its
argument. Run by ``tools.fuzz.pool``; the parent kills it on a timeout and
starts another after a crash.

The memory of the worker is capped (RLIMIT_AS) so that huge shapes fail
with MemoryError instead of exhausting a shared machine; faulthandler writes
the Python stack on a fatal signal or a hang to a file the parent reads."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import resource
import struct
import sys
import warnings


def _serve(answers: int, stack_file: str, memory_bytes: int, hang_seconds: float) -> None:
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    stack = open(stack_file, "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.enable(stack)
    # Output of the code under test must not mix with the answers.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    # Every input sees warnings as a fresh ``xlapy`` process would: shown each time, deprecations hidden.
    warnings.simplefilter("always")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)

    from tools.fuzz.targets import run_case
    from xlapy.runtime.kernel_cache import clear_memory_cache

    requests = sys.stdin.buffer
    import xlapy

    hello = pickle.dumps(("hello", xlapy.__file__))
    os.write(answers, struct.pack("<I", len(hello)) + hello)
    while True:
        header = requests.read(4)
        if len(header) < 4:
            return
        entry, case = pickle.loads(requests.read(struct.unpack("<I", header)[0]))
        stack.seek(0)
        stack.truncate()
        faulthandler.dump_traceback_later(hang_seconds, exit=False, file=stack)
        outcome = run_case(entry, case)
        faulthandler.cancel_dump_traceback_later()
        # Kernels compiled for one input must not pile up over thousands of them.
        with contextlib.suppress(Exception):
            clear_memory_cache()
        answer = pickle.dumps(outcome)
        os.write(answers, struct.pack("<I", len(answer)) + answer)


if __name__ == "__main__":
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in (repo, os.path.dirname(__file__))]
    # Last, so that the xlapy under test comes from PYTHONPATH or the installed package, never from here.
    sys.path.append(repo)
    _serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
