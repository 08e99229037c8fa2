"""The indexing maps of one HLO op in either direction: the rule of its
opcode from ``registry.py``'s tables, or undefined maps (XLA's "unknown
indexing") for an opcode without a rule or an instruction whose attributes do
not fit its opcode — never an exception. This module imports every family of
rules, so its tables are complete."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.indexing.ops import dynamic, elementwise, movement, reduction  # noqa: F401 - importing a family fills the tables
from xlapy.indexing.ops.common import MalformedOp, result_shapes, undefined
from xlapy.indexing.ops.registry import INPUT_TO_OUTPUT, OUTPUT_TO_INPUT

# What a rule raises on an instruction it cannot describe (a malformed or
# unexpected attribute, a size that does not add up). Anything else is a bug
# and propagates.
_UNDESCRIBABLE = MalformedOp


def op_output_to_input(instr: HloInstruction, output_id: int = 0) -> list[set[IndexingMap]]:
    """For each operand of ``instr``, the maps from the indices of output
    ``output_id`` to the operand indices read to compute them. Ops without
    operands (constant, iota, parameter) give an empty list."""
    outputs = len(result_shapes(instr))
    if not 0 <= output_id < outputs:
        raise ValueError(f"{instr.name} has {outputs} output(s), no output {output_id}")
    if not instr.operands:
        return []
    rule = OUTPUT_TO_INPUT.get(instr.opcode)
    if rule is None:
        return undefined(len(instr.operands))
    try:
        return rule(instr, output_id)
    except _UNDESCRIBABLE:
        return undefined(len(instr.operands))


def op_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """For each output of ``instr`` (one for a single-output op), the maps
    from the indices of operand ``input_id`` to the output indices it
    contributes to."""
    if not 0 <= input_id < len(instr.operands):
        raise ValueError(f"{instr.name} has {len(instr.operands)} operand(s), no operand {input_id}")
    outputs = len(result_shapes(instr))
    rule = INPUT_TO_OUTPUT.get(instr.opcode)
    if rule is None:
        return undefined(outputs)
    try:
        return rule(instr, input_id)
    except _UNDESCRIBABLE:
        return undefined(outputs)


__all__ = ["op_input_to_output", "op_output_to_input"]
