"""Pointwise ops: factor d is dimension d of every operand and result.
Also the ops that are pointwise up to scalar operands (clamp, select) and
bitcast-convert, which may add or drop a minor dimension."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import builder, depends_only_on_form, operand_dims, result_dims, rule_for
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule, pointwise_rule

# The StableHLO elementwise ops (in XLA's spelling) Shardy builds a pointwise
# rule for, and the sharding constraint, which keeps its operand's shape.
POINTWISE_OPCODES = (
    "abs", "add", "and", "atan2", "cbrt", "ceil", "compare", "complex", "convert", "cosine", "count-leading-zeros",
    "divide", "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one",
    "logistic", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real",
    "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt", "subtract", "tan", "tanh", "xor",
    "sdy.sharding_constraint", "stablehlo.convert",
)
# Elementwise HLO ops with no StableHLO counterpart (so absent from Shardy's
# registry): copy, erf (StableHLO spells it custom_call @mhlo.erf, which is
# pointwise) and stochastic-convert.
HLO_ONLY_POINTWISE_OPCODES = ("copy", "erf", "stochastic-convert")

depends_only_on_form(*POINTWISE_OPCODES, *HLO_ONLY_POINTWISE_OPCODES, "clamp", "select", "bitcast-convert")


def pointwise(instr: HloInstruction) -> OpShardingRule:
    return pointwise_rule([len(d) for d in operand_dims(instr)], result_dims(instr))


@rule_for(*POINTWISE_OPCODES, *HLO_ONLY_POINTWISE_OPCODES)
def _pointwise(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    return pointwise(instr)


@rule_for("clamp")
def _clamp(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # min and max may be scalars: they get no factor.
    return builder(instr).add_pointwise(operand_dims(instr)[1]).build()


@rule_for("select")
def _select(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # A scalar predicate is broadcast: it gets no factor.
    return builder(instr).add_pointwise(result_dims(instr)[0]).build()


@rule_for("bitcast-convert")
def _bitcast_convert(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Converting to a narrower type adds a minor dimension, to a wider one drops
    # it; that dimension holds the pieces of one element and cannot be sharded.
    (in_dims,), (out_dims,) = operand_dims(instr), result_dims(instr)
    rule = builder(instr).add_pointwise(in_dims if len(in_dims) < len(out_dims) else out_dims)
    if len(in_dims) < len(out_dims):
        rule.add_factor([NULL_DIM], [len(out_dims) - 1], out_dims[-1], FactorType.NEED_REPLICATION)
    elif len(in_dims) > len(out_dims):
        rule.add_factor([len(in_dims) - 1], [NULL_DIM], in_dims[-1], FactorType.NEED_REPLICATION)
    return rule.build()
