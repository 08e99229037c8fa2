"""Elementwise ops (XLA's docs/indexing.md): every output element reads the operand
elements at the same index, so both directions are identities. A scalar
operand of an array op (select's predicate, clamp's bounds) is read whole by
every output element. ``bitcast-convert`` between types of different widths
adds or removes a minor dimension."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.indexing.ops.common import (
    broadcast_from_scalar,
    dim_exprs,
    dim_vars,
    dims,
    identity,
    output_shape,
    scalar_map,
)
from xlapy.indexing.ops.registry import input_to_output, output_to_input
from xlapy.shapes import Shape

# XLA's ``IsOpElementwise`` opcodes, plus map and the all-reduce halves that
# its indexing analysis treats alike.
ELEMENTWISE = tuple(
    [name for name, spec in OPCODES.items() if spec.is_elementwise and name != "bitcast-convert"]
    + ["map", "all-reduce-start", "all-reduce-done"]
)


def _operand_map(operand: Shape, output: Shape) -> IndexingMap:
    if not operand.dimensions and output.dimensions:
        return scalar_map(dims(output))
    return identity(dims(output))


@output_to_input(*ELEMENTWISE)
def _elementwise_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    output = output_shape(instr, output_id)
    return [{_operand_map(operand.shape, output)} for operand in instr.operands]


@input_to_output(*ELEMENTWISE)
def _elementwise_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    output = output_shape(instr, 0)
    if not instr.operand(input_id).shape.dimensions and output.dimensions:
        return [{broadcast_from_scalar(dims(output))}]
    return [{identity(dims(output))}]


# --- bitcast-convert ---


def _convert_map(source: Shape, target: Shape) -> IndexingMap:
    """From indices of ``source`` to those of ``target``, one bitcast-convert
    apart: the same index, or with the minor dimension that holds the parts of
    a wider element dropped (to the wider type) or ranged over (to the
    narrower type)."""
    rank = len(source.dimensions)
    if rank == len(target.dimensions):
        return identity(dims(source))
    if rank == len(target.dimensions) + 1:  # drop the minor dimension
        return IndexingMap.from_tensor_sizes(dim_exprs(rank - 1), dims(source))
    if rank + 1 == len(target.dimensions):  # range over the new minor dimension
        return IndexingMap.from_exprs(
            [*dim_exprs(rank), affine.sym(0)], dim_vars(dims(source)), dim_vars(target.dimensions[-1:])
        )
    return IndexingMap.undefined()


@output_to_input("bitcast-convert")
def _bitcast_convert_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    return [{_convert_map(instr.shape, instr.operand(0).shape)}]


@input_to_output("bitcast-convert")
def _bitcast_convert_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    return [{_convert_map(instr.operand(0).shape, instr.shape)}]
