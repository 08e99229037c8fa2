"""`canonicalize`: xDSL's canonicalization, then every `arith.constant` of a function moved to the top of its
entry block, equal ones merged — what MLIR's canonicalizer does with constants (its folder materializes them at
the start of the enclosing function), so that dumps show a function's constants first, as XLA's do, whatever
pass created them inside a loop or a branch."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.transforms.canonicalize import CanonicalizePass as XdslCanonicalizePass


def hoist_constants(function: func.FuncOp) -> None:
    """Moves the constants of `function` (nested regions included) to the top of its entry block, in the order
    they appear, keeping the first of equal ones."""
    if not function.body.blocks:
        return
    entry = function.body.blocks[0]
    constants = [op for op in function.walk() if isinstance(op, arith.ConstantOp)]
    kept: dict[tuple[str, str], arith.ConstantOp] = {}
    previous: arith.ConstantOp | None = None
    for constant in constants:
        key = (str(constant.value), str(constant.result.type))
        if key in kept:
            Rewriter.replace_op(constant, [], [kept[key].result])
            continue
        kept[key] = constant
        constant.detach()
        if previous is not None:
            entry.insert_op_after(constant, previous)
        elif entry.first_op is not None:
            entry.insert_op_before(constant, entry.first_op)
        else:
            entry.add_op(constant)
        previous = constant


class CanonicalizePass(ModulePass):
    name = "canonicalize"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        XdslCanonicalizePass().apply(ctx, op)
        for function in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
            hoist_constants(function)
