"""``inline`` (one step of the example in XLA's docs/emitters.md): MLIR's inliner with the rule XLA's
``xla`` dialect inliner interface applies (``xla_dialect.cc``/
``xla_gpu_dialect.cc``), restricted as XLA's emitters document states it: a call of a
private function that is called from exactly one place in the module is
replaced by the function's body; a function called twice or more stays a
function (so its code is not duplicated). Afterwards private functions
nobody calls any more are erased.

Both ``xla.pure_call`` and ``func.call`` are calls.
"""

from __future__ import annotations

from collections import Counter

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import PureCallOp

CALL_OPS = (PureCallOp, func.CallOp)


def callee_name(call: Operation) -> str:
    """The name of the function a call op calls."""
    assert isinstance(call, CALL_OPS)
    return call.callee.root_reference.data


def _calls(root: Operation) -> list[Operation]:
    return [op for op in root.walk() if isinstance(op, CALL_OPS)]


def _is_private(function: func.FuncOp) -> bool:
    return function.sym_visibility is not None and function.sym_visibility.data == "private"


def _inlinable(function: func.FuncOp | None, call: Operation) -> bool:
    if function is None or not _is_private(function) or len(function.body.blocks) != 1:
        return False  # external, public, or with control flow between blocks
    # A function calling itself has its only call inside itself: leave recursion alone.
    return not function.is_ancestor(call)


def _inline(call: Operation, function: func.FuncOp) -> None:
    """Moves the body (the function is erased right after) before the call."""
    block = function.body.block
    terminator = block.last_op
    assert isinstance(terminator, func.ReturnOp)
    constants = [op for op in block.ops if isinstance(op, arith.ConstantOp)]
    Rewriter.inline_block(block, InsertPoint.before(call), call.operands)
    results = list(terminator.arguments)
    hints = [v.name_hint for v in results]
    Rewriter.replace_op(call, [], results)
    # Keep the callee's names, as the emitters document's example shows (`%8`, not `%pure_call`).
    for value, hint in zip(results, hints):
        value.name_hint = hint
    Rewriter.erase_op(terminator)
    _hoist_constants(constants)


def _hoist_constants(constants: list[arith.ConstantOp]) -> None:
    """Moves inlined constants to the top of the caller, merging equal ones,
    as MLIR's inliner does when it folds the inlined code (see the emitters document's example)."""
    if not constants:
        return
    caller = constants[0].parent_op()
    while caller is not None and not isinstance(caller, func.FuncOp):
        caller = caller.parent_op()
    if caller is None:
        return
    entry = caller.body.blocks.first
    assert entry is not None
    existing: dict[tuple, arith.ConstantOp] = {}
    for constant in constants:
        key = (constant.value, constant.result.type)
        if key in existing:
            Rewriter.replace_op(constant, [], [existing[key].result])
        else:
            existing[key] = constant
            constant.detach()
    for op in entry.ops:
        if not isinstance(op, arith.ConstantOp):
            continue
        key = (op.value, op.result.type)
        moving = existing.get(key)
        if moving is not None and moving.parent is None:  # one is already in the entry block: keep that one
            moving.result.replace_all_uses_with(op.result)
            moving.erase()
            existing[key] = op
    anchor = next((op for op in entry.ops if not isinstance(op, arith.ConstantOp)), None)
    for constant in existing.values():
        if constant.parent is None:
            if anchor is not None:
                entry.insert_op_before(constant, anchor)
            else:
                entry.add_op(constant)


class InlinePass(ModulePass):
    """Inlines private functions called exactly once, then drops unused private functions."""

    name = "inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        # Inlining f moves the calls in f's body into its caller; the counts
        # stay valid, but recount after each step to keep the rule obvious.
        while True:
            calls = _calls(op)
            counts = Counter(callee_name(c) for c in calls)
            call = next(
                (c for c in calls if counts[callee_name(c)] == 1 and _inlinable(functions.get(callee_name(c)), c)),
                None,
            )
            if call is None:
                break
            function = functions.pop(callee_name(call))
            _inline(call, function)
            Rewriter.erase_op(function)
        # Erasing a function drops the calls in it, which may leave more functions unused.
        while True:
            used = {callee_name(c) for c in _calls(op)}
            unused = [name for name, f in functions.items() if _is_private(f) and name not in used]
            if not unused:
                break
            for name in unused:
                Rewriter.erase_op(functions.pop(name))
