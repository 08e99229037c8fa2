"""Literals of HLO ``constant(...)`` instructions: read into numpy arrays of
the instruction's shape, and printed the way XLA prints them."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np

from xlapy.errors import XlapyError
from xlapy.shapes import ELEMENT_TYPES, Shape

_TOKEN = re.compile(r"\s*(?:([{}(),])|(-?(?:inf|nan)(?:\([^)]*\))?)|(true|false)"
                    r"|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))")


def parse_literal(text: str, shape: Shape) -> np.ndarray | tuple:
    """The value of literal ``text`` for ``shape``: an ndarray, or a tuple for tuple shapes."""
    tokens = _tokens(text)
    value, rest = _value(tokens, 0, shape, text)
    if rest != len(tokens):
        raise XlapyError(f"unexpected '{tokens[rest]}' in literal {text!r}")
    return value


def _tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            raise XlapyError(f"cannot read literal {text!r} at '{text[pos:pos + 10]}'")
        tokens.append(match.group().strip())
        pos = match.end()
    return tokens


def _value(tokens: list[str], i: int, shape: Shape, text: str):
    if shape.is_tuple:
        if tokens[i] != "(":
            raise XlapyError(f"tuple literal must start with '(' in {text!r}")
        i += 1
        values = []
        for k, sub in enumerate(shape.tuple_shapes):
            if k:
                if tokens[i] != ",":
                    raise XlapyError(f"expected ',' between tuple elements in {text!r}")
                i += 1
            value, i = _value(tokens, i, sub, text)
            values.append(value)
        if tokens[i] != ")":
            raise XlapyError(f"expected ')' at the end of a tuple literal in {text!r}")
        return tuple(values), i + 1
    if shape.is_token:
        return None, i
    scalars: list = []
    complex_type = shape.type.is_complex
    j = i
    depth = 0
    while j < len(tokens):
        t = tokens[j]
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth < 0:
                break
        elif t == "(" and complex_type:
            real, imag = tokens[j + 1], tokens[j + 3]
            if tokens[j + 2] != "," or tokens[j + 4] != ")":
                raise XlapyError(f"complex numbers are written (re, im) in {text!r}")
            scalars.append(complex(_number(real), _number(imag)))
            j += 5
            if depth == 0:
                break
            continue
        elif t == ",":
            if depth == 0:
                break
        elif t in "()":
            break
        else:
            scalars.append(_number(t))
            if depth == 0:
                j += 1
                break
        j += 1
        if depth == 0:
            break
    count = shape.element_count
    if len(scalars) != count:
        raise XlapyError(f"literal {text!r} has {len(scalars)} values, {shape} needs {count}")
    array = np.array(scalars, dtype=np.float64 if not complex_type else np.complex128)
    if shape.element_type == "pred" or np.issubdtype(shape.dtype, np.integer):
        array = np.array([int(v) for v in scalars], dtype=object)
    return np.asarray(array.astype(shape.dtype)).reshape(shape.dimensions), j


def _number(token: str):
    if token in ("true", "false"):
        return token == "true"
    if "nan" in token:
        return float("-nan" if token.startswith("-") else "nan")
    if "inf" in token:
        return float(token)
    if re.fullmatch(r"[-+]?\d+", token):
        return int(token)
    return float(token)


def _significant_digits(element_type: str) -> tuple[int, ...]:
    """The %g precisions XLA tries for a float type: f32 and f64 take the short
    one if it reads back exactly, else the long one; narrower types print
    ``max_digits10`` digits of the value as an f32."""
    if element_type == "f32":
        return (6, 9)
    if element_type == "f64":
        return (15, 17)
    mantissa_bits = ml_dtypes.finfo(ELEMENT_TYPES[element_type].dtype).nmant + 1
    return (math.ceil(1 + mantissa_bits * math.log10(2)),)


def format_scalar(value, element_type: str, in_array: bool = False) -> str:
    """One element as XLA's literal printer writes it."""
    if element_type == "pred":
        return ("1" if value else "0") if in_array else ("true" if value else "false")
    if element_type in ("c64", "c128"):
        part = "f32" if element_type == "c64" else "f64"
        return f"({format_scalar(value.real, part)}, {format_scalar(value.imag, part)})"
    kind = ELEMENT_TYPES[element_type]
    if kind.is_integral:
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    digits = _significant_digits(element_type)
    if len(digits) == 1:
        return f"{v:.{digits[0]}g}"
    short = f"{v:.{digits[0]}g}"
    return short if kind.dtype.type(float(short)) == kind.dtype.type(v) else f"{v:.{digits[1]}g}"


def format_literal(value, shape: Shape) -> str:
    """A literal on one line, as XLA prints a constant's operand."""
    if shape.is_tuple:
        return "( " + ", ".join(format_literal(v, s) for v, s in zip(value, shape.tuple_shapes)) + " )"
    array = np.asarray(value, dtype=shape.dtype)
    rank = array.ndim
    if rank == 0:
        return format_scalar(array[()], shape.element_type)
    if rank == 1:
        return "{" + ", ".join(format_scalar(x, shape.element_type, True) for x in array) + "}"

    def nested(a: np.ndarray, index: tuple[int, ...]) -> str:
        if a.ndim == 1:
            body = ", ".join(format_scalar(x, shape.element_type, True) for x in a)
            return "{ " + body + " }" if a.size > 1 else "{" + body + "}"
        # XLA labels the sub-blocks of arrays of rank > 3 with their index.
        label = f" /*i{len(index) - 1}={index[-1]}*/" if rank > 3 and index else ""
        return "{" + label + " " + ", ".join(nested(x, (*index, i)) for i, x in enumerate(a)) + " }"

    return nested(array, ())


