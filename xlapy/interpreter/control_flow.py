"""Ops that call computations: while, conditional, call, fusion, async wrappers."""

from __future__ import annotations

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo.stablehlo_forms import while_condition_and_body
from xlapy.interpreter.registry import rule
from xlapy.interpreter.sharding_ops import hlo_manual_call, run_hlo_manual_call


def _as_returned(value, shape):
    # A StableHLO region returning one value of an enclosing computation ends
    # in a one-element tuple of it: the region's result is that value.
    if isinstance(value, tuple) and len(value) == 1 and not shape.is_tuple:
        return value[0]
    return value


def _holds(value) -> bool:
    # A condition's pred[], possibly as a StableHLO region's one-element tuple.
    return bool(np.asarray(value[0] if isinstance(value, tuple) else value))


def _count_iteration(instr, ev, done: int) -> None:
    limit = ev.max_while_iterations
    if limit is not None and done >= limit:
        raise XlapyError(f"while {instr.name} did not finish within max_while_iterations={limit} iterations")


@rule("while")
def _while(instr, operands, ev):
    condition, body = while_condition_and_body(instr)
    done = 0
    if len(operands) == 1:
        # HLO's while: one (usually tuple) state, the regions' one parameter.
        state = operands[0]
        while _holds(ev.call(condition, state)):
            _count_iteration(instr, ev, done)
            state = _as_returned(ev.call(body, state), instr.shape)
            done += 1
        return state
    # StableHLO's while: one operand and one region parameter per loop value.
    state = tuple(operands)
    while _holds(ev.call(condition, *state)):
        _count_iteration(instr, ev, done)
        state = tuple(ev.call(body, *state))
        done += 1
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
    # HLO passes each branch its own operand; StableHLO's branches take none
    # (they use the enclosing computation's values directly).
    args = branch_operands[chosen:chosen + 1] if len(branch_operands) == len(branches) else []
    return _as_returned(ev.call(branches[chosen], *args), instr.shape)


@rule("call", "fusion")
def _call(instr, operands, ev):
    if instr.opcode == "call" and hlo_manual_call(instr) is not None:
        return run_hlo_manual_call(instr, operands, ev)
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
