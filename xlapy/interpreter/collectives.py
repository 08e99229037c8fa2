"""Collectives, as one participant sees them when it is alone in its group."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.registry import rule


def _alone(instr, operands, ev):
    # all-reduce over one contribution is that contribution; all-gather,
    # reduce-scatter, all-to-all and collective-broadcast over one
    # participant return their operands.
    return tuple(operands) if len(operands) > 1 else operands[0]


def _permute(instr, operands, ev):
    pairs = instr.attr("source_target_pairs", ())
    # A participant no one sends to receives zeros.
    receives = any(target == ev.replica_id for _, target in pairs)
    return operands[0] if receives else np.zeros_like(operands[0])


rule("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast", "all-reduce-start")(_alone)
rule("collective-permute")(_permute)


@rule("all-gather-start", "collective-permute-start")
def _start_with_buffers(instr, operands, ev) -> tuple:
    # The start's value holds (operands, results, contexts...).
    base = _permute if instr.opcode == "collective-permute-start" else _alone
    result = base(instr, operands, ev)
    contexts = tuple(np.zeros(s.dimensions, np.uint32) for s in instr.shape.tuple_shapes[2:])
    sent = tuple(operands) if len(operands) > 1 else operands[0]
    return (sent, result, *contexts)


@rule("all-reduce-done")
def _all_reduce_done(instr, operands, ev):
    return operands[0]


@rule("all-gather-done", "collective-permute-done")
def _done_with_buffers(instr, operands, ev):
    return operands[0][1]


@rule("partition-id")
def _partition_id(instr, operands, ev) -> np.ndarray:
    return np.uint32(ev.partition_id)


@rule("replica-id")
def _replica_id(instr, operands, ev) -> np.ndarray:
    return np.uint32(ev.replica_id)
