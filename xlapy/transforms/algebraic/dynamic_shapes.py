"""The rule for ``get-dimension-size``, as XLA's ``HandleGetDimensionSize``: the size of a static dimension is
a constant (only a bounded dynamic dimension, ``<=N``, has a size known at run time alone)."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule


@rule("get-dimension-size")
def _get_dimension_size(size: HloInstruction, s: Simplifier) -> bool:
    (dimension,) = size.attr("dimensions")
    shape = size.operands[0].shape
    if shape.dynamic_dimensions and shape.dynamic_dimensions[dimension]:
        return False
    constant = building.scalar(s, shape.dimensions[dimension], size.shape.element_type, before=size)
    return s.replace(size, constant)
