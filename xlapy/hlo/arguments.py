"""Arguments for an entry computation's parameters, checked and converted
the same way by every runner (the interpreter and compiled executables).

An argument is converted to its parameter's element type only when no value
changes beyond rounding:

- the argument must be a number, a (nested) list of numbers, a numpy array
  of a numeric or bool dtype, or an array of an ``ml_dtypes`` type
  (``bfloat16``, ``float8_*``, ``int4``...); strings, bytes, ``None``,
  dicts, object, structured and void arrays are refused;
- its shape must be the parameter's dimensions exactly (no broadcasting);
- a complex argument needs a complex parameter (the imaginary part would be lost);
- a floating-point argument for an integral or pred parameter must hold
  only whole numbers within the parameter type's range (0 and 1 for pred);
- an integral (or bool) argument for an integral or pred parameter must be
  within the parameter type's range;
- a floating-point or integral argument for a floating-point or complex
  parameter is rounded to the nearest representable value, as XLA's
  ``convert`` does (``f64`` to ``f32``, ``bf16``, ``f8e4m3fn``...);
- a tuple parameter takes a tuple or list of exactly as many arguments,
  each checked against its element's shape; a token parameter takes anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.memory import out_of_memory_as_error
from xlapy.shapes import ELEMENT_TYPES, Shape, TypeKind
from xlapy.shapes.element_types import ElementType, element_type_of_dtype

Argument = np.ndarray | tuple

# The numpy dtype kinds of plain numpy numbers; ml_dtypes types are looked up by dtype.
_NUMPY_KINDS = {"b": TypeKind.PRED, "i": TypeKind.SIGNED, "u": TypeKind.UNSIGNED, "f": TypeKind.FLOAT,
                "c": TypeKind.COMPLEX}
_INTEGRAL = (TypeKind.PRED, TypeKind.SIGNED, TypeKind.UNSIGNED)


def check_arguments(args: tuple | list, params: list, what: str) -> list[Argument]:
    """``check_argument`` for each parameter of a computation (``params``:
    its parameter instructions in order); ``what`` names the computation."""
    if len(args) != len(params):
        raise XlapyError(f"{what} takes {len(params)} argument{'s' * (len(params) != 1)}, got {len(args)}")
    return [check_argument(a, p.shape, p.name) for a, p in zip(args, params)]


def check_argument(value: Any, shape: Shape, name: str) -> Argument:
    """``value`` as the argument of parameter ``name`` of ``shape``: an
    array of the parameter's element type (or a tuple of them), following
    the rules of this module; raises ``XlapyError`` naming the parameter."""
    if shape.is_tuple or shape.element_type == "tuple":
        if not isinstance(value, (tuple, list)):
            raise XlapyError(f"argument for parameter {name} must be a tuple of {len(shape.tuple_shapes)} values "
                             f"for {_show(shape)}, got {_describe(value)}")
        if len(value) != len(shape.tuple_shapes):
            raise XlapyError(f"argument for parameter {name} must have {len(shape.tuple_shapes)} elements for "
                             f"{_show(shape)}, got {len(value)}")
        return tuple(check_argument(v, s, f"{name} (tuple element {i})")
                     for i, (v, s) in enumerate(zip(value, shape.tuple_shapes)))
    if shape.element_type == "token":
        return ()
    target = ELEMENT_TYPES.get(shape.element_type)
    if target is None or target.dtype is None:
        raise XlapyError(f"parameter {name} of shape {_show(shape)} cannot take an argument")
    array = _as_array(value, name)
    source = _kind_of(array.dtype)
    if source is None:
        raise XlapyError(f"argument for parameter {name} must be numeric, got an array of dtype {array.dtype}")
    if array.shape != tuple(shape.dimensions):
        raise XlapyError(f"argument for parameter {name} has shape {array.shape}, expected {_show(shape)}")
    if source is TypeKind.COMPLEX and target.kind is not TypeKind.COMPLEX:
        raise XlapyError(f"argument for parameter {name} is complex ({array.dtype}), but the parameter is "
                         f"{_show(shape)}: the imaginary part would be lost")
    if array.dtype == target.dtype:
        return array
    # The checks and the conversion make arrays of the argument's size (wider ones for some checks).
    with out_of_memory_as_error(f"converting the argument for parameter {name} to {_show(shape)}"):
        return _converted(array, source, target, shape, name)


def _converted(array: np.ndarray, source: TypeKind, target: ElementType, shape: Shape, name: str) -> np.ndarray:
    """``array`` (checked to hold values of ``target``'s kind) as an array of ``target``'s dtype."""
    if target.kind in _INTEGRAL and array.size:
        _check_integral(array, source, shape.element_type, target.bit_width, target.kind, name)
    with np.errstate(all="ignore"):  # rounding to a narrower float may overflow to inf, as convert does
        try:
            return array.astype(target.dtype)
        except (TypeError, ValueError):
            pass
        # ml_dtypes does not cast every pair of its types directly: go through
        # a wide type of the source's kind, which holds every value exactly.
        wide = np.int64 if source in _INTEGRAL and target.kind in _INTEGRAL else np.float64
        if source is TypeKind.COMPLEX:
            wide = np.complex128
        try:
            return array.astype(wide).astype(target.dtype)
        except (TypeError, ValueError) as e:
            raise XlapyError(f"argument for parameter {name} of dtype {array.dtype} cannot be converted to "
                             f"{_show(shape)}: {e}") from None


def _show(shape: Shape) -> str:
    return shape.to_string(print_layout=False)


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"a {type(value).__name__}"


def _as_array(value: Any, name: str) -> np.ndarray:
    if value is None or isinstance(value, (str, bytes, bytearray, dict, set, frozenset)):
        raise XlapyError(f"argument for parameter {name} must be an array or a number, got {_describe(value)}")
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 64):
        raise XlapyError(f"argument for parameter {name} is the integer {value}, which no element type holds")
    try:
        return np.asarray(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise XlapyError(f"argument for parameter {name} is not an array: {e}") from None


def _kind_of(dtype: np.dtype) -> TypeKind | None:
    """The kind of a numeric dtype (numpy's own or an ml_dtypes type), else None."""
    if dtype.fields is not None or dtype.subdtype is not None:
        return None
    kind = _NUMPY_KINDS.get(dtype.kind)
    if kind is not None:
        return kind
    try:
        element_type = element_type_of_dtype(dtype)
    except (KeyError, XlapyError):
        return None
    return element_type.kind if element_type.kind in (*_INTEGRAL, TypeKind.FLOAT) else None


def _check_integral(array: np.ndarray, source: TypeKind, element_type: str, bits: int, kind: TypeKind,
                    name: str) -> None:
    """Every value of ``array`` is a whole number that ``element_type`` holds."""
    if kind is TypeKind.PRED:
        low, high = 0, 1
    elif kind is TypeKind.SIGNED:
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        low, high = 0, (1 << bits) - 1
    if source is TypeKind.FLOAT:
        values = array.astype(np.float64)
        # high + 1 and low are 0 or powers of two, exact in float64, where high
        # itself may round up (2**63 - 1 becomes 2**63): compare with high + 1.
        bad = (~np.isfinite(values) | (values != np.trunc(values)) | (values < float(low))
               | (values >= float(high + 1)))
        if bad.any():
            culprit = float(values[bad].flat[0])
            raise XlapyError(f"argument for parameter {name} holds {culprit}, which {element_type} cannot hold "
                             f"(a floating-point argument for an integral or pred parameter must hold whole "
                             f"numbers in [{low}, {high}])")
        return
    if array.dtype.kind not in "iu":  # bool, ml_dtypes' narrow integers
        array = array.astype(np.int64)
    smallest, largest = int(array.min()), int(array.max())
    if smallest < low or largest > high:
        culprit = smallest if smallest < low else largest
        raise XlapyError(f"argument for parameter {name} holds {culprit}, which is out of range for {element_type} "
                         f"([{low}, {high}])")
