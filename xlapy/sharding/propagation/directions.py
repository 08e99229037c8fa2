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


# The values are bit sets of {forward, backward}: union and intersection are
# bitwise or and and.
def union(a: Direction, b: Direction) -> Direction:
    return _BY_VALUE[a | b]


def intersection(a: Direction, b: Direction) -> Direction:
    return _BY_VALUE[a & b]


_BY_VALUE = tuple(Direction)


# (unit, factor index) -> direction; ``unit`` is what is being propagated
# through (an op, a data-flow edge, ...), see ``graph.py``. A function may
# say, with ``by_form = True``, that it looks only at the unit's form
# (``graph.UnitForm``: its kind, opcode, rule, whether it is elementwise)
# and, if it has ``depends_on_uses = True``, at whether the unit's operands
# have other uses: its directions are then worked out once per form.
DirectionFn = Callable[[Any, int], Direction]


def propagate_any(unit: Any, factor: int) -> Direction:
    return Direction.BOTH


propagate_any.by_form = True
