"""Shardy's sharding propagation on xlapy's HLO IR; its entry point is
``strategies.propagate``, exported as ``xlapy.sharding.propagate``."""
