"""The one integer reader every parser and the command line share: ASCII
digits of base 10 or 16 after an optional sign, a bounded digit count, and a
range given by the caller; anything else is an error at the integer."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError, XlapyError
from xlapy.syntax import INT64_MAX, INT64_MIN, MAX_INT_TOKEN, Cursor, IntegerError, read_int


@pytest.mark.parametrize(("text", "base", "value"), [
    ("0", 10, 0), ("-7", 10, -7), ("+7", 10, 7), ("007", 10, 7), ("9223372036854775807", 10, INT64_MAX),
    ("-9223372036854775808", 10, INT64_MIN), ("ff", 16, 255), ("0x1F", 16, 31), ("-0x10", 16, -16),
    ("0" * 100 + "5", 10, 5),  # leading zeros do not count towards the digit limit
])
def test_reads_ascii_integers(text: str, base: int, value: int) -> None:
    assert read_int(text, INT64_MIN, INT64_MAX, base) == value


@pytest.mark.parametrize(("text", "base"), [
    ("\u0661\u0662", 10),  # Arabic-Indic 12: int() reads it as 12
    ("\uff13", 10),  # fullwidth 3
    ("1_0", 10), (" 5", 10), ("5\n", 10), ("", 10), ("-", 10), ("--5", 10), ("0x10", 10), ("1e3", 10),
    ("0x", 16), ("g", 16), ("0x1_0", 16), ("\uff41", 16),  # fullwidth a
])
def test_refuses_what_is_not_an_ascii_integer(text: str, base: int) -> None:
    with pytest.raises(IntegerError, match="expected an integer"):
        read_int(text, INT64_MIN, INT64_MAX, base)


@pytest.mark.parametrize(("text", "lower", "upper", "message"), [
    ("9223372036854775808", INT64_MIN, INT64_MAX, "integer too large: 9223372036854775808 is outside"),
    ("-9223372036854775809", INT64_MIN, INT64_MAX, "integer too large"),
    ("3", 0, 2, r"integer out of range: 3 is outside \[0, 2\]"),
    ("-1", 0, 2, "integer out of range"),
    ("9" * 41, -MAX_INT_TOKEN, MAX_INT_TOKEN, "integer too large: 99999999999999999999[.][.][.]"),
    ("9" * 100_000, -MAX_INT_TOKEN, MAX_INT_TOKEN, "integer too large"),  # int() refuses over 4,300 digits
    ("f" * 41, 0, MAX_INT_TOKEN, "integer too large"),
])
def test_refuses_integers_out_of_range(text: str, lower: int, upper: int, message: str) -> None:
    base = 16 if text.startswith("f") else 10
    with pytest.raises(IntegerError, match=message):
        read_int(text, lower, upper, base)


def test_errors_are_xlapy_errors_and_value_errors() -> None:
    with pytest.raises(XlapyError):
        read_int("x", 0, 1)
    with pytest.raises(ValueError):
        read_int("x", 0, 1)


def test_cursor_reports_the_integer_position() -> None:
    cursor = Cursor("a\n  1_0")
    with pytest.raises(ParseError) as info:
        cursor.checked_int("1_0", 4)
    assert (info.value.line, info.value.column) == (2, 3)
    assert "expected an integer" in info.value.message
    assert cursor.checked_int("12", 4, 0, 12) == 12
