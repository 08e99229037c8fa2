"""``dot`` with general dimension numbers."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.numerics import convert, dtype_of, widen
from xlapy.interpreter.registry import rule


@rule("dot")
def _dot(instr, operands, ev) -> np.ndarray:
    lhs, rhs = operands
    lhs_batch, rhs_batch = instr.attr("lhs_batch_dims", ()), instr.attr("rhs_batch_dims", ())
    lhs_contract, rhs_contract = instr.attr("lhs_contracting_dims", ()), instr.attr("rhs_contracting_dims", ())
    # Both operands are converted to the result's type (mixed-precision dots
    # accumulate in it); narrow floats accumulate in f32.
    compute = widen(np.zeros((), dtype_of(instr.shape.element_type))).dtype
    lhs, rhs = convert(lhs, compute), convert(rhs, compute)
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_batch and d not in rhs_contract]
    batch = [lhs.shape[d] for d in lhs_batch]
    lhs_m = int(np.prod([lhs.shape[d] for d in lhs_free]))
    rhs_n = int(np.prod([rhs.shape[d] for d in rhs_free]))
    k = int(np.prod([lhs.shape[d] for d in lhs_contract]))
    lhs3 = np.transpose(lhs, [*lhs_batch, *lhs_free, *lhs_contract]).reshape([*batch, lhs_m, k])
    rhs3 = np.transpose(rhs, [*rhs_batch, *rhs_contract, *rhs_free]).reshape([*batch, k, rhs_n])
    # Without a real contraction XLA multiplies (so -0 stays -0, no +0 is added).
    product = lhs3 * rhs3 if k == 1 else np.matmul(lhs3, rhs3)
    return product.reshape(instr.shape.dimensions)
