"""Shape rules of reductions: reduce, reduce-window and select-and-scatter."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    array_operand,
    array_shape,
    attr,
    braces,
    callees,
    check_comparator,
    check_dimension_numbers,
    check_reducer,
    declared_dynamic,
    fail,
    ints_attr,
    one_or_tuple,
    operand_count,
    same_dims,
    scalar_operand,
    show,
    window_output,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


def _half(instr: HloInstruction, what: str) -> int:
    count = len(instr.operands)
    if count < 2 or count % 2:
        fail(f"{instr.opcode} takes {what} and as many init values, got {count} operands")
    return count // 2


@shape_rule("reduce")
def _reduce(instr: HloInstruction) -> Shape:
    n = _half(instr, "N inputs")
    inputs = [array_operand(instr, i, f"input {i}") for i in range(n)]
    inits = [scalar_operand(instr, n + i, f"init value {i}") for i in range(n)]
    same_dims(instr, inputs, "inputs")
    dims = ints_attr(instr, "dimensions")
    check_dimension_numbers(instr, "dimensions", dims, inputs[0].rank, show(inputs[0]))
    (computation,) = callees(instr, 1, "to_apply")
    check_reducer(instr, computation, inits, [s.element_type for s in inputs])
    kept = [i for i in range(inputs[0].rank) if i not in dims]
    dynamic = [inputs[0].dynamic_dimensions[i] for i in kept]
    return one_or_tuple([array_shape(init.element_type, [inputs[0].dimensions[i] for i in kept], dynamic)
                          for init in inits])


@shape_rule("reduce-window")
def _reduce_window(instr: HloInstruction) -> Shape:
    n = _half(instr, "N inputs")
    inputs = [array_operand(instr, i, f"input {i}") for i in range(n)]
    inits = [scalar_operand(instr, n + i, f"init value {i}") for i in range(n)]
    same_dims(instr, inputs, "inputs")
    (computation,) = callees(instr, 1, "to_apply")
    check_reducer(instr, computation, inits, [s.element_type for s in inputs])
    dims = window_output(instr, inputs[0].dimensions, attr(instr, "window"))
    dynamic = declared_dynamic(instr, len(dims)) if n == 1 else None
    return one_or_tuple([array_shape(init.element_type, dims, dynamic) for init in inits])


@shape_rule("select-and-scatter")
def _select_and_scatter(instr: HloInstruction) -> Shape:
    # select-and-scatter(operand, source, init): source has one value per window position.
    operand_count(instr, 3)
    operand, source = array_operand(instr, 0), array_operand(instr, 1, "the source")
    init = scalar_operand(instr, 2, "the init value")
    select, scatter = callees(instr, 2, "select, scatter")
    check_comparator(instr, select, [operand.element_type], "select computation")
    check_reducer(instr, scatter, [init], [source.element_type], "scatter computation")
    windows = window_output(instr, operand.dimensions, attr(instr, "window"))
    if list(source.dimensions) != windows:
        fail(f"the source of select-and-scatter must have one element per window, {braces(windows)}, "
              f"got {show(source)}")
    return without_layout(operand)
