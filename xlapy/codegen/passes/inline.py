"""``inline``: inlines the subgraph functions called once ([A72]).

A private function called from exactly one place is inlined there (calls of
functions called twice or more stay, as in XLA's inliner rules for the xla
dialect); functions left without callers are erased.
"""

from __future__ import annotations

from collections import Counter

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import PureCallOp

_CALLS = (PureCallOp, func.CallOp)


def _callee(call: Operation) -> str:
    return call.callee.root_reference.data


def _calls(module: ModuleOp) -> list[Operation]:
    return [op for op in module.walk() if isinstance(op, _CALLS)]


class InlinePass(ModulePass):
    name = "inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        while True:
            counts = Counter(_callee(call) for call in _calls(op))
            once = [call for call in _calls(op)
                    if counts[_callee(call)] == 1 and _is_private(functions.get(_callee(call)))
                    and functions[_callee(call)].body.blocks]
            if not once:
                break
            for call in once:
                _inline(call, functions[_callee(call)])
        remaining = Counter(_callee(call) for call in _calls(op))
        for name, function in functions.items():
            if _is_private(function) and remaining[name] == 0:
                Rewriter.erase_op(function)


def _is_private(function: func.FuncOp | None) -> bool:
    return function is not None and function.sym_visibility is not None and function.sym_visibility.data == "private"


def _inline(call: Operation, function: func.FuncOp) -> None:
    block = function.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, call.operands))
    results: list[SSAValue] = []
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            results = [mapping.get(v, v) for v in op.arguments]
            break
        Rewriter.insert_op(op.clone(mapping), InsertPoint.before(call))
    Rewriter.replace_op(call, [], results)
