"""The rule for ``sort``, as XLA's ``HandleSort``: sorting along a dimension
of at most one element (or an operand of no elements) changes nothing; a
sort of several operands becomes the tuple of them."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic.registry import Simplifier, rule


@rule("sort")
def _sort(sort: HloInstruction, s: Simplifier) -> bool:
    operand = sort.operands[0]
    dimensions = tuple(sort.attr("dimensions", ()))
    if not dimensions:
        return False
    if operand.shape.element_count != 0 and operand.shape.dimensions[dimensions[0]] > 1:
        return False
    if len(sort.operands) == 1:
        return s.replace(sort, operand)
    return s.replace_with_new(sort, "tuple", sort.shape, list(sort.operands))
