"""xlapy: an XLA-style tensor compiler in Python."""

from xlapy.errors import ParseError, UnimplementedError, VerifyError, XlapyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule, verify
from xlapy.hlo import parse_module as parse_hlo
from xlapy.interpreter import evaluate
from xlapy.runtime import Executable, compile
from xlapy.version import __version__

__all__ = [
    "Executable", "HloComputation", "HloInstruction", "HloModule", "ParseError", "UnimplementedError", "VerifyError",
    "XlapyError", "__version__", "compile", "evaluate", "parse_hlo", "verify",
]
