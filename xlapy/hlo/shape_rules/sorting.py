"""Shape rules of sort and topk."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    array_operand,
    array_shape,
    at_least,
    braces,
    callees,
    check_comparator,
    fail,
    int_attr,
    ints_attr,
    one_or_tuple,
    operand_count,
    same_dims,
    show,
    tuple_shape,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


@shape_rule("sort")
def _sort(instr: HloInstruction) -> Shape:
    at_least(instr, 1)
    shapes = [array_operand(instr, i) for i in range(len(instr.operands))]
    same_dims(instr, shapes, "operands")
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        fail(f"sort needs one dimension of {show(shapes[0])}, got dimensions={braces(dims)}")
    (computation,) = callees(instr, 1, "to_apply")
    check_comparator(instr, computation, [s.element_type for s in shapes])
    return one_or_tuple(shapes)


@shape_rule("topk")
def _topk(instr: HloInstruction) -> Shape:
    # topk(operand), k=K: the K largest (or smallest) along the last dimension and their s32 indices.
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    k = int_attr(instr, "k")
    if not operand.rank:
        fail("topk needs an operand of rank >= 1")
    if not 0 <= k <= operand.dimensions[-1]:
        fail(f"k={k} of topk must be within the last dimension of {show(operand)}")
    dims = (*operand.dimensions[:-1], k)
    return tuple_shape([array_shape(operand.element_type, dims), array_shape("s32", dims)])
