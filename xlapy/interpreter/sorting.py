"""Rules of ``sort`` and ``topk``.

A sort whose comparator is recognisably a lexicographic comparison of keys
(each key the same elementwise function of an operand on both sides, compared
LT or GT, with EQ ties going to the next key) is done with numpy's stable
lexsort on those keys. Any other comparator is evaluated: a stable bottom-up
merge sort along the sorted dimension, one comparator call per merge step for
all rows and all merges at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo import HloComputation, HloInstruction
from xlapy.interpreter.custom_call import CUSTOM_CALL_TARGETS
from xlapy.interpreter.elementwise import total_order_key
from xlapy.interpreter.numerics import widen
from xlapy.interpreter.registry import Value, rule
from xlapy.shapes import TypeKind, element_type_of_dtype

if TYPE_CHECKING:
    from xlapy.interpreter.evaluator import Evaluator

# Attributes that annotate an instruction without changing what it computes.
_ANNOTATIONS = frozenset({"metadata", "frontend_attributes", "backend_config", "sharding", "statistics"})

# The compare type each kind of element type has when none is written.
_DEFAULT_COMPARE_TYPE = {TypeKind.FLOAT: "FLOAT", TypeKind.SIGNED: "SIGNED", TypeKind.UNSIGNED: "UNSIGNED",
                         TypeKind.PRED: "UNSIGNED", TypeKind.COMPLEX: None}

# A key of the comparator: (operand number, the function of it that is
# compared, direction LT or GT, compare type or None).
_Key = tuple[int, HloInstruction, str, Any]


def _mirrors(a: HloInstruction, b: HloInstruction, pa: int, pb: int) -> bool:
    """Whether ``a`` computes from parameter ``pa`` exactly what ``b`` computes
    from parameter ``pb`` (and from nothing else but constants)."""
    if a.opcode == "parameter" or b.opcode == "parameter":
        return a.opcode == b.opcode and a.parameter_number == pa and b.parameter_number == pb
    if a.opcode != b.opcode or a.shape != b.shape or _semantic(a) != _semantic(b):
        return False
    if len(a.operands) != len(b.operands) or len(a.called_computations) != len(b.called_computations):
        return False
    if any(x is not y for x, y in zip(a.called_computations, b.called_computations)):
        return False
    if a.opcode in ("rng", "stablehlo.rng", "rng-bit-generator", "custom-call", "infeed", "recv"):
        return False
    if a.opcode == "constant":
        la, lb = np.asarray(a.literal), np.asarray(b.literal)
        return la.shape == lb.shape and la.dtype == lb.dtype and la.tobytes() == lb.tobytes()
    return all(_mirrors(x, y, pa, pb) for x, y in zip(a.operands, b.operands))


def _semantic(instr: HloInstruction) -> dict[str, Any]:
    return {k: v for k, v in instr.attributes.items() if k not in _ANNOTATIONS}


def _compared_key(instr: HloInstruction, operand_count: int) -> tuple[_Key, HloInstruction] | None:
    """``instr`` as ``compare(f(lhs_i), f(rhs_i))``: the key and the rhs side."""
    if instr.opcode != "compare" or instr.attributes.get("direction") not in ("LT", "GT", "EQ"):
        return None
    a, b = instr.operands
    direction = instr.attributes["direction"]
    for i in range(operand_count):
        if _mirrors(a, b, 2 * i, 2 * i + 1):
            return (i, a, direction, instr.attributes.get("type")), b
        if _mirrors(a, b, 2 * i + 1, 2 * i):  # compare(rhs, lhs): the direction turns round
            flipped = {"LT": "GT", "GT": "LT", "EQ": "EQ"}[direction]
            return (i, b, flipped, instr.attributes.get("type")), a
    return None


def _same_key(less: tuple[_Key, HloInstruction], equal: tuple[_Key, HloInstruction], count: int) -> bool:
    """Whether ``equal`` is the EQ test of the same values ``less`` orders."""
    (i, f, _, kind), g = less
    (j, f2, direction, kind2), g2 = equal
    return (direction == "EQ" and i == j and kind == kind2
            and _mirrors(f, f2, 2 * i, 2 * i) and _mirrors(g, g2, 2 * i + 1, 2 * i + 1))


def lexicographic_keys(computation: HloComputation, operand_count: int) -> list[_Key] | None:
    """The keys of a comparator that orders lexicographically, most significant
    first, or None when it is not recognisably one."""
    return _keys(computation.root, operand_count)


def _keys(instr: HloInstruction, count: int) -> list[_Key] | None:
    compared = _compared_key(instr, count)
    if compared is not None:
        return [compared[0]] if compared[0][2] != "EQ" else None
    # or(less, and(equal, rest)), in either operand order.
    if instr.opcode == "or":
        for less_instr, tie in (instr.operands, instr.operands[::-1]):
            less = _compared_key(less_instr, count)
            if less is None or less[0][2] == "EQ" or tie.opcode != "and":
                continue
            for equal_instr, rest in (tie.operands, tie.operands[::-1]):
                equal = _compared_key(equal_instr, count)
                if equal is not None and _same_key(less, equal, count):
                    tail = _keys(rest, count)
                    if tail is not None:
                        return [less[0], *tail]
    # select(equal, rest, less)
    if instr.opcode == "select":
        predicate, rest, less_instr = instr.operands
        less, equal = _compared_key(less_instr, count), _compared_key(predicate, count)
        if less is not None and less[0][2] != "EQ" and equal is not None and _same_key(less, equal, count):
            tail = _keys(rest, count)
            if tail is not None:
                return [less[0], *tail]
    return None


def _evaluate_function(root: HloInstruction, argument: np.ndarray, ev: Evaluator) -> np.ndarray:
    """The value of the comparator subexpression ``root`` (a function of one
    parameter) on a whole array."""
    values: dict[int, Any] = {}
    stack = [root]
    while stack:
        current = stack[-1]
        if id(current) in values:
            stack.pop()
            continue
        if current.opcode == "parameter":
            values[id(current)] = argument
            stack.pop()
            continue
        pending = [o for o in current.operands if id(o) not in values]
        if pending:
            stack.extend(pending)
            continue
        values[id(current)] = ev.apply(current, [values[id(o)] for o in current.operands])
        stack.pop()
    return np.asarray(values[id(root)])


def _order_key(values: np.ndarray, direction: str, compare_type: Any) -> np.ndarray | None:
    """An array whose ascending order is the order the compare puts ``values``
    in, or None when the compare is not a strict weak order on them (NaN
    under a partial-order float compare)."""
    kind = element_type_of_dtype(values.dtype).kind
    if kind is TypeKind.COMPLEX or compare_type not in (None, "TOTALORDER", _DEFAULT_COMPARE_TYPE[kind]):
        return None  # e.g. signed values compared as unsigned: left to the comparator itself
    if kind is TypeKind.FLOAT:
        if compare_type == "TOTALORDER":
            key = total_order_key(values)
        else:
            key = widen(values).astype(np.float64)
            if np.isnan(key).any():
                return None
            return -key if direction == "GT" else key
    else:
        key = widen(values)
        key = key.astype(np.int64) if key.dtype.kind == "b" else key
    return ~key if direction == "GT" else key


def _lexsort_permutation(operands: list[np.ndarray], keys: list[_Key], ev: Evaluator) -> np.ndarray | None:
    columns = []
    for i, function, direction, compare_type in keys:
        key = _order_key(_evaluate_function(function, operands[i], ev), direction, compare_type)
        if key is None:
            return None
        columns.append(np.broadcast_to(key, operands[0].shape))
    return np.lexsort(columns[::-1], axis=-1)


def _merge_sort_permutation(operands: list[np.ndarray], computation: HloComputation, ev: Evaluator) -> np.ndarray:
    """The stable sorting permutation of each row (last axis) of ``operands``
    under the comparator: merge sort, a right element going first only when
    it compares less than the left one."""
    n = operands[0].shape[-1]
    if n <= 1 or operands[0].size == 0:
        return np.broadcast_to(np.arange(n), operands[0].shape)
    flat = [x.reshape(-1, n) for x in operands]
    count = flat[0].shape[0]
    row = np.arange(count)[:, None]
    perm = np.broadcast_to(np.arange(n), (count, n)).copy()
    width = 1
    while width < n:
        low = np.arange(0, n, 2 * width)
        middle, high = np.minimum(low + width, n), np.minimum(low + 2 * width, n)
        left = np.broadcast_to(low, (count, low.size)).copy()
        right = np.broadcast_to(middle, (count, low.size)).copy()
        merged = np.empty_like(perm)
        for step in range(2 * width):
            out = low + step
            active = out < high
            if not active.any():
                break
            has_left, has_right = left < middle, right < high
            left_at = perm[row, np.minimum(left, n - 1)]
            right_at = perm[row, np.minimum(right, n - 1)]
            take_right = has_right & ~has_left
            both = has_left & has_right
            if both.any():
                r, c = np.nonzero(both)
                args = []
                for x in flat:
                    args += [x[r, right_at[r, c]], x[r, left_at[r, c]]]
                take_right[r, c] = np.asarray(ev.call(computation, *args), bool)
            columns = np.flatnonzero(active)
            merged[:, out[columns]] = np.where(take_right, right_at, left_at)[:, columns]
            right += take_right & active
            left += ~take_right & active
        perm = merged
        width *= 2
    return perm.reshape(operands[0].shape)


def sort_along(operands: list[np.ndarray], dimension: int, computation: HloComputation,
               ev: Evaluator) -> list[np.ndarray]:
    """``operands`` stably sorted together along ``dimension`` by the comparator ``computation``."""
    moved = [np.moveaxis(np.asarray(x), dimension, -1) for x in operands]  # sorted dimension last
    perm = sort_permutation(moved, computation, ev)
    return [np.moveaxis(np.take_along_axis(x, perm, -1), -1, dimension) for x in moved]


def sort_permutation(operands: list[np.ndarray], computation: HloComputation, ev: Evaluator) -> np.ndarray:
    """The stable sorting permutation of each row (last axis) of ``operands``
    under the comparator ``computation``."""
    keys = lexicographic_keys(computation, len(operands))
    perm = _lexsort_permutation(operands, keys, ev) if keys is not None else None
    return perm if perm is not None else _merge_sort_permutation(operands, computation, ev)


@rule("sort")
def sort(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    # Unstable sorts are sorted stably too: any order of equivalent elements is allowed.
    (dimension,) = instr.attributes.get("dimensions", (0,))
    results = sort_along(operands, dimension, instr.called_computations[0], ev)
    return tuple(results) if len(results) > 1 else results[0]


@rule("topk")
def topk(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    values = np.asarray(operands[0])
    k = int(instr.attributes["k"])
    largest = instr.attributes.get("largest", True)
    if not isinstance(largest, bool):  # kept as text by the parser
        largest = str(largest).strip() == "true"
    # Floats in total order (NaN beyond infinity), ties to the lower index.
    key = _order_key(values, "GT" if largest else "LT", "TOTALORDER")
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(values, order, -1), order.astype(np.int32)


def _topk_custom_call(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    """XLA:CPU's ``TopK`` custom call: the first k of each row (last dimension)
    sorted by the comparator, whose parameters are (value, index) pairs or
    values alone; ties keep the lower index first."""
    values = np.asarray(operands[0])
    _check_topk_custom_call(instr, values)
    k = instr.shape.tuple_shapes[0].dimensions[-1]
    comparator = instr.called_computations[0]
    if len(comparator.parameters) == 2:
        perm = sort_permutation([values], comparator, ev)[..., :k]
        return np.take_along_axis(values, perm, -1), perm.astype(np.int32)
    positions = np.broadcast_to(np.arange(values.shape[-1], dtype=np.int32), values.shape)
    ordered, indices = sort_along([values, positions], values.ndim - 1, comparator, ev)
    return ordered[..., :k], indices[..., :k]


def _check_topk_custom_call(instr: HloInstruction, values: np.ndarray) -> None:
    # What the rule relies on; the verifier checks it too, but a module evaluated
    # without verification must still get an error, not a Python exception.
    shapes = instr.shape.tuple_shapes
    problem = None
    if len(instr.operands) != 1 or len(instr.called_computations) != 1:
        problem = "takes one operand and a comparator (called_computations)"
    elif len(instr.called_computations[0].parameters) not in (2, 4):
        problem = "needs a comparator of two parameters (values) or four (two values, two indices)"
    elif values.ndim == 0 or len(shapes) != 2:
        problem = "needs an operand of rank at least 1 and a (values, indices) result"
    else:
        k = shapes[0].dimensions[-1] if shapes[0].dimensions else -1
        expected = (*values.shape[:-1], k)
        if (tuple(shapes[0].dimensions) != expected or tuple(shapes[1].dimensions) != expected
                or not 0 <= k <= values.shape[-1]):
            problem = f"results {instr.shape} do not fit operand {instr.operands[0].shape}"
    if problem is not None:
        raise XlapyError(f"TopK custom-call {instr.name} {problem}")


CUSTOM_CALL_TARGETS["TopK"] = _topk_custom_call
