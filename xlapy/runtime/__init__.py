"""Running compiled modules: ``compile`` (HLO passes, buffer assignment, thunks) and the ``Executable`` it
returns, with its kernel cache and thread pool."""

from xlapy.runtime.executable import CompileSummary, Executable, compile

__all__ = ["CompileSummary", "Executable", "compile"]
