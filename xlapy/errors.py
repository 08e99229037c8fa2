"""The exception hierarchy of xlapy.

Every error caused by bad input is an ``XlapyError``; the command line prints
it as one line and exits 1.
"""

from __future__ import annotations


class XlapyError(Exception):
    """Base class of every error xlapy reports about its input."""


class ParseError(XlapyError):
    """Text that does not parse; carries the 1-based line and column."""

    def __init__(self, message: str, line: int = 1, column: int = 1, source: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}:" if self.source else ""
        return f"{where}{self.line}:{self.column}: {self.message}"


class VerifyError(XlapyError):
    """Well-formed input that breaks a rule (shape, layout or IR invariant)."""


class UnimplementedError(XlapyError):
    """Valid input that xlapy does not support (yet)."""
