"""Ops that call computations: while, conditional (and StableHLO's while, case
and if), call, fusion, async wrappers."""

from __future__ import annotations

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo.ir import while_condition_and_body
from xlapy.hlo.mlir_structure import op_value, region_result_values
from xlapy.interpreter.registry import rule
from xlapy.interpreter.sharding_ops import hlo_manual_call, run_hlo_manual_call


def _holds(value) -> bool:
    return bool(np.asarray(value))


def _count_iteration(instr, ev, done: int) -> None:
    limit = ev.max_while_iterations
    if limit is not None and done >= limit:
        raise XlapyError(f"while {instr.name} did not finish within max_while_iterations={limit} iterations")


@rule("while")
def _while(instr, operands, ev):
    # One state, the condition's and body's one parameter.
    condition, body = while_condition_and_body(instr)
    (state,) = operands
    done = 0
    while _holds(ev.call(condition, state)):
        _count_iteration(instr, ev, done)
        state = ev.call(body, state)
        done += 1
    return state


@rule("stablehlo.while")
def _stablehlo_while(instr, operands, ev):
    # One operand, condition parameter and body parameter per loop value.
    condition, body = instr.called_computations
    state = tuple(operands)
    done = 0
    while _holds(region_result_values(condition, ev.call(condition, *state))[0]):
        _count_iteration(instr, ev, done)
        state = region_result_values(body, ev.call(body, *state))
        done += 1
    return op_value(state)


@rule("conditional")
def _conditional(instr, operands, ev):
    # Each branch takes its own operand (after the branch index).
    chosen = _branch(np.asarray(operands[0]), len(instr.called_computations))
    return ev.call(instr.called_computations[chosen], operands[1 + chosen])


@rule("stablehlo.case", "stablehlo.if")
def _stablehlo_case(instr, operands, ev):
    # The branches take no parameters: they use their enclosing computations' values.
    chosen = _branch(np.asarray(operands[0]), len(instr.called_computations))
    branch = instr.called_computations[chosen]
    return op_value(region_result_values(branch, ev.call(branch)))


def _branch(selector: np.ndarray, count: int) -> int:
    if selector.dtype == np.bool_:
        return 0 if selector else 1  # the true branch, then the false one
    # An index out of range runs the last branch.
    index = int(selector)
    return index if 0 <= index < count else count - 1


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
