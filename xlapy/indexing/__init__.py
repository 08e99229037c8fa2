"""Indexing analysis (XLA's docs/indexing.md): indexing maps between the indices of HLO
values, their simplifier, and what is computed from them (operand
utilization, read coalescing, tile propagation)."""

from xlapy.indexing.coalescing import is_coalesced
from xlapy.indexing.hlo_indexing import input_to_output_indexing, output_to_input_indexing
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.tiling import OperandTile, Tile, propagate_tile
from xlapy.indexing.utilization import OperandUtilization, operand_utilization

__all__ = [
    "IndexingMap",
    "Interval",
    "OperandTile",
    "OperandUtilization",
    "Tile",
    "Variable",
    "input_to_output_indexing",
    "is_coalesced",
    "operand_utilization",
    "output_to_input_indexing",
    "propagate_tile",
]
