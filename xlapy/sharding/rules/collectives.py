"""Collectives. All-reduce, collective-permute and collective-broadcast keep
their operands' shapes: pointwise. All-gather, reduce-scatter and all-to-all
change the size of some dimensions: those get one factor on the operand side
and another on the result side, both needing replication."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.elementwise import pointwise
from xlapy.sharding.rules.registry import (
    attr,
    builder,
    depends_only_on_form,
    int_attr,
    ints,
    operand_dims,
    result_dims,
    rule_for,
)
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

depends_only_on_form("all-reduce", "collective-permute", "collective-broadcast", "all-gather", "reduce-scatter",
                     "all-to-all", "stablehlo.all_to_all")


@rule_for("all-reduce", "collective-permute", "collective-broadcast")
def _same_shape(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    return pointwise(instr)


def _with_resized_dims(instr: HloInstruction, resized: Sequence[int]) -> OpShardingRule:
    in_dims, out_dims = operand_dims(instr)[0], result_dims(instr)[0]
    operands, results = len(instr.operands), len(result_dims(instr))
    rule = builder(instr).add_pointwise_if(in_dims, lambda dim: dim not in resized)
    for dim in dict.fromkeys(resized):
        rule.add_factor([dim] * operands, [NULL_DIM] * results, in_dims[dim], FactorType.NEED_REPLICATION)
        rule.add_factor([NULL_DIM] * operands, [dim] * results, out_dims[dim], FactorType.NEED_REPLICATION)
    return rule.build()


def _dimension(instr: HloInstruction, *names: str) -> int:
    # HLO prints the collective's dimension as `dimensions={d}`.
    for name in names:
        if name in instr.attributes:
            return int_attr(instr, name)
    return ints(instr, "dimensions")[0]


@rule_for("all-gather")
def _all_gather(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    return _with_resized_dims(instr, [_dimension(instr, "all_gather_dimension")])


@rule_for("reduce-scatter")
def _reduce_scatter(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    return _with_resized_dims(instr, [_dimension(instr, "scatter_dimension")])


@rule_for("all-to-all")
def _all_to_all(instr: HloInstruction, conservative: bool = False) -> OpShardingRule | None:
    if not attr(instr, "dimensions", ()):
        return None  # a tuple all-to-all exchanges whole buffers: no dimension to follow
    dimension = ints(instr, "dimensions")[0]
    return _with_resized_dims(instr, [dimension])


@rule_for("stablehlo.all_to_all")
def _stablehlo_all_to_all(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # The split and concatenated dimensions may differ.
    return _with_resized_dims(instr, [int_attr(instr, "split_dimension"), int_attr(instr, "concat_dimension")])
