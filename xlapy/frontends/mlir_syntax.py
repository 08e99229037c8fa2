"""The MLIR textual syntax StableHLO programs are written in: tokens, types and
attributes, each read from a ``Cursor`` and printed back the way MLIR's
printer writes it (so text MLIR printed comes back byte for byte, and other
spellings come back in MLIR's canonical form).

Types: ``tensor<8x16xf32>``, ``tensor<f32>``, ``tensor<?x4xf32, #enc>``,
``!stablehlo.token``, ``tuple<...>``, scalar types (``i64``, ``f32``,
``complex<f32>``, ``index``) and any other ``!dialect.type`` kept as text.

Attributes: integers and floats with their type (``1 : i32``), strings,
booleans, ``unit``, arrays, ``array<i64: 1, 2>``, ``dense<...>`` (nested,
splat and hex forms), dictionaries (printed sorted by name, as MLIR keeps
them), symbol references, type attributes, and dialect attributes
(``#stablehlo.gather<...>``, ``#sdy.xxx<...>``) kept as text; Shardy's
sharding, mesh and sharding-rule attributes are read into the objects of
``xlapy.sharding``.

This is one of xlapy's two MLIR layers, the one of the StableHLO frontend
(``xlapy.frontends.stablehlo``). The code generator's IR is xDSL's
(``xlapy.codegen.mlir_text``). They stay apart because xDSL 0.74 cannot read
or reprint what JAX writes: it has no ``stablehlo`` or ``sdy`` dialect, so the
custom syntax of their ops does not parse; its parser drops ``loc(...)`` and
``#loc`` aliases; it reads a hex ``dense<0x7FC00000> : tensor<f32>`` as the
integer 2143289344 instead of the bits of a NaN; it prints ``module`` as
``builtin.module``. Only the cursor and integer reading of ``xlapy.syntax``
are shared (with the HLO text parser). docs/mlir.md has the rule for new code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from xlapy.errors import ParseError
from xlapy.shapes import UNBOUNDED_SIZE, Shape
from xlapy.syntax import INT64_MAX, INT64_MIN, MAX_INT_TOKEN, Cursor
from xlapy.syntax import read_int as read_int_text

# -- tokens ----------------------------------------------------------------------

VALUE_NAME = re.compile(r"%([0-9]+(?![\w$.\-])|[A-Za-z_$.\-][\w$.\-]*)", re.ASCII)
VALUE_USE = re.compile(r"%([0-9]+(?![\w$.\-])|[A-Za-z_$.\-][\w$.\-]*)(?:#([0-9]+))?", re.ASCII)
BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")  # MLIR's bare-id
OP_NAME = BARE_SYMBOL  # an op's name (``stablehlo.add``) is a bare-id too
KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
# Numbers are ASCII digits only (Python's \d also takes other scripts' digits).
INTEGER = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+)(?![.\w])", re.ASCII)
NUMBER = re.compile(r"[-+]?(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)")
UINT64_MAX = 2**64 - 1
# A dense splat is materialised as an array: one of more bytes than this is refused.
MAX_SPLAT_BYTES = 1 << 30


def read_string(cursor: Cursor) -> str:
    """An MLIR string literal (escapes ``\\\\``, ``\\"``, ``\\n``, ``\\t`` and ``\\XX``)."""
    cursor.skip_space()
    text, start = cursor.text, cursor.pos
    if not text.startswith('"', start):
        raise cursor.error(f"expected a string, got {cursor.found()}")
    out = bytearray()
    i = start + 1
    while True:
        if i >= len(text) or text[i] == "\n":
            raise cursor.error("unterminated string", start)
        c = text[i]
        if c == '"':
            break
        if c == "\\":
            nxt = text[i + 1: i + 2]
            if nxt in ('"', "\\"):
                out += nxt.encode()
                i += 2
            elif nxt == "n":
                out += b"\n"
                i += 2
            elif nxt == "t":
                out += b"\t"
                i += 2
            elif re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 1: i + 3]):
                out.append(int(text[i + 1: i + 3], 16))
                i += 3
            else:
                raise cursor.error("unknown escape in string", i)
        else:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
    cursor.pos = i + 1
    return out.decode("utf-8", "surrogateescape")


def quote_string(value: str) -> str:
    """A string as MLIR prints it: printable ASCII kept, ``\\\\`` doubled, the rest ``\\XX``."""
    out = []
    for byte in value.encode("utf-8", "surrogateescape"):
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F and byte != 0x22:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def read_symbol(cursor: Cursor, what: str = "a symbol name") -> str:
    """``@name`` or ``@"any name"``; returns the name without ``@``."""
    cursor.skip_space()
    if not cursor.text.startswith("@", cursor.pos):
        raise cursor.error(f"expected {what} ('@name'), got {cursor.found()}")
    cursor.pos += 1
    if cursor.text.startswith('"', cursor.pos):
        return read_string(cursor)
    match = BARE_SYMBOL.match(cursor.text, cursor.pos)
    if not match:
        raise cursor.error(f"expected {what} after '@'")
    cursor.pos = match.end()
    return match.group()


def symbol(name: str) -> str:
    """``@name``, quoted when the name is not a bare identifier."""
    return "@" + (name if BARE_SYMBOL.fullmatch(name) else quote_string(name))


def read_keyword(cursor: Cursor, what: str) -> str:
    return cursor.match(KEYWORD, what).group()


def expect_keyword(cursor: Cursor, word: str, what: str) -> None:
    cursor.skip_space()
    match = KEYWORD.match(cursor.text, cursor.pos)
    if not match or match.group() != word:
        raise cursor.error(f"expected '{word}' {what}, got {cursor.found()}")
    cursor.pos = match.end()


def eat_keyword(cursor: Cursor, word: str) -> bool:
    cursor.skip_space()
    match = KEYWORD.match(cursor.text, cursor.pos)
    if match and match.group() == word:
        cursor.pos = match.end()
        return True
    return False


def peek_keyword(cursor: Cursor) -> str | None:
    cursor.skip_space()
    match = KEYWORD.match(cursor.text, cursor.pos)
    return match.group() if match else None


def read_int(cursor: Cursor, what: str = "an integer") -> int:
    """A decimal or hex integer of at most 64 bits (signed, or unsigned when positive)."""
    cursor.skip_space()
    start = cursor.pos
    return integer_value(cursor, cursor.match(INTEGER, what).group(), start)


def integer_value(cursor: Cursor, literal: str, pos: int) -> int:
    """The value of integer ``literal`` (decimal or ``0x`` hex) read at ``pos``: at most 64 bits."""
    negative = literal.startswith("-")
    digits = literal.lstrip("-+")
    hexadecimal = digits[:2].lower() == "0x"
    value = cursor.checked_int(digits[2:] if hexadecimal else digits, pos, 0, UINT64_MAX, 16 if hexadecimal else 10)
    if negative and value > -INT64_MIN:
        raise cursor.error(f"integer too large: {literal} is below {INT64_MIN}", pos)
    return -value if negative else value


def balanced(cursor: Cursor, open_: str, close: str) -> str:
    """The text from ``open_`` (at the cursor) to its matching ``close``,
    skipping string literals; the cursor ends after ``close``."""
    cursor.skip_space()
    text, start = cursor.text, cursor.pos
    if not text.startswith(open_, start):
        raise cursor.error(f"expected '{open_}', got {cursor.found()}")
    depth, i = 0, start
    pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    while i < len(text):
        c = text[i]
        if c == '"':
            probe = Cursor(text, i, cursor.source)
            read_string(probe)
            i = probe.pos
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif c in ">)]}":
            # `->` inside dialect attributes is an arrow, not a closing bracket.
            if c == ">" and i > 0 and text[i - 1] == "-":
                i += 1
                continue
            if not stack or stack[-1] != c:
                raise cursor.error(f"unbalanced '{c}'", i)
            stack.pop()
            if not stack:
                cursor.pos = i + 1
                return text[start:i + 1]
        depth += 1
        i += 1
    raise cursor.error(f"missing '{close}'", start)


def read_location(cursor: Cursor) -> str | None:
    """A trailing ``loc(...)``, kept as its text; None when there is none."""
    cursor.skip_space()
    if not re.match(r"loc\s*\(", cursor.text[cursor.pos:cursor.pos + 8]):
        return None
    start = cursor.pos
    cursor.pos += 3
    balanced(cursor, "(", ")")
    return cursor.text[start:cursor.pos]


# -- element types -------------------------------------------------------------

# MLIR element type -> XLA element type.
_ELEMENT_TO_HLO: dict[str, str] = {
    "i1": "pred", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
    "complex<f32>": "c64", "complex<f64>": "c128",
    "f8E4M3FN": "f8e4m3fn", "f8E5M2": "f8e5m2", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz",
    "f8E4M3B11FNUZ": "f8e4m3b11fnuz", "f8E3M4": "f8e3m4", "f8E4M3": "f8e4m3", "f8E8M0FNU": "f8e8m0fnu",
    "f4E2M1FN": "f4e2m1fn",
    **{f"i{b}": f"s{b}" for b in (2, 4, 8, 16, 32, 64)},
    **{f"si{b}": f"s{b}" for b in (2, 4, 8, 16, 32, 64)},
    **{f"ui{b}": f"u{b}" for b in (1, 2, 4, 8, 16, 32, 64)},
}
_HLO_TO_ELEMENT: dict[str, str] = {}
for _mlir, _hlo in _ELEMENT_TO_HLO.items():
    if not _mlir.startswith("si"):
        _HLO_TO_ELEMENT.setdefault(_hlo, _mlir)

ELEMENT_TYPE = re.compile(r"(?:[fiu]|si|ui|bf)[0-9][0-9A-Za-z]*|index|complex<\s*[a-z0-9A-Z]+\s*>")


def element_dtype(element: str) -> np.dtype:
    """The numpy dtype holding values of an MLIR element type."""
    if element == "index":
        return np.dtype(np.int64)
    hlo = _ELEMENT_TO_HLO.get(element)
    if hlo is None:
        raise KeyError(element)
    from xlapy.shapes import element_type

    return element_type(hlo).dtype


def is_float_element(element: str) -> bool:
    return element.startswith(("f", "bf"))


def is_complex_element(element: str) -> bool:
    return element.startswith("complex<")


def is_unsigned_element(element: str) -> bool:
    return element.startswith("ui")


# -- types -------------------------------------------------------------------------


class Type:
    """An MLIR type."""


@dataclass(frozen=True)
class TensorType(Type):
    """``tensor<d0xd1x...xelement[, encoding]>``; a dynamic dimension is None."""

    dims: tuple[int | None, ...]
    element: str
    encoding: Any = None

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.dims)
        encoding = f", {self.encoding}" if self.encoding is not None else ""
        return f"tensor<{dims}{self.element}{encoding}>"

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class ScalarType(Type):
    """A builtin non-tensor type used as such: ``i64``, ``f32``, ``index``, ``none``..."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TupleType(Type):
    types: tuple[Type, ...]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.types)) + ">"


@dataclass(frozen=True)
class TokenType(Type):
    def __str__(self) -> str:
        return "!stablehlo.token"


@dataclass(frozen=True)
class OpaqueType(Type):
    """Any other type (``!dialect.name<...>``, ``memref<...>``...), kept as its text."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class FunctionType(Type):
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __str__(self) -> str:
        return f"({', '.join(map(str, self.inputs))}) -> {result_types_text(self.results)}"


def result_types_text(types: tuple[Type, ...] | list[Type]) -> str:
    """Results of a function type: one bare type (unless it is a function type), else parenthesised."""
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        return str(types[0])
    return "(" + ", ".join(map(str, types)) + ")"


_DIM = re.compile(r"(\?|[0-9]+)x")


def parse_type(cursor: Cursor) -> Type:
    cursor.skip_space()
    text, pos = cursor.text, cursor.pos
    if text.startswith("tensor<", pos):
        return _parse_tensor(cursor)
    if text.startswith("!stablehlo.token", pos) and not re.match(r"[A-Za-z0-9_.]", text[pos + 16: pos + 17]):
        cursor.pos += len("!stablehlo.token")
        return TokenType()
    if text.startswith("tuple<", pos):
        cursor.pos += len("tuple")
        with cursor.nested("types"):
            types = cursor.delimited("<", ">", lambda: parse_type(cursor), "the tuple element types")
        return TupleType(tuple(types))
    if text.startswith("(", pos):
        with cursor.nested("types"):
            inputs = cursor.delimited("(", ")", lambda: parse_type(cursor), "the function inputs")
            cursor.expect("->", "in a function type")
            results = parse_result_types(cursor)
        return FunctionType(tuple(inputs), tuple(results))
    if text.startswith("!", pos):
        match = re.compile(r"![A-Za-z_][A-Za-z0-9_.$]*").match(text, pos)
        if not match:
            raise cursor.error(f"expected a type, got {cursor.found()}")
        cursor.pos = match.end()
        if cursor.text.startswith("<", cursor.pos):
            balanced(cursor, "<", ">")
        return OpaqueType(text[pos:cursor.pos])
    match = ELEMENT_TYPE.match(text, pos)
    if match and not re.match(r"[A-Za-z0-9_.]", text[match.end(): match.end() + 1]):
        cursor.pos = match.end()
        return ScalarType(_normalise_element(match.group()))
    match = re.compile(r"(none|memref|vector)\b").match(text, pos)
    if match:
        cursor.pos = match.end()
        if cursor.text.startswith("<", cursor.pos):
            balanced(cursor, "<", ">")
        return OpaqueType(text[pos:cursor.pos])
    raise cursor.error(f"expected a type, got {cursor.found()}")


def parse_result_types(cursor: Cursor) -> list[Type]:
    """The result side of a function type: ``t`` or ``(t, ...)``."""
    if cursor.peek("("):
        return cursor.delimited("(", ")", lambda: parse_type(cursor), "the result types")
    return [parse_type(cursor)]


def _normalise_element(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _parse_tensor(cursor: Cursor) -> TensorType:
    start = cursor.pos
    cursor.pos += len("tensor<")
    dims: list[int | None] = []
    while True:
        cursor.skip_space()
        match = _DIM.match(cursor.text, cursor.pos)
        if not match:
            break
        dims.append(None if match.group(1) == "?" else cursor.checked_int(match.group(1), cursor.pos, 0))
        cursor.pos = match.end()
    if cursor.text.startswith("*", cursor.pos):
        raise cursor.error("unranked tensors are not supported", cursor.pos)
    element_type = parse_type(cursor)
    if not isinstance(element_type, ScalarType) or (element_type.name not in _ELEMENT_TO_HLO
                                                    and element_type.name != "index"):
        raise cursor.error(f"unsupported tensor element type '{element_type}'", start)
    # As XLA, the size in bytes of a static tensor must fit in 64 bits.
    byte_width = 1 if element_type.name in ("i1", "index") else element_dtype(element_type.name).itemsize
    if None not in dims and math.prod(dims) * byte_width > INT64_MAX:
        raise cursor.error(f"tensor of {math.prod(dims)} elements: its size in bytes does not fit in 64 bits", start)
    encoding = None
    if cursor.eat(","):
        with cursor.nested("types"):
            encoding = parse_attribute(cursor)
    cursor.expect(">", "to end the tensor type")
    return TensorType(tuple(dims), element_type.name, encoding)


def parse_type_list(cursor: Cursor) -> list[Type]:
    """``t, t, ...`` (at least one)."""
    types = [parse_type(cursor)]
    while cursor.eat(","):
        types.append(parse_type(cursor))
    return types


def shape_of(type_: Type) -> Shape:
    """The XLA shape of a value of MLIR type ``type_`` (no layout)."""
    if isinstance(type_, TensorType):
        if type_.element == "index":
            raise ValueError("index tensors have no XLA shape")
        bounds = _bounds(type_)
        dims, dynamic = [], []
        for i, d in enumerate(type_.dims):
            if d is None:
                bound = bounds[i] if bounds else None
                dims.append(UNBOUNDED_SIZE if bound is None else bound)
                dynamic.append(True)
            else:
                dims.append(d)
                dynamic.append(False)
        return Shape(_ELEMENT_TO_HLO[type_.element], tuple(dims), None, (), tuple(dynamic))
    if isinstance(type_, TokenType):
        return Shape.token()
    if isinstance(type_, TupleType):
        return Shape.make_tuple([shape_of(t) for t in type_.types])
    raise ValueError(f"type {type_} has no XLA shape")


def _bounds(type_: TensorType) -> list[int | None] | None:
    encoding = type_.encoding
    if isinstance(encoding, DialectAttr) and encoding.name == "stablehlo.bounds":
        bounds = [b.strip() for b in encoding.body.split(",")]
        if not all(b == "?" or re.fullmatch(r"[0-9]{1,19}", b) for b in bounds):
            raise ValueError(f"bounds <{encoding.body}> are not sizes or '?'")
        return [None if b == "?" else int(b) for b in bounds]
    return None


def type_of(shape: Shape) -> Type:
    """The MLIR type of values of XLA shape ``shape``."""
    if shape.is_tuple:
        return TupleType(tuple(type_of(s) for s in shape.tuple_shapes))
    if shape.is_token:
        return TokenType()
    dims: list[int | None] = []
    bounds: list[str] = []
    for d, dynamic in zip(shape.dimensions, shape.dynamic_dimensions):
        dims.append(None if dynamic else d)
        bounds.append("?" if not dynamic or d == UNBOUNDED_SIZE else str(d))
    encoding = None
    if any(b != "?" for b in bounds):
        encoding = DialectAttr("stablehlo.bounds", ", ".join(bounds))
    return TensorType(tuple(dims), _HLO_TO_ELEMENT[shape.element_type], encoding)


# -- floats as MLIR prints them --------------------------------------------------------


def _float_semantics(element: str) -> tuple[np.dtype, int, int]:
    """(dtype, significand precision in bits, width in bits) of a float element type."""
    dtype = element_dtype(element)
    if dtype == np.float64:
        return dtype, 53, 64
    if dtype == np.float32:
        return dtype, 24, 32
    info = ml_dtypes.finfo(dtype)
    return dtype, info.nmant + 1, info.bits


def _decimal_digits(value: float, precision: int) -> tuple[str, int]:
    """(digits, exponent) with digits * 10**exponent the value ``abs(value)``
    cut to at most ``precision`` significant digits, computed the way LLVM's
    APFloat::toString does (a first truncating cut, then a round half up on
    the digits), without trailing zeros."""
    numerator, denominator = abs(value).as_integer_ratio()
    exponent = -(denominator.bit_length() - 1)
    zeros = (numerator & -numerator).bit_length() - 1
    numerator >>= zeros
    exponent += zeros
    if exponent >= 0:
        significand, exponent = numerator << exponent, 0
    else:
        significand = numerator * 5 ** -exponent
    required_bits = (precision * 196 + 58) // 59
    bits = significand.bit_length()
    if bits > required_bits:
        removable = (bits - required_bits) * 59 // 196
        if removable:
            exponent += removable
            significand //= 10 ** removable
    digits = str(significand)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    if len(digits) > precision:
        dropped = len(digits) - precision
        kept = digits[:precision]
        exponent += dropped
        if digits[precision] >= "5":
            rounded = str(int(kept) + 1)
            if len(rounded) > len(kept):  # carried through every digit
                return "1", exponent + len(kept)
            kept = rounded
        stripped = kept.rstrip("0")
        exponent += len(kept) - len(stripped)
        digits = stripped
    return digits, exponent


def _format_digits(negative: bool, digits: str, exponent: int, precision: int, max_padding: int,
                   truncate_zero: bool) -> str:
    sign = "-" if negative else ""
    n = len(digits)
    if max_padding == 0:
        scientific = True
    elif exponent >= 0:
        scientific = exponent > max_padding or n + exponent > precision
    else:
        msd = exponent + n - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        exponent += n - 1
        mantissa = digits[0] + "." + (digits[1:] or ("0" if truncate_zero else ""))
        if not truncate_zero and precision > n - 1:
            mantissa += "0" * (precision - n + 1)
        exp_digits = str(abs(exponent))
        if not truncate_zero and len(exp_digits) < 2:
            exp_digits = "0" + exp_digits
        return f"{sign}{mantissa}{'e' if not truncate_zero else 'E'}{'+' if exponent >= 0 else '-'}{exp_digits}"
    if exponent >= 0:
        return sign + digits + "0" * exponent
    whole = exponent + n
    if whole > 0:
        return sign + digits[:whole] + "." + digits[whole:]
    return sign + "0." + "0" * (-whole) + digits


def _bits_hex(value: Any, dtype: np.dtype, width: int) -> str:
    raw = np.asarray(value, dtype=dtype).tobytes()
    bits = int.from_bytes(raw, "little")
    return f"0x{bits:0{max(1, (width + 3) // 4)}X}"


def format_float(value: Any, element: str) -> str:
    """A float of MLIR element type ``element`` as MLIR prints it: 6-digit
    scientific when that reads back exactly, else the shortest decimal form
    APFloat prints, else (infinities, NaNs, integral values) the hex bits."""
    dtype, precision, width = _float_semantics(element)
    typed = np.asarray(value, dtype=dtype)[()]
    v = float(typed)
    if math.isfinite(v):
        negative = math.copysign(1.0, v) < 0
        if v == 0:
            text = ("-" if negative else "") + "0.000000e+00"
        else:
            digits, exponent = _decimal_digits(abs(v), 6)
            text = _format_digits(negative, digits, exponent, 6, 0, False)
        if _reads_back(text, typed, dtype):
            return text
        natural = 2 + precision * 59 // 196
        digits, exponent = _decimal_digits(abs(v), natural)
        text = _format_digits(negative, digits, exponent, natural, 3, True) if v != 0 else "0"
        if "." in text:
            return text
    return _bits_hex(typed, dtype, width)


def _reads_back(text: str, typed: Any, dtype: np.dtype) -> bool:
    back = np.asarray(float(text), dtype=dtype)
    return back.tobytes() == np.asarray(typed, dtype=dtype).tobytes()


def format_integer(value: int, element: str) -> str:
    if element == "i1":
        return "true" if value else "false"
    return str(int(value))


# -- attributes ------------------------------------------------------------------------


class Attr:
    """An MLIR attribute; ``str()`` is its MLIR text."""


@dataclass(frozen=True)
class IntegerAttr(Attr):
    value: int
    type: Type | None = None   # None: written without a type (inside dialect attributes)

    def __str__(self) -> str:
        if isinstance(self.type, ScalarType) and self.type.name == "i1":
            return "true" if self.value else "false"
        return str(self.value) + (f" : {self.type}" if self.type is not None else "")


@dataclass(frozen=True)
class FloatAttr(Attr):
    value: float
    type: Type | None = None

    def __str__(self) -> str:
        element = self.type.name if isinstance(self.type, ScalarType) else "f64"
        text = format_float(self.value, element)
        return text + (f" : {self.type}" if self.type is not None else "")


@dataclass(frozen=True)
class BoolAttr(Attr):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass(frozen=True)
class StringAttr(Attr):
    value: str
    type: Type | None = None

    def __str__(self) -> str:
        return quote_string(self.value) + (f" : {self.type}" if self.type is not None else "")


@dataclass(frozen=True)
class UnitAttr(Attr):
    def __str__(self) -> str:
        return "unit"


@dataclass(frozen=True)
class ArrayAttr(Attr):
    items: tuple[Attr, ...]

    def __str__(self) -> str:
        return "[" + ", ".join(map(str, self.items)) + "]"


@dataclass(frozen=True)
class DenseArrayAttr(Attr):
    """``array<i64: 1, 2>``."""

    element: str
    values: tuple

    def __str__(self) -> str:
        if not self.values:
            return f"array<{self.element}>"
        if is_float_element(self.element):
            items = [format_float(v, self.element) for v in self.values]
        else:
            items = [format_integer(v, self.element) for v in self.values]
        return f"array<{self.element}: {', '.join(items)}>"


@dataclass(frozen=True, eq=False)
class DenseElementsAttr(Attr):
    """``dense<...> : tensor<...>``: the values as a numpy array of the tensor's
    shape (element type ``index`` as int64)."""

    type: TensorType
    array: np.ndarray

    def __str__(self) -> str:
        return f"dense<{self.body()}> : {self.type}"

    def body(self) -> str:
        return format_dense_body(self.array, self.type.element)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DenseElementsAttr) and self.type == other.type
                and self.array.tobytes() == other.array.tobytes())

    def __hash__(self) -> int:
        return hash((self.type, self.array.tobytes()))


@dataclass(frozen=True)
class DictAttr(Attr):
    entries: tuple[tuple[str, Attr], ...]

    def __str__(self) -> str:
        return format_attr_dict(dict(self.entries)) or "{}"

    def get(self, name: str) -> Attr | None:
        return dict(self.entries).get(name)


@dataclass(frozen=True)
class SymbolRefAttr(Attr):
    path: tuple[str, ...]

    def __str__(self) -> str:
        return "::".join(symbol(p) for p in self.path)

    @property
    def name(self) -> str:
        return self.path[-1]


@dataclass(frozen=True)
class TypeAttr(Attr):
    type: Type

    def __str__(self) -> str:
        return str(self.type)


@dataclass(frozen=True)
class DialectAttr(Attr):
    """``#name<body>`` (``#stablehlo.gather<...>``, ``#stablehlo<precision DEFAULT>``)
    or an alias ``#name`` (body None), kept as text."""

    name: str
    body: str | None = None

    def __str__(self) -> str:
        return f"#{self.name}" + (f"<{self.body}>" if self.body is not None else "")

    def fields(self) -> dict[str, Attr]:
        """The ``key = value, ...`` entries of a struct-like body."""
        return parse_struct_fields(self.body or "")


@dataclass(frozen=True)
class OpaqueAttr(Attr):
    """An attribute kept as its text (``affine_map<...>``, ``dense_resource<...>``...)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class ObjectAttr(Attr):
    """A Shardy attribute read into its ``xlapy.sharding`` object (a mesh, a
    tensor sharding, a list of them, a sharding rule); printed by ``printer``."""

    value: Any
    printer: Callable[[Any], str] = str

    def __str__(self) -> str:
        return self.printer(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectAttr) and self.value == other.value

    def __hash__(self) -> int:
        return id(self)


def format_attr_dict(attrs: dict[str, Attr]) -> str:
    """``{a = 1 : i64, b, c = "x"}`` sorted by name as MLIR keeps dictionaries
    (unit attributes print as their bare name); empty for no attributes."""
    if not attrs:
        return ""
    parts = []
    for name in sorted(attrs):
        value = attrs[name]
        key = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name) else quote_string(name)
        parts.append(key if isinstance(value, UnitAttr) else f"{key} = {value}")
    return "{" + ", ".join(parts) + "}"


# Shardy attributes read into objects (their modules are imported lazily:
# they are written alongside this one and only needed when the text has them).
def _sdy_readers() -> dict[str, Callable[[Cursor], Attr]]:
    def sharding(cursor: Cursor) -> Attr:
        from xlapy.sharding.tensor_sharding import parse_tensor_sharding

        return ObjectAttr(parse_tensor_sharding(cursor))

    def per_value(cursor: Cursor) -> Attr:
        from xlapy.sharding.tensor_sharding import parse_sharding_per_value, print_sharding_per_value

        return ObjectAttr(tuple(parse_sharding_per_value(cursor)), lambda v: print_sharding_per_value(list(v)))

    def mesh(cursor: Cursor) -> Attr:
        from xlapy.sharding.mesh import parse_mesh

        return ObjectAttr(parse_mesh(cursor), lambda m: m.attr())

    def rule(cursor: Cursor) -> Attr:
        from xlapy.sharding.sharding_rule import parse_op_sharding_rule

        return ObjectAttr(parse_op_sharding_rule(cursor))

    return {"#sdy.sharding<": sharding, "#sdy.sharding_per_value<": per_value, "#sdy.mesh<": mesh,
            "#sdy.op_sharding_rule<": rule}


_SDY_READERS: dict[str, Callable[[Cursor], Attr]] | None = None


def parse_attribute(cursor: Cursor, default_types: bool = True) -> Attr:
    """One attribute value. With ``default_types`` (attribute dictionaries),
    numbers without a type get MLIR's defaults (i64, f64) as MLIR would print them."""
    global _SDY_READERS
    cursor.skip_space()
    text, pos = cursor.text, cursor.pos
    if pos >= len(text):
        raise cursor.error("expected an attribute value, got end of text")
    c = text[pos]
    if c == "[":
        with cursor.nested("attributes"):
            items = cursor.delimited("[", "]", lambda: parse_attribute(cursor, default_types), "an array attribute")
        return ArrayAttr(tuple(items))
    if c == "{":
        with cursor.nested("attributes"):
            return DictAttr(tuple(parse_attr_dict(cursor).items()))
    if c == '"':
        value = read_string(cursor)
        if cursor.peek(":") and not cursor.peek("::"):
            checkpoint = cursor.pos
            cursor.pos += 1
            try:
                return StringAttr(value, parse_type(cursor))
            except ParseError:
                cursor.pos = checkpoint
        return StringAttr(value)
    if c == "@":
        path = [read_symbol(cursor)]
        while cursor.eat("::"):
            path.append(read_symbol(cursor))
        return SymbolRefAttr(tuple(path))
    if c == "#":
        if _SDY_READERS is None:
            _SDY_READERS = _sdy_readers()
        for prefix, reader in _SDY_READERS.items():
            if text.startswith(prefix, pos):
                return reader(cursor)
        match = re.compile(r"#([A-Za-z_][A-Za-z0-9_.$\-]*)").match(text, pos)
        if not match:
            raise cursor.error(f"expected an attribute, got {cursor.found()}")
        cursor.pos = match.end()
        if text.startswith("<", cursor.pos):
            body = balanced(cursor, "<", ">")[1:-1]
            return DialectAttr(match.group(1), body)
        return DialectAttr(match.group(1))
    word = KEYWORD.match(text, pos)
    if word:
        name = word.group()
        if name in ("true", "false"):
            cursor.pos = word.end()
            return BoolAttr(name == "true")
        if name == "unit":
            cursor.pos = word.end()
            return UnitAttr()
        if name == "dense" and text.startswith("<", word.end()):
            return _parse_dense(cursor)
        if name == "array" and text.startswith("<", word.end()):
            return _parse_dense_array(cursor)
        if name in ("dense_resource", "affine_map", "affine_set", "strided", "distinct", "sparse",
                    "opaque") and text.startswith(("<", "["), word.end()):
            cursor.pos = word.end()
            bracket = text[cursor.pos]
            balanced(cursor, bracket, ">" if bracket == "<" else "]")
            if name in ("dense_resource", "sparse", "opaque") and cursor.peek(":") and not cursor.peek("::"):
                cursor.pos += 1
                parse_type(cursor)
            return OpaqueAttr(text[pos:cursor.pos])
        if name == "loc" and text.startswith("(", word.end()):
            return OpaqueAttr(read_location(cursor) or "")
    if c in "-+0123456789":
        return _parse_number(cursor, default_types)
    try:
        return TypeAttr(parse_type(cursor))
    except ParseError:
        raise cursor.error(f"expected an attribute value, got {cursor.found()}") from None


def float_from_bits(bits: int, element: str) -> Any:
    """The float of element type ``element`` whose bit pattern is ``bits``."""
    dtype, _, width = _float_semantics(element)
    if bits < 0 or bits >= 1 << width:
        raise ValueError(f"hex value 0x{bits:X} does not fit {element}")
    return np.frombuffer(bits.to_bytes(dtype.itemsize, "little"), dtype=dtype)[0]


def _parse_number(cursor: Cursor, default_types: bool) -> Attr:
    cursor.skip_space()
    start = cursor.pos
    match = cursor.match(NUMBER, "a number")
    literal = match.group()
    type_: Type | None = None
    if cursor.peek(":") and not cursor.peek("::"):
        cursor.pos += 1
        type_ = parse_type(cursor)
    is_float = "." in literal or ("e" in literal.lower() and not literal.lower().startswith(("0x", "-0x")))
    if isinstance(type_, ScalarType) and (is_float_element(type_.name) or type_.name.startswith("complex")):
        if not is_float and "x" in literal.lower():
            try:
                return FloatAttr(float(float_from_bits(_int_token(literal, 16), type_.name)), type_)
            except ValueError as e:
                raise cursor.error(str(e), start) from None
        return FloatAttr(float(literal), type_)
    if is_float:
        if type_ is not None:  # MLIR's message for 1.5 : i64
            raise cursor.error(f"floating point value not valid for specified type {type_}", start)
        return FloatAttr(float(literal), ScalarType("f64") if default_types else None)
    value = integer_value(cursor, literal, start)
    if isinstance(type_, ScalarType) and type_.name in _ELEMENT_TO_HLO and type_.name != "i1" \
            and not is_float_element(type_.name) and not is_complex_element(type_.name):
        lower, upper = integer_range(type_.name)
        if not lower <= value <= upper:
            raise cursor.error(f"integer constant {literal} out of range for {type_.name} [{lower}, {upper}]", start)
    if type_ is None and default_types:
        type_ = ScalarType("i64")
    if isinstance(type_, ScalarType) and type_.name == "i1":
        return IntegerAttr(1 if value else 0, type_)
    return IntegerAttr(value, type_)


def parse_attr_dict(cursor: Cursor) -> dict[str, Attr]:
    """``{name = value, unit_name, ...}``; a name given twice is an error."""
    cursor.expect("{", "to start an attribute dictionary")
    attrs: dict[str, Attr] = {}
    if cursor.eat("}"):
        return attrs
    while True:
        cursor.skip_space()
        name_pos = cursor.pos
        if cursor.peek('"'):
            name = read_string(cursor)
        else:
            name = cursor.match(re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*"), "an attribute name").group()
        if name in attrs:
            raise cursor.error(f"duplicate attribute '{name}'", name_pos)
        attrs[name] = parse_attribute(cursor) if cursor.eat("=") else UnitAttr()
        if cursor.eat("}"):
            return attrs
        if not cursor.eat(","):
            raise cursor.error(f"expected ',' or '}}' in an attribute dictionary, got {cursor.found()}")


def parse_struct_fields(body: str) -> dict[str, Attr]:
    """The ``key = value`` entries of a dialect attribute's body
    (``offset_dims = [1], index_vector_dim = 1``); values read without default types."""
    cursor = Cursor(body)
    fields: dict[str, Attr] = {}
    if cursor.at_end():
        return fields
    while True:
        name = cursor.match(re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*"), "a field name").group()
        cursor.expect("=", f"after field '{name}'")
        fields[name] = parse_attribute(cursor, default_types=False)
        if cursor.at_end():
            return fields
        cursor.expect(",", "between fields")


def _parse_dense_array(cursor: Cursor) -> DenseArrayAttr:
    cursor.pos += len("array")
    cursor.expect("<", "after 'array'")
    element = parse_type(cursor)
    if not isinstance(element, ScalarType):
        raise cursor.error(f"unsupported dense array element type '{element}'")
    values: list = []
    if cursor.eat(":"):
        while True:
            cursor.skip_space()
            if element.name == "i1" and peek_keyword(cursor) in ("true", "false"):
                values.append(read_keyword(cursor, "a boolean") == "true")
            elif is_float_element(element.name):
                values.append(float(cursor.match(NUMBER, "a number").group()))
            else:
                values.append(read_int(cursor, "an integer"))
            if not cursor.eat(","):
                break
    cursor.expect(">", "to end the dense array")
    if element.name == "i1":
        values = [bool(v) for v in values]
    return DenseArrayAttr(element.name, tuple(values))


# -- dense elements ----------------------------------------------------------------------


def _parse_dense(cursor: Cursor) -> DenseElementsAttr:
    cursor.pos += len("dense")
    cursor.expect("<", "after 'dense'")
    cursor.skip_space()
    body_pos = cursor.pos
    hex_text = None
    literal: Any = None
    if cursor.peek('"'):
        hex_text = read_string(cursor)
    elif cursor.peek(">"):
        literal = []
    else:
        literal = _read_dense_literal(cursor)
    cursor.expect(">", "to end the dense literal")
    cursor.expect(":", "and the type after a dense literal")
    type_pos = cursor.pos
    type_ = parse_type(cursor)
    if not isinstance(type_, TensorType) or any(d is None for d in type_.dims):
        raise cursor.error("a dense literal needs a static tensor type", type_pos)
    try:
        array = _dense_from_hex(hex_text, type_) if hex_text is not None else _dense_from_literal(literal, type_)
    except ValueError as e:
        raise cursor.error(f"bad dense literal for {type_}: {e}", body_pos) from None
    return DenseElementsAttr(type_, array)


def _read_dense_literal(cursor: Cursor) -> Any:
    cursor.skip_space()
    if cursor.peek("["):
        with cursor.nested("dense literals"):
            return cursor.delimited("[", "]", lambda: _read_dense_literal(cursor), "a dense literal")
    if cursor.peek("("):
        cursor.pos += 1
        real = _read_scalar(cursor)
        cursor.expect(",", "in a complex literal")
        imag = _read_scalar(cursor)
        cursor.expect(")", "to end a complex literal")
        return ("complex", real, imag)
    return _read_scalar(cursor)


def _read_scalar(cursor: Cursor) -> Any:
    cursor.skip_space()
    word = peek_keyword(cursor)
    if word in ("true", "false"):
        cursor.pos += len(word)
        return word == "true"
    literal = cursor.match(NUMBER, "a number").group()
    return literal


def _scalar_value(token: Any, element: str) -> Any:
    if isinstance(token, tuple):
        part = element[len("complex<"):-1]
        return complex(float(_scalar_value(token[1], part)), float(_scalar_value(token[2], part)))
    if isinstance(token, bool):
        if element != "i1":
            raise ValueError(f"boolean value for element type {element}")
        return token
    is_hex = token.lower().lstrip("-").startswith("0x")
    if is_float_element(element):
        if is_hex:
            return float_from_bits(_int_token(token, 16), element)
        if "." not in token and "e" not in token.lower():
            raise ValueError("unexpected decimal integer literal for a floating point value")
        return float(token)
    if is_complex_element(element):
        raise ValueError("complex values are written (re,im)")
    if "." in token:
        raise ValueError("expected integer elements, got a float")
    value = _int_token(token, 16) if is_hex else _int_token(token)
    if element == "i1":
        if value not in (0, 1):
            raise ValueError(f"value {value} does not fit i1")
        return bool(value)
    if is_unsigned_element(element) and value < 0:
        raise ValueError("expected unsigned integer elements, but parsed negative value")
    return value


def _flatten(literal: Any, out: list) -> list[int]:
    """Flatten a nested literal; returns its shape."""
    if isinstance(literal, list):
        shapes = [_flatten(item, out) for item in literal]
        if any(s != shapes[0] for s in shapes):
            raise ValueError("nested lists of different lengths")
        return [len(literal), *(shapes[0] if shapes else [])]
    out.append(literal)
    return []


def _as_dtype(values: list, element: str) -> np.ndarray:
    dtype = element_dtype(element)
    if element == "i1":
        return np.array(values, dtype=np.bool_)
    if dtype.kind in "iu":
        # A signless integer reads as signed or unsigned, as MLIR's: 255 is an i8's -1.
        bits = _integer_bits(element)
        lower, upper = integer_range(element)
        signed = dtype.kind == "i"
        wrapped = []
        for v in values:
            if not lower <= v <= upper:
                raise ValueError(f"integer constant {v} out of range for {element} [{lower}, {upper}]")
            v = int(v) & ((1 << bits) - 1)
            wrapped.append(v - (1 << bits) if signed and v >= 1 << (bits - 1) else v)
        return np.array(wrapped, dtype=object).astype(dtype)
    return np.array([dtype.type(v) for v in values], dtype=dtype)


def _integer_bits(element: str) -> int:
    return 64 if element == "index" else int(element.lstrip("siu"))


def integer_range(element: str) -> tuple[int, int]:
    """The values an integer element type reads (a signless one as signed or unsigned)."""
    bits = _integer_bits(element)
    if element.startswith("ui"):
        return 0, (1 << bits) - 1
    if element.startswith("si") or element == "index":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return -(1 << (bits - 1)), (1 << bits) - 1


def _int_token(token: str, base: int = 10) -> int:
    """The value of an integer token; its range is checked later, against the element type it is for."""
    return read_int_text(token, -MAX_INT_TOKEN, MAX_INT_TOKEN, base)  # an IntegerError is a ValueError


def _check_splat_size(type_: TensorType) -> None:
    count = math.prod(type_.dims)
    byte_width = 1 if type_.element == "i1" else element_dtype(type_.element).itemsize
    if count * byte_width > MAX_SPLAT_BYTES:
        raise ValueError(f"a splat of {count} elements takes {count * byte_width} bytes, more than the "
                         f"{MAX_SPLAT_BYTES} xlapy holds in memory")


def _dense_from_literal(literal: Any, type_: TensorType) -> np.ndarray:
    shape = tuple(int(d) for d in type_.dims)
    count = math.prod(shape)
    flat: list = []
    if literal == []:
        if count != 0:
            raise ValueError("empty literal for a non-empty tensor")
        return np.zeros(shape, element_dtype(type_.element))
    found = _flatten(literal, flat)
    values = [_scalar_value(v, type_.element) for v in flat]
    array = _as_dtype(values, type_.element)
    if not found:  # a splat
        _check_splat_size(type_)
        return np.broadcast_to(array.reshape(()), shape).copy()
    if tuple(found) != shape:
        raise ValueError(f"literal of shape {tuple(found)}")
    return array.reshape(shape)


def _dense_from_hex(text: str, type_: TensorType) -> np.ndarray:
    if not re.fullmatch(r"0x([0-9a-fA-F]{2})*", text):
        raise ValueError("expected a hex string \"0x...\"")
    raw = bytes.fromhex(text[2:])
    dtype = element_dtype(type_.element)
    shape = tuple(int(d) for d in type_.dims)
    count = math.prod(shape)
    itemsize = 1 if type_.element == "i1" else dtype.itemsize
    if len(raw) == itemsize and count != 1:  # a splat
        _check_splat_size(type_)
        values = np.frombuffer(raw, dtype=np.uint8 if type_.element == "i1" else dtype)
        return np.broadcast_to(values.astype(dtype).reshape(()), shape).copy()
    if len(raw) != itemsize * count:
        raise ValueError(f"hex data of {len(raw)} bytes, {count} elements need {itemsize * count}")
    values = np.frombuffer(raw, dtype=np.uint8 if type_.element == "i1" else dtype)
    return values.astype(dtype).reshape(shape)


# MLIR prints a dense literal of more elements than this as hex.
HEX_THRESHOLD = 100


def format_dense_body(array: np.ndarray, element: str) -> str:
    """The text between ``dense<`` and ``>``, as MLIR prints it: empty, one
    splat value, nested lists, or hex bytes for large tensors."""
    flat = array.reshape(-1)
    if flat.size == 0:
        return ""
    first = flat[0]
    raw = flat.tobytes()
    itemsize = flat.dtype.itemsize
    if raw == raw[:itemsize] * flat.size:
        return _format_element(first, element)
    if flat.size > HEX_THRESHOLD:
        data = flat.astype(np.uint8).tobytes() if element == "i1" else flat.tobytes()
        return '"0x' + data.hex().upper() + '"'
    return _nested(array, element)


def _nested(array: np.ndarray, element: str) -> str:
    if array.ndim == 0:
        return _format_element(array[()], element)
    return "[" + ", ".join(_nested(item, element) for item in array) + "]"


def _format_element(value: Any, element: str) -> str:
    if is_complex_element(element):
        part = element[len("complex<"):-1]
        return f"({format_float(value.real, part)},{format_float(value.imag, part)})"
    if is_float_element(element):
        return format_float(value, element)
    if element == "i1":
        return "true" if value else "false"
    return str(int(value))


# -- input splitting -----------------------------------------------------------------------

_SEPARATOR = re.compile(r"// -----\s*")


def split_input_file(text: str) -> list[tuple[str, int]]:
    """The chunks of a file separated by lines ``// -----`` (as mlir-opt's
    ``--split-input-file``), each with the 1-based line it starts on, so that
    errors can name the line of the whole file."""
    chunks: list[tuple[str, int]] = []
    current: list[str] = []
    start_line = 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if _SEPARATOR.fullmatch(line.rstrip("\n")):
            chunks.append(("".join(current), start_line))
            current, start_line = [], number + 1
        else:
            current.append(line)
    chunks.append(("".join(current), start_line))
    return chunks
