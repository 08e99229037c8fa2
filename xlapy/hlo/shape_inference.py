"""Shape inference for HLO: one rule per opcode that computes the shape an
instruction must have from its operands' shapes, its attributes and the
computations it calls, and rejects inconsistent operands with a
``VerifyError`` naming the rule broken (the checks of XLA's
``ShapeInference`` and ``HloVerifier``).

Rules compute element type and dimensions (and which dimensions are
dynamic); layouts are ignored. Where the result depends on something the
instruction does not carry — the new dimensions of a broadcast, the shape of
a parameter, constant or custom call, the replica-group size of a collective
— the rule takes that part from the declared shape and checks the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn

import numpy as np

from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.attributes import PaddingDimension, SliceDimension
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.replica_groups import parse_replica_groups
from xlapy.hlo.stablehlo_forms import read_from_stablehlo, region_results, while_condition_and_body
from xlapy.registry import registrar
from xlapy.shapes import UNBOUNDED_SIZE, Shape, TypeKind, physical_byte_size

ShapeRule = Callable[[HloInstruction], Shape]

# opcode -> rule; an opcode without an entry has no rule (its declared shape is accepted).
SHAPE_RULES: dict[str, ShapeRule] = {}


shape_rule = registrar(SHAPE_RULES, "shape rules")


def has_shape_rule(opcode: str) -> bool:
    """Whether ``infer_shape`` knows ``opcode``."""
    return opcode in SHAPE_RULES


def opcodes_without_rules() -> list[str]:
    """The opcodes of ``OPCODES`` whose declared shape the verifier accepts unchecked."""
    return sorted(name for name in OPCODES if name not in SHAPE_RULES)


def infer_shape(instr: HloInstruction) -> Shape:
    """The shape ``instr`` must have (without layout). Raises ``VerifyError``
    naming the instruction and the rule broken when its operands, attributes
    or called computations are inconsistent, and ``UnimplementedError`` for
    an opcode without a rule."""
    rule = SHAPE_RULES.get(instr.opcode)
    if rule is None:
        raise UnimplementedError(f"instruction {instr.name}: no shape rule for opcode {instr.opcode}")
    try:
        return rule(instr)
    except VerifyError as e:
        raise VerifyError(f"instruction {instr.name}: {e}") from None
    except XlapyError as e:  # e.g. an impossible shape built from bad attributes
        raise VerifyError(f"instruction {instr.name}: {e}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        # An attribute of the wrong kind that a rule reads without a check of
        # its own (an IR built or edited by hand): still a verification error.
        raise VerifyError(f"instruction {instr.name}: malformed {instr.opcode}: {type(e).__name__}: {e}") from None


# -- shapes ------------------------------------------------------------------------

def without_layout(shape: Shape) -> Shape:
    """``shape`` with the layouts of it and of all its tuple elements dropped."""
    if shape.is_tuple:
        return replace(shape, layout=None, tuple_shapes=tuple(without_layout(s) for s in shape.tuple_shapes))
    return shape if shape.layout is None else replace(shape, layout=None)


def same_shape(a: Shape, b: Shape) -> bool:
    """Equal element types, dimensions and dynamic dimensions, layouts ignored."""
    return without_layout(a) == without_layout(b)


def show(shape: Shape) -> str:
    """``shape`` as error messages print it: XLA's syntax without layouts."""
    return shape.to_string(print_layout=False)


def _braces(values: Sequence[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _array_shape(element_type: str, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> Shape:
    return Shape(element_type, tuple(dims), dynamic_dimensions=tuple(dynamic) if dynamic else ())


def _tuple(shapes: Sequence[Shape]) -> Shape:
    return Shape.make_tuple([without_layout(s) for s in shapes])


def _one_or_tuple(shapes: Sequence[Shape]) -> Shape:
    # Variadic ops (reduce, sort, all-reduce, ...) return a tuple only for several results.
    return without_layout(shapes[0]) if len(shapes) == 1 else _tuple(shapes)


_SCALAR_U32 = Shape("u32")
_SCALAR_S32 = Shape("s32")
_SCALAR_PRED = Shape("pred")
_TOKEN = Shape("token")


# -- failures and accessors ----------------------------------------------------------

def _fail(message: str) -> NoReturn:
    raise VerifyError(message)


_MISSING: Any = object()


def _attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> Any:
    if name in instr.attributes:
        return instr.attributes[name]
    if default is _MISSING:
        _fail(f"{instr.opcode} needs attribute {name}")
    return default


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int(instr: HloInstruction, name: str, default: Any = _MISSING) -> int:
    value = _attr(instr, name, default)
    if isinstance(value, str):  # attributes the parser keeps verbatim, e.g. topk's k
        if not re.fullmatch(r"-?[0-9]{1,19}", value.strip()):
            _fail(f"attribute {name} of {instr.opcode} must be an integer, got {value}")
        return int(value)
    if not _is_int(value):
        _fail(f"attribute {name} of {instr.opcode} must be an integer, got {value!r}")
    return int(value)


def _ints(instr: HloInstruction, name: str, default: Any = _MISSING) -> tuple[int, ...]:
    value = _attr(instr, name, default)
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"\{\s*(-?[0-9]{1,19}\s*(,\s*-?[0-9]{1,19}\s*)*)?\}", text):
            _fail(f"attribute {name} of {instr.opcode} must be a list of integers, got {value}")
        return tuple(int(v) for v in re.findall(r"-?[0-9]+", text))
    if not isinstance(value, (list, tuple)) or not all(_is_int(v) for v in value):
        _fail(f"attribute {name} of {instr.opcode} must be a list of integers, got {value!r}")
    return tuple(int(v) for v in value)


def _records(instr: HloInstruction, name: str, kind: type, spelling: str) -> tuple[Any, ...]:
    """Attribute ``name``: a list of ``kind`` records with integer fields (slice, padding)."""
    value = _attr(instr, name)
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, kind) and all(_is_int(f) for f in vars(v).values()) for v in value):
        _fail(f"attribute {name} of {instr.opcode} must be {spelling}, got {value!r}")
    return tuple(value)


def _word(instr: HloInstruction, name: str, default: Any = _MISSING) -> str:
    return str(_attr(instr, name, default))


def _bool(instr: HloInstruction, name: str, default: bool = False) -> bool:
    value = _attr(instr, name, default)
    return value.strip() == "true" if isinstance(value, str) else bool(value)


def _operand_count(instr: HloInstruction, count: int) -> None:
    if len(instr.operands) != count:
        _fail(f"{instr.opcode} takes {count} operand{'s' * (count != 1)}, got {len(instr.operands)}")


def _at_least(instr: HloInstruction, count: int) -> None:
    if len(instr.operands) < count:
        _fail(f"{instr.opcode} takes at least {count} operand{'s' * (count != 1)}, got {len(instr.operands)}")


def _array(instr: HloInstruction, index: int, what: str | None = None) -> Shape:
    shape = instr.operands[index].shape
    if not shape.is_array:
        _fail(f"{what or f'operand {index}'} of {instr.opcode} must be an array, got {show(shape)}")
    return shape


def _scalar(instr: HloInstruction, index: int, what: str) -> Shape:
    shape = _array(instr, index, what)
    if shape.rank:
        _fail(f"{what} of {instr.opcode} must be a scalar, got {show(shape)}")
    return shape


def _tuple_operand(instr: HloInstruction, index: int, what: str | None = None, size: int = 0) -> Shape:
    shape = instr.operands[index].shape
    if not shape.is_tuple or len(shape.tuple_shapes) < size:
        need = f"a tuple of at least {size} elements" if size else "a tuple"
        _fail(f"{what or f'operand {index}'} of {instr.opcode} must be {need}, got {show(shape)}")
    return shape


def _declared_array(instr: HloInstruction) -> Shape:
    if not instr.shape.is_array:
        _fail(f"{instr.opcode} produces an array, but the instruction declares {show(instr.shape)}")
    return instr.shape


def _declared_tuple(instr: HloInstruction, size: int) -> Shape:
    shape = instr.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < size:
        _fail(f"{instr.opcode} produces a tuple of at least {size} elements, "
              f"but the instruction declares {show(shape)}")
    return shape


def _check_dimension_numbers(instr: HloInstruction, name: str, dims: Sequence[int], rank: int,
                             what: str = "the operand", ordered: bool = False) -> None:
    """``dims`` (attribute ``name``) are distinct dimensions of a rank-``rank`` array."""
    for d in dims:
        if not 0 <= d < rank:
            _fail(f"{name}={_braces(dims)} of {instr.opcode}: dimension {d} is out of range for {what} of rank {rank}")
    if len(set(dims)) != len(dims):
        _fail(f"{name}={_braces(dims)} of {instr.opcode} repeats a dimension")
    if ordered and list(dims) != sorted(dims):
        _fail(f"{name}={_braces(dims)} of {instr.opcode} must be sorted")


def _same_dims(instr: HloInstruction, shapes: Sequence[Shape], what: str) -> None:
    for shape in shapes[1:]:
        if shape.dimensions != shapes[0].dimensions:
            _fail(f"{what} of {instr.opcode} must have the same dimensions, got {show(shapes[0])} and {show(shape)}")


def _union_dynamic(shapes: Sequence[Shape]) -> tuple[bool, ...]:
    rank = shapes[0].rank
    return tuple(any(s.dynamic_dimensions[i] for s in shapes) for i in range(rank))


def _declared_dynamic(instr: HloInstruction, rank: int) -> tuple[bool, ...]:
    # Where XLA's rule for which dimensions stay dynamic is not modelled, trust the declaration.
    shape = instr.shape
    if shape.is_array and shape.rank == rank:
        return shape.dynamic_dimensions
    return (False,) * rank


def _kind(shape: Shape) -> TypeKind:
    return shape.type.kind


def _component_type(element_type: str) -> str:
    # The real type of a complex type's parts.
    return {"c64": "f32", "c128": "f64"}[element_type]


def _element_count(shape: Shape) -> int | None:
    if any(d == UNBOUNDED_SIZE for d in shape.dimensions):
        return None
    return math.prod(shape.dimensions)


# -- called computations ---------------------------------------------------------------

def _callees(instr: HloInstruction, count: int, roles: str = "") -> list[HloComputation]:
    called = instr.called_computations
    if len(called) != count:
        what = f" ({roles})" if roles else ""
        _fail(f"{instr.opcode} calls {count} computation{'s' * (count != 1)}{what}, got {len(called)}")
    return called


def _parameter_shapes(computation: HloComputation) -> list[Shape]:
    params = [i for i in computation.instructions if i.opcode == "parameter"]
    params.sort(key=lambda p: p.parameter_number if p.parameter_number is not None else -1)
    return [p.shape for p in params]


def _root_shape(computation: HloComputation) -> Shape:
    if computation.root is None:
        _fail(f"computation {computation.name} has no root")
    return computation.root.shape


def _check_parameters(instr: HloInstruction, computation: HloComputation, expected: Sequence[Shape],
                      role: str) -> None:
    """The parameters of ``computation`` (called by ``instr`` as ``role``) have the ``expected`` shapes."""
    params = _parameter_shapes(computation)
    if len(params) != len(expected):
        _fail(f"{role} {computation.name} of {instr.opcode} must take {len(expected)} "
              f"parameter{'s' * (len(expected) != 1)}, takes {len(params)}")
    for number, (param, want) in enumerate(zip(params, expected)):
        if not same_shape(param, want):
            _fail(f"parameter {number} of {role} {computation.name} must be {show(want)} to match {instr.opcode}, "
                  f"got {show(param)}")


def _check_reducer(instr: HloInstruction, computation: HloComputation, inits: Sequence[Shape],
                   input_types: Sequence[str], role: str = "to_apply computation") -> None:
    """``computation`` reduces N values at once: it takes N accumulators (the
    init shapes) then N inputs (scalars of ``input_types``) and returns the N
    new accumulators (a tuple when N > 1)."""
    n = len(inits)
    params = _parameter_shapes(computation)
    if len(params) != 2 * n:
        _fail(f"{role} {computation.name} of {instr.opcode} must take {2 * n} parameters, takes {len(params)}")
    root = _root_shape(computation)
    if n == 1:
        accumulators = [root]
    elif root.is_tuple and len(root.tuple_shapes) == n:
        accumulators = list(root.tuple_shapes)
    else:
        _fail(f"{role} {computation.name} of {instr.opcode} must return a tuple of {n} scalars, returns {show(root)}")
    for i, (accumulator, init) in enumerate(zip(accumulators, inits)):
        if not accumulator.is_array or accumulator.rank:
            _fail(f"{role} {computation.name} of {instr.opcode} must return scalars, returns {show(root)}")
        if not same_shape(accumulator, init):
            _fail(f"{role} {computation.name} of {instr.opcode} returns {show(accumulator)}, "
                  f"but its init value is {show(init)}")
        if not same_shape(params[i], accumulator):
            _fail(f"parameter {i} of {role} {computation.name} must be {show(accumulator)} (an accumulator), "
                  f"got {show(params[i])}")
        want = Shape(input_types[i])
        if not same_shape(params[n + i], want):
            _fail(f"parameter {n + i} of {role} {computation.name} must be {show(want)} to take input {i} "
                  f"of {instr.opcode}, got {show(params[n + i])}")


def _check_comparator(instr: HloInstruction, computation: HloComputation, types: Sequence[str],
                      role: str = "comparator") -> None:
    """``computation`` compares two scalars of each of ``types`` and returns pred[]."""
    expected = [Shape(t) for t in types for _ in range(2)]
    _check_parameters(instr, computation, expected, role)
    root = _root_shape(computation)
    if not same_shape(root, _SCALAR_PRED):
        _fail(f"{role} {computation.name} of {instr.opcode} must return pred[], returns {show(root)}")


# -- elementwise -----------------------------------------------------------------------

_INTEGRAL = frozenset({TypeKind.SIGNED, TypeKind.UNSIGNED})
_FLOAT = frozenset({TypeKind.FLOAT})
_FLOAT_OR_COMPLEX = frozenset({TypeKind.FLOAT, TypeKind.COMPLEX})
_SIGNED_NUMBERS = frozenset({TypeKind.SIGNED, TypeKind.FLOAT, TypeKind.COMPLEX})
_NUMBERS = frozenset({TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.FLOAT, TypeKind.COMPLEX})
_PRED_OR_INTEGRAL = frozenset({TypeKind.PRED, TypeKind.SIGNED, TypeKind.UNSIGNED})
_ARRAY_TYPES = frozenset(k for k in TypeKind if k not in (TypeKind.TOKEN, TypeKind.TUPLE, TypeKind.OPAQUE))

_KIND_WORDS = {
    _INTEGRAL: "integral", _FLOAT: "floating-point", _FLOAT_OR_COMPLEX: "floating-point or complex",
    _SIGNED_NUMBERS: "signed integral, floating-point or complex", _NUMBERS: "numeric (not pred)",
    _PRED_OR_INTEGRAL: "pred or integral", _ARRAY_TYPES: "array",
}

# Element types each unary op accepts (XLA's InferUnaryOpShape).
_UNARY_KINDS = {
    **dict.fromkeys(["floor", "ceil", "round-nearest-afz", "round-nearest-even", "erf"], _FLOAT),
    **dict.fromkeys(["cosine", "sine", "tan", "tanh", "exponential", "exponential-minus-one", "log",
                     "log-plus-one", "logistic", "rsqrt", "sqrt", "cbrt", "real", "imag"], _FLOAT_OR_COMPLEX),
    **dict.fromkeys(["abs", "sign"], _SIGNED_NUMBERS),
    "negate": _NUMBERS,
    "not": _PRED_OR_INTEGRAL,
    **dict.fromkeys(["count-leading-zeros", "popcnt"], _INTEGRAL),
    "is-finite": _FLOAT,
}


def _require_kind(instr: HloInstruction, shape: Shape, kinds: frozenset[TypeKind], what: str = "operands") -> None:
    if _kind(shape) not in kinds:
        words = _KIND_WORDS.get(kinds) or " or ".join(sorted(k.name.lower() for k in kinds))
        _fail(f"{instr.opcode} needs {words} {what}, got {show(shape)}")


@shape_rule(*_UNARY_KINDS)
def _unary(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    _require_kind(instr, operand, _UNARY_KINDS[instr.opcode])
    element_type = operand.element_type
    if instr.opcode == "is-finite":
        element_type = "pred"
    elif instr.opcode in ("abs", "real", "imag") and operand.type.is_complex:
        element_type = _component_type(element_type)
    return _array_shape(element_type, operand.dimensions, operand.dynamic_dimensions)


# copy (of arrays and tuples) and Shardy's annotations (imported under their MLIR
# names), which only mark a value for propagation: the result is the operand.
@shape_rule("copy", "sdy.sharding_constraint", "sdy.reshard", "sdy.data_flow_edge", "sdy.propagation_barrier")
def _operand_shape(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


@shape_rule("convert")
def _convert(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    target = _declared_array(instr).type
    # XLA's convert refuses complex to real; StableHLO's (imported) keeps the real part.
    if operand.type.is_complex and not target.is_complex and not read_from_stablehlo(instr):
        _fail(f"convert cannot turn complex {operand.element_type} into non-complex {target.name}; "
              "use real, imag or abs")
    return _array_shape(target.name, operand.dimensions, operand.dynamic_dimensions)


@shape_rule("bitcast-convert")
def _bitcast_convert(instr: HloInstruction) -> Shape:
    # Reinterprets the bits: a narrower target splits each element into a new
    # minor dimension, a wider one merges the (then required) minor dimension.
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    target = _declared_array(instr).type
    if operand.type.is_complex != target.is_complex:
        _fail(f"bitcast-convert cannot reinterpret {operand.element_type} as {target.name}: "
              "one is complex and the other is not")
    old_bits, new_bits = operand.type.bit_width, target.bit_width
    dims, dynamic = list(operand.dimensions), list(operand.dynamic_dimensions)
    if old_bits > new_bits:
        if old_bits % new_bits:
            _fail(f"bitcast-convert from {operand.element_type} to {target.name}: bit widths do not divide")
        dims.append(old_bits // new_bits)
        dynamic.append(False)
    elif old_bits < new_bits:
        ratio = new_bits // old_bits
        if new_bits % old_bits or not dims or dims[-1] != ratio:
            _fail(f"bitcast-convert from {show(operand)} to {target.name} needs a minor dimension of size {ratio}")
        dims.pop()
        dynamic.pop()
    return _array_shape(target.name, dims, dynamic)


@shape_rule("reduce-precision")
def _reduce_precision(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    _require_kind(instr, operand, _FLOAT)
    if _int(instr, "exponent_bits") < 1:
        _fail("reduce-precision needs exponent_bits >= 1")
    if _int(instr, "mantissa_bits") < 0:
        _fail("reduce-precision needs mantissa_bits >= 0")
    return without_layout(operand)


@shape_rule("stochastic-convert")
def _stochastic_convert(instr: HloInstruction) -> Shape:
    # stochastic-convert(operand, random): random holds unsigned bits of the operand's width.
    _operand_count(instr, 2)
    operand, random = _array(instr, 0), _array(instr, 1, "the random operand")
    _require_kind(instr, operand, _FLOAT)
    if _kind(random) is not TypeKind.UNSIGNED or random.type.bit_width != operand.type.bit_width:
        _fail(f"the random operand of stochastic-convert must be unsigned with the operand's bit width, "
              f"got {show(random)} for {show(operand)}")
    _same_dims(instr, [operand, random], "operands")
    return _array_shape(_declared_array(instr).element_type, operand.dimensions, operand.dynamic_dimensions)


_BINARY_KINDS = {
    **dict.fromkeys(["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
                     "compare"], _ARRAY_TYPES),
    **dict.fromkeys(["and", "or", "xor"], _PRED_OR_INTEGRAL),
    **dict.fromkeys(["shift-left", "shift-right-arithmetic", "shift-right-logical"], _INTEGRAL),
    **dict.fromkeys(["atan2", "complex"], _FLOAT_OR_COMPLEX),
}
_COMPARISON_DIRECTIONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}
_COMPARISON_TYPES = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}


def _elementwise_operands(instr: HloInstruction) -> list[Shape]:
    # HLO has no implicit broadcasting: operands of elementwise ops agree in dimensions and type.
    shapes = [_array(instr, i) for i in range(len(instr.operands))]
    for shape in shapes[1:]:
        if shape.dimensions != shapes[0].dimensions:
            _fail(f"operands of {instr.opcode} must have the same shape, got {show(shapes[0])} and {show(shape)}")
        if shape.element_type != shapes[0].element_type:
            _fail(f"operands of {instr.opcode} must have the same element type, "
                  f"got {show(shapes[0])} and {show(shape)}")
    return shapes


@shape_rule(*_BINARY_KINDS)
def _binary(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    shapes = _elementwise_operands(instr)
    lhs = shapes[0]
    _require_kind(instr, lhs, _BINARY_KINDS[instr.opcode])
    element_type = lhs.element_type
    if instr.opcode == "compare":
        direction = _word(instr, "direction")
        if direction not in _COMPARISON_DIRECTIONS:
            _fail(f"compare direction must be one of {', '.join(sorted(_COMPARISON_DIRECTIONS))}, got {direction}")
        kind = _word(instr, "type", "FLOAT")
        if kind not in _COMPARISON_TYPES:
            _fail(f"compare type must be one of {', '.join(sorted(_COMPARISON_TYPES))}, got {kind}")
        element_type = "pred"
    elif instr.opcode == "complex":
        if element_type not in ("f32", "f64"):
            _fail(f"complex needs f32 or f64 operands, got {show(lhs)}")
        element_type = "c64" if element_type == "f32" else "c128"
    return _array_shape(element_type, lhs.dimensions, _union_dynamic(shapes))


@shape_rule("select")
def _select(instr: HloInstruction) -> Shape:
    _operand_count(instr, 3)
    pred = _array(instr, 0, "the predicate")
    on_true, on_false = _array(instr, 1), _array(instr, 2)
    if on_true.dimensions != on_false.dimensions or on_true.element_type != on_false.element_type:
        _fail(f"on_true and on_false of select must have the same shape, got {show(on_true)} and {show(on_false)}")
    if pred.element_type != "pred":
        _fail(f"the predicate of select must be pred, got {show(pred)}")
    if pred.rank and pred.dimensions != on_true.dimensions:
        _fail(f"the predicate of select must be a scalar or have the dimensions of the values, "
              f"got {show(pred)} for {show(on_true)}")
    shapes = [on_true, on_false] + ([pred] if pred.rank else [])
    return _array_shape(on_true.element_type, on_true.dimensions, _union_dynamic(shapes))


@shape_rule("clamp")
def _clamp(instr: HloInstruction) -> Shape:
    # clamp(min, operand, max); the bounds may be scalars.
    _operand_count(instr, 3)
    low, operand, high = _array(instr, 0, "min"), _array(instr, 1), _array(instr, 2, "max")
    for bound in (low, high):
        if bound.element_type != operand.element_type:
            _fail(f"bounds of clamp must have the operand's element type, got {show(bound)} for {show(operand)}")
        if bound.rank and bound.dimensions != operand.dimensions:
            _fail(f"bounds of clamp must be scalars or have the operand's dimensions, "
                  f"got {show(bound)} for {show(operand)}")
    return without_layout(operand)


# -- shape manipulation ------------------------------------------------------------------

@shape_rule("broadcast")
def _broadcast(instr: HloInstruction) -> Shape:
    # dimensions[i] is the result dimension operand dimension i becomes; the
    # other result dimensions are new and come from the declared shape.
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    declared = _declared_array(instr)
    dims = _ints(instr, "dimensions")
    if len(dims) != operand.rank:
        _fail(f"dimensions={_braces(dims)} of broadcast must name one result dimension for each of the "
              f"{operand.rank} operand dimensions")
    _check_dimension_numbers(instr, "dimensions", dims, declared.rank, "the result")
    dynamic = list(declared.dynamic_dimensions)
    # StableHLO's broadcast_in_dim may stretch a size-1 dimension; HLO's
    # broadcast may not (XLA's verifier rejects it: reshape the dimension away).
    stretches = read_from_stablehlo(instr)
    for i, d in enumerate(dims):
        if declared.dimensions[d] != operand.dimensions[i] and not (stretches and operand.dimensions[i] == 1):
            rule = ("the sizes must be equal, or the operand's 1" if stretches else
                    "the sizes must be equal" + ("; HLO's broadcast does not stretch a size-1 dimension (reshape "
                                                 "it away first)" if operand.dimensions[i] == 1 else ""))
            _fail(f"broadcast maps operand dimension {i} (size {operand.dimensions[i]}) to result dimension {d} "
                  f"(size {declared.dimensions[d]}) of {show(declared)}; {rule}")
        dynamic[d] = operand.dynamic_dimensions[i] and declared.dimensions[d] == operand.dimensions[i]
    return _array_shape(operand.element_type, declared.dimensions, dynamic)


@shape_rule("reshape")
def _reshape(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    declared = _declared_array(instr)
    before, after = _element_count(operand), _element_count(declared)
    if before is not None and after is not None and before != after:
        _fail(f"reshape cannot change the number of elements: {show(operand)} has {before}, "
              f"{show(declared)} has {after}")
    return _array_shape(operand.element_type, declared.dimensions, declared.dynamic_dimensions)


@shape_rule("dynamic-reshape")
def _dynamic_reshape(instr: HloInstruction) -> Shape:
    # dynamic-reshape(operand, size...): one s32 scalar per result dimension.
    _at_least(instr, 1)
    operand = _array(instr, 0)
    declared = _declared_array(instr)
    if len(instr.operands) - 1 != declared.rank:
        _fail(f"dynamic-reshape takes one size per result dimension: {declared.rank} for {show(declared)}, "
              f"got {len(instr.operands) - 1}")
    for i in range(1, len(instr.operands)):
        size = _scalar(instr, i, f"size operand {i}")
        if size.element_type != "s32":
            _fail(f"size operand {i} of dynamic-reshape must be s32[], got {show(size)}")
    return _array_shape(operand.element_type, declared.dimensions, declared.dynamic_dimensions)


@shape_rule("transpose")
def _transpose(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    perm = _ints(instr, "dimensions")
    if sorted(perm) != list(range(operand.rank)):
        _fail(f"dimensions={_braces(perm)} of transpose must be a permutation of the {operand.rank} "
              f"dimensions of {show(operand)}")
    return _array_shape(operand.element_type, [operand.dimensions[p] for p in perm],
                        [operand.dynamic_dimensions[p] for p in perm])


@shape_rule("reverse")
def _reverse(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    _check_dimension_numbers(instr, "dimensions", _ints(instr, "dimensions"), operand.rank)
    return without_layout(operand)


@shape_rule("slice")
def _slice(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    slices = _records(instr, "slice", SliceDimension, "[start:limit:stride] per dimension")
    if len(slices) != operand.rank:
        _fail(f"slice has {len(slices)} dimensions, but the operand {show(operand)} has rank {operand.rank}")
    dims = []
    for i, s in enumerate(slices):
        if s.stride < 1:
            _fail(f"slice stride must be positive, got {s.stride} in dimension {i}")
        if not 0 <= s.start <= s.limit <= operand.dimensions[i]:
            _fail(f"slice [{s.start}:{s.limit}] of dimension {i} must satisfy 0 <= start <= limit <= "
                  f"{operand.dimensions[i]} (the size of {show(operand)})")
        dims.append(-(-(s.limit - s.start) // s.stride))
    return _array_shape(operand.element_type, dims, _declared_dynamic(instr, len(dims)))


def _check_start_indices(instr: HloInstruction, first: int, rank: int) -> None:
    """Operands ``first``.. are the start indices: one integral scalar per
    dimension (all of one type), or (XLA's older form) one rank-1 array."""
    indices = [_array(instr, i, f"start index {i - first}") for i in range(first, len(instr.operands))]
    if len(indices) == 1 and indices[0].rank == 1 and rank != 0:
        if indices[0].dimensions[0] != rank or not indices[0].type.is_integral:
            _fail(f"start indices of {instr.opcode} must be {rank} integers, got {show(indices[0])}")
        return
    if len(indices) != rank:
        _fail(f"{instr.opcode} needs one start index per operand dimension: {rank}, got {len(indices)}")
    for i, index in enumerate(indices):
        if index.rank or not index.type.is_integral:
            _fail(f"start index {i} of {instr.opcode} must be an integral scalar, got {show(index)}")
        if index.element_type != indices[0].element_type:
            _fail(f"start indices of {instr.opcode} must all have one type, got {show(indices[0])} and {show(index)}")


@shape_rule("dynamic-slice")
def _dynamic_slice(instr: HloInstruction) -> Shape:
    _at_least(instr, 1)
    operand = _array(instr, 0)
    _check_start_indices(instr, 1, operand.rank)
    sizes = _ints(instr, "dynamic_slice_sizes")
    if len(sizes) != operand.rank:
        _fail(f"dynamic_slice_sizes={_braces(sizes)} of dynamic-slice must have one size per dimension of "
              f"{show(operand)}")
    for i, (size, bound) in enumerate(zip(sizes, operand.dimensions)):
        if not 0 <= size <= bound:
            _fail(f"dynamic_slice_sizes={_braces(sizes)} of dynamic-slice: size {size} of dimension {i} is not "
                  f"within the {bound} of {show(operand)}")
    return _array_shape(operand.element_type, sizes, _declared_dynamic(instr, len(sizes)))


@shape_rule("dynamic-update-slice")
def _dynamic_update_slice(instr: HloInstruction) -> Shape:
    _at_least(instr, 2)
    operand, update = _array(instr, 0), _array(instr, 1, "the update")
    if update.element_type != operand.element_type or update.rank != operand.rank:
        _fail(f"the update of dynamic-update-slice must have the operand's element type and rank, "
              f"got {show(update)} for {show(operand)}")
    for i, (u, o) in enumerate(zip(update.dimensions, operand.dimensions)):
        if not 0 <= u <= o:
            _fail(f"the update {show(update)} of dynamic-update-slice is larger than the operand {show(operand)} "
                  f"in dimension {i}")
    _check_start_indices(instr, 2, operand.rank)
    return without_layout(operand)


@shape_rule("concatenate")
def _concatenate(instr: HloInstruction) -> Shape:
    _at_least(instr, 1)
    shapes = [_array(instr, i) for i in range(len(instr.operands))]
    dims = _ints(instr, "dimensions")
    if len(dims) != 1:
        _fail(f"concatenate needs exactly one dimension, got dimensions={_braces(dims)}")
    d = dims[0]
    first = shapes[0]
    if not 0 <= d < first.rank:
        _fail(f"concatenate dimension {d} is out of range for {show(first)}")
    for shape in shapes[1:]:
        if shape.element_type != first.element_type or shape.rank != first.rank or any(
                a != b for i, (a, b) in enumerate(zip(shape.dimensions, first.dimensions)) if i != d):
            _fail(f"operands of concatenate must agree in element type and in every dimension but {d}, "
                  f"got {show(first)} and {show(shape)}")
    result = list(first.dimensions)
    result[d] = sum(s.dimensions[d] for s in shapes)
    return _array_shape(first.element_type, result, _union_dynamic(shapes))


@shape_rule("pad")
def _pad(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    operand = _array(instr, 0)
    value = _scalar(instr, 1, "the padding value")
    if value.element_type != operand.element_type:
        _fail(f"the padding value of pad must have the operand's element type, got {show(value)} for {show(operand)}")
    padding = _records(instr, "padding", PaddingDimension, "low_high_interior per dimension")
    if len(padding) != operand.rank:
        _fail(f"padding of pad has {len(padding)} dimensions, but the operand {show(operand)} has rank {operand.rank}")
    dims = []
    for i, (p, size) in enumerate(zip(padding, operand.dimensions)):
        if p.interior < 0:
            _fail(f"interior padding of pad must not be negative, got {p.interior} in dimension {i}")
        padded = p.low + p.high + size + max(size - 1, 0) * p.interior
        if padded < 0:
            _fail(f"padding {p.low}_{p.high}_{p.interior} of pad leaves dimension {i} of {show(operand)} "
                  "with a negative size")
        dims.append(padded)
    return _array_shape(operand.element_type, dims, operand.dynamic_dimensions)


@shape_rule("iota")
def _iota(instr: HloInstruction) -> Shape:
    _operand_count(instr, 0)
    declared = _declared_array(instr)
    if not declared.rank:
        _fail("iota cannot produce a scalar")
    d = _int(instr, "iota_dimension")
    if not 0 <= d < declared.rank:
        _fail(f"iota_dimension={d} is out of range for {show(declared)}")
    return without_layout(declared)


def _check_literal(value: Any, shape: Shape) -> None:
    if value is None or isinstance(value, str):  # a token, or an elided `{...}` constant
        return
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            _fail(f"the literal of constant does not have the {len(shape.tuple_shapes)} elements of {show(shape)}")
        for element, sub in zip(value, shape.tuple_shapes):
            _check_literal(element, sub)
        return
    array = np.asarray(value)
    if array.shape != shape.dimensions:
        _fail(f"the literal of constant has dimensions {list(array.shape)}, but the instruction declares "
              f"{show(shape)}")
    if shape.dtype is not None and array.dtype != shape.dtype:
        _fail(f"the literal of constant holds {array.dtype} values, but the instruction declares {show(shape)}")


@shape_rule("constant")
def _constant(instr: HloInstruction) -> Shape:
    _operand_count(instr, 0)
    _check_literal(instr.literal, instr.shape)
    return without_layout(instr.shape)


@shape_rule("parameter")
def _parameter(instr: HloInstruction) -> Shape:
    # The numbering across the computation is the verifier's to check.
    _operand_count(instr, 0)
    number = instr.parameter_number
    if not isinstance(number, int) or number < 0:
        _fail(f"parameter needs a non-negative parameter number, got {number}")
    return without_layout(instr.shape)


# -- reductions and windows -----------------------------------------------------------------

def _half(instr: HloInstruction, what: str) -> int:
    count = len(instr.operands)
    if count < 2 or count % 2:
        _fail(f"{instr.opcode} takes {what} and as many init values, got {count} operands")
    return count // 2


@shape_rule("reduce")
def _reduce(instr: HloInstruction) -> Shape:
    n = _half(instr, "N inputs")
    inputs = [_array(instr, i, f"input {i}") for i in range(n)]
    inits = [_scalar(instr, n + i, f"init value {i}") for i in range(n)]
    _same_dims(instr, inputs, "inputs")
    dims = _ints(instr, "dimensions")
    _check_dimension_numbers(instr, "dimensions", dims, inputs[0].rank, show(inputs[0]))
    (computation,) = _callees(instr, 1, "to_apply")
    _check_reducer(instr, computation, inits, [s.element_type for s in inputs])
    kept = [i for i in range(inputs[0].rank) if i not in dims]
    dynamic = [inputs[0].dynamic_dimensions[i] for i in kept]
    return _one_or_tuple([_array_shape(init.element_type, [inputs[0].dimensions[i] for i in kept], dynamic)
                          for init in inits])


def _window_output(instr: HloInstruction, dims: Sequence[int], window: Sequence[Any],
                   sizes_from: Sequence[int] | None = None) -> list[int]:
    """The dimensions a window slides to over ``dims`` (XLA's InferWindowOutputShape)."""
    if len(window) != len(dims):
        _fail(f"the window of {instr.opcode} has {len(window)} dimensions, the operand {len(dims)}")
    result = []
    for i, (size, w) in enumerate(zip(dims, window)):
        if w.size < 1 or w.stride < 1 or w.base_dilation < 1 or w.window_dilation < 1:
            _fail(f"window dimension {i} of {instr.opcode} needs positive size, stride and dilations, got {w}")
        if sizes_from is not None and w.size != sizes_from[i]:
            _fail(f"window size {w.size} of {instr.opcode} in spatial dimension {i} must equal the kernel's "
                  f"{sizes_from[i]}")
        dilated_base = (size - 1) * w.base_dilation + 1 if size else 0
        padded = w.padding_low + dilated_base + w.padding_high
        if padded < 0:
            _fail(f"the padding of window dimension {i} of {instr.opcode} leaves a negative size")
        dilated_window = (w.size - 1) * w.window_dilation + 1
        result.append(0 if padded == 0 or dilated_window > padded else (padded - dilated_window) // w.stride + 1)
    return result


@shape_rule("reduce-window")
def _reduce_window(instr: HloInstruction) -> Shape:
    n = _half(instr, "N inputs")
    inputs = [_array(instr, i, f"input {i}") for i in range(n)]
    inits = [_scalar(instr, n + i, f"init value {i}") for i in range(n)]
    _same_dims(instr, inputs, "inputs")
    (computation,) = _callees(instr, 1, "to_apply")
    _check_reducer(instr, computation, inits, [s.element_type for s in inputs])
    dims = _window_output(instr, inputs[0].dimensions, _attr(instr, "window"))
    dynamic = _declared_dynamic(instr, len(dims)) if n == 1 else None
    return _one_or_tuple([_array_shape(init.element_type, dims, dynamic) for init in inits])


@shape_rule("select-and-scatter")
def _select_and_scatter(instr: HloInstruction) -> Shape:
    # select-and-scatter(operand, source, init): source has one value per window position.
    _operand_count(instr, 3)
    operand, source = _array(instr, 0), _array(instr, 1, "the source")
    init = _scalar(instr, 2, "the init value")
    select, scatter = _callees(instr, 2, "select, scatter")
    _check_comparator(instr, select, [operand.element_type], "select computation")
    _check_reducer(instr, scatter, [init], [source.element_type], "scatter computation")
    windows = _window_output(instr, operand.dimensions, _attr(instr, "window"))
    if list(source.dimensions) != windows:
        _fail(f"the source of select-and-scatter must have one element per window, {_braces(windows)}, "
              f"got {show(source)}")
    return without_layout(operand)


# -- contractions -----------------------------------------------------------------------

def _contraction_type(instr: HloInstruction, lhs: Shape, rhs: Shape) -> str:
    """The result type of a dot/convolution: operand types agree (floating-point
    precisions may differ); the declared type is the preferred one, which an
    integral op may not narrow."""
    a, b = lhs.type, rhs.type
    if a.name != b.name and not (a.is_floating_point and b.is_floating_point):
        _fail(f"operands of {instr.opcode} must have the same element type, got {show(lhs)} and {show(rhs)}")
    natural = a if a.bit_width >= b.bit_width else b
    if not instr.shape.is_array:
        return natural.name
    preferred = instr.shape.type
    if preferred.name != natural.name and not natural.is_floating_point and preferred.bit_width < natural.bit_width:
        _fail(f"the result type {preferred.name} of {instr.opcode} must not be narrower than its operands' "
              f"{natural.name}")
    return preferred.name


def _dot_dimensions(instr: HloInstruction, lhs: Shape, rhs: Shape,
                    rhs_group: Sequence[int] = ()) -> tuple[list[int], list[bool]]:
    """Dimensions of a dot: batch dimensions, then lhs free dimensions, then rhs
    free dimensions (``rhs_group``, a ragged dot's group dimension, is not free)."""
    lb, rb = _ints(instr, "lhs_batch_dims", ()), _ints(instr, "rhs_batch_dims", ())
    lc, rc = _ints(instr, "lhs_contracting_dims", ()), _ints(instr, "rhs_contracting_dims", ())
    op = instr.opcode
    if len(lb) != len(rb):
        _fail(f"{op} needs as many lhs_batch_dims as rhs_batch_dims, got {_braces(lb)} and {_braces(rb)}")
    if len(lc) != len(rc):
        _fail(f"{op} needs as many lhs_contracting_dims as rhs_contracting_dims, got {_braces(lc)} and {_braces(rc)}")
    _check_dimension_numbers(instr, "lhs batch and contracting dims", lb + lc, lhs.rank, f"lhs {show(lhs)}")
    _check_dimension_numbers(instr, "rhs batch, contracting and group dims", (*rb, *rc, *rhs_group), rhs.rank,
                             f"rhs {show(rhs)}")
    for what, ldims, rdims in (("batch", lb, rb), ("contracting", lc, rc)):
        for ld, rd in zip(ldims, rdims):
            if lhs.dimensions[ld] != rhs.dimensions[rd]:
                _fail(f"{what} dimensions of {op} must have equal sizes: lhs dimension {ld} of {show(lhs)} is "
                      f"{lhs.dimensions[ld]}, rhs dimension {rd} of {show(rhs)} is {rhs.dimensions[rd]}")
    lfree = [d for d in range(lhs.rank) if d not in lb + lc]
    rfree = [d for d in range(rhs.rank) if d not in (*rb, *rc, *rhs_group)]
    picks = [(lhs, d) for d in lb] + [(lhs, d) for d in lfree] + [(rhs, d) for d in rfree]
    return [s.dimensions[d] for s, d in picks], [s.dynamic_dimensions[d] for s, d in picks]


@shape_rule("dot")
def _dot(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    lhs, rhs = _array(instr, 0, "lhs"), _array(instr, 1, "rhs")
    dims, dynamic = _dot_dimensions(instr, lhs, rhs)
    return _array_shape(_contraction_type(instr, lhs, rhs), dims, dynamic)


@shape_rule("ragged-dot")
def _ragged_dot(instr: HloInstruction) -> Shape:
    # ragged-dot(lhs, rhs, group_sizes): lhs_ragged_dims={r} is split into groups of group_sizes.
    # r free in lhs: rhs has a group dimension (rhs_group_dims) picking each group's matrix;
    # r contracting: the result gets a leading group dimension; r batch: a plain dot.
    _operand_count(instr, 3)
    lhs, rhs = _array(instr, 0, "lhs"), _array(instr, 1, "rhs")
    group_sizes = _array(instr, 2, "group_sizes")
    if not group_sizes.type.is_integral or not group_sizes.rank:
        _fail(f"group_sizes of ragged-dot must be an integral array, got {show(group_sizes)}")
    groups = group_sizes.dimensions[-1]
    ragged = _ints(instr, "lhs_ragged_dims")
    rhs_group = _ints(instr, "rhs_group_dims", ())
    if len(ragged) != 1 or not 0 <= ragged[0] < lhs.rank:
        _fail(f"ragged-dot needs one lhs ragged dimension of {show(lhs)}, got lhs_ragged_dims={_braces(ragged)}")
    contracting = ragged[0] in _ints(instr, "lhs_contracting_dims", ())
    batch = ragged[0] in _ints(instr, "lhs_batch_dims", ())
    if contracting or batch:
        if rhs_group:
            _fail("ragged-dot has rhs_group_dims only when the ragged dimension is a free lhs dimension")
    else:
        if len(rhs_group) != 1 or not 0 <= rhs_group[0] < rhs.rank:
            _fail(f"ragged-dot with a free ragged dimension needs one rhs group dimension of {show(rhs)}, "
                  f"got rhs_group_dims={_braces(rhs_group)}")
        if rhs.dimensions[rhs_group[0]] != groups:
            _fail(f"the rhs group dimension of ragged-dot has size {rhs.dimensions[rhs_group[0]]}, but "
                  f"group_sizes {show(group_sizes)} has {groups} groups")
    dims, dynamic = _dot_dimensions(instr, lhs, rhs, rhs_group)
    if contracting:
        dims, dynamic = [groups, *dims], [False, *dynamic]
    return _array_shape(_contraction_type(instr, lhs, rhs), dims, dynamic)


def _parse_labels(instr: HloInstruction, text: str, letters: str, spatial: int, what: str) -> tuple[int, ...]:
    """Positions of ``letters`` then of the spatial digits 0..spatial-1 in one part of ``dim_labels``."""
    expected = sorted(letters + "".join(str(i) for i in range(spatial)))
    if sorted(text) != expected:
        _fail(f"dim_labels {what} part '{text}' must name {letters[0]}, {letters[1]} and spatial dimensions "
              f"0..{spatial - 1} once each")
    return tuple(text.index(c) for c in letters + "".join(str(i) for i in range(spatial)))


@shape_rule("convolution")
def _convolution(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    lhs, rhs = _array(instr, 0, "lhs"), _array(instr, 1, "rhs")
    labels = _word(instr, "dim_labels")
    match = re.fullmatch(r"(\w+)_(\w+)->(\w+)", labels)
    if not match:
        _fail(f"dim_labels of convolution must look like b01f_01io->b01f, got {labels}")
    window = _attr(instr, "window", ())
    spatial = len(window)
    lhs_text, rhs_text, out_text = match.groups()
    for text, shape, name in ((lhs_text, lhs, "lhs"), (rhs_text, rhs, "rhs")):
        if len(text) != shape.rank:
            _fail(f"dim_labels {name} part '{text}' has {len(text)} dimensions, but {name} {show(shape)} has "
                  f"rank {shape.rank}")
    if len(out_text) != spatial + 2 or len(lhs_text) != spatial + 2:
        _fail(f"convolution has {spatial} window dimensions, but dim_labels {labels} has "
              f"{len(lhs_text) - 2} spatial dimensions")
    batch, feature, *lhs_spatial = _parse_labels(instr, lhs_text, "bf", spatial, "lhs")
    kin, kout, *rhs_spatial = _parse_labels(instr, rhs_text, "io", spatial, "rhs")
    out_batch, out_feature, *out_spatial = _parse_labels(instr, out_text, "bf", spatial, "output")
    groups = _int(instr, "feature_group_count", 1)
    batch_groups = _int(instr, "batch_group_count", 1)
    if groups < 1 or batch_groups < 1:
        _fail(f"feature_group_count ({groups}) and batch_group_count ({batch_groups}) of convolution must be positive")
    if groups > 1 and batch_groups > 1:
        _fail("convolution cannot have both feature_group_count and batch_group_count above 1")
    in_features, in_batch = lhs.dimensions[feature], lhs.dimensions[batch]
    kernel_in, kernel_out = rhs.dimensions[kin], rhs.dimensions[kout]
    if in_features % groups:
        _fail(f"input features ({in_features}) of convolution must be divisible by feature_group_count ({groups})")
    if in_features // groups != kernel_in:
        _fail(f"input features ({in_features}) / feature_group_count ({groups}) of convolution must equal the "
              f"kernel's input features ({kernel_in})")
    if kernel_out % groups:
        _fail(f"kernel output features ({kernel_out}) of convolution must be divisible by feature_group_count "
              f"({groups})")
    if in_batch % batch_groups or kernel_out % batch_groups:
        _fail(f"input batch ({in_batch}) and kernel output features ({kernel_out}) of convolution must be "
              f"divisible by batch_group_count ({batch_groups})")
    element_type = _contraction_type(instr, lhs, rhs)
    spatial_out = _window_output(instr, [lhs.dimensions[d] for d in lhs_spatial], window,
                                 [rhs.dimensions[d] for d in rhs_spatial])
    dims = [0] * (spatial + 2)
    dims[out_batch] = in_batch // batch_groups
    dims[out_feature] = kernel_out
    for d, size in zip(out_spatial, spatial_out):
        dims[d] = size
    return _array_shape(element_type, dims, _declared_dynamic(instr, len(dims)))


# -- gather and scatter --------------------------------------------------------------------

def _index_batch_dims(indices: Shape, index_vector_dim: int) -> list[int]:
    # The dimensions of the indices that enumerate index vectors.
    return [d for d in range(indices.rank) if d != index_vector_dim]


def _index_vector_size(instr: HloInstruction, indices: Shape, index_vector_dim: int) -> int:
    if not 0 <= index_vector_dim <= indices.rank:
        _fail(f"index_vector_dim={index_vector_dim} of {instr.opcode} is out of range for indices {show(indices)}")
    if not indices.type.is_integral:
        _fail(f"indices of {instr.opcode} must be integral, got {show(indices)}")
    # index_vector_dim == rank means an implicit trailing dimension of size 1.
    return indices.dimensions[index_vector_dim] if index_vector_dim < indices.rank else 1


def _check_batching_dims(instr: HloInstruction, names: tuple[str, str], operand_dims: Sequence[int],
                         index_dims: Sequence[int], operand: Shape, indices: Shape, index_vector_dim: int) -> None:
    _check_dimension_numbers(instr, names[0], operand_dims, operand.rank, show(operand), ordered=True)
    _check_dimension_numbers(instr, names[1], index_dims, indices.rank, f"indices {show(indices)}")
    if len(operand_dims) != len(index_dims):
        _fail(f"{instr.opcode} needs as many {names[0]} as {names[1]}, got {_braces(operand_dims)} and "
              f"{_braces(index_dims)}")
    if index_vector_dim in index_dims:
        _fail(f"{names[1]}={_braces(index_dims)} of {instr.opcode} must not contain index_vector_dim")
    for o, i in zip(operand_dims, index_dims):
        if operand.dimensions[o] != indices.dimensions[i]:
            _fail(f"batching dimensions of {instr.opcode} must have equal sizes: operand dimension {o} of "
                  f"{show(operand)} and indices dimension {i} of {show(indices)}")


@shape_rule("gather")
def _gather(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    operand, indices = _array(instr, 0), _array(instr, 1, "the start indices")
    index_vector_dim = _int(instr, "index_vector_dim")
    vector = _index_vector_size(instr, indices, index_vector_dim)
    offset_dims = _ints(instr, "offset_dims")
    collapsed = _ints(instr, "collapsed_slice_dims", ())
    start_index_map = _ints(instr, "start_index_map")
    slice_sizes = _ints(instr, "slice_sizes")
    operand_batching = _ints(instr, "operand_batching_dims", ())
    indices_batching = _ints(instr, "start_indices_batching_dims", ())
    batch_dims = _index_batch_dims(indices, index_vector_dim)
    out_rank = len(offset_dims) + len(batch_dims)
    _check_dimension_numbers(instr, "offset_dims", offset_dims, out_rank, "the result", ordered=True)
    _check_dimension_numbers(instr, "collapsed_slice_dims", collapsed, operand.rank, show(operand), ordered=True)
    _check_batching_dims(instr, ("operand_batching_dims", "start_indices_batching_dims"), operand_batching,
                         indices_batching, operand, indices, index_vector_dim)
    _check_dimension_numbers(instr, "start_index_map", start_index_map, operand.rank, show(operand))
    if len(start_index_map) != vector:
        _fail(f"start_index_map={_braces(start_index_map)} of gather must have one entry per index vector "
              f"element ({vector} in {show(indices)})")
    if set(collapsed) & set(operand_batching):
        _fail("collapsed_slice_dims and operand_batching_dims of gather must not overlap")
    if len(slice_sizes) != operand.rank:
        _fail(f"slice_sizes={_braces(slice_sizes)} of gather must have one size per dimension of {show(operand)}")
    for d, (size, bound) in enumerate(zip(slice_sizes, operand.dimensions)):
        if not 0 <= size <= bound:
            _fail(f"slice_sizes={_braces(slice_sizes)} of gather: size {size} of dimension {d} is not within "
                  f"the {bound} of {show(operand)}")
    for d in collapsed + operand_batching:
        if slice_sizes[d] > 1:
            _fail(f"gather can only drop dimensions sliced to size 1, but slice_sizes[{d}] is {slice_sizes[d]}")
    if len(offset_dims) + len(collapsed) + len(operand_batching) != operand.rank:
        _fail(f"gather: offset_dims ({len(offset_dims)}) + collapsed_slice_dims ({len(collapsed)}) + "
              f"operand_batching_dims ({len(operand_batching)}) must add up to the operand rank {operand.rank}")
    offsets = iter(slice_sizes[d] for d in range(operand.rank) if d not in collapsed + operand_batching)
    batches = iter(batch_dims)
    dims = [next(offsets) if i in offset_dims else indices.dimensions[next(batches)] for i in range(out_rank)]
    return _array_shape(operand.element_type, dims, _declared_dynamic(instr, out_rank))


@shape_rule("scatter")
def _scatter(instr: HloInstruction) -> Shape:
    count = len(instr.operands)
    if count < 3 or count % 2 == 0:
        _fail(f"scatter takes N operands, the indices and N updates, got {count} operands")
    n = (count - 1) // 2
    operands = [_array(instr, i, f"operand {i}") for i in range(n)]
    indices = _array(instr, n, "the scatter indices")
    updates = [_array(instr, n + 1 + i, f"update {i}") for i in range(n)]
    _same_dims(instr, operands, "operands")
    _same_dims(instr, updates, "updates")
    operand, update = operands[0], updates[0]
    index_vector_dim = _int(instr, "index_vector_dim")
    vector = _index_vector_size(instr, indices, index_vector_dim)
    window_dims = _ints(instr, "update_window_dims")
    inserted = _ints(instr, "inserted_window_dims", ())
    to_operand = _ints(instr, "scatter_dims_to_operand_dims")
    input_batching = _ints(instr, "input_batching_dims", ())
    indices_batching = _ints(instr, "scatter_indices_batching_dims", ())
    _check_dimension_numbers(instr, "update_window_dims", window_dims, update.rank, show(update), ordered=True)
    _check_dimension_numbers(instr, "inserted_window_dims", inserted, operand.rank, show(operand), ordered=True)
    _check_batching_dims(instr, ("input_batching_dims", "scatter_indices_batching_dims"), input_batching,
                         indices_batching, operand, indices, index_vector_dim)
    if set(inserted) & set(input_batching):
        _fail("inserted_window_dims and input_batching_dims of scatter must not overlap")
    if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
        _fail(f"scatter: update_window_dims ({len(window_dims)}) + inserted_window_dims ({len(inserted)}) + "
              f"input_batching_dims ({len(input_batching)}) must add up to the operand rank {operand.rank}")
    _check_dimension_numbers(instr, "scatter_dims_to_operand_dims", to_operand, operand.rank, show(operand))
    if len(to_operand) != vector:
        _fail(f"scatter_dims_to_operand_dims={_braces(to_operand)} of scatter must have one entry per index "
              f"vector element ({vector} in {show(indices)})")
    batch_dims = _index_batch_dims(indices, index_vector_dim)
    if update.rank != len(window_dims) + len(batch_dims):
        _fail(f"updates of scatter must have rank {len(window_dims) + len(batch_dims)} (update_window_dims plus "
              f"the index batch dimensions of {show(indices)}), got {show(update)}")
    window_operand_dims = [d for d in range(operand.rank) if d not in inserted + input_batching]
    for u, o in zip(window_dims, window_operand_dims):
        if update.dimensions[u] > operand.dimensions[o]:
            _fail(f"update window dimension {u} of {show(update)} is larger than operand dimension {o} of "
                  f"{show(operand)}")
    scatter_dims = [d for d in range(update.rank) if d not in window_dims]
    for u, i in zip(scatter_dims, batch_dims):
        if update.dimensions[u] != indices.dimensions[i]:
            _fail(f"update dimension {u} of {show(update)} must equal the size {indices.dimensions[i]} of "
                  f"indices dimension {i} of {show(indices)}")
    for i, (o, u) in enumerate(zip(operands, updates)):
        if o.element_type != u.element_type:
            _fail(f"update {i} of scatter must have the element type of operand {i}, got {show(u)} for {show(o)}")
    (computation,) = _callees(instr, 1, "to_apply")
    _check_reducer(instr, computation, [Shape(o.element_type) for o in operands], [u.element_type for u in updates])
    return _one_or_tuple(operands)


# -- sort and topk ---------------------------------------------------------------------

@shape_rule("sort")
def _sort(instr: HloInstruction) -> Shape:
    _at_least(instr, 1)
    shapes = [_array(instr, i) for i in range(len(instr.operands))]
    _same_dims(instr, shapes, "operands")
    dims = _ints(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        _fail(f"sort needs one dimension of {show(shapes[0])}, got dimensions={_braces(dims)}")
    (computation,) = _callees(instr, 1, "to_apply")
    _check_comparator(instr, computation, [s.element_type for s in shapes])
    return _one_or_tuple(shapes)


@shape_rule("topk")
def _topk(instr: HloInstruction) -> Shape:
    # topk(operand), k=K: the K largest (or smallest) along the last dimension and their s32 indices.
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    k = _int(instr, "k")
    if not operand.rank:
        _fail("topk needs an operand of rank >= 1")
    if not 0 <= k <= operand.dimensions[-1]:
        _fail(f"k={k} of topk must be within the last dimension of {show(operand)}")
    dims = (*operand.dimensions[:-1], k)
    return _tuple([_array_shape(operand.element_type, dims), _array_shape("s32", dims)])


# -- control flow and calls -------------------------------------------------------------------

@shape_rule("while")
def _while(instr: HloInstruction) -> Shape:
    _callees(instr, 2, "body, condition")
    condition, body = while_condition_and_body(instr)
    if read_from_stablehlo(instr):
        # StableHLO's while: one operand, region parameter and body result per loop value.
        states = [o.shape for o in instr.operands]
        _check_parameters(instr, body, states, "body")
        _check_parameters(instr, condition, states, "condition")
        returned = [v.shape for v in region_results(body)]
        if len(returned) != len(states) or not all(same_shape(r, s) for r, s in zip(returned, states)):
            _fail(f"body {body.name} of while must return the loop values ({', '.join(map(show, states))}), "
                  f"returns ({', '.join(map(show, returned))})")
        tested = [v.shape for v in region_results(condition)]
        if len(tested) != 1 or not same_shape(tested[0], _SCALAR_PRED):
            _fail(f"condition {condition.name} of while must return pred[], returns "
                  f"({', '.join(map(show, tested))})")
        return without_layout(states[0]) if len(states) == 1 else _tuple(states)
    _operand_count(instr, 1)
    state = instr.operands[0].shape
    _check_parameters(instr, body, [state], "body")
    _check_parameters(instr, condition, [state], "condition")
    if not same_shape(_root_shape(body), state):
        _fail(f"body {body.name} of while must return the loop state {show(state)}, "
              f"returns {show(_root_shape(body))}")
    if not same_shape(_root_shape(condition), _SCALAR_PRED):
        _fail(f"condition {condition.name} of while must return pred[], returns {show(_root_shape(condition))}")
    return without_layout(state)


@shape_rule("conditional")
def _conditional(instr: HloInstruction) -> Shape:
    # conditional(index, operand of branch 0, operand of branch 1, ...); a pred index picks true/false.
    _at_least(instr, 1)
    index = instr.operands[0].shape
    branches = instr.called_computations
    if not branches:
        _fail("conditional needs at least one branch computation")
    if same_shape(index, _SCALAR_PRED):
        if len(branches) != 2:
            _fail(f"a conditional with a pred[] branch index needs 2 branches, got {len(branches)}")
    elif not same_shape(index, _SCALAR_S32):
        _fail(f"the branch index of conditional must be pred[] or s32[], got {show(index)}")
    if read_from_stablehlo(instr):
        return _region_branches(instr, branches)
    if len(instr.operands) - 1 != len(branches):
        _fail(f"conditional has {len(branches)} branches, so it takes {len(branches) + 1} operands, "
              f"got {len(instr.operands)}")
    roots = []
    for i, branch in enumerate(branches):
        _check_parameters(instr, branch, [instr.operands[i + 1].shape], f"branch {i}")
        roots.append(_root_shape(branch))
        if not same_shape(roots[-1], roots[0]):
            _fail(f"branches of conditional must return the same shape, {branches[0].name} returns "
                  f"{show(roots[0])} and {branch.name} returns {show(roots[-1])}")
    return without_layout(roots[0])


def _region_branches(instr: HloInstruction, branches: Sequence[HloComputation]) -> Shape:
    # StableHLO's case and if: the branch index is the only operand; branches
    # take no parameters and return the op's results.
    _operand_count(instr, 1)
    results = None
    for i, branch in enumerate(branches):
        _check_parameters(instr, branch, [], f"branch {i}")
        returned = [v.shape for v in region_results(branch)]
        if results is None:
            results = returned
        elif len(returned) != len(results) or not all(same_shape(a, b) for a, b in zip(returned, results)):
            _fail(f"branches of conditional must return the same values, {branches[0].name} returns "
                  f"({', '.join(map(show, results))}) and {branch.name} returns ({', '.join(map(show, returned))})")
    results = results or []
    return without_layout(results[0]) if len(results) == 1 else _tuple(results)


@shape_rule("call")
def _call(instr: HloInstruction) -> Shape:
    (computation,) = _callees(instr, 1, "to_apply")
    _check_parameters(instr, computation, [o.shape for o in instr.operands], "to_apply computation")
    return without_layout(_root_shape(computation))


_FUSION_KINDS = {"kLoop", "kInput", "kOutput", "kCustom"}


@shape_rule("fusion")
def _fusion(instr: HloInstruction) -> Shape:
    kind = _word(instr, "kind", "kLoop")
    if kind not in _FUSION_KINDS:
        _fail(f"fusion kind must be one of {', '.join(sorted(_FUSION_KINDS))}, got {kind}")
    (computation,) = _callees(instr, 1, "calls")
    _check_parameters(instr, computation, [o.shape for o in instr.operands], "fused computation")
    return without_layout(_root_shape(computation))


@shape_rule("map")
def _map(instr: HloInstruction) -> Shape:
    _at_least(instr, 1)
    shapes = [_array(instr, i) for i in range(len(instr.operands))]
    _same_dims(instr, shapes, "operands")
    dims = _ints(instr, "dimensions", tuple(range(shapes[0].rank)))
    if list(dims) != list(range(shapes[0].rank)):
        _fail(f"dimensions={_braces(dims)} of map must be all dimensions of {show(shapes[0])} in order")
    (computation,) = _callees(instr, 1, "to_apply")
    _check_parameters(instr, computation, [Shape(s.element_type) for s in shapes], "to_apply computation")
    root = _root_shape(computation)
    if not root.is_array or root.rank:
        _fail(f"to_apply computation {computation.name} of map must return a scalar, returns {show(root)}")
    return _array_shape(root.element_type, shapes[0].dimensions, _union_dynamic(shapes))


# custom_call_target -> the rule of a target whose meaning xlapy knows (the
# interpreter runs them); other targets are checked as calls only.
CUSTOM_CALL_RULES: dict[str, ShapeRule] = {}
custom_call_rule = registrar(CUSTOM_CALL_RULES, "custom-call rules")


@shape_rule("custom-call")
def _custom_call(instr: HloInstruction) -> Shape:
    target = _attr(instr, "custom_call_target")
    if not isinstance(target, str) or not target:
        _fail("custom-call needs a non-empty custom_call_target")
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is None:
        return without_layout(instr.shape)  # the target decides the result
    return rule(instr)


def _custom_call_results(instr: HloInstruction) -> list[Shape]:
    # One result per operand: the declared tuple's elements, or the declared shape for one operand.
    if len(instr.operands) == 1:
        return [instr.shape]
    declared = instr.shape
    if not declared.is_tuple or len(declared.tuple_shapes) != len(instr.operands):
        _fail(f"custom-call {instr.attr('custom_call_target')} returns one value per operand, a tuple of "
              f"{len(instr.operands)}, but the instruction declares {show(declared)}")
    return list(declared.tuple_shapes)


# Targets that only annotate their operands (sharding, placement, memory
# space) and return them unchanged; and those between a value's global shape
# and its per-device shard. Runners name their rules of these targets from here.
PASS_THROUGH_TARGETS = ("Sharding", "MoveToHost", "MoveToDevice", "annotate_device_placement", "LayoutConstraint",
                        "xla_python_cpu_callback_identity", "xla.sdy.FuncResultSharding")
SHARD_SHAPE_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.GlobalToLocalShape",
                       "xla.sdy.LocalToGlobalShape")


@custom_call_rule(*PASS_THROUGH_TARGETS)
def _annotation_call(instr: HloInstruction) -> Shape:
    # Annotations (sharding, memory space, layout): each operand passes through unchanged.
    _at_least(instr, 1)
    _custom_call_results(instr)
    return _one_or_tuple([o.shape for o in instr.operands])


@custom_call_rule(*SHARD_SHAPE_TARGETS)
def _shard_shape_call(instr: HloInstruction) -> Shape:
    # Between a value's global shape and its per-device shard: sizes change, element types and ranks do not.
    _at_least(instr, 1)
    results = _custom_call_results(instr)
    for i, (operand, result) in enumerate(zip(instr.operands, results)):
        if not (operand.shape.is_array and result.is_array and operand.shape.element_type == result.element_type
                and operand.shape.rank == result.rank):
            _fail(f"custom-call {instr.attr('custom_call_target')} keeps the element type and rank of operand {i}: "
                  f"{show(operand.shape)} cannot become {show(result)}")
    return without_layout(instr.shape)


@custom_call_rule("TopK")
def _topk_call(instr: HloInstruction) -> Shape:
    # XLA:CPU's TopK: the first k of each row (last dimension) in the order of
    # a comparator, with their s32 indices. The comparator is that of the sort
    # the custom call replaces: of (value, value, index, index) for a sort of
    # values and their iota, of (value, value) for a sort of the values alone.
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    if not operand.rank:
        _fail(f"custom-call TopK needs an operand of rank >= 1, got {show(operand)}")
    if len(instr.called_computations) != 1:
        _fail(f"custom-call TopK needs one comparator computation (called_computations={{...}}), "
              f"got {len(instr.called_computations)}")
    comparator = instr.called_computations[0]
    types = [operand.element_type] if len(comparator.parameters) == 2 else [operand.element_type, "s32"]
    _check_comparator(instr, comparator, types, "comparator")
    declared = _declared_tuple(instr, 2)
    values = declared.tuple_shapes[0]
    k = values.dimensions[-1] if values.is_array and values.rank else -1
    expected = [_array_shape(operand.element_type, (*operand.dimensions[:-1], k)),
                _array_shape("s32", (*operand.dimensions[:-1], k))]
    if len(declared.tuple_shapes) != 2 or not 0 <= k <= operand.dimensions[-1] or not all(
            same_shape(d, e) for d, e in zip(declared.tuple_shapes, expected)):
        _fail(f"custom-call TopK of {show(operand)} returns (values, s32 indices) of its leading dimensions and "
              f"k <= {operand.dimensions[-1]}, but the instruction declares {show(declared)}")
    return _tuple(expected)


# -- tuples, tokens, plumbing -------------------------------------------------------------------

@shape_rule("tuple")
def _tuple_rule(instr: HloInstruction) -> Shape:
    return _tuple([o.shape for o in instr.operands])


@shape_rule("get-tuple-element")
def _get_tuple_element(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _tuple_operand(instr, 0)
    index = _int(instr, "index")
    if not 0 <= index < len(operand.tuple_shapes):
        _fail(f"index={index} of get-tuple-element is out of range for {show(operand)}")
    return without_layout(operand.tuple_shapes[index])


@shape_rule("bitcast")
def _bitcast(instr: HloInstruction) -> Shape:
    # A bitcast reinterprets the buffer: the result must occupy as many bytes, as the layouts lay them out
    # (tile and tail padding included).
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    declared = _declared_array(instr)
    before, after = _byte_size(operand), _byte_size(declared)
    if before is not None and after is not None and before != after:
        _fail(f"bitcast must keep the byte size: {_show_layout(operand)} has {before} bytes, "
              f"{_show_layout(declared)} has {after}")
    return without_layout(declared)


def _byte_size(shape: Shape) -> int | None:
    """The bytes of ``shape``'s physical buffer; None while a dimension is unbounded."""
    if _element_count(shape) is None:
        return None
    try:
        return physical_byte_size(shape)
    except XlapyError as error:
        _fail(f"{shape}: {error}")


def _show_layout(shape: Shape) -> str:
    # The layout only matters to a byte size when it pads or packs.
    layout = shape.layout
    plain = layout is None or (not layout.tiles and not layout.element_size_in_bits
                               and layout.tail_padding_alignment_in_elements == 1)
    return show(shape) if plain else str(shape)


@shape_rule("domain")
def _pass_through(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


@shape_rule("opt-barrier")
def _optimization_barrier(instr: HloInstruction) -> Shape:
    if read_from_stablehlo(instr) and len(instr.operands) != 1:
        # StableHLO's barrier passes any number of values through, one result each.
        return _tuple([o.shape for o in instr.operands])
    return _pass_through(instr)


@shape_rule("after-all")
def _after_all(instr: HloInstruction) -> Shape:
    for i, operand in enumerate(instr.operands):
        if not operand.shape.is_token:
            _fail(f"operands of after-all must be tokens, operand {i} is {show(operand.shape)}")
    return _TOKEN


@shape_rule("add-dependency")
def _add_dependency(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    if not instr.operands[1].shape.is_token:
        _fail(f"the second operand of add-dependency must be a token, got {show(instr.operands[1].shape)}")
    return without_layout(instr.operands[0].shape)


@shape_rule("partition-id", "replica-id")
def _device_id(instr: HloInstruction) -> Shape:
    _operand_count(instr, 0)
    return _SCALAR_U32


@shape_rule("get-dimension-size")
def _get_dimension_size(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    dims = _ints(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        _fail(f"get-dimension-size needs one dimension of {show(operand)}, got dimensions={_braces(dims)}")
    return _SCALAR_S32


@shape_rule("set-dimension-size")
def _set_dimension_size(instr: HloInstruction) -> Shape:
    _operand_count(instr, 2)
    operand = _array(instr, 0)
    size = instr.operands[1].shape
    if not same_shape(size, _SCALAR_S32):
        _fail(f"the size operand of set-dimension-size must be s32[], got {show(size)}")
    dims = _ints(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        _fail(f"set-dimension-size needs one dimension of {show(operand)}, got dimensions={_braces(dims)}")
    dynamic = list(operand.dynamic_dimensions)
    dynamic[dims[0]] = True
    return _array_shape(operand.element_type, operand.dimensions, dynamic)


# -- random numbers ---------------------------------------------------------------------------

@shape_rule("rng")
def _rng(instr: HloInstruction) -> Shape:
    # StableHLO's rng also takes the result's dimensions as a rank-1 integer operand.
    if read_from_stablehlo(instr) and len(instr.operands) == 3:
        sizes = _array(instr, 2, "the shape operand")
        if sizes.rank != 1 or not sizes.type.is_integral or sizes.dimensions[0] != _declared_array(instr).rank:
            _fail(f"the shape operand of rng must hold one integer per result dimension, got {show(sizes)} "
                  f"for {show(instr.shape)}")
    else:
        _operand_count(instr, 2)
    a, b = _scalar(instr, 0, "the first parameter"), _scalar(instr, 1, "the second parameter")
    if a.element_type != b.element_type:
        _fail(f"parameters of rng must have one element type, got {show(a)} and {show(b)}")
    distribution = _word(instr, "distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        _fail(f"rng distribution must be rng_uniform or rng_normal, got {distribution}")
    if distribution == "rng_normal":
        _require_kind(instr, a, _FLOAT, "parameters for rng_normal")
    declared = _declared_array(instr)
    return _array_shape(a.element_type, declared.dimensions, declared.dynamic_dimensions)


@shape_rule("rng-get-and-update-state")
def _rng_state(instr: HloInstruction) -> Shape:
    # The state of XLA's random number generator: two u64 words.
    _operand_count(instr, 0)
    return _array_shape("u64", [2])


# The state sizes each algorithm takes (StableHLO's rng_bit_generator); the
# default algorithm's state is the implementation's (any integral array).
_RNG_STATE_SIZES: dict[str, tuple[int, ...]] = {"rng_default": (), "rng_philox": (2, 3), "rng_three_fry": (2,)}


@shape_rule("rng-bit-generator")
def _rng_bit_generator(instr: HloInstruction) -> Shape:
    # rng-bit-generator(state) -> (new state, random bits of the declared shape).
    _operand_count(instr, 1)
    state = _array(instr, 0, "the state")
    algorithm = _word(instr, "algorithm", "rng_default")
    sizes = _RNG_STATE_SIZES.get(algorithm)
    if sizes is None:
        _fail(f"rng-bit-generator algorithm must be one of {', '.join(sorted(_RNG_STATE_SIZES))}, got {algorithm}")
    if sizes and (state.element_type != "u64" or state.rank != 1 or state.dimensions[0] not in sizes):
        _fail(f"the state of rng-bit-generator with {algorithm} must be "
              f"{' or '.join(f'u64[{n}]' for n in sizes)}, got {show(state)}")
    if not state.type.is_integral:
        _fail(f"the state of rng-bit-generator must be integral, got {show(state)}")
    declared = _declared_tuple(instr, 2)
    bits = declared.tuple_shapes[1]
    if not bits.is_array or not bits.type.is_integral:
        _fail(f"rng-bit-generator produces integral bits, but the instruction declares {show(declared)}")
    return _tuple([state, bits])


# -- linear algebra and normalisation ---------------------------------------------------------

@shape_rule("fft")
def _fft(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    kind = _word(instr, "fft_type")
    lengths = _ints(instr, "fft_length")
    if not 1 <= len(lengths) <= 3 or len(lengths) > operand.rank:
        _fail(f"fft_length={_braces(lengths)} of fft must name 1 to 3 of the dimensions of {show(operand)}")
    inner = list(operand.dimensions[-len(lengths):])
    dims = list(operand.dimensions)
    if kind in ("FFT", "IFFT"):
        _require_kind(instr, operand, frozenset({TypeKind.COMPLEX}), f"operands for {kind}")
        expected, element_type = list(lengths), operand.element_type
    elif kind == "RFFT":
        if operand.element_type not in ("f32", "f64"):
            _fail(f"RFFT needs an f32 or f64 operand, got {show(operand)}")
        expected, element_type = list(lengths), "c64" if operand.element_type == "f32" else "c128"
        dims[-1] = lengths[-1] // 2 + 1
    elif kind == "IRFFT":
        _require_kind(instr, operand, frozenset({TypeKind.COMPLEX}), f"operands for {kind}")
        expected, element_type = [*lengths[:-1], lengths[-1] // 2 + 1], _component_type(operand.element_type)
        dims[-1] = lengths[-1]
    else:
        _fail(f"fft_type must be FFT, IFFT, RFFT or IRFFT, got {kind}")
    if inner != expected:
        _fail(f"{kind} with fft_length={_braces(lengths)} needs minor dimensions {_braces(expected)}, "
              f"got {show(operand)}")
    return _array_shape(element_type, dims, operand.dynamic_dimensions)


def _square_matrices(instr: HloInstruction, shape: Shape, what: str) -> None:
    if shape.rank < 2 or shape.dimensions[-1] != shape.dimensions[-2]:
        _fail(f"{what} of {instr.opcode} must be (batches of) square matrices, got {show(shape)}")
    _require_kind(instr, shape, _FLOAT_OR_COMPLEX)


@shape_rule("cholesky")
def _cholesky(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    operand = _array(instr, 0)
    _square_matrices(instr, operand, "the operand")
    return without_layout(operand)


@shape_rule("triangular-solve")
def _triangular_solve(instr: HloInstruction) -> Shape:
    # Solves a x = b (left_side) or x a = b for x, a triangular.
    _operand_count(instr, 2)
    a, b = _array(instr, 0, "a"), _array(instr, 1, "b")
    _square_matrices(instr, a, "a")
    if b.element_type != a.element_type or b.rank != a.rank or b.dimensions[:-2] != a.dimensions[:-2]:
        _fail(f"b of triangular-solve must match a in element type and batch dimensions, got {show(a)} and {show(b)}")
    left = _bool(instr, "left_side")
    shared = b.dimensions[-2] if left else b.dimensions[-1]
    if shared != a.dimensions[-1]:
        side = "rows" if left else "columns"
        _fail(f"the {side} of b {show(b)} must match the size of a {show(a)} in triangular-solve")
    return without_layout(b)


def _feature_index(instr: HloInstruction, operand: Shape) -> int:
    index = _int(instr, "feature_index")
    if not 0 <= index < operand.rank:
        _fail(f"feature_index={index} of {instr.opcode} is out of range for {show(operand)}")
    return index


def _check_per_feature(instr: HloInstruction, indices: Sequence[int], operand: Shape, features: int) -> Shape:
    per_feature = _array_shape(operand.element_type, [features])
    for i in indices:
        if not same_shape(instr.operands[i].shape, per_feature):
            _fail(f"operand {i} of {instr.opcode} must be {show(per_feature)} (one value per feature), "
                  f"got {show(instr.operands[i].shape)}")
    return per_feature


@shape_rule("batch-norm-inference")
def _batch_norm_inference(instr: HloInstruction) -> Shape:
    # (operand, scale, offset, mean, variance)
    _operand_count(instr, 5)
    operand = _array(instr, 0)
    _require_kind(instr, operand, _FLOAT)
    _check_per_feature(instr, range(1, 5), operand, operand.dimensions[_feature_index(instr, operand)])
    return without_layout(operand)


@shape_rule("batch-norm-training")
def _batch_norm_training(instr: HloInstruction) -> Shape:
    # (operand, scale, offset) -> (normalised, batch mean, batch variance)
    _operand_count(instr, 3)
    operand = _array(instr, 0)
    _require_kind(instr, operand, _FLOAT)
    per_feature = _check_per_feature(instr, (1, 2), operand, operand.dimensions[_feature_index(instr, operand)])
    return _tuple([operand, per_feature, per_feature])


@shape_rule("batch-norm-grad")
def _batch_norm_grad(instr: HloInstruction) -> Shape:
    # (operand, scale, mean, variance, grad_output) -> (grad operand, grad scale, grad offset)
    _operand_count(instr, 5)
    operand = _array(instr, 0)
    _require_kind(instr, operand, _FLOAT)
    per_feature = _check_per_feature(instr, (1, 2, 3), operand, operand.dimensions[_feature_index(instr, operand)])
    if not same_shape(instr.operands[4].shape, operand):
        _fail(f"grad_output of batch-norm-grad must have the operand's shape {show(operand)}, "
              f"got {show(instr.operands[4].shape)}")
    return _tuple([operand, per_feature, per_feature])


# -- collectives ------------------------------------------------------------------------------

def _replica_group_size(instr: HloInstruction) -> int | None:
    """The number of devices in each replica group, when the groups say it:
    ``{{0,1},{2,3}}`` lists them, ``[2,2]<=[4]`` is an iota list of 2 groups of 2;
    ``{}`` (all devices) leaves it unknown."""
    try:
        groups = parse_replica_groups(instr.attributes.get("replica_groups"))
    except XlapyError as e:
        _fail(f"{instr.opcode}: {e}")
    size = groups.group_size
    if size is None and groups.listed and len({len(g) for g in groups.listed}) > 1:
        _fail(f"replica_groups {groups.text} of {instr.opcode} have different sizes")
    return size


def _collective_arrays(instr: HloInstruction) -> list[Shape]:
    _at_least(instr, 1)
    return [_array(instr, i) for i in range(len(instr.operands))]


def _all_reduce_shape(instr: HloInstruction) -> Shape:
    shapes = _collective_arrays(instr)
    (computation,) = _callees(instr, 1, "to_apply")
    for shape in shapes[1:]:
        if shape.element_type != shapes[0].element_type:
            _fail(f"operands of {instr.opcode} share one reduction, so they need one element type, "
                  f"got {show(shapes[0])} and {show(shape)}")
    scalar = Shape(shapes[0].element_type)
    _check_reducer(instr, computation, [scalar], [scalar.element_type])
    return _one_or_tuple(shapes)


@shape_rule("all-reduce", "all-reduce-start")
def _all_reduce(instr: HloInstruction) -> Shape:
    return _all_reduce_shape(instr)


@shape_rule("all-reduce-done")
def _all_reduce_done(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


def _gathered_shapes(instr: HloInstruction, declared: Sequence[Shape], gather: bool) -> list[Shape]:
    """Results of all-gather (``gather``) or reduce-scatter: equal to the
    operands except along ``dimensions``, where the gathered side is the
    other times the group size (the declared size where that is unknown)."""
    shapes = _collective_arrays(instr)
    dims = _ints(instr, "dimensions")
    if len(dims) != 1:
        _fail(f"{instr.opcode} needs one dimension, got dimensions={_braces(dims)}")
    d = dims[0]
    group = _replica_group_size(instr)
    if len(declared) != len(shapes):
        _fail(f"{instr.opcode} has {len(shapes)} operands, so it produces {len(shapes)} results, "
              f"but the instruction declares {len(declared)}")
    results = []
    for operand, result in zip(shapes, declared):
        if not 0 <= d < operand.rank:
            _fail(f"dimension {d} of {instr.opcode} is out of range for {show(operand)}")
        if not result.is_array or result.rank != operand.rank:
            _fail(f"{instr.opcode} of {show(operand)} cannot produce {show(result)}")
        small, large = (operand, result) if gather else (result, operand)
        if group is not None:
            size = operand.dimensions[d] * group if gather else operand.dimensions[d] // group
            if not gather and operand.dimensions[d] % group:
                _fail(f"dimension {d} of {show(operand)} must be divisible by the group size {group} of reduce-scatter")
        else:
            size = result.dimensions[d]
            if small.dimensions[d] == 0 or large.dimensions[d] % small.dimensions[d]:
                _fail(f"dimension {d} of {show(large)} must be a multiple of that of {show(small)} in {instr.opcode}")
        dims_out = list(operand.dimensions)
        dims_out[d] = size
        results.append(_array_shape(operand.element_type, dims_out, operand.dynamic_dimensions))
    return results


def _declared_parts(shape: Shape, count: int) -> list[Shape]:
    return list(shape.tuple_shapes) if count > 1 and shape.is_tuple else [shape]


@shape_rule("all-gather")
def _all_gather(instr: HloInstruction) -> Shape:
    declared = _declared_parts(instr.shape, len(instr.operands))
    return _one_or_tuple(_gathered_shapes(instr, declared, gather=True))


@shape_rule("all-gather-start")
def _all_gather_start(instr: HloInstruction) -> Shape:
    # all-gather-start -> (operand(s), gathered result(s))
    count = len(instr.operands)
    declared = _declared_tuple(instr, 2)
    results = _gathered_shapes(instr, _declared_parts(declared.tuple_shapes[1], count), gather=True)
    return _tuple([_one_or_tuple([o.shape for o in instr.operands]), _one_or_tuple(results)])


@shape_rule("all-gather-done", "collective-permute-done")
def _second_of_start(instr: HloInstruction) -> Shape:
    # The -done of a start that returns (operand, result, ...) gives the result.
    _operand_count(instr, 1)
    return without_layout(_tuple_operand(instr, 0, "the start", 2).tuple_shapes[1])


@shape_rule("reduce-scatter")
def _reduce_scatter(instr: HloInstruction) -> Shape:
    shapes = _collective_arrays(instr)
    (computation,) = _callees(instr, 1, "to_apply")
    scalar = Shape(shapes[0].element_type)
    _check_reducer(instr, computation, [scalar], [scalar.element_type])
    declared = _declared_parts(instr.shape, len(instr.operands))
    return _one_or_tuple(_gathered_shapes(instr, declared, gather=False))


@shape_rule("all-to-all")
def _all_to_all(instr: HloInstruction) -> Shape:
    shapes = _collective_arrays(instr)
    if "split_dimension" in instr.attributes:
        return _split_concat_all_to_all(instr, shapes)
    if "dimensions" not in instr.attributes:
        return _tuple(shapes)  # the tuple form exchanges whole operands
    dims = _ints(instr, "dimensions")
    if len(shapes) != 1 or len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        _fail(f"an all-to-all with dimensions={_braces(dims)} takes one array operand and one of its dimensions")
    group = _replica_group_size(instr)
    if group and shapes[0].dimensions[dims[0]] % group:
        _fail(f"dimension {dims[0]} of {show(shapes[0])} must be divisible by the group size {group} of all-to-all")
    return without_layout(shapes[0])


def _split_concat_all_to_all(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    # StableHLO's all_to_all: each operand is split in split_count blocks along
    # split_dimension, and the blocks received are concatenated along concat_dimension.
    split, concat, count = (_int(instr, name) for name in ("split_dimension", "concat_dimension", "split_count"))
    if count <= 0:
        _fail(f"split_count={count} of all-to-all must be positive")
    group = _replica_group_size(instr)
    if group and group != count:
        _fail(f"split_count={count} of all-to-all must be the size {group} of its replica groups")
    if "dimensions" in instr.attributes and (_ints(instr, "dimensions") != (split,) or concat != split):
        _fail(f"dimensions={_braces(_ints(instr, 'dimensions'))} of all-to-all is HLO's form of splitting and "
              f"concatenating one dimension, but split_dimension={split} and concat_dimension={concat}")
    results = []
    for shape in shapes:
        for name, d in (("split_dimension", split), ("concat_dimension", concat)):
            if not 0 <= d < shape.rank:
                _fail(f"{name}={d} of all-to-all is out of range for {show(shape)}")
        if shape.dimensions[split] % count:
            _fail(f"dimension {split} of {show(shape)} must be divisible by split_count={count} of all-to-all")
        dims = list(shape.dimensions)
        dims[split] //= count
        dims[concat] *= count
        results.append(_array_shape(shape.element_type, dims))
    return _one_or_tuple(results)


@shape_rule("ragged-all-to-all")
def _ragged_all_to_all(instr: HloInstruction) -> Shape:
    # (input, output, input offsets, send sizes, output offsets, receive sizes) -> output
    _operand_count(instr, 6)
    data, output = _array(instr, 0, "the input"), _array(instr, 1, "the output")
    if data.element_type != output.element_type or data.dimensions[1:] != output.dimensions[1:]:
        _fail(f"input and output of ragged-all-to-all must agree in element type and all but the major dimension, "
              f"got {show(data)} and {show(output)}")
    for i in range(2, 6):
        sizes = _array(instr, i)
        if not sizes.type.is_integral:
            _fail(f"operand {i} of ragged-all-to-all must hold integer offsets or sizes, got {show(sizes)}")
    return without_layout(output)


@shape_rule("collective-permute")
def _collective_permute(instr: HloInstruction) -> Shape:
    if len(instr.operands) == 1:
        _array(instr, 0)
        return without_layout(instr.operands[0].shape)
    # In-place and combined forms: the declared result stands.
    _at_least(instr, 1)
    return without_layout(instr.shape)


@shape_rule("collective-permute-start")
def _collective_permute_start(instr: HloInstruction) -> Shape:
    # -> (operand, result, contexts...)
    _at_least(instr, 1)
    declared = _declared_tuple(instr, 2)
    if len(instr.operands) != 1:
        return without_layout(declared)
    operand = _array(instr, 0)
    return _tuple([operand, operand, *declared.tuple_shapes[2:]])


@shape_rule("collective-broadcast")
def _collective_broadcast(instr: HloInstruction) -> Shape:
    return _one_or_tuple(_collective_arrays(instr))


# -- asynchronous pairs ------------------------------------------------------------------------

@shape_rule("copy-start")
def _copy_start(instr: HloInstruction) -> Shape:
    # -> (destination, source, context)
    _operand_count(instr, 1)
    declared = _declared_tuple(instr, 2)
    operand = instr.operands[0].shape
    return _tuple([operand, operand, *declared.tuple_shapes[2:]])


@shape_rule("copy-done")
def _copy_done(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    return without_layout(_tuple_operand(instr, 0, "the copy-start", 2).tuple_shapes[0])


@shape_rule("send")
def _send(instr: HloInstruction) -> Shape:
    # send(data, token) -> (data, u32[] context, token)
    _operand_count(instr, 2)
    if not instr.operands[1].shape.is_token:
        _fail(f"the second operand of send must be a token, got {show(instr.operands[1].shape)}")
    return _tuple([instr.operands[0].shape, _SCALAR_U32, _TOKEN])


@shape_rule("send-done", "outfeed")
def _token_result(instr: HloInstruction) -> Shape:
    if instr.opcode == "outfeed":
        _operand_count(instr, 2)
        if not instr.operands[1].shape.is_token:
            _fail(f"the second operand of outfeed must be a token, got {show(instr.operands[1].shape)}")
    else:
        _operand_count(instr, 1)
        _tuple_operand(instr, 0, "the send", 3)
    return _TOKEN


def _token_operand(instr: HloInstruction) -> None:
    _operand_count(instr, 1)
    if not instr.operands[0].shape.is_token:
        _fail(f"the operand of {instr.opcode} must be a token, got {show(instr.operands[0].shape)}")


@shape_rule("recv")
def _recv(instr: HloInstruction) -> Shape:
    # recv(token) -> (data of the declared shape, u32[] context, token)
    _token_operand(instr)
    declared = _declared_tuple(instr, 3)
    return _tuple([declared.tuple_shapes[0], _SCALAR_U32, _TOKEN])


@shape_rule("recv-done")
def _recv_done(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    recv = _tuple_operand(instr, 0, "the recv", 3)
    return _tuple([recv.tuple_shapes[0], _TOKEN])


@shape_rule("infeed")
def _infeed(instr: HloInstruction) -> Shape:
    # infeed(token) -> (data of the declared shape, token)
    _token_operand(instr)
    declared = _declared_tuple(instr, 2)
    return _tuple([declared.tuple_shapes[0], _TOKEN])


def _async_start(instr: HloInstruction) -> Shape:
    # -> ((operands...), result of the wrapped computation, contexts...)
    declared = _declared_tuple(instr, 2)
    result = declared.tuple_shapes[1]
    if len(instr.called_computations) == 1:
        wrapped = instr.called_computations[0]
        _check_parameters(instr, wrapped, [o.shape for o in instr.operands], "wrapped computation")
        result = _root_shape(wrapped)
    return _tuple([_tuple([o.shape for o in instr.operands]), result, *declared.tuple_shapes[2:]])


def _async_update(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    _tuple_operand(instr, 0, "the async start", 2)
    return without_layout(instr.operands[0].shape)


def _async_done(instr: HloInstruction) -> Shape:
    _operand_count(instr, 1)
    return without_layout(_tuple_operand(instr, 0, "the async start", 2).tuple_shapes[1])


# Every other `X-start` / `X-update` / `X-done` is XLA's printing of an async
# wrapping of X, with the async-start/update/done shapes.
for _name in sorted(OPCODES):
    if _name in SHAPE_RULES:
        continue
    if _name.endswith("-start"):
        shape_rule(_name)(_async_start)
    elif _name.endswith("-update"):
        shape_rule(_name)(_async_update)
    elif _name.endswith("-done"):
        shape_rule(_name)(_async_done)


# -- Shardy's ops (imported from StableHLO under their MLIR names) --------------------------

@shape_rule("sdy.sharding_group")
def _sdy_sharding_group(instr: HloInstruction) -> Shape:
    # Shardy's form has no result (an empty tuple); the compiler API's form returns the operand.
    _operand_count(instr, 1)
    return without_layout(instr.operands[0].shape) if _bool(instr, "has_result") else _tuple([])


@shape_rule("sdy.named_computation")
def _sdy_named_computation(instr: HloInstruction) -> Shape:
    # A call of its region, whose results are the op's.
    (body,) = _callees(instr, 1, "the body")
    _check_parameters(instr, body, [o.shape for o in instr.operands], "body")
    return _one_or_tuple([v.shape for v in region_results(body)] or [_tuple([])])


@shape_rule("sdy.manual_computation")
def _sdy_manual_computation(instr: HloInstruction) -> Shape:
    # The body sees each operand's local shard and returns each result's: the
    # counts and element types are checked here, the sizes against the mesh
    # and the shardings by the sharding verifier (Shardy's invariants).
    (body,) = _callees(instr, 1, "the body")
    params = _parameter_shapes(body)
    if len(params) != len(instr.operands):
        _fail(f"body {body.name} of sdy.manual_computation must take {len(instr.operands)} parameters, "
              f"takes {len(params)}")
    for number, (param, operand) in enumerate(zip(params, instr.operands)):
        if not (param.is_array and operand.shape.is_array and param.element_type == operand.shape.element_type
                and param.rank == operand.shape.rank):
            _fail(f"parameter {number} of body {body.name} must be a shard of {show(operand.shape)}, "
                  f"got {show(param)}")
    declared = instr.shape
    results = list(declared.tuple_shapes) if declared.is_tuple else [declared]
    returned = [v.shape for v in region_results(body)]
    if len(returned) != len(results) or not all(
            r.is_array and d.is_array and r.element_type == d.element_type and r.rank == d.rank
            for r, d in zip(returned, results)):
        _fail(f"body {body.name} of sdy.manual_computation must return shards of ({', '.join(map(show, results))}), "
              f"returns ({', '.join(map(show, returned))})")
    _check_manual_shardings(instr)
    return without_layout(declared)


# Checks of an op that a package built on this one adds (the sharding
# verifier registers the manual computation's shardings against its mesh),
# run after the op's shape rule; keyed by opcode.
OP_CHECKS: dict[str, Callable[[HloInstruction], None]] = {}
op_check = registrar(OP_CHECKS, "op checks")


def _check_manual_shardings(instr: HloInstruction) -> None:
    check = OP_CHECKS.get(instr.opcode)
    if check is not None:
        check(instr)
