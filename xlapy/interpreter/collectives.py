"""Collectives. A device alone in its group computes them alone; devices
simulated together (a manual computation's body) exchange their values
(see ``xlapy.interpreter.spmd``); any other group is refused, naming the op and
its groups, rather than computed as if the device were alone."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.registry import rule
from xlapy.interpreter.spmd import participants, permute_peers, unsupported


def _packed(results: list):
    return tuple(results) if len(results) > 1 else results[0]


def _exchanged(instr, operands, ev):
    """(this device's index in its group, every participant's operands)."""
    group = participants(instr, ev.layout, ev.device)
    values = ev.exchange(instr, group, tuple(operands))
    return group.index(ev.device), values


def _fold(instr, arrays: list, ev):
    # The group's contributions combined in group order with to_apply, applied to whole arrays.
    total = arrays[0]
    for other in arrays[1:]:
        total = ev.call(instr.called_computations[0], total, other)
    return total


def _all_reduce(instr, operands, ev):
    _, values = _exchanged(instr, operands, ev)
    return _packed([_fold(instr, [v[i] for v in values], ev) for i in range(len(operands))])


def _all_gather(instr, operands, ev):
    _, values = _exchanged(instr, operands, ev)
    axis = instr.attr("dimensions")[0]
    return _packed([np.concatenate([v[i] for v in values], axis=axis) for i in range(len(operands))])


def _reduce_scatter(instr, operands, ev):
    me, values = _exchanged(instr, operands, ev)
    axis = instr.attr("dimensions")[0]
    results = []
    for i in range(len(operands)):
        total = np.asarray(_fold(instr, [v[i] for v in values], ev))
        results.append(np.split(total, len(values), axis=axis)[me])
    return _packed(results)


def _all_to_all(instr, operands, ev):
    me, values = _exchanged(instr, operands, ev)
    count = len(values)
    if not instr.attributes.get("dimensions"):
        # The tuple form: participant i's j-th operand goes to participant j's i-th result (a tuple even of one).
        return tuple(values[i][me] for i in range(count))
    dimension = instr.attr("dimensions")[0]
    return _split_and_concatenate([v[0] for v in values], me, dimension, dimension)


def _stablehlo_all_to_all(instr, operands, ev):
    me, values = _exchanged(instr, operands, ev)
    split, concat = instr.attr("split_dimension"), instr.attr("concat_dimension")
    return _packed([_split_and_concatenate([v[i] for v in values], me, split, concat)
                    for i in range(len(operands))])


def _split_and_concatenate(sent: list, me: int, split: int, concat: int):
    # Each participant's array is split in as many blocks as there are
    # participants; this one receives block `me` of each, in order.
    blocks = [np.split(np.asarray(array), len(sent), axis=split)[me] for array in sent]
    return np.concatenate(blocks, axis=concat)


def _collective_broadcast(instr, operands, ev):
    # The group's first device sends its value to the others.
    _, values = _exchanged(instr, operands, ev)
    return _packed(list(values[0]))


def _permute(instr, operands, ev):
    peers, source = permute_peers(instr, ev.layout, ev.device)
    if len(operands) != 1:
        raise unsupported(instr, ev.layout, peers, "the interpreter permutes one operand only")
    if ev.meeting is None:
        if source is None:
            return np.zeros_like(operands[0])  # a device no one sends to receives zeros
        if source == ev.device:
            return operands[0]
        raise unsupported(instr, ev.layout, [source, ev.device], "the interpreter evaluates one device")
    group = [d for d in peers if d in ev.simulated]
    values = ev.exchange(instr, group, operands[0])
    if source is None:
        return np.zeros_like(operands[0])
    if source not in group:
        raise unsupported(instr, ev.layout, [source, ev.device], f"device {source} is not among those simulated")
    return values[group.index(source)]


rule("all-reduce", "all-reduce-start")(_all_reduce)
rule("all-gather")(_all_gather)
rule("reduce-scatter")(_reduce_scatter)
rule("all-to-all")(_all_to_all)
rule("stablehlo.all_to_all")(_stablehlo_all_to_all)
rule("collective-broadcast")(_collective_broadcast)
rule("collective-permute")(_permute)


@rule("all-gather-start", "collective-permute-start")
def _start_with_buffers(instr, operands, ev) -> tuple:
    # The start's value holds (operands, results, contexts...).
    base = _permute if instr.opcode == "collective-permute-start" else _all_gather
    result = base(instr, operands, ev)
    contexts = tuple(np.zeros(s.dimensions, np.uint32) for s in instr.shape.tuple_shapes[2:])
    return (_packed(list(operands)), result, *contexts)


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
