"""Literals of HLO ``constant(...)`` instructions: read into numpy arrays of
the instruction's shape, and printed the way XLA prints them."""

from __future__ import annotations

import functools
import math
import re

import ml_dtypes
import numpy as np

from xlapy.errors import XlapyError
from xlapy.shapes import ELEMENT_TYPES, ElementType, Shape, TypeKind
from xlapy.syntax import MAX_INT_TOKEN, MAX_NESTING, IntegerError, read_int

# Decimal numbers as XLA's lexer reads them: ASCII digits, no leading '+' or '.'.
_TOKEN = re.compile(r"\s*(?:([{}(),])|(-?(?:inf|nan)(?:\(0x[0-9a-fA-F]+\))?)|(true|false)"
                    r"|(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))")


class LiteralError(XlapyError):
    """A literal that does not read; ``offset`` is where in its text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def parse_literal(text: str, shape: Shape) -> np.ndarray | tuple:
    """The value of literal ``text`` for ``shape``: an ndarray, or a tuple for tuple shapes."""
    reader = _LiteralReader(*_tokens(text), text)
    value = reader.value(shape, 0)
    if reader.i != len(reader.tokens):
        raise reader.error(f"unexpected '{reader.tokens[reader.i]}' in literal {text!r}")
    return value


_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def _tokens(text: str) -> tuple[list[str], list[int]]:
    # XLA labels sub-arrays of rank > 3 literals with /*iN=v*/ comments
    # (blanked out in place, so that offsets stay those of the text).
    text = _COMMENT.sub(lambda m: " " * len(m.group()), text)
    tokens, offsets, pos = [], [], 0
    while text[pos:].strip():
        match = _TOKEN.match(text, pos)
        if not match:
            raise LiteralError(f"cannot read literal {text!r} at '{text[pos:pos + 10].strip()}'",
                               len(text) - len(text[pos:].lstrip()))
        tokens.append(match.group().strip())
        offsets.append(match.start() + len(match.group()) - len(match.group().lstrip()))
        pos = match.end()
    return tokens, offsets


class _LiteralReader:
    """literal ::= scalar | '(' re ',' im ')' | '{' [literal (',' literal)*] '}' | '(' literal, ... ')'
    with arrays nested exactly as deep as their rank, as XLA reads them."""

    def __init__(self, tokens: list[str], offsets: list[int], text: str):
        self.tokens, self.offsets, self.text, self.i = tokens, offsets, text, 0

    def error(self, message: str) -> LiteralError:
        at = self.offsets[self.i] if self.i < len(self.offsets) else len(self.text)
        return LiteralError(message, at)

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if expected is not None and token != expected:
            raise self.error(f"expected '{expected}', got '{token or 'end'}' in literal {self.text!r}")
        if not token:
            raise self.error(f"literal {self.text!r} ends too early")
        self.i += 1
        return token

    def value(self, shape: Shape, depth: int):
        if shape.is_tuple:
            if depth >= MAX_NESTING:
                raise self.error(f"literal nested more than {MAX_NESTING} levels deep")
            self.take("(")
            values = []
            for k, sub in enumerate(shape.tuple_shapes):
                if k:
                    self.take(",")
                values.append(self.value(sub, depth + 1))
            self.take(")")
            return tuple(values)
        if shape.is_token:
            return None
        if shape.rank > MAX_NESTING:
            raise self.error(f"literal nested more than {MAX_NESTING} levels deep")
        element = shape.type
        scalars: list = []
        self.array(shape.dimensions, element, scalars)
        if element.kind is TypeKind.PRED:
            return np.array(scalars, dtype=np.bool_).reshape(shape.dimensions)
        if element.is_integral:
            return np.array(scalars, dtype=object).astype(shape.dtype).reshape(shape.dimensions)
        return np.array(scalars, dtype=shape.dtype).reshape(shape.dimensions)

    def array(self, dims: tuple[int, ...], element: ElementType, out: list) -> None:
        """Append the scalars of an array literal of dimensions ``dims`` to ``out``."""
        if not dims:
            if self.peek() == "{":
                raise self.error("expects nested array in rank 0, but sees larger")
            out.append(self.scalar(element))
            return
        if self.peek() != "{":
            raise self.error(f"expects nested array in rank {len(dims)}, but sees '{self.peek() or 'end'}'")
        self.take()
        if self.peek() == "}" and math.prod(dims) == 0:
            self.take()
            return
        count = 0
        while True:
            if count == dims[0]:
                raise self.error(f"expects {dims[0]} elements in a dimension of rank {len(dims)}, but sees more")
            self.array(dims[1:], element, out)
            count += 1
            if self.peek() != ",":
                break
            self.take()
        if count != dims[0]:
            raise self.error(f"expects {dims[0]} elements in a dimension of rank {len(dims)}, but sees {count}")
        self.take("}")

    def scalar(self, element: ElementType):
        if element.is_complex:
            part = ELEMENT_TYPES["f32" if element.name == "c64" else "f64"]
            start = self.i
            self.take("(")
            try:
                real = self.scalar(part)
                self.take(",")
                imag = self.scalar(part)
            except LiteralError as e:
                e.offset = self.offsets[start]  # as XLA, at the '(' of the complex value
                raise
            self.take(")")
            return complex(real, imag)
        token = self.peek()
        if token in ("", "{", "}", "(", ")", ","):
            if token == "(":
                raise self.error("unexpected '(' in literal: parentheses are only for complex values")
            raise self.error(f"expected a value, got '{token or 'end'}' in literal {self.text!r}")
        value = self._scalar(token, element)
        self.take()
        return value

    def _scalar(self, token: str, element: ElementType):
        if element.kind is TypeKind.PRED:
            if token in ("true", "false"):
                return token == "true"
            if not _is_integer(token):
                raise self.error(f"expects true, false or an integer for pred, got '{token}'")
            return self._integer(token) != 0  # as XLA, any non-zero integer is true
        if token in ("true", "false"):
            raise self.error(f"expects a number for {element.name}, got '{token}'")
        if element.is_integral:
            if not _is_integer(token):
                raise self.error(f"expects an integer for {element.name}, got '{token}'")
            value = self._integer(token)
            info = ml_dtypes.iinfo(element.dtype)
            if not int(info.min) <= value <= int(info.max):
                raise self.error(f"value {value} is out of range for literal's primitive type {element.name} "
                                 f"namely [{info.min}, {info.max}]")
            return value
        return self._float(token, element)

    def _integer(self, token: str) -> int:
        # Bounded by digit count only: the caller checks the range of the type it is for.
        try:
            return read_int(token, -MAX_INT_TOKEN, MAX_INT_TOKEN)
        except IntegerError as e:
            raise self.error(str(e)) from None

    def _float(self, token: str, element: ElementType):
        dtype = element.dtype
        finite = _finite_range(element.name)
        if "nan" in token:
            negative = token.startswith("-")
            if not _has_nan(dtype):
                raise self.error(f"{element.name} has no NaN")
            payload = token.partition("(")[2].rstrip(")")
            if not payload:
                return dtype.type(-math.nan if negative else math.nan)
            return self._nan_with_payload(element, negative, int(payload, 16))
        if "inf" in token:
            if not _has_infinity(dtype):
                raise self.error(f"{element.name} has no infinity")
            return dtype.type(float(token))
        # An integer token is read as an integer first, as XLA does: `-0` is +0.
        value = float(self._integer(token)) if _is_integer(token) else float(token)
        lowest, limit = finite
        # Past ``limit`` a value rounds to infinity; an unsigned type (f8e8m0fnu) has no zero.
        in_range = abs(value) < limit and (lowest < 0 or value >= lowest)
        if not math.isfinite(value) or not in_range:
            raise self.error(f"value {token} is out of range for literal's primitive type {element.name} "
                             f"namely [{_limits(element.name)[0]}, {_limits(element.name)[1]}]")
        return dtype.type(value)

    def _nan_with_payload(self, element: ElementType, negative: bool, payload: int):
        layout = _nan_layout(element.name)
        if layout is None:
            raise self.error(f"{element.name} does not support NaN payloads")
        width, mantissa_bits = layout
        if not 0 < payload < 1 << mantissa_bits:
            raise self.error(f"NaN payload 0x{payload:x} is out of range (0x{(1 << mantissa_bits) - 1:x}) "
                             f"for {element.name}")
        bits = (int(negative) << (width - 1)) | (((1 << (width - 1 - mantissa_bits)) - 1) << mantissa_bits) | payload
        return np.array(bits, dtype=f"uint{width}").view(element.dtype)[()]


def _is_integer(token: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", token) is not None


def _has_nan(dtype: np.dtype) -> bool:
    return bool(np.isnan(np.array(math.nan).astype(dtype)))


def _has_infinity(dtype: np.dtype) -> bool:
    return bool(np.isinf(np.array(math.inf).astype(dtype)))


@functools.cache
def _limits(name: str) -> tuple:
    """The lowest and largest finite values of float type ``name``."""
    info = ml_dtypes.finfo(ELEMENT_TYPES[name].dtype)
    return info.min, info.max


@functools.cache
def _finite_range(name: str) -> tuple[float, float]:
    """The lowest value of float type ``name`` and the magnitude from which
    values round to infinity (as XLA's parser reads them): half a step past the largest."""
    dtype = ELEMENT_TYPES[name].dtype
    lowest, largest = (float(v) for v in _limits(name))
    width = dtype.itemsize * 8
    below = np.array(np.array(largest, dtype=dtype).view(f"uint{width}") - 1, dtype=f"uint{width}")
    half_step = (largest - float(below.view(dtype))) / 2
    return lowest, largest + half_step


# Types whose NaNs are IEEE's (exponent all ones, any non-zero mantissa): (width, mantissa bits).
def _nan_layout(name: str) -> tuple[int, int] | None:
    dtype = ELEMENT_TYPES[name].dtype
    if not _has_infinity(dtype) or dtype.itemsize * 8 != ELEMENT_TYPES[name].bit_width:
        return None
    return ELEMENT_TYPES[name].bit_width, ml_dtypes.finfo(dtype).nmant


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
        sign = "-" if math.copysign(1.0, v) < 0 else ""
        return sign + "nan" + _nan_payload_text(value, element_type)
    digits = _significant_digits(element_type)
    if len(digits) == 1:
        return f"{v:.{digits[0]}g}"
    short = f"{v:.{digits[0]}g}"
    return short if kind.dtype.type(float(short)) == kind.dtype.type(v) else f"{v:.{digits[1]}g}"


def _nan_payload_text(value, element_type: str) -> str:
    """``(0x...)`` for a NaN whose payload is not the default quiet one, as XLA prints it."""
    layout = _nan_layout(element_type)
    if layout is None:
        return ""
    width, mantissa_bits = layout
    bits = int(np.asarray(value, dtype=ELEMENT_TYPES[element_type].dtype).view(f"uint{width}"))
    payload = bits & ((1 << mantissa_bits) - 1)
    return "" if payload == 1 << (mantissa_bits - 1) else f"(0x{payload:x})"


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


