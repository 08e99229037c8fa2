"""A cursor over program text for the hand-written parsers of xlapy: skips
whitespace and comments, reads the small tokens every syntax shares, and
reports errors at a line and column."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from xlapy.errors import ParseError, XlapyError

T = TypeVar("T")

# Only ASCII digits are digits (Python's \d and int() also take other scripts' digits).
INT = re.compile(r"-?[0-9]+")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# More digits than any integer xlapy reads has (2^128 has 39); longer ones are refused before int(),
# which is slow on long strings and refuses over 4,300 digits.
MAX_INT_DIGITS = 40
# The bound of a token read only for its digit count (its range is checked later, with the type it is for).
MAX_INT_TOKEN = 10**MAX_INT_DIGITS - 1
_INT_TEXT = {10: re.compile(r"[+-]?[0-9]+"), 16: re.compile(r"[+-]?(?:0[xX])?[0-9A-Fa-f]+")}
# Deeper nesting of tuples, parentheses, attributes or regions is refused with a
# ParseError instead of exhausting Python's stack.
MAX_NESTING = 100
_SPACE = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.S)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class IntegerError(XlapyError, ValueError):
    """Text that is not an integer, or one outside the range asked for."""


def read_int(text: str, lower: int, upper: int, base: int = 10) -> int:
    """The value of integer ``text``, which must lie in ``[lower, upper]``.

    ``text`` is an optional sign then ASCII digits of ``base`` (10, or 16 with an optional ``0x``): unlike int(),
    no other scripts' digits, ``_`` separators or surrounding spaces.
    """
    if not _INT_TEXT[base].fullmatch(text):
        raise IntegerError(f"expected an integer, got {text[:20]!r}")
    digits = text.lstrip("+-")
    if base == 16 and digits[:2].lower() == "0x":
        digits = digits[2:]
    if len(digits.lstrip("0")) > MAX_INT_DIGITS:
        raise IntegerError(f"integer too large: {text[:20]}...")
    value = int(text, base)
    if not lower <= value <= upper:
        problem = "too large" if value > upper >= INT64_MAX or value < lower <= INT64_MIN else "out of range"
        raise IntegerError(f"integer {problem}: {text} is outside [{lower}, {upper}]")
    return value


class Cursor:
    """Reads ``text`` from ``pos``; ``pos`` advances past what was read."""

    def __init__(self, text: str, pos: int = 0, source: str | None = None):
        self.text = text
        self.pos = pos
        self.source = source
        self.depth = 0

    def error(self, message: str, pos: int | None = None) -> ParseError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, column, self.source)

    def skip_space(self) -> None:
        """Skip whitespace, ``/* block */`` and ``// line`` comments."""
        self.pos = _SPACE.match(self.text, self.pos).end()
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated /* comment")

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text)

    def peek(self, literal: str) -> bool:
        self.skip_space()
        return self.text.startswith(literal, self.pos)

    def eat(self, literal: str) -> bool:
        if self.peek(literal):
            self.pos += len(literal)
            return True
        return False

    def found(self) -> str:
        """The token at the cursor, quoted, for error messages."""
        self.skip_space()
        if self.pos >= len(self.text):
            return "end of text"
        match = re.compile(r"-?[0-9]+|[%A-Za-z_][\w.\-]*").match(self.text, self.pos)
        return f"'{match.group() if match else self.text[self.pos]}'"

    def expect(self, literal: str, what: str) -> None:
        if not self.eat(literal):
            raise self.error(f"expected '{literal}' {what}, got {self.found()}")

    def match(self, pattern: re.Pattern, what: str) -> re.Match:
        """Consume ``pattern`` at the cursor, or fail saying ``what`` was expected."""
        self.skip_space()
        match = pattern.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected {what}, got {self.found()}")
        self.pos = match.end()
        return match

    def int(self, what: str, lower: int = INT64_MIN, upper: int = INT64_MAX) -> int:
        """An integer in ``[lower, upper]`` (by default a 64-bit signed one)."""
        self.skip_space()
        start = self.pos
        return self.checked_int(self.match(INT, what).group(), start, lower, upper)

    def checked_int(self, digits: str, pos: int, lower: int = INT64_MIN, upper: int = INT64_MAX,
                    base: int = 10) -> int:
        """The value of ``digits`` (read at ``pos``), which must lie in ``[lower, upper]`` (see read_int)."""
        try:
            return read_int(digits, lower, upper, base)
        except IntegerError as e:
            raise self.error(str(e), pos) from None

    @contextmanager
    def nested(self, what: str) -> Iterator[None]:
        """One more level of nesting while the block runs."""
        if self.depth >= MAX_NESTING:
            raise self.error(f"{what} nested more than {MAX_NESTING} levels deep")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def delimited(self, open_: str, close: str, read_item: Callable[[], T], what: str) -> list[T]:
        """``open_ item, item, ... close`` (possibly empty)."""
        self.expect(open_, f"to start {what}")
        items: list[T] = []
        if self.eat(close):
            return items
        while True:
            items.append(read_item())
            if self.eat(close):
                return items
            if not self.eat(","):
                raise self.error(f"expected ',' or '{close}' in {what}, got {self.found()}")

    def ident(self) -> str | None:
        """The identifier at the cursor, without consuming it."""
        self.skip_space()
        match = IDENT.match(self.text, self.pos)
        return match.group() if match else None
