"""Collectives of a program that runs on one device (one replica, one partition), as XLA:CPU runs them there:
every group holds that device alone, so each collective is a copy of its operands into its result —

- all-reduce, reduce-scatter: the reduction of one contribution is that contribution (the reducer is never
  applied); reduce-scatter's one block is the whole array;
- all-gather, all-to-all, collective-broadcast: the device's own data, gathered, exchanged or broadcast among
  one participant;
- collective-permute: the operand when a ``source_target_pairs`` pair sends device 0 to itself, else zeros
  (a device no pair sends to receives zeros);
- replica-id, partition-id: 0.

A module on several devices is refused when its thunks are emitted (``UnimplementedError`` naming each
collective): the CPU backend runs one device. The asynchronous start/done forms run as these, at their start
(``async_ops.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlapy.errors import UnimplementedError
from xlapy.interpreter.spmd import DeviceLayout
from xlapy.runtime.thunks.base import ExecutionContext, Thunk
from xlapy.runtime.thunks.copy import leaf_copies, same_physical_layout
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter

# The collectives whose one-device result is their operands, leaf for leaf.
_COPYING = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast")


@dataclass(eq=False)
class FillThunk(Thunk):
    """Writes ``value`` into every element of the array at ``out``."""

    name: str
    out: BufferSlice
    shape: Shape
    value: int = 0
    kind: str = field(default="copy", init=False)

    def run(self, context: ExecutionContext) -> None:
        context.array(self.out, self.shape)[...] = self.value


def check_one_device(instr: HloInstruction, emitter: ThunkEmitter) -> None:
    layout = DeviceLayout.of(emitter.module)
    devices = layout.replica_count * layout.num_partitions
    if devices != 1:
        raise UnimplementedError(f"{instr.opcode} ({instr.name}) on {devices} devices ({layout.describe()}): the "
                                 "CPU backend runs collectives of one device only")


def operand_copies(instr: HloInstruction, emitter: ThunkEmitter,
                   destinations: list[tuple[Shape, BufferSlice]] | None = None) -> list[Thunk]:
    """The copies of every array leaf of the operands, in order, into ``destinations`` (default: the result's
    leaves)."""
    sources = [leaf for operand in instr.operands for leaf in emitter.leaves(operand)]
    destinations = emitter.leaves(instr) if destinations is None else destinations
    for (source_shape, _), (shape, _) in zip(sources, destinations):
        if source_shape.dimensions != shape.dimensions or not same_physical_layout(source_shape, shape):
            raise UnimplementedError(f"{instr.opcode} ({instr.name}) from {source_shape} to {shape}: on one device "
                                     "the CPU backend copies the operand's bytes, which needs one layout")
    copies = leaf_copies(instr.name, sources, destinations)
    return [copies] if copies else []


@thunk_rule(*_COPYING)
def _copying_collective(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    check_one_device(instr, emitter)
    return operand_copies(instr, emitter)


@thunk_rule("collective-permute")
def _collective_permute(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    return permute_thunks(instr, emitter, instr.shape, emitter.slice(instr))


def permute_thunks(instr: HloInstruction, emitter: ThunkEmitter, shape: Shape, out: BufferSlice) -> list[Thunk]:
    """A collective-permute's thunks on one device, writing its array of ``shape`` at ``out``."""
    check_one_device(instr, emitter)
    if len(instr.operands) != 1 or shape.is_tuple:
        raise UnimplementedError(f"{instr.opcode} ({instr.name}) of {len(instr.operands)} operands: the CPU "
                                 "backend permutes one array")
    pairs = instr.attributes.get("source_target_pairs", ())
    if any(int(str(target)) == 0 for _, target in pairs):
        return operand_copies(instr, emitter, [(shape, out)])
    return [FillThunk(instr.name, out, shape, 0)]


@thunk_rule("replica-id", "partition-id")
def _device_id(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    check_one_device(instr, emitter)
    return [FillThunk(instr.name, emitter.slice(instr), instr.shape, 0)]
