"""Shape rules of custom calls: the targets whose meaning xlapy knows are
checked by a rule of their own, keyed by target; other targets are checked as
calls only."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    array_operand,
    array_shape,
    at_least,
    attr,
    check_comparator,
    declared_tuple,
    fail,
    one_or_tuple,
    operand_count,
    same_shape,
    show,
    tuple_shape,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import CUSTOM_CALL_RULES, custom_call_rule, shape_rule
from xlapy.shapes import Shape


@shape_rule("custom-call")
def _custom_call(instr: HloInstruction) -> Shape:
    target = attr(instr, "custom_call_target")
    if not isinstance(target, str) or not target:
        fail("custom-call needs a non-empty custom_call_target")
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is None:
        return without_layout(instr.shape)  # the target decides the result
    return rule(instr)


def _custom_call_results(instr: HloInstruction) -> list[Shape]:
    # One result per operand: the declared tuple's elements, or the declared shape for one operand.
    if len(instr.operands) == 1:
        return [instr.shape]
    declared = instr.shape
    if not declared.is_tuple or len(declared.tuple_shapes) != len(instr.operands):
        fail(f"custom-call {instr.attr('custom_call_target')} returns one value per operand, a tuple of "
              f"{len(instr.operands)}, but the instruction declares {show(declared)}")
    return list(declared.tuple_shapes)


# Targets that only annotate their operands (sharding, placement, memory
# space) and return them unchanged; and those between a value's global shape
# and its per-device shard. Runners name their rules of these targets from here.
PASS_THROUGH_TARGETS = ("Sharding", "MoveToHost", "MoveToDevice", "annotate_device_placement", "LayoutConstraint",
                        "xla_python_cpu_callback_identity", "xla.sdy.FuncResultSharding")


SHARD_SHAPE_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.GlobalToLocalShape",
                       "xla.sdy.LocalToGlobalShape")


@custom_call_rule(*PASS_THROUGH_TARGETS)
def _annotation_call(instr: HloInstruction) -> Shape:
    # Annotations (sharding, memory space, layout): each operand passes through unchanged.
    at_least(instr, 1)
    _custom_call_results(instr)
    return one_or_tuple([o.shape for o in instr.operands])


@custom_call_rule(*SHARD_SHAPE_TARGETS)
def _shard_shape_call(instr: HloInstruction) -> Shape:
    # Between a value's global shape and its per-device shard: sizes change, element types and ranks do not.
    at_least(instr, 1)
    results = _custom_call_results(instr)
    for i, (operand, result) in enumerate(zip(instr.operands, results)):
        if not (operand.shape.is_array and result.is_array and operand.shape.element_type == result.element_type
                and operand.shape.rank == result.rank):
            fail(f"custom-call {instr.attr('custom_call_target')} keeps the element type and rank of operand {i}: "
                  f"{show(operand.shape)} cannot become {show(result)}")
    return without_layout(instr.shape)


@custom_call_rule("TopK")
def _topk_call(instr: HloInstruction) -> Shape:
    # XLA:CPU's TopK: the first k of each row (last dimension) in the order of
    # a comparator, with their s32 indices. The comparator is that of the sort
    # the custom call replaces: of (value, value, index, index) for a sort of
    # values and their iota, of (value, value) for a sort of the values alone.
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    if not operand.rank:
        fail(f"custom-call TopK needs an operand of rank >= 1, got {show(operand)}")
    if len(instr.called_computations) != 1:
        fail(f"custom-call TopK needs one comparator computation (called_computations={{...}}), "
              f"got {len(instr.called_computations)}")
    comparator = instr.called_computations[0]
    types = [operand.element_type] if len(comparator.parameters) == 2 else [operand.element_type, "s32"]
    check_comparator(instr, comparator, types, "comparator")
    declared = declared_tuple(instr, 2)
    values = declared.tuple_shapes[0]
    k = values.dimensions[-1] if values.is_array and values.rank else -1
    expected = [array_shape(operand.element_type, (*operand.dimensions[:-1], k)),
                array_shape("s32", (*operand.dimensions[:-1], k))]
    if len(declared.tuple_shapes) != 2 or not 0 <= k <= operand.dimensions[-1] or not all(
            same_shape(d, e) for d, e in zip(declared.tuple_shapes, expected)):
        fail(f"custom-call TopK of {show(operand)} returns (values, s32 indices) of its leading dimensions and "
              f"k <= {operand.dimensions[-1]}, but the instruction declares {show(declared)}")
    return tuple_shape(expected)
