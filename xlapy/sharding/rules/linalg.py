"""Linear algebra: cholesky, triangular-solve and fft. Their batch
dimensions pass through; the matrix (or transformed) dimensions need
replication."""

from __future__ import annotations

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import (
    bool_attr,
    builder,
    depends_only_on_form,
    ints,
    operand_dims,
    result_dims,
    rule_for,
    word,
)
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

depends_only_on_form("cholesky", "triangular-solve", "fft")


@rule_for("cholesky")
def _cholesky(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    (shape,) = operand_dims(instr)
    batch = len(shape) - 2
    return builder(instr).add_pointwise(
        shape, lambda dim: FactorType.PASS_THROUGH if dim < batch else FactorType.NEED_REPLICATION).build()


@rule_for("triangular-solve")
def _triangular_solve(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    a, b = operand_dims(instr)
    rule = builder(instr).add_pointwise(a[:-2])
    dim1, dim2 = len(a) - 2, len(a) - 1
    transposed = word(instr, "transpose_a", "NO_TRANSPOSE") in ("TRANSPOSE", "ADJOINT")
    replicated = FactorType.NEED_REPLICATION
    if bool_attr(instr, "left_side"):
        # op(a) @ result = b
        a_free, a_contracting = (dim2, dim1) if transposed else (dim1, dim2)
        rule.add_factor([a_free, dim1], [NULL_DIM], a[a_free], replicated)
        rule.add_factor([NULL_DIM, dim2], [dim2], b[dim2], replicated)
        rule.add_factor([a_contracting, NULL_DIM], [dim1], a[a_contracting], replicated)
    else:
        # result @ op(a) = b
        a_free, a_contracting = (dim1, dim2) if transposed else (dim2, dim1)
        rule.add_factor([NULL_DIM, dim1], [dim1], b[dim1], replicated)
        rule.add_factor([a_free, dim2], [NULL_DIM], a[a_free], replicated)
        rule.add_factor([a_contracting, NULL_DIM], [dim2], a[a_contracting], replicated)
    return rule.build()


@rule_for("fft")
def _fft(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # The leading dimensions are batch dimensions; the transformed ones need
    # replication, and a real transform that changes the last dimension's size
    # blocks propagation along it.
    (in_dims,), (out_dims,) = operand_dims(instr), result_dims(instr)
    transformed = len(ints(instr, "fft_length"))
    rank = len(in_dims)
    rule = builder(instr)
    for dim, size in enumerate(in_dims):
        if dim < rank - transformed:
            rule.add_pointwise_factor(dim, size)
        elif dim < rank - 1:
            rule.add_pointwise_factor(dim, size, FactorType.NEED_REPLICATION)
        else:
            rule.add_pointwise_factor(dim, size, FactorType.NEED_REPLICATION, blocked=in_dims[-1] != out_dims[-1])
    return rule.build()
