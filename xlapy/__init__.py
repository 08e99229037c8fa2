"""xlapy: an XLA-style tensor compiler in Python."""

from xlapy.errors import ParseError, UnimplementedError, VerifyError, XlapyError

__version__ = "0.1.0"

__all__ = ["ParseError", "UnimplementedError", "VerifyError", "XlapyError", "__version__"]
