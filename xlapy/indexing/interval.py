"""Closed integer intervals: the bounds of indexing-map variables and the
ranges the simplifier derives for sub-expressions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interval:
    """The integers ``lower .. upper``, both included; empty when
    ``lower > upper``."""

    lower: int
    upper: int

    def __str__(self) -> str:
        return f"[{self.lower}, {self.upper}]"

    @staticmethod
    def point(value: int) -> Interval:
        return Interval(value, value)

    def is_empty(self) -> bool:
        return self.lower > self.upper

    def is_point(self) -> bool:
        return self.lower == self.upper

    def size(self) -> int:
        """The number of integers in the interval."""
        return max(0, self.upper - self.lower + 1)

    def contains(self, value: int | Interval) -> bool:
        if isinstance(value, Interval):
            return value.is_empty() or (self.lower <= value.lower and value.upper <= self.upper)
        return self.lower <= value <= self.upper

    def intersect(self, other: Interval) -> Interval:
        return Interval(max(self.lower, other.lower), min(self.upper, other.upper))

    def union(self, other: Interval) -> Interval:
        """The smallest interval holding both."""
        return Interval(min(self.lower, other.lower), max(self.upper, other.upper))

    def __add__(self, other: Interval | int) -> Interval:
        other = _as_interval(other)
        return Interval(self.lower + other.lower, self.upper + other.upper)

    def __neg__(self) -> Interval:
        return Interval(-self.upper, -self.lower)

    def __sub__(self, other: Interval | int) -> Interval:
        return self + -_as_interval(other)

    def __mul__(self, other: Interval | int) -> Interval:
        other = _as_interval(other)
        products = [a * b for a in (self.lower, self.upper) for b in (other.lower, other.upper)]
        return Interval(min(products), max(products))

    def floordiv(self, divisor: int) -> Interval:
        """``x floordiv divisor`` for every ``x`` of the interval (divisor != 0)."""
        ends = (self.lower // divisor, self.upper // divisor)
        return Interval(min(ends), max(ends))

    def mod(self, modulus: int) -> Interval:
        """``x mod modulus`` (the result takes the sign of the modulus, as in
        affine maps) for every ``x`` of the interval."""
        if modulus == 0:
            return Interval(0, 0)
        if self.lower // modulus == self.upper // modulus:
            # One period: x mod m = x - m * q grows with x.
            return Interval(self.lower % modulus, self.upper % modulus)
        return Interval(0, modulus - 1) if modulus > 0 else Interval(modulus + 1, 0)


def _as_interval(value: Interval | int) -> Interval:
    return value if isinstance(value, Interval) else Interval(value, value)
