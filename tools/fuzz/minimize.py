"""Shrinking a failing input while it keeps failing the same way: delete
lines, then ever smaller chunks of characters (a simple delta debugging)."""

from __future__ import annotations

import time
from collections.abc import Callable

# The case fields that hold the input text, in the order they are shrunk.
TEXT_FIELDS = ("text", "file", "shape")


def _pieces(value: str | bytes, size: int) -> list:
    return [value[i:i + size] for i in range(0, len(value), size)]


def shrink(case: dict, still_fails: Callable[[dict], bool], deadline: float, max_tries: int = 150) -> dict:
    """A smaller ``case`` for which ``still_fails`` holds (``case`` itself if
    none is found before ``deadline`` or after ``max_tries`` runs)."""
    tries = 0
    for field in TEXT_FIELDS:
        value = case.get(field)
        if not isinstance(value, str | bytes) or not value:
            continue
        newline = "\n" if isinstance(value, str) else b"\n"
        empty = value[:0]
        units = [line + newline for line in value.split(newline)]
        units[-1] = units[-1][:-1]
        for by_lines in (True, False):
            if not by_lines:
                units = _pieces(empty.join(units), max(1, len(empty.join(units)) // 8))
            size = max(1, len(units) // 2)
            while size >= 1:
                i = 0
                while i < len(units):
                    if time.monotonic() > deadline or tries >= max_tries:
                        return case
                    candidate_units = units[:i] + units[i + size:]
                    candidate = dict(case, **{field: empty.join(candidate_units)})
                    tries += 1
                    if still_fails(candidate):
                        units, case = candidate_units, candidate
                    else:
                        i += size
                if size == 1 and not by_lines and len(units) > 1 and len(units[0]) > 1:
                    units = [c for u in units for c in _pieces(u, 1)] if len(empty.join(units)) <= 400 else units
                    if all(len(u) == 1 for u in units) and size == 1:
                        break
                size //= 2
    return case
