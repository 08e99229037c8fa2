"""How far each result of a module may be from the interpreter's when the compiled code adds its float sums in
another order: a running error bound, carried from the sums through the ops that use them.

A float sum (a reduce or reduce-window whose reducer adds two floats) of ``n`` terms whose magnitudes add up to
``M`` is within ``gamma(n) * M`` of the exact sum whatever the order (Higham, Accuracy and Stability of Numerical
Algorithms, 4.2), so the compiled sum and the interpreter's are within ``2 gamma(n) M``, plus what its terms may
be off already. From there each op's rule (``_RULES``, one per opcode) bounds how far the op's result can move
when its operands move within their bounds, plus the last rounding of each side (``_rounding``):

- data movement (broadcast, reshape, slice, concatenate, pad, gather, ...) moves the bounds with the values: the
  interpreter's own rule, applied to the bounds in place of the data;
- ``add`` and ``subtract`` add the bounds; ``multiply`` takes ``|a| eb + |b| ea + ea eb``; ``divide``
  ``(ea + |a / b| eb) / (|b| - eb)``, with no bound where ``b`` may be 0;
- monotonic functions (exp, log, tanh, logistic, sqrt, rsqrt, ...) take their largest move over the interval;
- ``compare`` is exact where the operands' intervals do not meet. Where they do, the predicate may differ, which
  its bound (1) says, and a ``select`` on it may take either side: its bound there covers both;
- maximum and minimum reductions take the largest bound of their terms.

A value no float sum reaches has no bound (None): compiled and interpreted agree on it to the ulps of
``ulp_tolerance``. ``unbounded`` names the first op some sum reaches that has no rule here (a loop, a sort, a
dot, a conversion to integers...): such a module's values are not compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.arguments import check_arguments
from xlapy.hlo.opcodes import TRANSCENDENTAL_OPCODES
from xlapy.interpreter.all_rules import RULES
from xlapy.interpreter.evaluator import Evaluator
from xlapy.shapes import ELEMENT_TYPES

Bound = Any  # a float64 array of its value's shape, a tuple of bounds, or None (exact)
Rule = Callable[[HloInstruction, list, list, Any, Evaluator], Bound]

_RULES: dict[str, Rule] = {}


def _rule(*opcodes: str) -> Callable[[Rule], Rule]:
    def register(function: Rule) -> Rule:
        for opcode in opcodes:
            _RULES[opcode] = function
        return function

    return register


class Unbounded(Exception):
    """A value some float sum reaches goes through an op this module has no rule for (the message says which)."""


def _is_float(shape_or_type: Any) -> bool:
    name = shape_or_type if isinstance(shape_or_type, str) else shape_or_type.element_type
    element = ELEMENT_TYPES.get(name)
    return element is not None and element.is_floating_point


def _float_reducer(reducer: HloComputation) -> str | None:
    """``"add"``, ``"maximum"`` or ``"minimum"`` when ``reducer`` is that op of its two float parameters."""
    root = reducer.root
    operands = root.operands
    if root.opcode in ("add", "maximum", "minimum") and _is_float(root.shape) and len(operands) == 2 and \
            operands[0] is not operands[1] and all(o.opcode == "parameter" for o in operands):
        return root.opcode
    return None


def _is_float_sum(instr: HloInstruction) -> bool:
    return instr.opcode in ("reduce", "reduce-window") and len(instr.operands) == 2 and \
        _float_reducer(instr.called_computations[0]) == "add"


_INEXACT = frozenset({"add", "subtract", "multiply", "divide", "power", "atan2", "remainder"})


def _does_float_arithmetic(reducer: HloComputation) -> bool:
    """Whether ``reducer`` does float arithmetic an order may change (max, min, select, compare are exact)."""
    return any(i.opcode in _INEXACT and _is_float(i.shape) for i in reducer.instructions)


def unbounded(module: HloModule) -> str:
    """'' when every value a float sum of ``module`` reaches has a rule here; else why not."""
    reached: list[HloInstruction] = []
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode in ("reduce", "reduce-window") and instr.called_computations and \
                    _does_float_arithmetic(instr.called_computations[0]) and not _is_float_sum(instr):
                return f"{instr.opcode} {instr.name} reduces with other float arithmetic than one add"
            if _is_float_sum(instr):
                reached.append(instr)
    seen: set[int] = set()
    while reached:
        instr = reached.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        computation = instr.parent
        if instr is computation.root:
            if computation.fusion_instruction is not None:
                reached.append(computation.fusion_instruction)
            elif not computation.is_entry:
                return f"the float sums reaching {instr.name} leave {computation.name} for its callers"
        for user in instr.users:
            if user.opcode == "fusion":
                fused = user.fused_computation
                reached.extend(fused.parameters[k] for k, o in enumerate(user.operands) if o is instr)
            elif refusal := _refusal(user):
                return f"the float sums reaching {instr.name} feed {user.opcode} {user.name}{refusal}"
            else:
                reached.append(user)
    return ""


def _refusal(instr: HloInstruction) -> str:
    """'' when ``instr``'s rule bounds its result whatever its operands' bounds; else why not (a clause)."""
    if instr.opcode not in _RULES:
        return ", which has no rule"
    if instr.opcode in ("reduce", "reduce-window") and (len(instr.operands) != 2 or
                                                         _float_reducer(instr.called_computations[0]) is None):
        return ", whose reducer is not one add, maximum or minimum of floats"
    if instr.opcode in ("convert", "divide") and not _is_float(instr.shape):
        return f", to {instr.shape.element_type}"
    if instr.opcode == "bitcast" and instr.operands[0].shape.element_type != instr.shape.element_type:
        return f", to {instr.shape.element_type}"
    return ""


def result_bounds(module: HloModule, args: list) -> list[np.ndarray | None] | None:
    """Each array of the entry's result (in the order of ``tools.compare.leaves``): how far its elements may be
    from the interpreter's (None: not at all beyond its ulps). None when the module has no float sums. Raises
    ``Unbounded`` (see ``unbounded``)."""
    if not any(_is_float_sum(i) for c in module.computations for i in c.instructions):
        return None
    if reason := unbounded(module):
        raise Unbounded(reason)
    evaluator = Evaluator(module)
    entry = module.entry
    values = check_arguments(args, entry.parameters, entry.name)
    _, bound = _computation(evaluator, entry, list(values), [None] * len(values))
    return _leaves(bound, entry.root.shape)


def _leaves(bound: Bound, shape: Any) -> list:
    if shape.tuple_shapes or shape.element_type == "tuple":
        parts = bound if isinstance(bound, tuple) else (None,) * len(shape.tuple_shapes)
        return [leaf for part, element in zip(parts, shape.tuple_shapes) for leaf in _leaves(part, element)]
    return [] if shape.element_type == "token" else [bound]


def _computation(evaluator: Evaluator, computation: HloComputation, values: list, bounds: list) -> tuple[Any, Bound]:
    """The root's value and bound, given the parameters'."""
    known: dict[int, tuple[Any, Bound]] = {id(p): (v, b) for p, v, b in zip(computation.parameters, values, bounds)}
    for instr in computation.post_order():
        if instr.opcode == "parameter":
            continue
        operand_values = [known[id(o)][0] for o in instr.operands]
        operand_bounds = [known[id(o)][1] for o in instr.operands]
        if instr.opcode == "fusion":
            known[id(instr)] = _computation(evaluator, instr.fused_computation, operand_values, operand_bounds)
            continue
        value = evaluator.apply(instr, operand_values)
        bound = None
        if _is_float_sum(instr) or any(b is not None for b in operand_bounds):
            if refusal := _refusal(instr):  # ``unbounded`` has refused the module already
                raise Unbounded(f"a float sum reaches {instr.opcode} {instr.name}{refusal}")
            with np.errstate(all="ignore"):
                bound = _RULES[instr.opcode](instr, operand_values, operand_bounds, value, evaluator)
        known[id(instr)] = (value, bound)
    return known[id(computation.root)]


def _wide(value: Any) -> np.ndarray:
    return np.asarray(value).astype(np.float64)


def _zero_or(bound: Bound, value: Any) -> np.ndarray:
    return np.zeros(np.shape(value)) if bound is None else bound


def _eps(element_type: str) -> tuple[float, float]:
    """Machine epsilon (twice the unit roundoff) of a float type, and its smallest subnormal."""
    info = ml_dtypes.finfo(ELEMENT_TYPES[element_type].dtype)
    return float(info.eps), float(info.smallest_subnormal)


def _rounding(instr: HloInstruction, value: Any, moved: np.ndarray) -> np.ndarray:
    """``moved`` (how far the exact results on the two sides' operands may be apart) plus the rounding of both
    sides' results: an ulp of the larger, at most ``eps * (|value| + moved)`` (a subnormal's at least); transcendental
    functions, which may be an ulp off the correctly rounded result already, twice that."""
    eps, tiny = _eps(instr.shape.element_type)
    ulps = 2 if instr.opcode in TRANSCENDENTAL_OPCODES else 1
    return moved + ulps * (eps * (np.abs(_wide(value)) + moved) + tiny)


# -- data movement: the interpreter's rule on the bounds ---------------------------------------------------------

# The operands whose elements become the result's, where not all of them (the others are indices).
_DATA_OPERANDS = {"dynamic-slice": range(1), "dynamic-update-slice": range(2), "gather": range(1)}


@_rule("bitcast", "broadcast", "concatenate", "copy", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
       "reshape", "reverse", "slice", "transpose")
def _moved(instr, values, bounds, value, evaluator):
    data = _DATA_OPERANDS.get(instr.opcode, range(len(instr.operands)))
    operands = [_zero_or(b, v) if k in data else v for k, (v, b) in enumerate(zip(values, bounds))]
    return _wide(RULES[instr.opcode](instr, operands, evaluator))


@_rule("tuple")
def _tuple(instr, values, bounds, value, evaluator):
    return tuple(bounds)


@_rule("get-tuple-element")
def _get_tuple_element(instr, values, bounds, value, evaluator):
    return None if bounds[0] is None else bounds[0][instr.attr("index")]


@_rule("select")
def _select(instr, values, bounds, value, evaluator):
    predicate, on_true, on_false = values
    chosen = np.where(predicate, _zero_or(bounds[1], on_true), _zero_or(bounds[2], on_false))
    if bounds[0] is None:
        return chosen
    # Where the predicate may differ, either side may be taken.
    either = np.maximum(_zero_or(bounds[1], on_true), _zero_or(bounds[2], on_false)) + \
        np.abs(_wide(on_true) - _wide(on_false))
    return np.where(bounds[0] > 0, either, chosen)


@_rule("compare")
def _compare(instr, values, bounds, value, evaluator):
    a, b = (_wide(v) for v in values)
    reach = _zero_or(bounds[0], a) + _zero_or(bounds[1], b)
    apart = np.abs(a - b)
    # 1 where the predicate may differ: operands that may move, and may meet (or are NaN)
    return ((reach > 0) & ((apart <= reach) | np.isnan(apart))).astype(np.float64)


# -- arithmetic -----------------------------------------------------------------------------------------------------

@_rule("add", "subtract")
def _sum(instr, values, bounds, value, evaluator):
    return _rounding(instr, value, _zero_or(bounds[0], values[0]) + _zero_or(bounds[1], values[1]))


@_rule("multiply")
def _product(instr, values, bounds, value, evaluator):
    a, b = (_wide(v) for v in values)
    ea, eb = _zero_or(bounds[0], a), _zero_or(bounds[1], b)
    return _rounding(instr, value, np.abs(a) * eb + np.abs(b) * ea + ea * eb)


@_rule("divide")
def _quotient(instr, values, bounds, value, evaluator):
    a, b = (_wide(v) for v in values)
    ea, eb = _zero_or(bounds[0], a), _zero_or(bounds[1], b)
    room = np.abs(b) - eb
    moved = np.where(room > 0, (ea + np.abs(a / b) * eb) / np.where(room > 0, room, 1.0), np.inf)
    return _rounding(instr, value, moved)


@_rule("negate", "abs")
def _exact_unary(instr, values, bounds, value, evaluator):
    return bounds[0]


@_rule("maximum", "minimum")
def _extremum(instr, values, bounds, value, evaluator):
    return np.maximum(_zero_or(bounds[0], values[0]), _zero_or(bounds[1], values[1]))


@_rule("clamp")
def _clamp(instr, values, bounds, value, evaluator):
    return np.maximum.reduce([np.broadcast_to(_zero_or(b, v), np.shape(value)) for v, b in zip(values, bounds)])


def _monotonic(function: Callable[[np.ndarray], np.ndarray], low: float = -np.inf) -> Rule:
    """The rule of a monotonic function defined above ``low``: its largest move over ``[x - e, x + e]``."""

    def bound(instr, values, bounds, value, evaluator):
        x, e = _wide(values[0]), bounds[0]
        at = function(x)
        below = np.where(x - e > low, function(np.maximum(x - e, low)), np.inf)
        moved = np.maximum(np.abs(function(x + e) - at), np.abs(at - below))
        return _rounding(instr, value, np.where(np.isnan(moved), np.inf, moved))

    return bound


def _logistic(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))


for _opcode, _function, _low in (("exponential", np.exp, -np.inf), ("exponential-minus-one", np.expm1, -np.inf),
                                 ("log", np.log, 0.0), ("log-plus-one", np.log1p, -1.0), ("tanh", np.tanh, -np.inf),
                                 ("logistic", _logistic, -np.inf), ("sqrt", np.sqrt, 0.0),
                                 ("rsqrt", lambda x: 1 / np.sqrt(x), 0.0), ("cbrt", np.cbrt, -np.inf)):
    _RULES[_opcode] = _monotonic(_function, _low)


@_rule("convert")
def _convert(instr, values, bounds, value, evaluator):
    narrows = ELEMENT_TYPES[instr.shape.element_type].bit_width < \
        ELEMENT_TYPES[instr.operands[0].shape.element_type].bit_width
    return _rounding(instr, value, bounds[0]) if narrows else bounds[0]


# -- reductions -----------------------------------------------------------------------------------------------------

def _gamma(terms: int, element_type: str) -> float:
    u = _eps(element_type)[0] / 2
    return terms * u / (1 - terms * u) if terms * u < 1 else math.inf


@_rule("reduce")
def _reduce(instr, values, bounds, value, evaluator):
    operand, init = values
    kind = _float_reducer(instr.called_computations[0])
    axes = tuple(instr.attr("dimensions", ()))
    terms, init_bound = _zero_or(bounds[0], operand), _zero_or(bounds[1], init)
    if kind != "add":
        return np.maximum(np.max(terms, axis=axes, initial=0.0), init_bound)
    count = math.prod(np.shape(operand)[d] for d in axes) + 1
    moved = np.sum(terms, axis=axes) + init_bound
    # The terms on the compiled side are within their bounds of these: their magnitudes too.
    magnitude = np.sum(np.abs(_wide(operand)), axis=axes) + np.abs(_wide(init)) + moved
    # Summed in float64: the largest relative rounding of these sums of positive numbers is ~count * 2^-53.
    order = 2 * _gamma(count, instr.shape.element_type) * magnitude * (1 + count * 2.0 ** -52)
    return order + moved + _eps(instr.shape.element_type)[1]


@_rule("reduce-window")
def _reduce_window(instr, values, bounds, value, evaluator):
    operand, init = values
    # The interpreter's rule combines in the reducer's type: a maximum of rounded bounds is at most an ulp below
    # the largest, and each of its sums of positive numbers at most gamma below the exact one, which dividing by
    # (1 - gamma) undoes.
    terms = _wide(RULES["reduce-window"](instr, [_zero_or(bounds[0], operand), _zero_or(bounds[1], init)],
                                         evaluator))
    if not _is_float_sum(instr):
        return terms * (1 + _eps(instr.shape.element_type)[0])
    windows = math.prod(d.size for d in instr.attr("window", ())) + 1
    gamma = _gamma(windows, instr.shape.element_type)
    scale = 1 / (1 - gamma) if gamma < 1 else math.inf
    magnitude = _wide(RULES["reduce-window"](instr, [np.abs(_wide(operand)), np.abs(_wide(init))], evaluator))
    return (2 * gamma * (magnitude + terms) + terms) * scale + _eps(instr.shape.element_type)[1]
