"""A cursor over program text for the hand-written parsers of xlapy: skips
whitespace and comments, reads the small tokens every syntax shares, and
reports errors at a line and column."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from xlapy.errors import ParseError

T = TypeVar("T")

INT = re.compile(r"-?\d+")
_SPACE = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.S)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Cursor:
    """Reads ``text`` from ``pos``; ``pos`` advances past what was read."""

    def __init__(self, text: str, pos: int = 0, source: str | None = None):
        self.text = text
        self.pos = pos
        self.source = source

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
        match = re.compile(r"-?\d+|[%A-Za-z_][\w.\-]*").match(self.text, self.pos)
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

    def int(self, what: str) -> int:
        return int(self.match(INT, what).group())

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
