"""Random edits of indexing maps, with the tokens that broke parsers before
(other scripts' digits, 5000-digit numbers, 5000-deep nesting, zero and
negative divisors): ``IndexingMap.parse`` either reads the text, and then
what it prints reads back to the same text, the simplified map has the
original's values at every point of a small domain, and no division or
modulus by a non-positive constant is left; or it raises an XlapyError."""

from __future__ import annotations

import itertools

import pytest
from xdsl.ir.affine import AffineBinaryOpExpr

from tests.text_edits import check_drawn, edit_budgets, edited_text
from xlapy.errors import ParseError, XlapyError
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap

SOURCES = [
    "(d0, d1) -> (d0 floordiv 4, d1 mod 8 + d0 * 2), domain: d0 in [0, 15], d1 in [0, 9]",
    "(d0)[s0] -> (d0 + s0 * 3, (d0 ceildiv 2) mod 3), domain: d0 in [0, 7], s0 in [0, 2], d0 + s0 in [1, 8]",
    "(d0, d1) -> ((d0 * 6 + d1) floordiv 9 - d1), domain: d0 in [0, 5], d1 in [0, 2]",
    "(th_x) -> (th_x mod 4, -th_x), domain: th_x in [0, 11], th_x mod 2 in [0, 0]",
    "(d0) -> (d0), domain: d0 in [5, 2]",
    "() -> (3)",
]
NASTY = ["\u0661", "\uff13", "9" * 5000, "(" * 5000, ")" * 5000, "- " * 5000, "9223372036854775808",
         "9223372036854775807", "0", "-1", " mod 0", " floordiv 0", " ceildiv -2", " mod ", " * ", " + ", " - ",
         "(", ")", "[", "]", ",", "d0", "s0", "d9", " in ", "[0, 0]", "domain:", "\n", "is_simplified: true",
         "KNOWN EMPTY", "\u00a0"]


def _divisors(expr) -> list[int]:
    if not isinstance(expr, AffineBinaryOpExpr):
        return []
    own = [] if expr.kind is affine.MUL or expr.kind is affine.ADD else [affine.constant_value(expr.rhs)]
    return own + _divisors(expr.lhs) + _divisors(expr.rhs)


def _small_domain(indexing_map: IndexingMap) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    variables = [*indexing_map.dim_vars, *indexing_map.symbol_vars]
    if any(v.bounds.size() > 40 for v in variables) or len(variables) > 3:
        return None
    boxes = [range(v.bounds.lower, v.bounds.upper + 1) for v in variables]
    return [(p[:indexing_map.num_dims], p[indexing_map.num_dims:]) for p in itertools.product(*boxes)]


def _check_edited(text: str) -> None:
    try:
        indexing_map = IndexingMap.parse(text)
    except XlapyError:
        return
    printed = str(indexing_map)
    assert str(IndexingMap.parse(printed)) == printed
    if indexing_map.is_undefined() or indexing_map.is_known_empty():
        return
    simplified = indexing_map.simplify()
    for expr in (*indexing_map.results, *simplified.results, *simplified.constraints):
        assert all(d is None or d > 0 for d in _divisors(expr))
    points = _small_domain(indexing_map)
    if points is None:
        return
    for dims, symbols in points:
        inside = indexing_map.contains(dims, symbols)
        assert simplified.contains(dims, symbols) == inside
        if inside:
            assert simplified.evaluate(dims, symbols) == indexing_map.evaluate(dims, symbols)


@edit_budgets()
def test_edits_parse_or_raise_xlapy_errors(budget: int) -> None:
    check_drawn(budget, edited_text(SOURCES, NASTY, max_span=6), _check_edited)


@pytest.mark.parametrize(("text", "column", "message"), [
    ("(d0) -> (d0 mod 0), domain: d0 in [0, 9]", 17, "the right operand of 'mod' must be a positive constant, got 0"),
    ("(d0) -> (d0 floordiv 0), domain: d0 in [0, 9]", 22, "'floordiv' must be a positive constant, got 0"),
    ("(d0) -> (d0 ceildiv -3), domain: d0 in [0, 9]", 21, "'ceildiv' must be a positive constant, got -3"),
    ("(d0) -> (d0 mod (2 - 2)), domain: d0 in [0, 9]", 17, "'mod' must be a positive constant, got 0"),
    ("(d0) -> (d0 + \u0661), domain: d0 in [0, 9]", 15, "expected an affine expression"),
    ("(d0) -> (d0), domain: d0 in [0, \u0669]", 33, "expected the upper bound"),
    ("(d0) -> (d0 * 9223372036854775809), domain: d0 in [0, 9]", 15, "integer too large"),
    ("(d0) -> (d0 + " + "7" * 5000 + "), domain: d0 in [0, 9]", 15, "integer too large"),
    ("(d0) -> (d0), domain: d0 in [0, 9223372036854775808]", 33, "integer too large"),
    # Folding constants past 64 bits would print text that does not read back.
    ("(d0) -> (d0 * 9223372036854775807 * 2), domain: d0 in [0, 9]", 35, "does not fit in 64 bits"),
    ("(d0) -> (-9223372036854775808 - 1)", 32, "does not fit in 64 bits"),
    ("(d0) -> (" + "(" * 5000 + "d0" + ")" * 5000 + "), domain: d0 in [0, 9]", 110, "nested more than 100 levels"),
    ("(d0) -> (" + "-" * 5000 + "d0), domain: d0 in [0, 9]", 110, "nested more than 100 levels"),
])
def test_refused_with_position(text: str, column: int, message: str) -> None:
    with pytest.raises(ParseError) as info:
        IndexingMap.parse(text)
    assert (info.value.line, info.value.column) == (1, column)
    assert message in info.value.message


def test_limits_that_read() -> None:
    # As MLIR, 2**63 may be written as the magnitude of INT64_MIN.
    low = IndexingMap.parse("(d0) -> (d0 - 9223372036854775808), domain: d0 in [0, 9223372036854775807]")
    assert low.evaluate((5,)) == (5 - 2**63,)
    assert str(IndexingMap.parse("(d0) -> (d0), domain: d0 in [5, 2]")) == "KNOWN EMPTY"
    assert IndexingMap.parse("(d0) -> (d0 mod 1), domain: d0 in [0, 9]").simplify().evaluate((7,)) == (0,)
