"""xlapy's version: the package metadata's (pyproject.toml reads it from here)
and the one compiled-kernel cache keys record."""

__version__ = "0.1.0"
