"""Random edits of valid text for the parsers' property tests: a few spans
deleted, duplicated, or replaced by (or preceded by) tokens that break parsers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlapy.errors import XlapyError


def edited_text(sources: Sequence[str], tokens: Sequence[str], *, max_edits: int = 3,
                max_span: int = 8) -> st.SearchStrategy[str]:
    """One of ``sources`` after 1 to ``max_edits`` edits of at most ``max_span`` characters."""

    @st.composite
    def edited(draw) -> str:
        text = draw(st.sampled_from(sources))
        for _ in range(draw(st.integers(1, max_edits))):
            start = draw(st.integers(0, len(text)))
            end = min(len(text), start + draw(st.integers(0, max_span)))
            kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
            if kind == "delete":
                text = text[:start] + text[end:]
            elif kind == "insert":
                text = text[:start] + draw(st.sampled_from(tokens)) + text[start:]
            elif kind == "replace":
                text = text[:start] + draw(st.sampled_from(tokens)) + text[end:]
            else:
                text = text[:start] + text[start:end] * 2 + text[end:]
        return text

    return edited()


def edit_budgets(default: int = 75, slow: int = 300) -> pytest.MarkDecorator:
    """A property test's ``budget`` parameter: a bounded number of examples in the default run, and a larger one
    with the slow tests."""
    return pytest.mark.parametrize("budget", [default, pytest.param(slow, marks=pytest.mark.slow)])


def check_drawn(budget: int, strategy: st.SearchStrategy[str], check: Callable[[str], None]) -> None:
    """``check`` on ``budget`` texts drawn from ``strategy`` (shrunk to a smallest failing one, as ``@given``)."""

    def drawn(text: str) -> None:
        check(text)

    settings(max_examples=budget, deadline=None, suppress_health_check=[HealthCheck.too_slow])(given(strategy)(drawn))()


def refused_or_round_trips(parse: Callable[[str], Any], show: Callable[[Any], str]) -> Callable[[str], None]:
    """``check_refused_or_round_trips`` of ``parse`` and ``show``, as a check of one text."""
    return lambda text: check_refused_or_round_trips(parse, show, text)


def check_refused_or_round_trips(parse: Callable[[str], Any], show: Callable[[Any], str], text: str) -> None:
    """``text`` is refused with an ``XlapyError``, or what it reads prints as
    text that reads back and prints the same."""
    try:
        value = parse(text)
    except XlapyError:
        return
    printed = show(value)
    assert show(parse(printed)) == printed
