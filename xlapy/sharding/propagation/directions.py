"""The directions in which propagation may move shardings through an op,
per factor: from operands to results (forward), back, both or none."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any


class Direction(IntEnum):
    NONE = 0
    FORWARD = 1
    BACKWARD = 2
    BOTH = 3

    @staticmethod
    def parse(text: str) -> Direction:
        return Direction[text.upper()]


def _forward_and_backward(a: Direction, b: Direction) -> bool:
    return {a, b} == {Direction.FORWARD, Direction.BACKWARD}


def union(a: Direction, b: Direction) -> Direction:
    return Direction.BOTH if _forward_and_backward(a, b) else max(a, b)


def intersection(a: Direction, b: Direction) -> Direction:
    return Direction.NONE if _forward_and_backward(a, b) else min(a, b)


# (unit, factor index) -> direction; ``unit`` is what is being propagated
# through (an op, a data-flow edge, ...), see ``graph.py``.
DirectionFn = Callable[[Any, int], Direction]


def propagate_any(unit: Any, factor: int) -> Direction:
    return Direction.BOTH
