"""What running one generated input gave, and how failures are told apart."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

# Ordered from good to bad; the table has one column each.
OUTCOMES = ("ok", "clean_error", "exception", "hang", "signal", "wrong")


@dataclass
class Outcome:
    outcome: str  # one of OUTCOMES
    type: str = ""  # the exception type, signal name or kind of wrong answer
    where: str = ""  # the innermost xlapy frame (file:line), or the worker's stack for hangs and signals
    deepest: str = ""  # the innermost frame of all
    message: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def signature(self) -> tuple[str, str, str]:
        return (self.outcome, self.type, self.where)


def _relative(filename: str) -> str:
    marker = "/xlapy/"
    index = filename.rfind(marker)
    return filename[index + 1:] if index >= 0 else filename.rsplit("/", 2)[-1] if "/" in filename else filename


def from_exception(error: BaseException) -> Outcome:
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/xlapy/" in f.filename and "/tools/" not in f.filename]
    where = f"{_relative(ours[-1].filename)}:{ours[-1].lineno}" if ours else "?"
    deepest = f"{_relative(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    return Outcome("exception", type(error).__name__, where, deepest, str(error)[:300])


def wrong(kind: str, message: str = "") -> Outcome:
    return Outcome("wrong", kind, kind, "", message[:300])


def innermost_xlapy_frame(stack_text: str) -> str:
    """Where the worker's main thread was in a faulthandler dump: its innermost
    xlapy frame, else its innermost frame, else '?'. (Other threads, such as
    a kernel's thread pool, are listed too; the main thread runs worker.py.)"""
    blocks: list[list[tuple[str, str]]] = []
    for line in stack_text.splitlines():
        line = line.strip()
        if line.startswith(("Thread ", "Current thread ")) or not blocks:
            blocks.append([])
        if line.startswith("File ") and ", line " in line:
            # File "/path/xlapy/x.py", line 12 in func
            blocks[-1].append((line.split('"')[1], line.split(", line ")[1].split()[0]))
    main = [b for b in blocks if any(p.endswith("worker.py") for p, _ in b)] or blocks or [[]]
    frames = main[-1]
    ours = [(p, n) for p, n in frames if "/xlapy/" in p and "/tools/" not in p]
    if ours or frames:
        path, number = (ours or frames)[0]
        return f"{_relative(path)}:{number}"
    return "?"
