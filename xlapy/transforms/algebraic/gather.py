"""The rule for ``gather``, as XLA's ``HandleGather``:

- a gather from an operand of no elements is 0 (it gathers nothing real);
- a gather from an operand of one element is that element, broadcast;
- a gather of single elements of a vector of at most four (XLA's
  ``very_small_gather_size``), one index per result element, is a chain of
  selects on ``index >= i``: indices are clamped, so an index below 0 reads
  the first element and one past the end the last.

XLA's moving of pads from the gathered operand to the result is not made.
"""

from __future__ import annotations

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule

# XLA's ``AlgebraicSimplifierOptions::very_small_gather_size`` default.
VERY_SMALL_GATHER_SIZE = 4


@rule("gather")
def _gather(gather: HloInstruction, s: Simplifier) -> bool:
    operand, indices = gather.operands
    if operand.shape.element_count == 0:
        return s.replace(gather, building.zeros_like(s, gather))
    if operand.shape.element_count == 1:
        value = operand if operand.shape.rank == 0 else building.reshape(s, operand, (), gather)
        return s.replace(gather, building.broadcast(s, value, gather.shape, (), gather))
    if (operand.shape.rank == 1 and operand.shape.dimensions[0] <= VERY_SMALL_GATHER_SIZE
            and gather.attr("index_vector_dim") == indices.shape.rank
            and len(gather.attr("collapsed_slice_dims", ()) or ()) == 1):
        return _select_chain(gather, s, operand, indices)
    return False


def _select_chain(gather: HloInstruction, s: Simplifier, operand: HloInstruction, indices: HloInstruction) -> bool:
    element_type = operand.shape.element_type

    def element(i: int) -> HloInstruction:
        piece = s.add("slice", building.array_shape(operand.shape, element_type, (1,)), [operand],
                      {"slice": (SliceDimension(i, i + 1, 1),)}, before=gather)
        return building.broadcast(s, building.reshape(s, piece, (), gather), gather.shape, (), gather)

    predicate_shape = building.array_shape(gather.shape, "pred", gather.shape.dimensions)
    result = element(0)
    for i in range(operand.shape.dimensions[0]):
        bound = s.scalar_like(indices, i)
        at_least = s.add("compare", predicate_shape, [indices, bound], {"direction": "GE"}, before=gather)
        result = s.add("select", gather.shape, [at_least, element(i), result], before=gather)
    return s.replace(gather, result)
