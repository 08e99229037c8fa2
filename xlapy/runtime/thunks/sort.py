"""``sort`` as a library call: numpy's stable sort on keys made from the comparator, where XLA:CPU's
``xla/backends/cpu/runtime/sort_thunk.cc`` runs ``std::sort`` with the compiled comparator.

The comparator must be recognisably a lexicographic comparison of keys (``xla.interpreter.sorting``'s
``lexicographic_keys``: one key is ``compare(f(lhs_i), f(rhs_i))`` with direction LT or GT, ties going to
the next key through ``or(less, and(equal, rest))`` or ``select(equal, rest, less)``). Each key function
``f`` is an elementwise expression of one operand (what JAX emits: the identity, or NaN and -0
canonicalisation, or after XLA's comparison expander the total-order integer of the bits) and is turned into
numpy operations on whole arrays when the thunk is built, so a run evaluates no HLO. The values ``f`` gives are
then ordered as the compare orders them (total order as integers, floats as numbers, unsigned or signed
integers) and every row is sorted stably, which is also a valid result of an unstable sort. Any other
comparator is refused at compile time. Floats compared with the partial order (compare type FLOAT) and NaN
among them have no defined order in XLA either; here NaN goes last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.interpreter.elementwise import total_order_key
from xlapy.interpreter.sorting import lexicographic_keys
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, dtype_of
from xlapy.runtime.thunks.library import check_layout, read, result_shapes, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape, TypeKind

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloComputation, HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter

ArrayFunction = Callable[[np.ndarray], np.ndarray]

_COMPARISONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
                "GE": np.greater_equal}
_UNARY = {"negate": np.negative, "abs": np.abs, "not": np.invert}
_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "and": np.bitwise_and,
           "or": np.bitwise_or, "xor": np.bitwise_xor, "maximum": np.maximum, "minimum": np.minimum}
_INTEGER_KINDS = (TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.PRED)
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _compared(a: np.ndarray, b: np.ndarray, compare_type: str | None) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as numpy compares them in the order ``compare_type`` means."""
    kind = a.dtype.kind
    if compare_type == "TOTALORDER":
        return total_order_key(a), total_order_key(b)
    if compare_type == "UNSIGNED" and kind == "i":
        return a.view(_UNSIGNED[a.dtype.itemsize]), b.view(_UNSIGNED[b.dtype.itemsize])
    if compare_type == "SIGNED" and kind == "u":
        return a.view(_SIGNED[a.dtype.itemsize]), b.view(_SIGNED[b.dtype.itemsize])
    return a, b


def key_function(root: HloInstruction, parameter: int) -> ArrayFunction:
    """``root`` (an elementwise expression of comparator parameter ``parameter`` and scalar constants) as a
    function of whole numpy arrays; refuses (``UnimplementedError``) an op it has no numpy form for."""
    built: dict[int, ArrayFunction] = {}

    def build(instr: HloInstruction) -> ArrayFunction:
        if id(instr) not in built:
            built[id(instr)] = _build(instr, parameter, build)
        return built[id(instr)]

    return build(root)


def _build(instr: HloInstruction, parameter: int, build: Callable[[HloInstruction], ArrayFunction]) -> ArrayFunction:
    dtype = dtype_of(instr.shape)
    if instr.shape.dimensions or not instr.shape.is_array:
        raise UnimplementedError(f"sort comparator op {instr.name} is not a scalar")
    operands = [build(o) for o in instr.operands]
    opcode = instr.opcode
    if opcode == "parameter":
        if instr.parameter_number != parameter:
            raise UnimplementedError(f"sort comparator op {instr.name}: a key reads two operands")
        return lambda x: x
    if opcode == "constant":
        value = np.asarray(instr.literal, dtype)
        return lambda x: value
    if opcode == "compare":
        compare = _COMPARISONS[instr.attr("direction")]
        compare_type = instr.attr("type")
        lhs, rhs = operands

        def compared(x: np.ndarray) -> np.ndarray:
            a, b = np.broadcast_arrays(np.asarray(lhs(x)), np.asarray(rhs(x)))
            return compare(*_compared(np.ascontiguousarray(a), np.ascontiguousarray(b), compare_type))

        return compared
    if opcode == "select":
        predicate, on_true, on_false = operands
        return lambda x: np.where(predicate(x), on_true(x), on_false(x)).astype(dtype, copy=False)
    if opcode in _UNARY and not (opcode == "abs" and instr.operands[0].shape.type.is_complex):
        function = _UNARY[opcode]
        (operand,) = operands
        return lambda x: function(operand(x)).astype(dtype, copy=False)
    if opcode in _BINARY:
        function = _BINARY[opcode]
        lhs, rhs = operands
        return lambda x: function(lhs(x), rhs(x)).astype(dtype, copy=False)
    if opcode in ("bitcast", "bitcast-convert") and instr.operands[0].shape.type.byte_width == dtype.itemsize:
        (operand,) = operands
        return lambda x: np.ascontiguousarray(operand(x)).view(dtype)
    source = instr.operands[0].shape.type if instr.operands else None
    if opcode == "convert" and source is not None and not (source.is_floating_point and dtype.kind in "biu"):
        (operand,) = operands
        return lambda x: np.asarray(operand(x)).astype(dtype)
    raise UnimplementedError(f"sort comparator op {instr.name} ({opcode}) has no library form")


@dataclass(frozen=True)
class SortKey:
    """One key of a lexicographic comparator: which operand, the function of it that is compared, and how."""

    operand: int
    function: ArrayFunction
    descending: bool
    compare_type: str
    kind: TypeKind

    def order(self, values: np.ndarray) -> np.ndarray:
        """An array whose ascending order is the order the comparator puts ``values`` (the operand) in."""
        key = np.asarray(self.function(values))
        if self.kind is TypeKind.FLOAT and self.compare_type == "FLOAT":
            key = key.astype(np.float64)
            return -key if self.descending else key
        if self.kind is TypeKind.FLOAT:
            key = total_order_key(np.ascontiguousarray(key))
        elif self.compare_type == "UNSIGNED" and key.dtype.kind in "ib":
            key = key.astype(np.uint8) if key.dtype.kind == "b" else key.view(_UNSIGNED[key.dtype.itemsize])
        elif self.compare_type == "SIGNED" and key.dtype.kind == "u":
            key = key.view(_SIGNED[key.dtype.itemsize])
        return ~key if self.descending else key


def sort_keys(comparator: HloComputation, operand_count: int, where: str) -> list[SortKey]:
    """The keys of ``comparator`` (over ``operand_count`` operands), most significant first; refuses a
    comparator that is not a lexicographic comparison of elementwise keys."""
    keys = lexicographic_keys(comparator, operand_count)
    if keys is None:
        raise UnimplementedError(f"{where}: comparator {comparator.name} is not a lexicographic LT/GT comparison "
                                 "of the operands' elements, which is what the CPU sort thunk runs")
    result = []
    for operand, function, direction, compare_type in keys:
        element = function.shape.type
        if element.kind is TypeKind.FLOAT:
            compare_type = compare_type or "FLOAT"
            allowed = ("FLOAT", "TOTALORDER")
        else:
            compare_type = compare_type or ("SIGNED" if element.kind is TypeKind.SIGNED else "UNSIGNED")
            allowed = ("SIGNED", "UNSIGNED") if element.kind in _INTEGER_KINDS else ()
        if compare_type not in allowed:
            raise UnimplementedError(f"{where}: comparator {comparator.name} compares {element.name} keys as "
                                     f"{compare_type}")
        result.append(SortKey(operand, key_function(function, 2 * operand), direction == "GT", compare_type,
                              element.kind))
    return result


def sort_permutation(operands: list[np.ndarray], keys: list[SortKey]) -> np.ndarray:
    """The stable sorting permutation of every row (last axis) of the same-shaped ``operands``."""
    columns = [np.broadcast_to(key.order(operands[key.operand]), operands[0].shape) for key in keys]
    if len(columns) == 1:
        return np.argsort(columns[0], axis=-1, kind="stable")
    return np.lexsort(columns[::-1], axis=-1)


def sort_along(operands: list[np.ndarray], dimension: int, keys: list[SortKey]) -> list[np.ndarray]:
    """``operands`` sorted together along ``dimension``."""
    moved = [np.moveaxis(x, dimension, -1) for x in operands]
    if moved[0].shape[-1] <= 1 or moved[0].size == 0:
        return [np.array(x) for x in operands]
    permutation = sort_permutation(moved, keys)
    return [np.moveaxis(np.take_along_axis(x, permutation, -1), -1, dimension) for x in moved]


@dataclass
class SortThunk(Thunk):
    """One sort of several operands along one dimension over the slices of its operands and results."""

    name: str
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[BufferSlice, Shape]]
    dimension: int
    keys: list[SortKey]
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        values = [read(context, s, shape) for s, shape in self.operands]
        # Every result is computed before any is written: a result may share its operand's slice.
        for (s, shape), result in zip(self.results, sort_along(values, self.dimension, self.keys)):
            write(context, s, shape, result)


@thunk_rule("sort")
def _sort(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    shapes = result_shapes(instr)
    for shape in [*shapes, *(o.shape for o in instr.operands)]:
        check_layout(instr, shape)
    (dimension,) = instr.attr("dimensions", (0,))
    keys = sort_keys(instr.called_computations[0], len(instr.operands), f"sort {instr.name}")
    results = [(emitter.slice(instr, (i,) if instr.shape.is_tuple else ()), s) for i, s in enumerate(shapes)]
    return [SortThunk(instr.name, [(emitter.slice(o), o.shape) for o in instr.operands], results, int(dimension),
                      keys)]
