"""Rules for ``reduce``, as XLA's ``HandleReduce``: a reduction of no
elements is its initial value, and one that combines no two elements (it
reduces only dimensions of size 1, or none) is a reshape of its input. The
latter takes the initial value to be an identity of the reduction, as XLA
does."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic.registry import Simplifier, rule


@rule("reduce")
def _reduce(reduce: HloInstruction, s: Simplifier) -> bool:
    if len(reduce.operands) != 2:
        return False  # a variadic reduce: not simplified here
    arg, init = reduce.operands
    if arg.shape.element_count == 0 or reduce.shape.element_count == 0:
        return s.replace_with_new(reduce, "broadcast", reduce.shape, [init], {"dimensions": ()})
    if arg.shape.element_count == reduce.shape.element_count:
        return s.replace_with_new(reduce, "reshape", reduce.shape, [arg])
    return False
