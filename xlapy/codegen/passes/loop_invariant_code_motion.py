"""``loop-invariant-code-motion``: moves the values an ``scf.for`` body computes from values defined outside
the loop to before the loop (MLIR's ``LoopInvariantCodeMotion``, which XLA's emitter pipeline runs after
lowering ``xla.loop`` to ``scf``).

Inlining the functions of a fused computation puts their whole body in the loop over a thread's elements,
including what does not depend on the element: the start indices of a dynamic-slice or dynamic-update-slice
read from their tensors and clamped, a broadcast scalar operand. Once before the loop, such a value is a
loop-invariant operand of the index arithmetic, which ``vectorize-loads-stores`` folds into one map of the
lane (a read of an update row at a dynamic row start becomes one vector read).

Moved are ops without regions directly in the loop's body whose operands are all defined outside it:
``arith``, ``math``, ``xla.apply_indexing`` and ``tensor.extract`` (tensors are values: an extract from a
tensor defined outside reads the same element in every iteration). They are moved only out of loops known to
run at least once (bounds whose ranges say so), where the op ran anyway: an index out of bounds or a division
by zero that an empty loop would have skipped never runs. Loops are visited innermost first, so a value
invariant in several nested loops moves out of all of them.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import scf, tensor
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.codegen.passes.simplify_arith import value_range

_MOVABLE_DIALECTS = ("arith", "math")


def _movable(op: Operation) -> bool:
    if op.regions:
        return False
    if isinstance(op, (ApplyIndexingOp, tensor.ExtractOp)):
        return True
    return op.name.split(".", 1)[0] in _MOVABLE_DIALECTS


def _runs_at_least_once(loop: scf.ForOp) -> bool:
    lower, upper, step = value_range(loop.lb), value_range(loop.ub), value_range(loop.step)
    return lower is not None and upper is not None and step is not None and step[0] > 0 and lower[1] < upper[0]


def hoist_loop_invariants(loop: scf.ForOp) -> int:
    """Moves ``loop``'s invariant ops before it (see the module docstring); returns how many moved."""
    if not _runs_at_least_once(loop):
        return 0
    moved = 0
    for op in list(loop.body.block.ops):
        if _movable(op) and all(not loop.is_ancestor(operand.owner) for operand in op.operands):
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(loop))
            moved += 1
    return moved


class LoopInvariantCodeMotionPass(ModulePass):
    """Hoists loop-invariant values out of ``scf.for`` loops (see the module docstring)."""

    name = "loop-invariant-code-motion"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # walk() yields a loop before the loops nested in it: reversed, the innermost come first.
        for loop in reversed([o for o in op.walk() if isinstance(o, scf.ForOp)]):
            hoist_loop_invariants(loop)
