"""Interval: inclusive bounds, arithmetic, intersection, emptiness — checked
against the integer sets they stand for."""

from hypothesis import given
from hypothesis import strategies as st

from xlapy.indexing import Interval

intervals = st.builds(lambda lo, n: Interval(lo, lo + n), st.integers(-12, 12), st.integers(-1, 8))


def values(interval: Interval) -> set[int]:
    return set(range(interval.lower, interval.upper + 1))


def test_basics():
    assert str(Interval(0, 9)) == "[0, 9]"
    assert Interval(3, 2).is_empty() and Interval(3, 2).size() == 0
    assert Interval(4, 4).is_point() and Interval.point(4) == Interval(4, 4)
    assert Interval(0, 9).contains(9) and not Interval(0, 9).contains(10)
    assert Interval(0, 9).contains(Interval(2, 3)) and not Interval(0, 9).contains(Interval(8, 10))
    assert Interval(0, 9).intersect(Interval(5, 20)) == Interval(5, 9)
    assert Interval(0, 3).intersect(Interval(5, 20)).is_empty()


@given(intervals, intervals)
def test_arithmetic_encloses_every_result(a, b):
    if a.is_empty() or b.is_empty():
        return
    assert {x + y for x in values(a) for y in values(b)} == values(a + b)
    assert {x - y for x in values(a) for y in values(b)} == values(a - b)
    assert {x * y for x in values(a) for y in values(b)} <= values(a * b)
    assert values(a.intersect(b)) == values(a) & values(b)


@given(intervals, st.integers(-6, 6).filter(bool))
def test_floordiv_and_mod_are_exact_or_enclosing(a, c):
    if a.is_empty():
        return
    assert {x // c for x in values(a)} == values(a.floordiv(c))
    assert {x % c for x in values(a)} <= values(a.mod(c))
