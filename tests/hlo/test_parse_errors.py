"""Malformed HLO gives a ParseError at the right line and column; mutated
modules give nothing but XlapyError."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import ParseError, XlapyError
from xlapy.hlo import parse_module

GOOD = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
"""


def break_line(line_no: int, old: str, new: str) -> str:
    lines = GOOD.splitlines()
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    return "\n".join(lines)


def column_of(text: str, line: int, token: str) -> int:
    """1-based column of the last ``token`` on ``line`` of ``text``."""
    return text.splitlines()[line - 1].rindex(token) + 1


# (text, line, the token the error must point at, words of the message)
CASES = [
    (break_line(6, "add(a, b)", "add(a b)"), 6, "b)", "expected ',' or ')' after operand, got 'b'"),
    (break_line(6, "add(a, b)", "add(a, b"), 7, "}", "expected ',' or ')' after operand, got '}'"),
    (break_line(6, "add(a, b)", "addd(a, b)"), 6, "addd", "unknown opcode 'addd'"),
    (break_line(6, "add(a, b)", "add(a, c)"), 6, "c)", "instruction 'c' is not defined in computation 'add'"),
    (break_line(12, "to_apply=add", "to_apply=mul"), 12, "mul", "computation 'mul' is not defined"),
    (break_line(5, "b = f32[]", "a = f32[]"), 5, "a =", "duplicate instruction name 'a'"),
    (break_line(6, "ROOT s", "s"), 3, "add", "computation 'add' has no ROOT instruction"),
    (break_line(11, "z = f32[]", "ROOT z = f32[]"), 12, "ROOT", "has a second ROOT"),
    (break_line(11, "constant(0)", "constant({1, 2})"), 11, "{1", "bad literal for f32[]"),
    (break_line(10, "f32[4]{0}", "f32[4]{1}"), 10, "1}", "not a permutation"),
    (break_line(12, "dimensions={0}", "dimensions={0"), 12, "to_apply", "expected an integer, got 'to_apply'"),
    (break_line(12, "dimensions={0}", "dimensions={0}, dimensions={0}"), 12, "dimensions", "given twice"),
    (break_line(1, "HloModule m", "HloModul m"), 1, "HloModul", "expected 'HloModule'"),
    (break_line(11, "constant(0)", "constant(0), backend_config=\"x"), 11, '"x', "unterminated string"),
    (break_line(12, "reduce(p, z)", "reduce(p, z"), 12, "={0}", "expected ',' or ')' after operand, got '='"),
    (break_line(10, "parameter(0)", "parameter(x)"), 10, "x)", "expected the parameter number, got 'x'"),
]


@pytest.mark.parametrize(("text", "line", "token", "words"), CASES)
def test_errors_point_at_the_problem(text, line, token, words):
    with pytest.raises(ParseError) as info:
        parse_module(text, source="m.hlo")
    error = info.value
    column = column_of(text, line, token)
    assert words in error.message
    assert (error.line, error.column) == (line, column), str(error)
    assert str(error).startswith(f"m.hlo:{line}:{column}: ")


def test_unterminated_computation():
    text = GOOD.replace("ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}", "ROOT r = f32[] negate(p)")
    with pytest.raises(ParseError, match="expected '}' to end computation 'main', got end of text"):
        parse_module(text)


def test_use_before_definition_is_an_error_as_in_xla():
    text = break_line(11, "z = f32[] constant(0)", "y = f32[] negate(z)\n  z = f32[] constant(0)")
    with pytest.raises(ParseError, match="'z' is used before it is defined"):
        parse_module(text)


CORPUS = [GOOD] + [p.read_text() for p in sorted((Path(__file__).parent / "data").glob("*.hlo"))]


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i, min(len(text), i + 8)))
        choice = draw(st.integers(0, 4))
        if choice == 0:  # drop a few characters
            text = text[:i] + text[j:]
        elif choice == 1:  # truncate
            text = text[:i]
        elif choice == 2:  # change a digit
            text = text[:i] + draw(st.sampled_from("0123456789-")) + text[i + 1:]
        elif choice == 3:  # insert a token
            token = draw(st.sampled_from(["(", ")", "{", "}", ",", "=", "%", "ROOT ", "f32[2]", "\"", "/*", "x"]))
            text = text[:i] + token + text[i:]
        else:  # duplicate a span
            text = text[:j] + text[i:j] + text[j:]
    return text


def _check_mutated_module(text: str) -> None:
    try:
        module = parse_module(text)
    except XlapyError:
        return
    printed = module.to_text()
    assert parse_module(printed).to_text() == printed


# A bounded budget in the default run, a larger one with the slow tests.
@settings(max_examples=125, deadline=2000)
@given(mutated())
def test_mutated_modules_raise_only_xlapy_errors(text):
    _check_mutated_module(text)


@pytest.mark.slow
@settings(max_examples=500, deadline=2000)
@given(mutated())
def test_mutated_modules_raise_only_xlapy_errors_many(text):
    _check_mutated_module(text)
