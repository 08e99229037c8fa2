"""The parent side of the worker: send an input, wait at most a timeout,
and turn a dead or stuck worker into a 'signal' or 'hang' outcome."""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.fuzz.outcome import Outcome, innermost_xlapy_frame

WORKER = Path(__file__).with_name("worker.py")

# How many times the timeout a timed-out input gets on its second run.
PATIENCE = 6


class Worker:
    """One worker process, restarted after each crash or hang."""

    def __init__(self, timeout: float = 10.0, memory_bytes: int = 4 << 30, recycle_every: int = 100):
        self.timeout = timeout
        self.memory_bytes = memory_bytes
        # A fresh process every so many inputs: what native code leaks must not make later inputs fail.
        self.recycle_every = recycle_every
        self.served = 0
        self.scratch = Path(tempfile.mkdtemp(prefix="xlapy-fuzz-"))
        self.process: subprocess.Popen | None = None
        self.xlapy_file = ""
        self.restarts = 0

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        env = dict(os.environ)
        env["XLAPY_CACHE_DIR"] = str(self.scratch / "cache")
        env["TMPDIR"] = str(self.scratch / "tmp")
        env["MALLOC_ARENA_MAX"] = "2"  # thread arenas reserve address space the memory cap counts
        (self.scratch / "tmp").mkdir(exist_ok=True)
        self.stack_file = self.scratch / "stack.txt"
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(write_end), str(self.stack_file), str(self.memory_bytes),
             str(self.timeout * 0.9)],
            stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=(write_end,), env=env, cwd=self.scratch,
            start_new_session=True)
        os.close(write_end)
        self.answers = read_end
        hello = self._read(120.0)
        if not isinstance(hello, tuple) or hello[0] != "hello":  # None (no answer) or EOFError (it exited)
            stack = self.stack_file.read_text(errors="replace")[-1500:] if self.stack_file.exists() else ""
            raise RuntimeError(f"the fuzzing worker did not start (is xlapy importable?) {stack}".rstrip())
        self.xlapy_file = hello[1]

    def _read(self, timeout: float):
        deadline = time.monotonic() + timeout
        data = b""
        needed = 4
        while len(data) < needed:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.answers], [], [], left)[0]:
                return None
            chunk = os.read(self.answers, max(needed - len(data), 1 << 16))
            if not chunk:
                return EOFError
            data += chunk
            if len(data) >= 4 and needed == 4:
                needed = 4 + struct.unpack("<I", data[:4])[0]
        return pickle.loads(data[4:needed])

    def run(self, entry: str, case: dict) -> tuple[Outcome, float]:
        """The outcome of one input. A crash or a hang is confirmed in a fresh
        worker, so that it belongs to the input and not to the worker's past; a
        hang with ``PATIENCE`` times the timeout, so that an input that only needs
        longer (tens of millions of elements through numpy) counts as slow
        (``extra["slow_seconds"]``), not as stuck."""
        outcome, elapsed = self._run_once(entry, case)
        if outcome.outcome == "signal":
            retried, elapsed = self._run_once(entry, case)
        elif outcome.outcome == "hang":
            retried, elapsed = self._run_patiently(entry, case)
        else:
            return outcome, elapsed
        if retried.outcome not in ("signal", "hang"):
            retried.extra["first_try"] = f"{outcome.outcome} {outcome.type}"
            if outcome.outcome == "hang":
                retried.extra["slow_seconds"] = round(elapsed, 1)
        return retried, elapsed

    def _run_patiently(self, entry: str, case: dict) -> tuple[Outcome, float]:
        """``case`` in a fresh worker that waits ``PATIENCE`` times the timeout (killed afterwards, so that the
        next inputs get a worker with the usual one)."""
        self._kill()
        timeout = self.timeout
        self.timeout = timeout * PATIENCE
        try:
            return self._run_once(entry, case)
        finally:
            self.timeout = timeout
            self._kill()

    def _run_once(self, entry: str, case: dict) -> tuple[Outcome, float]:
        if self.process is not None and self.served >= self.recycle_every:
            self._kill()
        if self.process is None:
            self._start()
            self.served = 0
        self.served += 1
        request = pickle.dumps((entry, case))
        start = time.monotonic()
        try:
            self.process.stdin.write(struct.pack("<I", len(request)) + request)
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        answer = self._read(self.timeout)
        elapsed = time.monotonic() - start
        if isinstance(answer, Outcome):
            return answer, elapsed
        stack = self.stack_file.read_text(errors="replace") if self.stack_file.exists() else ""
        if answer is None:  # still running: a hang
            self._kill()
            return Outcome("hang", "timeout", innermost_xlapy_frame(stack), "", stack[-1500:]), elapsed
        code = self.process.wait()
        self._close()
        name = signal.Signals(-code).name if code < 0 else f"exit {code}"
        return Outcome("signal", name, innermost_xlapy_frame(stack), "", stack[-1500:]), elapsed

    def _kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._close()

    def _close(self) -> None:
        if self.process is not None:
            os.close(self.answers)
            self.process.stdin.close()
            self.process = None
            self.restarts += 1
            # A killed worker leaves its temporary files (FIFOs, caches) behind.
            shutil.rmtree(self.scratch / "tmp", ignore_errors=True)
            shutil.rmtree(self.scratch / "cache", ignore_errors=True)

    def close(self) -> None:
        if self.process is not None:
            self._kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
