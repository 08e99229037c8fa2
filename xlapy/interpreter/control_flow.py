"""Ops that call computations: while, conditional, call, fusion, async wrappers."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.registry import rule


@rule("while")
def _while(instr, operands, ev):
    body, condition = instr.called_computations
    state = operands[0]
    while bool(ev.call(condition, state)):
        state = ev.call(body, state)
    return state


@rule("conditional")
def _conditional(instr, operands, ev):
    selector, branch_operands = np.asarray(operands[0]), operands[1:]
    branches = instr.called_computations
    if selector.dtype == np.bool_:
        chosen = 0 if selector else 1  # true_computation, then false_computation
    else:
        # An index out of range runs the last branch.
        index = int(selector)
        chosen = index if 0 <= index < len(branches) else len(branches) - 1
    return ev.call(branches[chosen], branch_operands[chosen])


@rule("call", "fusion")
def _call(instr, operands, ev):
    return ev.call(instr.called_computations[0], *operands)


@rule("async-start")
def _async_start(instr, operands, ev) -> tuple:
    # ((operands...), result, context...): the wrapped computation runs at once.
    result = ev.call(instr.called_computations[0], *operands)
    contexts = tuple(np.zeros(s.dimensions, np.uint32) for s in instr.shape.tuple_shapes[2:])
    return (tuple(operands), result, *contexts)


@rule("async-update")
def _async_update(instr, operands, ev):
    return operands[0]


@rule("async-done")
def _async_done(instr, operands, ev):
    return operands[0][1]
