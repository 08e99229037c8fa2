"""``topk`` and XLA:CPU's ``TopK`` custom call as library calls (XLA:CPU's
``xla/backends/cpu/runtime/topk_thunk.cc``): the first k elements of every row (the last dimension) and their
indices.

``topk`` orders floats in total order (NaN beyond infinity), largest first unless ``largest=false``; the
``TopK`` custom call orders by its comparator (parameters: two values, or two values and two indices), which
must be one the sort thunk recognises. Both keep the lower index first among equal elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.interpreter.elementwise import total_order_key
from xlapy.runtime.thunks.base import ExecutionContext, Thunk
from xlapy.runtime.thunks.library import check_layout, read, result_shapes, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.runtime.thunks.sort import SortKey, sort_keys, sort_permutation
from xlapy.shapes import Shape, TypeKind

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter


def top_k(values: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (or smallest) elements of every row of ``values`` and their s32 indices."""
    if np.dtype(values.dtype).kind in "biu":
        key = values.astype(np.int64) if values.dtype.kind == "b" else values
    else:
        key = total_order_key(np.ascontiguousarray(values))
    key = ~key if largest else key
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(values, order, -1), order.astype(np.int32)


def top_k_by(values: np.ndarray, k: int, keys: list[SortKey]) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` elements of every row of ``values`` in the order of a comparator's ``keys`` (over the
    values and their indices) and their s32 indices."""
    positions = np.broadcast_to(np.arange(values.shape[-1], dtype=np.int32), values.shape)
    order = sort_permutation([values, positions], keys)[..., :k]
    return np.take_along_axis(values, order, -1), order.astype(np.int32)


@dataclass
class TopKThunk(Thunk):
    """One top-k over the slices of its operand and its two results."""

    name: str
    operand: BufferSlice
    operand_shape: Shape
    results: list[tuple[BufferSlice, Shape]]
    k: int
    largest: bool
    keys: list[SortKey] | None  # the comparator's keys (custom call), or None for total order
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        values = read(context, self.operand, self.operand_shape)
        found = top_k(values, self.k, self.largest) if self.keys is None else top_k_by(values, self.k, self.keys)
        for (s, shape), result in zip(self.results, found):
            write(context, s, shape, result)


def _check(instr: HloInstruction, k: int) -> None:
    (operand,) = instr.operands
    shapes = result_shapes(instr)
    expected = (*operand.shape.dimensions[:-1], k)
    if (not operand.shape.dimensions or len(shapes) != 2 or shapes[1].element_type != "s32"
            or any(tuple(s.dimensions) != expected for s in shapes) or not 0 <= k <= operand.shape.dimensions[-1]):
        raise UnimplementedError(f"{instr.opcode} {instr.name}: results {instr.shape} are not the top {k} of "
                                 f"{operand.shape}")
    if operand.shape.type.kind not in (TypeKind.FLOAT, TypeKind.SIGNED, TypeKind.UNSIGNED):
        raise UnimplementedError(f"{instr.opcode} {instr.name}: the CPU top-k thunk does not order {operand.shape}")
    for shape in (operand.shape, *shapes):
        check_layout(instr, shape)


def _thunk(instr: HloInstruction, emitter: ThunkEmitter, k: int, largest: bool,
           keys: list[SortKey] | None) -> list[Thunk]:
    (operand,) = instr.operands
    results = [(emitter.slice(instr, (i,)), s) for i, s in enumerate(result_shapes(instr))]
    return [TopKThunk(instr.name, emitter.slice(operand), operand.shape, results, k, largest, keys)]


@thunk_rule("topk")
def _topk(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    k = int(instr.attr("k", -1))
    largest = instr.attr("largest", True)
    if not isinstance(largest, bool):  # kept as its text
        largest = str(largest).strip() != "false"
    _check(instr, k)
    return _thunk(instr, emitter, k, largest, None)


def top_k_custom_call_thunk(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    """The thunk of XLA:CPU's ``TopK`` custom call (its comparator in ``called_computations``)."""
    shapes = result_shapes(instr)
    if len(instr.operands) != 1 or len(instr.called_computations) != 1 or len(shapes) != 2:
        raise UnimplementedError(f"TopK custom-call {instr.name} needs one operand, a comparator and two results")
    k = shapes[0].dimensions[-1] if shapes[0].dimensions else -1
    _check(instr, k)
    comparator = instr.called_computations[0]
    if len(comparator.parameters) not in (2, 4):
        raise UnimplementedError(f"TopK custom-call {instr.name}: its comparator takes {len(comparator.parameters)} "
                                 "parameters, not two values or two values and two indices")
    keys = sort_keys(comparator, len(comparator.parameters) // 2, f"TopK custom-call {instr.name}")
    return _thunk(instr, emitter, k, True, keys)
