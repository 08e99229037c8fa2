"""Running compiled modules: the Executable, its kernel cache and thread pool."""

from xlapy.runtime.executable import Executable, compile

__all__ = ["Executable", "compile"]
