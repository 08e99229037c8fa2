"""Convolution, with its dimension numbers read from ``dim_labels``
(``b01f_01io->b01f``: batch, feature, spatial 0..n-1; kernel input and
output features)."""

from __future__ import annotations

import re

from xlapy.errors import VerifyError
from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import (
    builder,
    depends_only_on_form,
    int_attr,
    operand_dims,
    result_dims,
    rule_for,
    word,
)
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule, OpShardingRuleBuilder

depends_only_on_form("convolution")


def _positions(instr: HloInstruction, labels: str, letters: str) -> tuple[int, ...]:
    # The positions of `letters` then of the spatial dimensions 0, 1, ... in `labels`.
    spatial = "".join(str(i) for i in range(len(labels) - len(letters)))
    if sorted(labels) != sorted(letters + spatial):
        raise VerifyError(f"{instr.name}: dim_labels part '{labels}' must name {', '.join(letters)} and spatial "
                          "dimensions once each")
    return tuple(labels.index(c) for c in letters + spatial)


@rule_for("convolution")
def _convolution(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    match = re.fullmatch(r"(\w+)_(\w+)->(\w+)", word(instr, "dim_labels"))
    if not match:
        raise VerifyError(f"{instr.name}: dim_labels must look like b01f_01io->b01f")
    in_batch, in_feature, *in_spatial = _positions(instr, match.group(1), "bf")
    kernel_in, kernel_out, *kernel_spatial = _positions(instr, match.group(2), "io")
    out_batch, out_feature, *out_spatial = _positions(instr, match.group(3), "bf")
    lhs, rhs = operand_dims(instr)
    (out,) = result_dims(instr)
    batch_groups = int_attr(instr, "batch_group_count", 1)
    feature_groups = int_attr(instr, "feature_group_count", 1)
    rule = builder(instr)
    if batch_groups > 1:
        rule.add_factor([in_batch, kernel_out], [out_feature], batch_groups)
    rule.add_factor([in_batch, NULL_DIM], [out_batch], out[out_batch])
    if not conservative:
        for lhs_dim, rhs_dim, out_dim in zip(in_spatial, kernel_spatial, out_spatial):
            _add_spatial_factors(rule, lhs_dim, rhs_dim, out_dim, lhs[lhs_dim], out[out_dim], rhs[rhs_dim])
    if feature_groups > 1:
        rule.add_factor([in_feature, kernel_out], [out_feature], feature_groups)
    rule.add_factor([in_feature, kernel_in], [NULL_DIM], rhs[kernel_in], FactorType.REDUCTION)
    # The output features per group (none when there is one per group).
    per_group = out[out_feature] // (batch_groups * feature_groups)
    if per_group > 1:
        rule.add_factor([NULL_DIM, kernel_out], [out_feature], per_group)
    return rule.build()


def _add_spatial_factors(rule: OpShardingRuleBuilder, lhs_dim: int, rhs_dim: int, out_dim: int, lhs_size: int,
                         windows: int, window_size: int) -> None:
    """An input spatial dimension splits into the number of windows (the
    output's dimension, a permutation factor) and the window size (the
    kernel's, a reduction factor); the larger one is the major factor."""
    remaining = lhs_size

    def add(size: int, in_kernel: bool) -> None:
        nonlocal remaining
        size = min(remaining, size)
        if size <= 1:
            return
        if in_kernel:
            rule.add_factor([lhs_dim, rhs_dim], [NULL_DIM], size, FactorType.REDUCTION)
        else:
            rule.add_factor([lhs_dim, NULL_DIM], [out_dim], size, FactorType.PERMUTATION)
        remaining //= size

    if windows >= window_size:
        add(windows, False)
        add(window_size, True)
    else:
        add(window_size, True)
        add(windows, False)
