"""Indexing analysis (SPEC.md §3): indexing maps between the indices of HLO
values, their simplifier, and what is computed from them."""

from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval

__all__ = ["IndexingMap", "Interval", "Variable"]
