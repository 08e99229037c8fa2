"""Where each array of a scheduled module lives: allocations of raw bytes and
the slice of one that each instruction's value (each array leaf of it) is,
after XLA's ``xla/service/buffer_assignment.cc``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlapy.buffers import sharing
from xlapy.buffers.liveness import Liveness, ShapeIndex, analyze_liveness
from xlapy.buffers.schedule import ModuleSchedule
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.memory import buffer_bytes


@dataclass(frozen=True)
class BufferAllocation:
    """A block of bytes the runtime allocates once per run (constants: once per executable)."""

    index: int
    size: int                               # bytes
    kind: str                               # "parameter" | "constant" | "temp" | "output"
    parameter_number: int | None = None     # the entry parameter it holds
    parameter_index: tuple[int, ...] = ()   # the shape index inside a tuple parameter
    constant: HloInstruction | None = None  # the constant whose literal it holds
    is_output: bool = False                 # holds (part of) the entry's result


@dataclass(frozen=True)
class BufferSlice:
    """``size`` bytes at byte ``offset`` of allocation number ``allocation``."""

    allocation: int
    offset: int
    size: int


class BufferAssignment:
    """The allocations of a module and the slice of each array value."""

    def __init__(self, module: HloModule, liveness: Liveness) -> None:
        self.module = module
        self.liveness = liveness
        self.allocations: list[BufferAllocation] = []
        # LogicalBuffer.id -> its slice.
        self.buffer_slices: dict[int, BufferSlice] = {}

    def slice(self, instr: HloInstruction, index: tuple[int, ...] = ()) -> BufferSlice:
        """The slice holding the array at shape ``index`` of ``instr``'s value."""
        return self.buffer_slices[self.liveness.buffer(instr, tuple(index)).id]

    def leaf_slices(self, instr: HloInstruction) -> list[tuple[tuple[int, ...], BufferSlice]]:
        """(shape index, slice) of every array in ``instr``'s value, in shape order."""
        leaves = self.liveness.buffers_of(instr)
        return [(index, self.buffer_slices[leaves[index].id]) for index in sorted(leaves)]

    @property
    def total_bytes(self) -> int:
        return sum(allocation.size for allocation in self.allocations)

    def _add(self, size: int, kind: str, **facts: object) -> int:
        self.allocations.append(BufferAllocation(len(self.allocations), size, kind, **facts))
        return len(self.allocations) - 1

    def __str__(self) -> str:
        lines = [f"buffer assignment of {self.module.name}: {self.total_bytes:,} bytes"]
        for allocation in self.allocations:
            what = allocation.kind + (" (output)" if allocation.is_output and allocation.kind != "output" else "")
            lines.append(f"  allocation {allocation.index}: {allocation.size:,} bytes, {what}")
            for buffer in self.liveness.buffers:
                piece = self.buffer_slices[buffer.id]
                if piece.allocation == allocation.index:
                    index = f"{{{','.join(map(str, buffer.index))}}}" if buffer.index else ""
                    lines.append(f"    {buffer.instruction.name}{index}: [{piece.offset}, {piece.offset + piece.size})")
        return "\n".join(lines)


# Offsets inside an allocation are multiples of this (smaller buffers: of SMALL_ALIGNMENT), as XLA:CPU
# aligns its buffers.
ALIGNMENT = 64
SMALL_ALIGNMENT = 16


def assign_buffers(module: HloModule, schedule: ModuleSchedule, *, in_place: bool = True) -> BufferAssignment:
    """Allocations for every array value of ``module`` run in ``schedule``'s order.

    Entry parameters get one allocation per array leaf, constants one each;
    the other buffers are first grouped where an instruction may write its
    result over a buffer that dies there (``sharing``), then the groups the
    entry returns get one allocation each and every other group a slice of a
    single "temp" allocation, placed by a heap simulation (greedy by size,
    best fit, as XLA's ``GlobalDecreasingSizeBestFitHeap``) so that groups
    never live at the same time share bytes. ``in_place=False`` shares no
    buffer between an instruction's operand and its result (control flow's
    loop state included): every value gets bytes of its own."""
    if schedule.module is not module:
        raise VerifyError(f"the schedule is of module {schedule.module.name}, not of {module.name}")
    liveness = analyze_liveness(schedule, buffer_bytes)
    assignment = BufferAssignment(module, liveness)
    groups = sharing.colocated_groups(module, liveness, in_place=in_place)
    temps: list[sharing.BufferGroup] = []
    for group in groups:
        anchor = group.anchor
        if anchor is not None and anchor.is_entry_parameter:
            allocation = assignment._add(group.size, "parameter", parameter_number=anchor.instruction.parameter_number,
                                         parameter_index=anchor.index, is_output=group.is_output)
        elif anchor is not None and anchor.is_constant:
            allocation = assignment._add(group.size, "constant", constant=anchor.instruction,
                                         is_output=group.is_output)
        elif group.is_output:
            allocation = assignment._add(group.size, "output", is_output=True)
        else:
            temps.append(group)
            continue
        for buffer in group.members:
            assignment.buffer_slices[buffer.id] = BufferSlice(allocation, 0, buffer.size)
    if temps:
        offsets, heap_size = best_fit_heap(temps)
        allocation = assignment._add(heap_size, "temp")
        for group, offset in zip(temps, offsets, strict=True):
            for buffer in group.members:
                assignment.buffer_slices[buffer.id] = BufferSlice(allocation, offset, buffer.size)
    return assignment


def best_fit_heap(groups: list[sharing.BufferGroup]) -> tuple[list[int], int]:
    """An offset for each group, so that groups live at the same time do not
    overlap, and the heap's size: groups placed largest first, each in the
    smallest gap between the groups already placed that live with it where it
    fits, else above them all."""
    count = len(groups)
    starts = np.array([g.start for g in groups], dtype=np.int64)
    ends = np.array([g.end for g in groups], dtype=np.int64)
    alignments = [alignment_of(g.size) for g in groups]
    sizes = np.array([_round_up(g.size, a) for g, a in zip(groups, alignments)], dtype=np.int64)
    offsets = np.zeros(count, dtype=np.int64)
    placed = np.zeros(count, dtype=bool)
    order = sorted(range(count), key=lambda i: (-groups[i].size, groups[i].start, i))
    for i in order:
        placed[i] = True
        if sizes[i] == 0:
            continue
        live = placed & (starts <= ends[i]) & (starts[i] <= ends) & (sizes > 0)
        live[i] = False
        neighbours = np.flatnonzero(live)
        best, best_gap, cursor = -1, None, 0
        for j in neighbours[np.argsort(offsets[neighbours], kind="stable")]:
            candidate = _round_up(cursor, alignments[i])
            gap = int(offsets[j]) - candidate
            if gap >= sizes[i] and (best_gap is None or gap < best_gap):
                best, best_gap = candidate, gap
            cursor = max(cursor, int(offsets[j] + sizes[j]))
        offsets[i] = best if best >= 0 else _round_up(cursor, alignments[i])
    heap = int(max((offsets[i] + sizes[i] for i in range(count)), default=0))
    return [int(o) for o in offsets], heap


def alignment_of(size: int) -> int:
    """Where a buffer of ``size`` bytes may start in the heap: 64-byte lines
    (as XLA:CPU aligns buffers) for all but small buffers, which only need
    their elements aligned (16 bytes fits every element type)."""
    return ALIGNMENT if size >= ALIGNMENT else SMALL_ALIGNMENT


def _round_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


__all__ = ["ALIGNMENT", "BufferAllocation", "BufferAssignment", "BufferSlice", "ShapeIndex", "assign_buffers"]
