"""Expansion of the simple ``gather``s, as XLA's ``GatherExpander``
(``xla/service/gather_expander.cc``) in the mode XLA:CPU runs,
``kEliminateSimpleGathers``; the loop emitter computes every other gather
element by element.

Two kinds of gather are simple:

- a gather whose slices are the whole operand is a broadcast: the operand
  without its collapsed dimensions, broadcast along the offset dimensions (an
  empty operand gives zeros);
- a gather of one index vector (a loop of one trip). XLA builds that loop and
  leaves it to ``WhileLoopSimplifier`` and the algebraic simplifier; here what
  they leave of it is built directly: the index vector spread over the
  operand's dimensions (0 for the dimensions ``start_index_map`` leaves out),
  one ``dynamic-slice`` of ``slice_sizes`` there (it clamps the start as
  gather does), reshaped to the result (the batch dimensions all have size 1,
  so the slice's elements are already in the result's order).

Gathers with an empty result are left to ``ZeroSizedHloElimination``, and
gathers with batching dimensions (which XLA's ``BatchedGatherScatterNormalizer``
rewrites first) are left alone. Mode ``ELIMINATE_ALL_GATHERS`` is not
offered: every other gather stays for the loop emitter.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass
from xlapy.transforms.scatter_expander import InstructionBuilder


def _dims(instruction: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in instruction.attributes.get(name, ()) or ())


def gather_trip_count(gather: HloInstruction) -> int:
    """The number of index vectors (XLA's ``GatherLoopTripCount``)."""
    indices = gather.operands[1].shape
    index_vector_dim = int(gather.attr("index_vector_dim", indices.rank))
    return int(np.prod([d for i, d in enumerate(indices.dimensions) if i != index_vector_dim], dtype=np.int64))


def gather_is_broadcast(gather: HloInstruction) -> bool:
    return _dims(gather, "slice_sizes") == tuple(gather.operands[0].shape.dimensions)


class GatherExpander(OpExpanderPass):
    """Rewrites the gathers that need no loop."""

    name = "gather_expander"
    ELIMINATE_SIMPLE_GATHERS = "eliminate-simple-gathers"

    def __init__(self, mode: str = ELIMINATE_SIMPLE_GATHERS) -> None:
        if mode != self.ELIMINATE_SIMPLE_GATHERS:
            raise ValueError(f"unknown gather expansion mode {mode!r}")
        self.mode = mode

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "gather" or instruction.shape.element_count == 0:
            return False
        if _dims(instruction, "operand_batching_dims"):
            return False
        return gather_trip_count(instruction) == 1 or gather_is_broadcast(instruction)

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        build = InstructionBuilder(builder.computation, builder.before)
        operand, indices = instruction.operands
        collapsed = _dims(instruction, "collapsed_slice_dims")
        if gather_is_broadcast(instruction):
            if operand.shape.element_count == 0:
                zero = build.constant(0, instruction.shape.element_type)
                return build.add("broadcast", instruction.shape, [zero], {"dimensions": ()})
            kept = [d for i, d in enumerate(operand.shape.dimensions) if i not in collapsed]
            reshaped = build.reshape(operand, kept)
            return build.add("broadcast", instruction.shape, [reshaped],
                             {"dimensions": _dims(instruction, "offset_dims")})
        index_vector_dim = int(instruction.attr("index_vector_dim", indices.shape.rank))
        components = 1 if index_vector_dim == indices.shape.rank else indices.shape.dimensions[index_vector_dim]
        vector = build.reshape(indices, (components,))
        start_index_map = _dims(instruction, "start_index_map")
        zero = build.constant(0, indices.shape.element_type)
        starts = [build.slice1(vector, start_index_map.index(d)) if d in start_index_map else zero
                  for d in range(operand.shape.rank)]
        sliced = build.dynamic_slice(operand, starts, _dims(instruction, "slice_sizes"))
        return build.add("reshape", instruction.shape, [sliced]) if sliced.shape != instruction.shape else sliced
