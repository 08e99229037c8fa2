"""Literals of HLO ``constant(...)`` instructions: read into numpy arrays of
the instruction's shape, and printed the way XLA prints them."""

from __future__ import annotations

import re

import numpy as np

from xlapy.errors import ParseError, XlapyError
from xlapy.shapes import Shape

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


def format_scalar(value, element_type: str) -> str:
    """One element as XLA prints it: shortest %g-style text that reads back exactly."""
    if element_type == "pred":
        return "true" if value else "false"
    if isinstance(value, (complex, np.complexfloating)):
        part = "f32" if element_type == "c64" else "f64"
        return f"({format_scalar(value.real, part)}, {format_scalar(value.imag, part)})"
    if isinstance(value, (np.integer, int)):
        return str(int(value))
    v = float(value)
    if np.isnan(v):
        return "-nan" if np.signbit(v) else "nan"
    if np.isinf(v):
        return "-inf" if v < 0 else "inf"
    dtype = type(value) if isinstance(value, np.generic) else np.float64
    for precision in range(1, 18):
        text = f"{v:.{precision}g}"
        if dtype(float(text)) == value:
            return text
    return repr(v)


def format_literal(value, shape: Shape) -> str:
    """A literal as XLA prints it: scalars bare, arrays as nested ``{...}``."""
    if shape.is_tuple:
        return "(" + ", ".join(format_literal(v, s) for v, s in zip(value, shape.tuple_shapes)) + ")"
    array = np.asarray(value, dtype=shape.dtype)
    if not shape.dimensions:
        return format_scalar(array[()], shape.element_type)

    def nested(a) -> str:
        if a.ndim == 1:
            return "{" + ", ".join(format_scalar(x, shape.element_type) for x in a) + "}"
        return "{ " + ", ".join(nested(x) for x in a) + " }"

    return nested(array)


def check_literal(text: str, shape: Shape, where: tuple[int, int]) -> None:
    """Raise a ParseError at ``where`` unless ``text`` is a literal of ``shape``."""
    if text.strip() == "{...}":
        return  # a large constant elided by XLA's printer
    try:
        parse_literal(text, shape)
    except XlapyError as e:
        raise ParseError(str(e), *where) from None
