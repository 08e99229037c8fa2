"""Sort, top-k, rng-bit-generator and batch-norm-inference."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import (
    builder,
    depends_only_on_form,
    int_attr,
    ints,
    no_rule,
    operand_dims,
    result_dims,
    rule_for,
)
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

# Ops Shardy leaves without a rule: they have no tensor to shard, or their
# results do not follow their operands' dimensions.
no_rule("partition-id", "replica-id", "after-all", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
        "rng", "stablehlo.rng", "rng-get-and-update-state", "get-tuple-element", "tuple", "parameter")
# Ops Shardy's registry does not know (so no rule), or HLO ops with no
# StableHLO counterpart that propagation should not see through.
no_rule("map", "get-dimension-size", "set-dimension-size", "dynamic-reshape", "batch-norm-training",
        "batch-norm-grad", "ragged-dot", "ragged-all-to-all", "bitcast", "domain", "add-dependency", "fusion")


depends_only_on_form("sort", "topk", "rng-bit-generator", "batch-norm-inference")


@rule_for("sort")
def _sort(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # The sorted dimension needs replication; when it is the only dimension
    # larger than 1, propagation along it is blocked too.
    shape = operand_dims(instr)[0]
    (sort_dim,) = ints(instr, "dimensions")
    only_sorted = all(dim == sort_dim or size == 1 for dim, size in enumerate(shape))
    rule = builder(instr)
    for dim, size in enumerate(shape):
        if dim == sort_dim:
            rule.add_pointwise_factor(dim, size, FactorType.NEED_REPLICATION, blocked=only_sorted)
        else:
            rule.add_pointwise_factor(dim, size)
    return rule.build()


def top_k(instr: HloInstruction) -> OpShardingRule:
    """Top-k along the last dimension (the HLO op and the ``mhlo.topk`` custom
    call): that dimension needs replication and blocks propagation."""
    return builder(instr).add_pointwise_with_diff_type_for_mismatch(
        operand_dims(instr)[0], result_dims(instr)[0], FactorType.NEED_REPLICATION, mismatch_blocked=True).build()


@rule_for("topk")
def _topk(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    return top_k(instr)


@rule_for("rng-bit-generator")
def _rng_bit_generator(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # The state (operand and first result) must stay replicated, and does not
    # propagate; the random bits (second result) can be sharded freely.
    (state,), (_, output) = operand_dims(instr), result_dims(instr)
    rule = builder(instr)
    for dim, size in enumerate(state):
        rule.add_factor([dim], [dim, NULL_DIM], size, FactorType.NEED_REPLICATION, blocked=True)
    for dim, size in enumerate(output):
        rule.add_factor([NULL_DIM], [NULL_DIM, dim], size)
    return rule.build()


@rule_for("batch-norm-inference")
def _batch_norm_inference(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Operands: operand, scale, offset, mean, variance; the four vectors run
    # along the feature dimension.
    (shape, *vectors), feature = operand_dims(instr), int_attr(instr, "feature_index")
    rule = builder(instr)
    for dim, size in enumerate(shape):
        vector_dim = 0 if dim == feature else NULL_DIM
        rule.add_factor([dim] + [vector_dim] * len(vectors), [dim], size)
    return rule.build()
