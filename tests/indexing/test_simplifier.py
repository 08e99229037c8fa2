"""The simplifier keeps meaning: for random maps over small random bounds the
simplified map gives the same indices at every point of the domain, and the
same domain; simplifying again changes nothing."""

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlapy.indexing import IndexingMap, Interval
from xlapy.indexing import affine as A


@st.composite
def expressions(draw, num_dims: int, num_symbols: int, depth: int = 3):
    leaves = [A.dim(i) for i in range(num_dims)] + [A.sym(i) for i in range(num_symbols)]
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(leaves))
        return A.const(draw(st.integers(-20, 20)))
    kind = draw(st.sampled_from(["add", "add", "mul", "floordiv", "mod", "sub"]))
    lhs = draw(expressions(num_dims, num_symbols, depth - 1))
    if kind in ("add", "sub"):
        rhs = draw(expressions(num_dims, num_symbols, depth - 1))
        return A.add(lhs, rhs) if kind == "add" else A.sub(lhs, rhs)
    constant = draw(st.sampled_from([-4, -3, -2, -1, 2, 3, 4, 5, 6, 8, 10, 16]))
    if kind == "mul":
        return A.mul(lhs, constant)
    constant = abs(constant)
    return A.floordiv(lhs, constant) if kind == "floordiv" else A.mod(lhs, constant)


@st.composite
def indexing_maps(draw):
    num_dims = draw(st.integers(1, 3))
    num_symbols = draw(st.integers(0, 1))
    bounds = []
    for _ in range(num_dims + num_symbols):
        lower = draw(st.integers(-3, 6))
        bounds.append((lower, lower + draw(st.integers(0, 7))))
    results = draw(st.lists(expressions(num_dims, num_symbols), min_size=1, max_size=3))
    constraints = []
    for _ in range(draw(st.integers(0, 2))):
        lower = draw(st.integers(-10, 10))
        constraints.append(
            (draw(expressions(num_dims, num_symbols, 2)), Interval(lower, lower + draw(st.integers(0, 12))))
        )
    return IndexingMap.from_exprs(results, bounds[:num_dims], bounds[num_dims:], (), constraints)


def box(indexing_map: IndexingMap):
    variables = indexing_map.dim_vars + indexing_map.symbol_vars
    for point in itertools.product(*(range(v.bounds.lower, v.bounds.upper + 1) for v in variables)):
        yield point[: indexing_map.num_dims], point[indexing_map.num_dims :]


def assert_same_meaning(original: IndexingMap, simplified: IndexingMap) -> None:
    if simplified.is_known_empty():
        assert not any(original.contains(d, s) for d, s in box(original))
        return
    assert simplified.num_dims == original.num_dims and simplified.num_symbols == original.num_symbols
    for dims, symbols in box(original):
        inside = original.contains(dims, symbols)
        assert simplified.contains(dims, symbols) == inside, (dims, symbols)
        if inside:
            assert simplified.evaluate(dims, symbols) == original.evaluate(dims, symbols), (dims, symbols)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(indexing_maps())
def test_simplify_keeps_meaning_and_is_idempotent(indexing_map):
    simplified = indexing_map.simplify()
    assert_same_meaning(indexing_map, simplified)
    again = simplified.simplify()
    assert again == simplified
    assert str(again) == str(simplified)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(indexing_maps())
def test_simplify_keeps_meaning_many(indexing_map):
    simplified = indexing_map.simplify()
    assert_same_meaning(indexing_map, simplified)
    assert simplified.simplify() == simplified


REWRITES = [
    # (map, simplified results) — each rule of the simplifier on its own.
    ("(d0) -> (d0 mod 8), domain: d0 in [0, 7]", "(d0)"),
    ("(d0) -> (d0 mod 8), domain: d0 in [8, 15]", "(d0 - 8)"),
    ("(d0) -> ((d0 * 4) mod 8), domain: d0 in [0, 9]", "((d0 mod 2) * 4)"),
    ("(d0, d1) -> ((d0 * 4 + d1) mod 8), domain: d0 in [0, 9], d1 in [0, 3]", "(d1 + (d0 mod 2) * 4)"),
    ("(d0, d1) -> ((d0 * 8 + d1 + 17) mod 8), domain: d0 in [0, 9], d1 in [0, 3]", "(d1 + 1)"),
    ("(d0) -> ((d0 mod 16) floordiv 4), domain: d0 in [0, 99]", "((d0 floordiv 4) mod 4)"),
    ("(d0) -> ((d0 floordiv 4) floordiv 3), domain: d0 in [0, 99]", "(d0 floordiv 12)"),
    ("(d0, d1) -> ((d0 * 6 + d1) floordiv 9), domain: d0 in [0, 99], d1 in [0, 2]", "((d0 * 2) floordiv 3)"),
    (
        "(d0, d1) -> ((d0 floordiv 2 + d1) floordiv 4), domain: d0 in [0, 99], d1 in [0, 99]",
        "((d0 + d1 * 2) floordiv 8)",
    ),
    ("(d0) -> ((d0 + 3) * 2 - d0 * 2), domain: d0 in [0, 99]", "(6)"),
    ("(d0) -> ((d0 mod 4) * 3 + (d0 floordiv 4) * 12), domain: d0 in [0, 99]", "(d0 * 3)"),
    ("(d0) -> (d0 floordiv 100), domain: d0 in [0, 99]", "(0)"),
]


@pytest.mark.parametrize(("text", "results"), REWRITES)
def test_each_rewrite(text, results):
    original = IndexingMap.parse(text)
    simplified = original.simplify()
    assert simplified.to_string(multiline=False).split(" -> ")[1].split(", domain")[0] == results
    assert_same_meaning(original, simplified)


CONSTRAINTS = [
    # rule 1: x + c, x * c, x floordiv c in [lb, ub] become bounds of x
    (
        "(d0, d1) -> (d0), domain: d0 in [0, 99], d1 in [0, 9], d0 + d1 * 3 + 5 in [10, 20]",
        "d0 in [0, 99], d1 in [0, 9], d0 + d1 * 3 in [5, 15]",
    ),
    ("(d0) -> (d0), domain: d0 in [0, 99], (d0 + 4) * 3 in [30, 40]", "d0 in [6, 9]"),
    ("(d0) -> (d0), domain: d0 in [0, 99], d0 floordiv 4 in [2, 3]", "d0 in [8, 15]"),
    ("(d0) -> (d0), domain: d0 in [0, 99], d0 * -2 in [-10, -4]", "d0 in [2, 5]"),
    # rule 2: constraints that always hold disappear
    ("(d0)[s0] -> (d0), domain: d0 in [0, 5], s0 in [1, 3], d0 + s0 in [0, 20]", "d0 in [0, 5], s0 in [1, 3]"),
    # rule 3: the expression inside is simplified
    (
        "(d0, d1) -> (d0), domain: d0 in [0, 99], d1 in [0, 3], (d0 * 4 + d1) mod 8 in [0, 5]",
        "d0 in [0, 99], d1 in [0, 3], d1 + (d0 mod 2) * 4 in [0, 5]",
    ),
    # a sum whose small part cannot matter: 0 <= d0 * 4 + d1 <= 11 with d1 < 4
    ("(d0, d1) -> (d0), domain: d0 in [0, 99], d1 in [0, 3], d0 * 4 + d1 in [0, 11]", "d0 in [0, 2], d1 in [0, 3]"),
]


@pytest.mark.parametrize(("text", "domain"), CONSTRAINTS)
def test_constraint_rules(text, domain):
    original = IndexingMap.parse(text)
    simplified = original.simplify()
    assert simplified.to_string(multiline=False).split("domain: ")[1] == domain
    assert_same_meaning(original, simplified)


def test_mod_constraints_merge_and_round_variable_bounds():
    m = IndexingMap.parse("(d0) -> (d0), domain: d0 in [1, 100], d0 mod 2 in [1, 1], d0 mod 3 in [1, 1]")
    simplified = m.simplify()
    assert simplified.to_string(multiline=False) == "(d0) -> (d0), domain: d0 in [1, 97], d0 mod 6 in [1, 1]"
    assert_same_meaning(m, simplified)


def test_unsatisfiable_domain_is_known_empty():
    m = IndexingMap.parse("(d0) -> (d0), domain: d0 in [0, 9], d0 mod 4 in [5, 7]")
    assert m.simplify().is_known_empty()
    m = IndexingMap.parse("(d0) -> (d0), domain: d0 in [0, 9], d0 * 2 in [3, 3]")
    assert m.simplify().is_known_empty()
