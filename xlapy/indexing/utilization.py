"""Operand utilization (XLA's docs/indexing.md): how much of each operand is read
when the whole output of an instruction or fusion is computed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.indexing.hlo_indexing import output_to_input_indexing
from xlapy.indexing.indexing_map import IndexingMap


@dataclass(frozen=True)
class OperandUtilization:
    """``read`` of the operand's ``total`` elements are read. ``exact`` is
    False when a map is undefined (then every element is counted) or reads
    at runtime-chosen positions (then every position it may read is)."""

    operand: int
    read: int
    total: int
    exact: bool = True

    @property
    def fraction(self) -> float:
        return self.read / self.total if self.total else 1.0


def operand_utilization(instr: HloInstruction) -> list[OperandUtilization]:
    """For each operand: the number of its elements that some output element
    reads, over every output of ``instr``."""
    num_outputs = max(1, len(instr.shape.tuple_shapes))
    per_output = [output_to_input_indexing(instr, k) for k in range(num_outputs)]
    result = []
    for index, operand in enumerate(instr.operands):
        maps = set().union(*(output[index] for output in per_output))
        result.append(_utilization(index, operand.shape.dimensions, maps))
    return result


def _utilization(index: int, dimensions: tuple[int, ...], maps: set[IndexingMap]) -> OperandUtilization:
    total = int(np.prod(dimensions, dtype=np.int64))
    read = np.zeros(total, bool)
    exact = True
    for indexing_map in maps:
        if indexing_map.is_undefined():
            return OperandUtilization(index, total, total, exact=False)
        exact &= not indexing_map.rt_vars
        dims, symbols = indexing_map.domain_arrays()
        if not indexing_map.point_count(dims, symbols):
            continue
        if not dimensions:
            read[0] = True
            continue
        indices = indexing_map.evaluate_arrays(dims, symbols)
        read[np.ravel_multi_index(indices, dimensions)] = True
    return OperandUtilization(index, int(read.sum()), total, exact)
