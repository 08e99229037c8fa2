"""Shardy's sharding propagation on xlapy's HLO IR (see ``xlapy.sharding.propagate``)."""
