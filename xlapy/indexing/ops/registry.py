"""The per-opcode indexing rules: two tables from opcode to function, one per
direction, filled by decorators.

An output-to-input rule ``rule(instr, output_id)`` returns, for each operand,
the set of maps from the indices of output ``output_id`` to the indices of
that operand read to compute them. An input-to-output rule ``rule(instr,
input_id)`` returns, for each output, the set of maps from the indices of
operand ``input_id`` to the output indices it contributes to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xlapy.registry import registrar

if TYPE_CHECKING:
    from xlapy.hlo import HloInstruction
    from xlapy.indexing.indexing_map import IndexingMap

IndexingRule = Callable[["HloInstruction", int], "list[set[IndexingMap]]"]

OUTPUT_TO_INPUT: dict[str, IndexingRule] = {}
INPUT_TO_OUTPUT: dict[str, IndexingRule] = {}

output_to_input = registrar(OUTPUT_TO_INPUT, "output-to-input indexing rules")
input_to_output = registrar(INPUT_TO_OUTPUT, "input-to-output indexing rules")
