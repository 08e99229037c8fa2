"""Indexing maps of HLO instructions: the per-op rules for single ops, and for
fusions the composition of those rules through the fused computation
(XLA's docs/indexing.md)."""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.indexing.ops.op_indexing import op_input_to_output, op_output_to_input


def _result_shapes(instr: HloInstruction) -> list:
    return list(instr.shape.tuple_shapes) or [instr.shape]


def output_to_input_indexing(instr: HloInstruction, output_id: int = 0) -> list[set[IndexingMap]]:
    """For each operand of ``instr``, the maps from the indices of output
    ``output_id`` to the indices of that operand that are read to compute
    them. A fusion's maps are composed through its fused computation and
    simplified; equal maps appear once."""
    if instr.opcode == "fusion":
        return fusion_output_to_input(instr, output_id)
    return op_output_to_input(instr, output_id)


def input_to_output_indexing(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """For each output of ``instr``, the maps from the indices of operand
    ``input_id`` to the output indices it contributes to."""
    if instr.opcode == "fusion":
        return fusion_input_to_output(instr, input_id)
    return op_input_to_output(instr, input_id)


def _compose_into(into: set[IndexingMap], firsts: set[IndexingMap], thens: set[IndexingMap]) -> None:
    """Adds every ``then ∘ first``, simplified and without unused symbols."""
    for first in firsts:
        for then in thens:
            into.add(first.compose(then).simplify().remove_unused_symbols())


def fusion_outputs(computation: HloComputation) -> list[tuple[HloInstruction, int]]:
    """What a fusion returns, as (instruction, output index) pairs: the
    operands of a root tuple (a multi-output fusion), or each output of the
    root (one unless the root itself returns a tuple, like a variadic
    reduce)."""
    root = computation.root
    if root.opcode == "tuple":
        return [(operand, 0) for operand in root.operands]
    return [(root, k) for k in range(len(_result_shapes(root)))]


def grouped_output_to_input(
    computation: HloComputation, target: HloInstruction, output_id: int = 0
) -> dict[HloInstruction, set[IndexingMap]]:
    """For every instruction of ``computation`` that output ``output_id`` of
    ``target`` reads (directly or not), the distinct maps from the target's
    indices to its indices.

    Users come before their operands in reverse post order, so when an
    instruction is reached every way its value is read is known; each is
    composed with the instruction's own maps, simplified, and added to its
    operands' sets."""
    shape = _result_shapes(target)[output_id]
    grouped: dict[HloInstruction, set[IndexingMap]] = {target: {IndexingMap.identity(shape.dimensions)}}
    order = computation.post_order()
    for instr in reversed(order[: order.index(target) + 1]):
        consumer_maps = grouped.get(instr)
        if consumer_maps is None or instr.opcode == "parameter":
            continue
        operand_maps = output_to_input_indexing(instr, output_id if instr is target else 0)
        for operand, producer_maps in zip(instr.operands, operand_maps):
            _compose_into(grouped.setdefault(operand, set()), consumer_maps, producer_maps)
    return grouped


def fusion_output_to_input(fusion: HloInstruction, output_id: int = 0) -> list[set[IndexingMap]]:
    computation = fusion.fused_computation
    target, target_output = fusion_outputs(computation)[output_id]
    grouped = grouped_output_to_input(computation, target, target_output)
    return [grouped.get(parameter, set()) for parameter in computation.parameters]


def fusion_input_to_output(fusion: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """Follows every use chain from parameter ``input_id`` to the outputs,
    composing the input-to-output maps of each op on the way."""
    computation = fusion.fused_computation
    parameter = computation.parameter(input_id)
    # Maps from the parameter's indices to each (instruction, output index).
    reached: dict[tuple[HloInstruction, int], set[IndexingMap]] = {
        (parameter, 0): {IndexingMap.identity(parameter.shape.dimensions)}
    }
    for instr in computation.post_order():
        if instr.opcode == "parameter" or (instr.opcode == "tuple" and instr is computation.root):
            continue
        if instr.opcode == "get-tuple-element":
            maps = reached.get((instr.operands[0], instr.attr("index")))
            if maps:
                reached[(instr, 0)] = maps
            continue
        for operand_index, operand in enumerate(instr.operands):
            maps = reached.get((operand, 0))
            if not maps:
                continue
            for output_index, step_maps in enumerate(input_to_output_indexing(instr, operand_index)):
                _compose_into(reached.setdefault((instr, output_index), set()), maps, step_maps)
    return [reached.get(output, set()) for output in fusion_outputs(computation)]
