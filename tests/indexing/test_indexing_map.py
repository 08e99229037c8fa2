"""IndexingMap: text round trips, XLA's one-line form, named variables, parse
errors, and the operations (evaluate, contains, compose, unused symbols,
rename, equality)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import ParseError
from xlapy.indexing import IndexingMap, Interval, Variable
from xlapy.indexing import affine as A


def squash(text: str) -> str:
    return " ".join(text.split())


ROUND_TRIPS = [
    "(d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 19]",
    "(d0)[s0, s1] -> (s0, d0, s1), domain: d0 in [0, 19], s0 in [0, 9], s1 in [0, 29]",
    "(d0, d1, d2){rt0, rt1, rt2} -> (d0 + rt0, d1 + rt1, d2 + rt2), domain: d0 in [0, 0], d1 in [0, 1], "
    "d2 in [0, 31], rt0 in [0, 1], rt1 in [0, 0], rt2 in [0, 226]",
    "(d0, d1, d2) -> (d0 - 5, (d1 - 3) floordiv 7, d2 floordiv 2), domain: d0 in [5, 9], d1 in [3, 17], "
    "d2 in [0, 48], (d1 - 3) mod 7 in [0, 0], d2 mod 2 in [0, 0]",
    "(d0, d1, d2, d3) -> (d0, -d1 + 16, -d2 + 8, d3), domain: d0 in [0, 0], d1 in [0, 16], d2 in [0, 8], d3 in [0, 8]",
    "()[s0] -> (s0), domain: s0 in [0, 9]",
    "(d0) -> (), domain: d0 in [0, 9]",
    "() -> ()",
    "(d0, d1, d2)[s0]{rt0} -> (d0 + rt0, s0, d2), domain: d0 in [0, 0], d1 in [0, 1], d2 in [0, 3], "
    "s0 in [0, 2], rt0 in [0, 5], d2 mod 2 in [0, 0]",
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], "
    "vector_index in [0, 3]",
    "(d0, d1, d2) -> (d0 * 2 + d1 floordiv 2, d2 + (d1 mod 2) * 4), domain: d0 in [0, 1], d1 in [0, 3], d2 in [0, 3]",
    "(d0) -> (d0 - d0 floordiv 4 - (d0 mod 3) * 2 - 7), domain: d0 in [0, 99]",
    "(d0) -> (d0 ceildiv 4), domain: d0 in [-3, 99], d0 * 3 + 1 in [-5, 100]",
    "UNDEFINED",
    "KNOWN EMPTY",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_one_line_form_round_trips(text):
    parsed = IndexingMap.parse(text)
    assert parsed.to_string(multiline=False) == text
    assert IndexingMap.parse(str(parsed)) == parsed
    assert str(IndexingMap.parse(str(parsed))) == str(parsed)


def test_multiline_form_is_the_layout_xla_prints():
    text = "(d0, d1)[s0] -> (d0, s0), domain: d0 in [0, 9], d1 in [0, 4], s0 in [0, 1], d0 + s0 in [0, 5]"
    assert str(IndexingMap.parse(text)) == (
        "(d0, d1)[s0] -> (d0, s0),\ndomain:\nd0 in [0, 9],\nd1 in [0, 4],\ns0 in [0, 1],\nd0 + s0 in [0, 5]"
    )


def test_whitespace_and_newlines_of_xlas_docs_are_accepted():
    text = """(d0, d1, d2) -> (d0 - 5, (d1 - 3) floordiv 7, d2 floordiv 2),
    domain:
    d0 in [5, 9],
    d1 in [3, 17],
    d2 in [0, 48],
    (d1 - 3) mod 7 in [0, 0],
    d2 mod 2 in [0, 0]
    """
    parsed = IndexingMap.parse(text)
    assert squash(str(parsed)) == squash(text)


def test_constraints_print_sorted_as_xla_does():
    m = IndexingMap.parse(
        "(d0, d1) -> (d0), domain: d0 in [0, 9], d1 in [0, 9], d1 mod 2 in [0, 0], d0 mod 3 in [1, 1]"
    )
    assert m.to_string(multiline=False).endswith("d0 mod 3 in [1, 1], d1 mod 2 in [0, 0]")


def test_xla_current_prints_are_read():
    # Today's XLA names runtime variables freely and may print is_simplified.
    m = IndexingMap.parse("(d0){r0, r1} -> (d0 + r0 * 2 + r1), domain: d0 in [0, 3], r0 in [0, 1], r1 in [0, 5]")
    assert m.rt_names() == ["r0", "r1"]
    assert m.evaluate((1,), (1, 2)) == (5,)
    older = IndexingMap.parse("(d0) -> (d0), domain: d0 in [0, 3], is_simplified: false")
    assert older == IndexingMap.identity([4])


def test_floordiv_spelling_and_implicit_products_of_xlas_docs():
    m = IndexingMap.parse("(d0, d1) -> ((12d0 + 4d1) floorDiv 8), domain: d0 in [0, 9], d1 in [0, 9]")
    assert (
        m.to_string(multiline=False)
        == "(d0, d1) -> ((d0 * 12 + d1 * 4) floordiv 8), domain: d0 in [0, 9], d1 in [0, 9]"
    )
    # MLIR folds at construction: a summand that is a multiple of the divisor splits off.
    m = IndexingMap.parse("(d0, d1) -> ((16d0 + 4d1) floordiv 8), domain: d0 in [0, 9], d1 in [0, 9]")
    assert (
        m.to_string(multiline=False) == "(d0, d1) -> (d0 * 2 + (d1 * 4) floordiv 8), domain: d0 in [0, 9], d1 in [0, 9]"
    )


def test_unary_minus_binds_to_the_next_operand_as_in_mlir():
    # -(x) floordiv 11 is (-x) floordiv 11, not -(x floordiv 11).
    m = IndexingMap.parse("(d0) -> (-(d0) floordiv 11), domain: d0 in [0, 30]")
    assert [m.evaluate((d,))[0] for d in (0, 1, 11, 12)] == [0, -1, -1, -2]


PARSE_ERRORS = [
    ("(d0) -> (d0)", "1:13: expected ',' before 'domain:'"),
    ("(d0) -> (d1), domain: d0 in [0, 3]", "1:10: unknown variable 'd1'"),
    ("(d0, d1) -> (d0), domain: d0 in [0, 3] d1 in [0, 3]", "1:40: expected ',' and the bounds of 'd1'"),
    ("(d0, d1) -> (d0), domain: d1 in [0, 3], d0 in [0, 3]", "1:27: expected the bounds of 'd0', got 'd1'"),
    ("(d0) -> (d0 * d0), domain: d0 in [0, 3]", "1:13: not affine"),
    ("(d0) -> (d0), domain: d0 in [0, 3],", "1:36: expected an affine expression, got end of text"),
    ("(d0) -> (d0), domain: d0 in [0 3]", "1:32: expected ',' in an interval"),
    ("(d0, d0) -> (d0), domain: d0 in [0, 3], d0 in [0, 3]", "variable 'd0' is declared twice"),
    ("(d0) -> (d0 mod), domain: d0 in [0, 3]", "1:16: expected an affine expression, got ')'"),
    ("(d0) -> (d0), domain: d0 in [0, 3] extra", "1:36: unexpected 'extra'"),
    ("KNOWN", "1:6: expected 'EMPTY'"),
]


@pytest.mark.parametrize(("text", "message"), PARSE_ERRORS)
def test_parse_errors_say_what_and_where(text, message):
    with pytest.raises(ParseError) as error:
        IndexingMap.parse(text)
    assert message in str(error.value)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_text_raises_only_parse_errors(data):
    text = data.draw(st.sampled_from(ROUND_TRIPS[:-2]))
    position = data.draw(st.integers(0, len(text)))
    action = data.draw(st.sampled_from(["drop", "insert", "truncate"]))
    if action == "drop":
        text = text[:position] + text[position + 1 :]
    elif action == "insert":
        text = text[:position] + data.draw(st.sampled_from([*"(),[]{}-+*0123456789ds ", "mod", "in"])) + text[position:]
    else:
        text = text[:position]
    try:
        parsed = IndexingMap.parse(text)
    except ParseError:
        return
    assert IndexingMap.parse(str(parsed)) == parsed


def test_evaluate_and_contains():
    m = IndexingMap.parse(
        "(d0, d1) -> ((d0 - 1) floordiv 2, d1 - 4), domain: d0 in [1, 7], d1 in [4, 7], (d0 - 1) mod 2 in [0, 0]"
    )
    assert m.evaluate((5, 6)) == (2, 2)
    assert m.contains((5, 6))
    assert not m.contains((4, 6))  # constraint
    assert not m.contains((9, 6))  # bound
    assert len(list(m.domain())) == 4 * 4
    assert m.touched_elements() == {(i, j) for i in range(4) for j in range(4)}
    assert m.touched_ranges() == [Interval(0, 3), Interval(0, 3)]
    with pytest.raises(ValueError, match="takes 2 dimensions"):
        m.evaluate((1,))


def test_compose_orders_symbols_as_xla():
    consumer = IndexingMap.parse("(d0)[s0]{rt0} -> (d0 + s0 + rt0), domain: d0 in [0, 3], s0 in [0, 1], rt0 in [0, 2]")
    producer = IndexingMap.parse(
        "(d0)[s0]{rt0} -> (d0 * 2 + s0 + rt0), domain: d0 in [0, 7], s0 in [0, 4], rt0 in [0, 6]"
    )
    composed = consumer.compose(producer)
    # Range vars: producer's then consumer's; runtime vars likewise.
    assert composed.to_string(multiline=False) == (
        "(d0)[s0, s1]{rt0, rt1} -> ((d0 + s1 + rt1) * 2 + s0 + rt0), domain: d0 in [0, 3], "
        "s0 in [0, 4], s1 in [0, 1], rt0 in [0, 6], rt1 in [0, 2], d0 + s1 + rt1 in [0, 7]"
    )
    assert (
        composed.simplify()
        .to_string(multiline=False)
        .startswith("(d0)[s0, s1]{rt0, rt1} -> (d0 * 2 + s1 * 2 + rt1 * 2 + s0 + rt0)")
    )
    for dims, symbols in composed.domain():
        s0, s1, rt0, rt1 = symbols
        inner = consumer.evaluate(dims, (s1, rt1))
        assert composed.evaluate(dims, symbols) == producer.evaluate(inner, (s0, rt0))


def test_compose_with_undefined_is_undefined():
    m = IndexingMap.identity([4])
    assert m.compose(IndexingMap.undefined()).is_undefined()


def test_compose_with_known_empty_is_known_empty():
    # A known-empty map has no results, whatever the operand's rank (XLA's ComposeIndexingMaps checks
    # emptiness first).
    # What pad(x), padding=-1_1_1 reads of x: (d0 + 1) / 2 where (d0 + 1) mod 2 == 0, for d0 in [0, 0].
    never_read = IndexingMap.from_exprs([A.dim(0)], [(0, 0)],
                                        constraints=[(A.mod(A.add(A.dim(0), 1), 2), Interval(0, 0))])
    empty = never_read.simplify()
    assert empty.is_known_empty()
    identity = IndexingMap.identity([1, 7, 8])
    assert empty.compose(identity).is_known_empty()
    assert str(IndexingMap.identity([4, 3]).compose(empty)) == "KNOWN EMPTY"


def test_remove_unused_symbols_keeps_constrained_ones():
    m = IndexingMap.parse(
        "(d0)[s0, s1, s2] -> (d0 + s1), domain: d0 in [0, 3], s0 in [0, 1], s1 in [0, 2], s2 in [0, 4], "
        "d0 + s2 in [0, 5], s0 mod 2 in [0, 0]"
    )
    assert m.remove_unused_symbols().to_string(multiline=False) == (
        "(d0)[s0, s1] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 2], s1 in [0, 4], d0 + s1 in [0, 5]"
    )


def test_rename_equality_and_hash():
    m = IndexingMap.parse("(d0, d1)[s0] -> (d1, s0), domain: d0 in [0, 127], d1 in [0, 3], s0 in [0, 3]")
    named = m.rename(["th_x", "bl_x"], ["vector_index"])
    assert named.to_string(multiline=False) == (
        "(th_x, bl_x)[vector_index] -> (bl_x, vector_index), domain: th_x in [0, 127], bl_x in [0, 3], "
        "vector_index in [0, 3]"
    )
    assert named == m and hash(named) == hash(m)
    assert len({m, named, m.simplify()}) == 1
    assert IndexingMap.parse(str(named)) == m


def test_single_variable_constraints_narrow_bounds_and_empty_domains_are_known():
    m = IndexingMap.from_exprs([A.dim(0)], [Variable(Interval(0, 9))], constraints=[(A.dim(0), Interval(3, 20))])
    assert m.dim_vars[0].bounds == Interval(3, 9)
    empty = IndexingMap.from_exprs([A.dim(0)], [(0, 9)], constraints=[(A.add(A.dim(0), 5), Interval(20, 30))])
    assert not empty.is_known_empty()
    assert empty.simplify().is_known_empty()
    assert str(empty.simplify()) == "KNOWN EMPTY"
