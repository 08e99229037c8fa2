"""The rule for ``iota``, as XLA's ``HandleIota``: an iota whose dimension
has at most one element is all zeros."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule


@rule("iota")
def _iota(iota: HloInstruction, s: Simplifier) -> bool:
    if iota.shape.dimensions[iota.attr("iota_dimension", 0)] > 1:
        return False
    return s.replace(iota, building.zeros_like(s, iota))
