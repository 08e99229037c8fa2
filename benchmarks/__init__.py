"""Benchmarks of xlapy, run from the repository root as ``python -m benchmarks.<name>``."""
