"""What the shape rules share: shape builders, the failure they raise,
typed readers of attributes and operands, checks of dimension numbers and of
called computations (parameters, reducers, comparators), element-kind checks
and the output of a sliding window."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from xlapy.errors import VerifyError
from xlapy.hlo.attributes import ATTRIBUTES, Verbatim, is_int
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.shapes import UNBOUNDED_SIZE, Shape, TypeKind


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


def braces(values: Sequence[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def array_shape(element_type: str, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> Shape:
    return Shape(element_type, tuple(dims), dynamic_dimensions=tuple(dynamic) if dynamic else ())


def tuple_shape(shapes: Sequence[Shape]) -> Shape:
    return Shape.make_tuple([without_layout(s) for s in shapes])


def one_or_tuple(shapes: Sequence[Shape]) -> Shape:
    # Variadic ops (reduce, sort, all-reduce, ...) return a tuple only for several results.
    return without_layout(shapes[0]) if len(shapes) == 1 else tuple_shape(shapes)


SCALAR_U32 = Shape("u32")


SCALAR_S32 = Shape("s32")


SCALAR_PRED = Shape("pred")


TOKEN = Shape("token")


def fail(message: str) -> NoReturn:
    raise VerifyError(message)


_MISSING: Any = object()


def attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> Any:
    if name in instr.attributes:
        return instr.attributes[name]
    if default is _MISSING:
        fail(f"{instr.opcode} needs attribute {name}")
    return default


def int_attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> int:
    value = attr(instr, name, default)
    # The text the parser keeps for an attribute it does not model is read as the integer it spells; any other
    # string is refused: the interpreter and the emitters read the attribute itself.
    if isinstance(value, Verbatim):
        if not re.fullmatch(r"-?[0-9]{1,19}", value.strip()):
            fail(f"attribute {name} of {instr.opcode} must be an integer, got {value}")
        return int(value)
    if not is_int(value):
        fail(f"attribute {name} of {instr.opcode} must be an integer, got "
             f"{value if isinstance(value, str) else repr(value)}")
    return int(value)


def ints_attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> tuple[int, ...]:
    value = attr(instr, name, default)
    # Not the text of a list ("{1,2}"): the parser reads every list attribute into a tuple, and the interpreter and
    # the emitters read the attribute itself, which must then be the list this accepted.
    if not isinstance(value, (list, tuple)) or not all(is_int(v) for v in value):
        fail(f"attribute {name} of {instr.opcode} must be a list of integers, got "
             f"{value if isinstance(value, str) else repr(value)}")
    return tuple(int(v) for v in value)


def records_attr(instr: HloInstruction, name: str) -> tuple[Any, ...]:
    """Attribute ``name``: a list of records with integer fields (slice, padding), as its kind requires."""
    value = attr(instr, name)
    kind = ATTRIBUTES[name]
    if not kind.holds(value):
        fail(f"attribute {name} of {instr.opcode} must be {kind.spelling}, got {value!r}")
    return tuple(value)


def word_attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> str:
    return str(attr(instr, name, default))


def bool_attr(instr: HloInstruction, name: str, default: bool = False) -> bool:
    value = attr(instr, name, default)
    return value.strip() == "true" if isinstance(value, str) else bool(value)


def operand_count(instr: HloInstruction, count: int) -> None:
    if len(instr.operands) != count:
        fail(f"{instr.opcode} takes {count} operand{'s' * (count != 1)}, got {len(instr.operands)}")


def at_least(instr: HloInstruction, count: int) -> None:
    if len(instr.operands) < count:
        fail(f"{instr.opcode} takes at least {count} operand{'s' * (count != 1)}, got {len(instr.operands)}")


def array_operand(instr: HloInstruction, index: int, what: str | None = None) -> Shape:
    shape = instr.operands[index].shape
    if not shape.is_array:
        fail(f"{what or f'operand {index}'} of {instr.opcode} must be an array, got {show(shape)}")
    return shape


def scalar_operand(instr: HloInstruction, index: int, what: str) -> Shape:
    shape = array_operand(instr, index, what)
    if shape.rank:
        fail(f"{what} of {instr.opcode} must be a scalar, got {show(shape)}")
    return shape


def tuple_operand(instr: HloInstruction, index: int, what: str | None = None, size: int = 0) -> Shape:
    shape = instr.operands[index].shape
    if not shape.is_tuple or len(shape.tuple_shapes) < size:
        need = f"a tuple of at least {size} elements" if size else "a tuple"
        fail(f"{what or f'operand {index}'} of {instr.opcode} must be {need}, got {show(shape)}")
    return shape


def declared_array(instr: HloInstruction) -> Shape:
    if not instr.shape.is_array:
        fail(f"{instr.opcode} produces an array, but the instruction declares {show(instr.shape)}")
    return instr.shape


def declared_tuple(instr: HloInstruction, size: int) -> Shape:
    shape = instr.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < size:
        fail(f"{instr.opcode} produces a tuple of at least {size} elements, "
              f"but the instruction declares {show(shape)}")
    return shape


def check_dimension_numbers(instr: HloInstruction, name: str, dims: Sequence[int], rank: int,
                             what: str = "the operand", ordered: bool = False) -> None:
    """``dims`` (attribute ``name``) are distinct dimensions of a rank-``rank`` array."""
    for d in dims:
        if not 0 <= d < rank:
            fail(f"{name}={braces(dims)} of {instr.opcode}: dimension {d} is out of range for {what} of rank {rank}")
    if len(set(dims)) != len(dims):
        fail(f"{name}={braces(dims)} of {instr.opcode} repeats a dimension")
    if ordered and list(dims) != sorted(dims):
        fail(f"{name}={braces(dims)} of {instr.opcode} must be sorted")


def same_dims(instr: HloInstruction, shapes: Sequence[Shape], what: str) -> None:
    for shape in shapes[1:]:
        if shape.dimensions != shapes[0].dimensions:
            fail(f"{what} of {instr.opcode} must have the same dimensions, got {show(shapes[0])} and {show(shape)}")


def union_dynamic(shapes: Sequence[Shape]) -> tuple[bool, ...]:
    rank = shapes[0].rank
    return tuple(any(s.dynamic_dimensions[i] for s in shapes) for i in range(rank))


def declared_dynamic(instr: HloInstruction, rank: int) -> tuple[bool, ...]:
    # Where XLA's rule for which dimensions stay dynamic is not modelled, trust the declaration.
    shape = instr.shape
    if shape.is_array and shape.rank == rank:
        return shape.dynamic_dimensions
    return (False,) * rank


def element_kind(shape: Shape) -> TypeKind:
    return shape.type.kind


def component_type(element_type: str) -> str:
    # The real type of a complex type's parts.
    return {"c64": "f32", "c128": "f64"}[element_type]


def element_count(shape: Shape) -> int | None:
    if any(d == UNBOUNDED_SIZE for d in shape.dimensions):
        return None
    return math.prod(shape.dimensions)


def callees(instr: HloInstruction, count: int, roles: str = "") -> list[HloComputation]:
    called = instr.called_computations
    if len(called) != count:
        what = f" ({roles})" if roles else ""
        fail(f"{instr.opcode} calls {count} computation{'s' * (count != 1)}{what}, got {len(called)}")
    return called


def parameter_shapes(computation: HloComputation) -> list[Shape]:
    params = [i for i in computation.instructions if i.opcode == "parameter"]
    params.sort(key=lambda p: p.parameter_number if p.parameter_number is not None else -1)
    return [p.shape for p in params]


def root_shape(computation: HloComputation) -> Shape:
    if computation.root is None:
        fail(f"computation {computation.name} has no root")
    return computation.root.shape


def check_parameters(instr: HloInstruction, computation: HloComputation, expected: Sequence[Shape],
                      role: str) -> None:
    """The parameters of ``computation`` (called by ``instr`` as ``role``) have the ``expected`` shapes."""
    params = parameter_shapes(computation)
    if len(params) != len(expected):
        fail(f"{role} {computation.name} of {instr.opcode} must take {len(expected)} "
              f"parameter{'s' * (len(expected) != 1)}, takes {len(params)}")
    for number, (param, want) in enumerate(zip(params, expected)):
        if not same_shape(param, want):
            fail(f"parameter {number} of {role} {computation.name} must be {show(want)} to match {instr.opcode}, "
                  f"got {show(param)}")


def check_reducer(instr: HloInstruction, computation: HloComputation, inits: Sequence[Shape],
                   input_types: Sequence[str], role: str = "to_apply computation") -> None:
    """``computation`` reduces N values at once: it takes N accumulators (the
    init shapes) then N inputs (scalars of ``input_types``) and returns the N
    new accumulators (a tuple when N > 1)."""
    n = len(inits)
    params = parameter_shapes(computation)
    if len(params) != 2 * n:
        fail(f"{role} {computation.name} of {instr.opcode} must take {2 * n} parameters, takes {len(params)}")
    root = root_shape(computation)
    if n == 1:
        accumulators = [root]
    elif root.is_tuple and len(root.tuple_shapes) == n:
        accumulators = list(root.tuple_shapes)
    else:
        fail(f"{role} {computation.name} of {instr.opcode} must return a tuple of {n} scalars, returns {show(root)}")
    for i, (accumulator, init) in enumerate(zip(accumulators, inits)):
        if not accumulator.is_array or accumulator.rank:
            fail(f"{role} {computation.name} of {instr.opcode} must return scalars, returns {show(root)}")
        if not same_shape(accumulator, init):
            fail(f"{role} {computation.name} of {instr.opcode} returns {show(accumulator)}, "
                  f"but its init value is {show(init)}")
        if not same_shape(params[i], accumulator):
            fail(f"parameter {i} of {role} {computation.name} must be {show(accumulator)} (an accumulator), "
                  f"got {show(params[i])}")
        want = Shape(input_types[i])
        if not same_shape(params[n + i], want):
            fail(f"parameter {n + i} of {role} {computation.name} must be {show(want)} to take input {i} "
                  f"of {instr.opcode}, got {show(params[n + i])}")


def check_comparator(instr: HloInstruction, computation: HloComputation, types: Sequence[str],
                      role: str = "comparator") -> None:
    """``computation`` compares two scalars of each of ``types`` and returns pred[]."""
    expected = [Shape(t) for t in types for _ in range(2)]
    check_parameters(instr, computation, expected, role)
    root = root_shape(computation)
    if not same_shape(root, SCALAR_PRED):
        fail(f"{role} {computation.name} of {instr.opcode} must return pred[], returns {show(root)}")


INTEGRAL = frozenset({TypeKind.SIGNED, TypeKind.UNSIGNED})


FLOAT = frozenset({TypeKind.FLOAT})


FLOAT_OR_COMPLEX = frozenset({TypeKind.FLOAT, TypeKind.COMPLEX})


SIGNED_NUMBERS = frozenset({TypeKind.SIGNED, TypeKind.FLOAT, TypeKind.COMPLEX})


NUMBERS = frozenset({TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.FLOAT, TypeKind.COMPLEX})


PRED_OR_INTEGRAL = frozenset({TypeKind.PRED, TypeKind.SIGNED, TypeKind.UNSIGNED})


ARRAY_TYPES = frozenset(k for k in TypeKind if k not in (TypeKind.TOKEN, TypeKind.TUPLE, TypeKind.OPAQUE))


_KIND_WORDS = {
    INTEGRAL: "integral", FLOAT: "floating-point", FLOAT_OR_COMPLEX: "floating-point or complex",
    SIGNED_NUMBERS: "signed integral, floating-point or complex", NUMBERS: "numeric (not pred)",
    PRED_OR_INTEGRAL: "pred or integral", ARRAY_TYPES: "array",
}


def require_kind(instr: HloInstruction, shape: Shape, kinds: frozenset[TypeKind], what: str = "operands") -> None:
    if element_kind(shape) not in kinds:
        words = _KIND_WORDS.get(kinds) or " or ".join(sorted(k.name.lower() for k in kinds))
        fail(f"{instr.opcode} needs {words} {what}, got {show(shape)}")


def window_output(instr: HloInstruction, dims: Sequence[int], window: Sequence[Any],
                   sizes_from: Sequence[int] | None = None) -> list[int]:
    """The dimensions a window slides to over ``dims`` (XLA's InferWindowOutputShape)."""
    if len(window) != len(dims):
        fail(f"the window of {instr.opcode} has {len(window)} dimensions, the operand {len(dims)}")
    result = []
    for i, (size, w) in enumerate(zip(dims, window)):
        if w.size < 1 or w.stride < 1 or w.base_dilation < 1 or w.window_dilation < 1:
            fail(f"window dimension {i} of {instr.opcode} needs positive size, stride and dilations, got {w}")
        if sizes_from is not None and w.size != sizes_from[i]:
            fail(f"window size {w.size} of {instr.opcode} in spatial dimension {i} must equal the kernel's "
                  f"{sizes_from[i]}")
        dilated_base = (size - 1) * w.base_dilation + 1 if size else 0
        padded = w.padding_low + dilated_base + w.padding_high
        if padded < 0:
            fail(f"the padding of window dimension {i} of {instr.opcode} leaves a negative size")
        dilated_window = (w.size - 1) * w.window_dilation + 1
        result.append(0 if padded == 0 or dilated_window > padded else (padded - dilated_window) // w.stride + 1)
    return result
