"""Contractions: dot (StableHLO's dot and dot_general)."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import builder, depends_only_on_form, ints, operand_dims, rule_for
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

depends_only_on_form("dot")


@rule_for("dot")
def _dot(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Factors in the order of the result's dimensions (batch, lhs free, rhs
    # free), then the contracting dimensions, which need a reduction.
    lhs, rhs = operand_dims(instr)
    lhs_batch, rhs_batch = ints(instr, "lhs_batch_dims", ()), ints(instr, "rhs_batch_dims", ())
    lhs_contracting, rhs_contracting = ints(instr, "lhs_contracting_dims", ()), ints(instr, "rhs_contracting_dims", ())
    rule = builder(instr)
    out_dim = 0
    for lhs_dim, rhs_dim in zip(lhs_batch, rhs_batch):
        rule.add_factor([lhs_dim, rhs_dim], [out_dim], lhs[lhs_dim])
        out_dim += 1
    for dim, size in enumerate(lhs):
        if dim not in lhs_contracting and dim not in lhs_batch:
            rule.add_factor([dim, NULL_DIM], [out_dim], size)
            out_dim += 1
    for dim, size in enumerate(rhs):
        if dim not in rhs_contracting and dim not in rhs_batch:
            rule.add_factor([NULL_DIM, dim], [out_dim], size)
            out_dim += 1
    for lhs_dim, rhs_dim in zip(lhs_contracting, rhs_contracting):
        rule.add_factor([lhs_dim, rhs_dim], [NULL_DIM], lhs[lhs_dim], FactorType.REDUCTION)
    return rule.build()
