"""The one conflict of a dot that explicit-reshard insertion resolves even
outside its full version: the result shards a dimension with the axes of the
contracting dimensions instead of the operand's axes. Then the dot computes
its result sharded like the operand (more sharded, an all-reduce instead of a
reduce-scatter) and a reshard after it restores the result's sharding, which
moves the smaller tensor.

It applies only when the operands agree with each other, exactly one
dimension of the result conflicts with them, the result is not larger than
the operand it conflicts with, that operand's axes there are not empty, and
the result's axes there are exactly the contracting axes, in order."""

from __future__ import annotations

from math import prod

from xlapy.hlo import HloInstruction
from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.propagation.projection import ShardingProjection
from xlapy.sharding.sharding_rule import OpShardingRule


def element_count(value: HloInstruction) -> int:
    """The number of elements of ``value``; 0 (as Shardy counts it) when a
    dimension is dynamic."""
    dims = value.shape.dimensions
    return 0 if any(d < 0 for d in dims) else prod(dims)


def dot_result_factor_axes(dot: HloInstruction, projection: ShardingProjection,
                           rule: OpShardingRule) -> tuple[int, list[AxisRef]] | None:
    """The result factor to shard differently and its new axes, or None when
    the dot is left as it is."""
    lhs, rhs = projection.operands[0].factors, projection.operands[1].factors
    result = projection.results[0].factors
    lhs_size, rhs_size = element_count(dot.operands[0]), element_count(dot.operands[1])
    result_size = element_count(dot)
    conflict: tuple[int, list[AxisRef]] | None = None
    reduction_axes: list[AxisRef] = []
    free_axes: list[AxisRef] = []
    for factor in range(rule.num_factors):
        in_lhs, in_rhs = lhs.get(factor), rhs.get(factor)
        if in_lhs is not None and in_rhs is not None:
            # A batching or contracting dimension: both operands must agree.
            operand_axes, operand_size = in_lhs.axes, max(lhs_size, rhs_size)
            if in_lhs.axes != in_rhs.axes:
                return None
            if rule.is_reduction_factor(factor):
                reduction_axes.extend(operand_axes)
                continue
        elif in_lhs is not None or in_rhs is not None:
            # A free dimension of one operand: no axis may shard both operands' free dimensions.
            operand_axes, operand_size = (in_lhs.axes, lhs_size) if in_lhs is not None else (in_rhs.axes, rhs_size)
            for axis in operand_axes:
                if any(seen.overlaps(axis) for seen in free_axes):
                    return None
                free_axes.append(axis)
        else:
            continue
        if factor not in result or result[factor].axes == operand_axes:
            continue
        if not operand_axes or conflict is not None or result_size > operand_size:
            return None
        conflict = (factor, list(operand_axes))
    if conflict is None:
        return None
    result_axes = result[conflict[0]].axes
    if not result_axes or result_axes != reduction_axes:
        return None
    return conflict
