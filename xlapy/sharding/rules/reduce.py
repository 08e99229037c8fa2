"""Reductions: reduce, reduce-window and select-and-scatter."""

from __future__ import annotations

from xlapy.errors import VerifyError
from xlapy.hlo import HloInstruction
from xlapy.hlo.attributes import WindowDimension
from xlapy.sharding.rules.registry import attr, builder, depends_only_on_form, ints, operand_dims, result_dims, rule_for
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

depends_only_on_form("reduce", "reduce-window", "select-and-scatter")


@rule_for("reduce")
def _reduce(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Operands: inputs..., inits... (the scalar inits get no factor).
    dims = operand_dims(instr)
    count = len(dims) // 2
    reduced = set(ints(instr, "dimensions"))
    rule = builder(instr)
    out_dim = 0
    for in_dim, size in enumerate(dims[0]):
        if in_dim in reduced:
            rule.add_factor([in_dim] * count, [NULL_DIM] * count, size, FactorType.REDUCTION)
        else:
            rule.add_factor([in_dim] * count, [out_dim] * count, size)
            out_dim += 1
    return rule.build()


def _windows(instr: HloInstruction, rank: int) -> tuple[WindowDimension, ...]:
    windows = attr(instr, "window")
    if len(windows) != rank:
        raise VerifyError(f"{instr.name}: the window of {instr.opcode} has {len(windows)} dimensions, its operands "
                          f"{rank}")
    return windows


def _windowed(window: WindowDimension) -> bool:
    """Whether a window dimension combines or moves elements (a window or
    stride above 1, or padding); base and window dilations alone do not."""
    return window.size != 1 or window.stride != 1 or window.padding_low != 0 or window.padding_high != 0


@rule_for("reduce-window")
def _reduce_window(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # A result dimension counts the windows along an input dimension: the
    # input can be sharded along them, with data moving between devices where
    # windows span or shift elements (a permutation factor).
    out_dims = result_dims(instr)[0]
    windows = _windows(instr, len(out_dims))
    rule = builder(instr)
    for dim, size in enumerate(out_dims):
        windowed = _windowed(windows[dim])
        rule.add_pointwise_factor(dim, size, FactorType.PERMUTATION if windowed else FactorType.PASS_THROUGH,
                                  blocked=windowed and conservative)
    return rule.build()


@rule_for("select-and-scatter")
def _select_and_scatter(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Operands: operand, source (one element per window), init. Along a
    # windowed dimension the source has a factor of its own (replicated) and
    # the operand and result another (a permutation).
    operand, source = operand_dims(instr)[:2]
    windows = _windows(instr, len(operand))
    rule = builder(instr)
    for dim, (operand_size, source_size) in enumerate(zip(operand, source)):
        if _windowed(windows[dim]):
            rule.add_factor([NULL_DIM, dim], [NULL_DIM], source_size, FactorType.NEED_REPLICATION, blocked=conservative)
            rule.add_factor([dim, NULL_DIM], [dim], operand_size, FactorType.PERMUTATION, blocked=conservative)
        else:
            rule.add_pointwise_factor(dim, source_size)
    return rule.build()
