"""Custom calls: a rule per known target (``custom_call_target``); unknown
targets have none. (A rule the user attached to the op wins over these; see
``op_sharding_rule``.)"""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.elementwise import pointwise
from xlapy.sharding.rules.misc import top_k
from xlapy.sharding.rules.registry import builder, operand_dims, result_dims, rule_for, word
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

# Targets whose results must not be given a rule (host callbacks, kernels
# Shardy cannot see into).
OPAQUE_TARGETS = frozenset({
    "sdy_testonly", "tpu_custom_call", "xla_python_cpu_callback", "xla_python_gpu_callback",
    "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback",
})
# Targets that are pointwise in all their operands and results.
POINTWISE_TARGETS = frozenset({
    "annotate_device_placement", "Cholesky", "CompactWyHelper", "InspectSharding", "InvertDiagBlocksLowerTriangular",
    "InvertDiagBlocksUpperTriangular", "LayoutConstraint", "mhlo.erf", "MoveToDevice", "MoveToHost",
    "X64SplitHigh", "X64SplitLow", "xla.megascale.provide_metadata",
})
REPLICATED = FactorType.NEED_REPLICATION


def _eigh(instr: HloInstruction) -> OpShardingRule:
    # jax.lax.linalg.eigh: (matrices) -> (eigenvectors, eigenvalues). The
    # eigenvalues run along the last dimension of the matrices.
    (shape,) = operand_dims(instr)[:1]
    dim1, dim2 = len(shape) - 2, len(shape) - 1
    return (builder(instr).add_pointwise(shape[:-2])
            .add_factor([dim1], [dim1, NULL_DIM], shape[dim1])
            .add_factor([dim2], [dim2, dim1], shape[dim2]).build())


def _qr(instr: HloInstruction) -> OpShardingRule:
    # jax.lax.linalg.qr: (matrices) -> (q or packed qr, taus); the taus'
    # dimension matches none of the others.
    (shape,), taus = operand_dims(instr)[:1], result_dims(instr)[1]
    dim1, dim2 = len(shape) - 2, len(shape) - 1
    return (builder(instr).add_pointwise(shape[:-2])
            .add_factor([dim1], [dim1, NULL_DIM], shape[dim1], REPLICATED)
            .add_factor([dim2], [dim2, NULL_DIM], shape[dim2], REPLICATED)
            .add_factor([NULL_DIM], [NULL_DIM, dim1], taus[dim1], REPLICATED).build())


def _householder_product(instr: HloInstruction) -> OpShardingRule:
    # jax.lax.linalg.householder_product: (matrices, taus) -> matrices.
    shape, taus = operand_dims(instr)[:2]
    dim1, dim2 = len(shape) - 2, len(shape) - 1
    return (builder(instr).add_pointwise(shape[:-2])
            .add_factor([dim1, NULL_DIM], [dim1], shape[dim1], REPLICATED)
            .add_factor([dim2, NULL_DIM], [dim2], shape[dim2], REPLICATED)
            .add_factor([NULL_DIM, dim1], [NULL_DIM], taus[dim1], REPLICATED).build())


def _approx_top_k(instr: HloInstruction) -> OpShardingRule:
    # jax.lax.approx_max_k: (operand, iota, init value, init index) -> (values,
    # indices). The reduced dimension gets an input factor and an output factor.
    rule = builder(instr)
    for dim, (in_size, out_size) in enumerate(zip(operand_dims(instr)[0], result_dims(instr)[0])):
        if in_size == out_size:
            rule.add_pointwise_factor(dim, in_size)
        else:
            rule.add_factor([dim, dim], [NULL_DIM, NULL_DIM], in_size)
            rule.add_factor([NULL_DIM, NULL_DIM], [dim, dim], out_size, REPLICATED, blocked=True)
    return rule.build()


def _x64_combine(instr: HloInstruction) -> OpShardingRule:
    # The initial state of an rng-bit-generator must be replicated and cannot
    # be resharded after the combine: then nothing propagates into it.
    (shape,) = result_dims(instr)[:1]
    if any(user.opcode == "rng-bit-generator" for user in instr.users):
        rule = builder(instr)
        if shape:
            rule.add_pointwise_factor(0, shape[0], REPLICATED, blocked=True)
        return rule.build()
    return builder(instr).add_pointwise(shape).build()


_TARGET_RULES = {
    "Eigh": _eigh, "Qr": _qr, "QrDecompositionBlock": _qr,
    "ProductOfElementaryHouseholderReflectors": _householder_product,
    "mhlo.topk": top_k, "ApproxTopK": _approx_top_k, "PartialReduce": _approx_top_k,
    "X64Combine": _x64_combine,
}


@rule_for("custom-call")
def _custom_call(instr: HloInstruction, conservative: bool = False) -> OpShardingRule | None:
    target = word(instr, "custom_call_target", "")
    if target in OPAQUE_TARGETS:
        return None
    if target in POINTWISE_TARGETS:
        return pointwise(instr)
    rule = _TARGET_RULES.get(target)
    return rule(instr) if rule is not None else None
