"""Importers of programs written for other systems into xlapy's HLO IR."""
