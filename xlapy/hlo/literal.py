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
    reader = _LiteralReader(_tokens(text), text)
    value = reader.value(shape)
    if reader.i != len(reader.tokens):
        raise XlapyError(f"unexpected '{reader.tokens[reader.i]}' in literal {text!r}")
    return value


_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def _tokens(text: str) -> list[str]:
    # XLA labels sub-arrays of rank > 3 literals with /*iN=v*/ comments.
    text = _COMMENT.sub(" ", text)
    tokens, pos = [], 0
    while text[pos:].strip():
        match = _TOKEN.match(text, pos)
        if not match:
            raise XlapyError(f"cannot read literal {text!r} at '{text[pos:pos + 10]}'")
        tokens.append(match.group().strip())
        pos = match.end()
    return tokens


class _LiteralReader:
    """literal ::= scalar | '(' re ',' im ')' | '{' [literal (',' literal)*] '}' | '(' literal, ... ')'"""

    def __init__(self, tokens: list[str], text: str):
        self.tokens, self.text, self.i = tokens, text, 0

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if expected is not None and token != expected:
            raise XlapyError(f"expected '{expected}', got '{token or 'end'}' in literal {self.text!r}")
        if not token:
            raise XlapyError(f"literal {self.text!r} ends too early")
        self.i += 1
        return token

    def value(self, shape: Shape):
        if shape.is_tuple:
            self.take("(")
            values = []
            for k, sub in enumerate(shape.tuple_shapes):
                if k:
                    self.take(",")
                values.append(self.value(sub))
            self.take(")")
            return tuple(values)
        if shape.is_token:
            return None
        scalars: list = []
        self.elements(shape.type.is_complex, scalars)
        if len(scalars) != shape.element_count:
            raise XlapyError(f"literal {self.text!r} has {len(scalars)} values, {shape} needs {shape.element_count}")
        if shape.element_type == "pred" or np.issubdtype(shape.dtype, np.integer):
            array = np.array([int(v) for v in scalars], dtype=object)
        else:
            array = np.array(scalars, dtype=np.complex128 if shape.type.is_complex else np.float64)
        return np.asarray(array.astype(shape.dtype)).reshape(shape.dimensions)

    def elements(self, is_complex: bool, out: list) -> None:
        """Append the scalars of one (possibly nested) array literal to ``out``."""
        if self.peek() == "{":
            self.take()
            if self.peek() != "}":
                self.elements(is_complex, out)
                while self.peek() == ",":
                    self.take()
                    self.elements(is_complex, out)
            self.take("}")
        elif is_complex:
            self.take("(")
            real = _number(self.take())
            self.take(",")
            out.append(complex(real, _number(self.take())))
            self.take(")")
        else:
            token = self.take()
            if token in "{}(),":
                raise XlapyError(f"unexpected '{token}' in literal {self.text!r}")
            out.append(_number(token))


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
        inner = ", ".join(nested(x, (*index, i)) for i, x in enumerate(a))
        return "{" + label + (" " + inner if inner or not label else "") + " }"

    return nested(array, ())


