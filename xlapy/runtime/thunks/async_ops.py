"""The asynchronous pairs XLA's schedulers make (a start, async-updates, a done) run as XLA:CPU runs them:
synchronously, all the work done by the start.

- all-reduce-start, all-gather-start, collective-permute-start: the collective on one device
  (``collectives.py``), written into the start's result (all-reduce-start: its whole value; the others: element
  {1});
- copy-start: the copy of its operand into element {0};
- async-start: the computation it wraps, run as a call (its result, the root's value, is element {1}).

The buffer assignment gives these values the places XLA's dataflow analysis gives them
(``xla/service/hlo_dataflow_analysis.cc``; see ``xlapy/buffers/liveness.py``): a start's element holding its
operands is the operands' own buffers, and a done's (or async-update's) value is its start's result element, so
the updates and dones have nothing left to do. The contexts (the ``u32[]``/``s32[]`` elements) are never read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlapy.buffers.liveness import ASYNC_RESULT_ELEMENT, OPERANDS_ELEMENT, ShapeIndex, array_leaves
from xlapy.errors import UnimplementedError
from xlapy.runtime.thunks.base import Thunk
from xlapy.runtime.thunks.collectives import check_one_device, operand_copies, permute_thunks
from xlapy.runtime.thunks.control_flow import CallThunk
from xlapy.runtime.thunks.copy import leaf_copies, same_physical_layout
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter


def _element(shape: Shape, index: ShapeIndex) -> Shape:
    for i in index:
        shape = shape.tuple_shapes[i]
    return shape


def _element_leaves(instr: HloInstruction, emitter: ThunkEmitter, index: ShapeIndex) -> list[tuple[Shape, BufferSlice]]:
    """(shape, slice) of every array leaf of ``instr``'s value inside its element at ``index``, depth first."""
    return [(shape, emitter.slice(instr, at)) for at, shape in array_leaves(_element(instr.shape, index), index)]


def _held_operands(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    """Copies of the operands into the start's element that holds them: none where that element is the operands'
    own buffers (always, unless their layouts differ in the declared shapes)."""
    return operand_copies(instr, emitter, _element_leaves(instr, emitter, OPERANDS_ELEMENT[instr.opcode]))


@thunk_rule("all-reduce-start")
def _all_reduce_start(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    check_one_device(instr, emitter)
    return operand_copies(instr, emitter)


@thunk_rule("all-gather-start")
def _all_gather_start(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    check_one_device(instr, emitter)
    return [*_held_operands(instr, emitter), *operand_copies(instr, emitter, _element_leaves(instr, emitter, (1,)))]


@thunk_rule("collective-permute-start")
def _collective_permute_start(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    permute = permute_thunks(instr, emitter, _element(instr.shape, (1,)), emitter.slice(instr, (1,)))
    return [*_held_operands(instr, emitter), *permute]


@thunk_rule("copy-start")
def _copy_start(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    return [*_held_operands(instr, emitter), *operand_copies(instr, emitter, _element_leaves(instr, emitter, (0,)))]


@thunk_rule("async-start")
def _async_start(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    (wrapped,) = instr.called_computations
    held = _held_operands(instr, emitter)
    sequence = emitter.emit_computation(wrapped)
    root, result = emitter.leaves(wrapped.root), _element_leaves(instr, emitter, (1,))
    if not all(same_physical_layout(a, b) for (a, _), (b, _) in zip(root, result)):
        raise UnimplementedError(f"async-start ({instr.name}): the root of {wrapped.name} is laid out otherwise than "
                                 "its result element; the CPU backend copies bytes")
    return [*held, CallThunk(instr.name, sequence, leaf_copies(f"{instr.name} (result)", root, result))]


@thunk_rule(*ASYNC_RESULT_ELEMENT)
def _done(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    return []  # its value is its start's result element, computed by the start
