"""The orders in which the benchmarks time their sides (``benchmarks/timing.py``)."""

from collections import Counter
from itertools import pairwise

import pytest

from benchmarks.timing import balanced_orders, time_in_turns


@pytest.mark.parametrize("sides", range(1, 8))
def test_every_side_follows_every_other_equally_often(sides: int) -> None:
    orders = balanced_orders(sides)
    assert all(sorted(order) == list(range(sides)) for order in orders)
    follows = Counter(pair for order in orders for pair in pairwise(order))
    assert set(follows) == {(a, b) for a in range(sides) for b in range(sides) if a != b}
    assert len(set(follows.values())) <= 1


def test_each_round_runs_each_side_once() -> None:
    calls: list[int] = []
    times = time_in_turns([lambda k=k: calls.append(k) for k in range(4)], rounds=8, warm_up=1)
    assert [len(t) for t in times] == [8, 8, 8, 8]
    assert Counter(calls) == {k: 9 for k in range(4)}
    # Round by round (after the warm-up), the orders of balanced_orders(4), taken in turn.
    rounds = [calls[4 + 4 * i: 8 + 4 * i] for i in range(8)]
    assert rounds == [balanced_orders(4)[i % 4] for i in range(8)]
