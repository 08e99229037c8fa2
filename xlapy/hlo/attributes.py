"""HLO instruction attributes: one entry per attribute name, each knowing
how to read its value from text and print it back as XLA does. Attributes
without an entry are kept as ``Verbatim`` text and printed back unchanged."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.syntax import Cursor


class Verbatim(str):
    """The text of an attribute value that xlapy keeps without modelling it."""


def scan_value(cursor: Cursor) -> str:
    """The text of one attribute value: a balanced ``{...}``/``[...]``/``(...)``
    group, a quoted string, or a bare token, up to the next top-level ','."""
    cursor.skip_space()
    text, start, pos = cursor.text, cursor.pos, cursor.pos
    closers = {"{": "}", "[": "]", "(": ")"}
    stack: list[str] = []
    while pos < len(text):
        c = text[pos]
        if c == '"':
            pos = _end_of_string(cursor, pos)
            continue
        if c in closers:
            stack.append(closers[c])
        elif c in "}])":
            if not stack:
                break
            if c != stack.pop():
                raise cursor.error(f"unbalanced '{c}' in attribute value", pos)
        elif not stack and c in ",\n":
            break
        pos += 1
    if stack:
        raise cursor.error(f"missing '{stack[-1]}' in attribute value", start)
    value = text[start:pos].rstrip()
    if not value:
        raise cursor.error(f"expected an attribute value, got {cursor.found()}")
    cursor.pos = start + len(value)
    return value


def _end_of_string(cursor: Cursor, pos: int) -> int:
    text = cursor.text
    i = pos + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    raise cursor.error("unterminated string", pos)


def read_string(cursor: Cursor) -> str:
    cursor.skip_space()
    if not cursor.peek('"'):
        raise cursor.error(f"expected a string, got {cursor.found()}")
    end = _end_of_string(cursor, cursor.pos)
    start = cursor.pos
    raw = cursor.text[start + 1: end - 1]
    cursor.pos = end
    return _c_unescape(raw, cursor, start) if "\\" in raw else raw


_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b'"': b'"', b"'": b"'", b"\\": b"\\", b"?": b"?",
            b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)


def _c_unescape(raw: str, cursor: Cursor, pos: int) -> str:
    """The string a C-escaped literal stands for (XLA escapes strings C-style,
    non-ASCII text as octal UTF-8 bytes)."""
    def replace(match: re.Match) -> bytes:
        octal, hexa, char = match.groups()
        if octal:
            return bytes([int(octal, 8) & 0xFF])
        if hexa:
            return bytes([int(hexa, 16)])
        if char in _ESCAPES:
            return _ESCAPES[char]
        raise cursor.error(f"unknown escape '\\{char.decode(errors='replace')}' in string", pos)

    return _ESCAPE.sub(replace, raw.encode("utf-8")).decode("utf-8", "surrogateescape")


def quote(value: str) -> str:
    """A string as XLA prints it: quoted, escaped as ``absl::CEscape`` does."""
    named = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"', ord("'"): "\\'",
             ord("\\"): "\\\\"}
    out = []
    for byte in value.encode("utf-8", "surrogateescape"):
        if byte in named:
            out.append(named[byte])
        elif byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:03o}")
        else:
            out.append(chr(byte))
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class WindowDimension:
    size: int = 1
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1
    base_dilation: int = 1
    window_reversal: bool = False


@dataclass(frozen=True)
class SliceDimension:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class PaddingDimension:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class AttributeKind:
    """How to read and print one kind of attribute value, and what the parser makes of it: ``holds(value)`` tells
    whether a value (set by a pass, a frontend or an edit) is of that form, described by ``spelling``."""

    read: Callable[[Cursor], Any]
    print: Callable[[Any], str]
    holds: Callable[[Any], bool]
    spelling: str


def is_int(value: Any) -> bool:
    """An integer, not a boolean (numpy's included)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_sequence_of(holds: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, (tuple, list)) and all(holds(v) for v in value)


def _is_record(kind: type) -> Callable[[Any], bool]:
    """A ``kind`` record whose fields hold integers (booleans where the field's default is one)."""
    return lambda value: isinstance(value, kind) and all(
        _is_bool(v) if isinstance(getattr(kind, name, None), bool) else is_int(v) for name, v in vars(value).items())


def _is_str(value: Any) -> bool:
    return isinstance(value, str) and not isinstance(value, Verbatim)


# -- readers and printers -------------------------------------------------------

def _read_int_list(cursor: Cursor) -> tuple[int, ...]:
    return tuple(cursor.delimited("{", "}", lambda: cursor.int("an integer"), "a list of integers"))


def _print_int_list(values: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _read_int_list_list(cursor: Cursor) -> tuple[tuple[int, ...], ...]:
    return tuple(cursor.delimited("{", "}", lambda: _read_int_list(cursor), "a list of lists"))


def _print_int_list_list(values) -> str:
    return "{" + ",".join(_print_int_list(v) for v in values) + "}"


def _read_int_list_or_lists(cursor: Cursor) -> tuple:
    """``{1,2}`` (gather's slice sizes) or ``{{1},{2}}`` (a combined collective-permute's)."""
    cursor.skip_space()
    after_brace = cursor.text[cursor.pos + 1:].lstrip()
    return _read_int_list_list(cursor) if after_brace.startswith("{") else _read_int_list(cursor)


def _print_int_list_or_lists(values: tuple) -> str:
    return _print_int_list_list(values) if values and isinstance(values[0], tuple) else _print_int_list(values)


_WORD = re.compile(r"[\w.\-]+", re.ASCII)
_DIM_LABELS = re.compile(r"\w+->\w+", re.ASCII)
_COMPUTATION_NAME = re.compile(r"%?([A-Za-z_][\w.\-]*)", re.ASCII)


def _read_word(cursor: Cursor) -> str:
    return cursor.match(_WORD, "a word").group()


def _read_dim_labels(cursor: Cursor) -> str:
    return cursor.match(_DIM_LABELS, "dimension labels like b01f_01io->b01f").group()


def _read_bool(cursor: Cursor) -> bool:
    word = _read_word(cursor)
    if word not in ("true", "false"):
        raise cursor.error(f"expected true or false, got '{word}'", cursor.pos - len(word))
    return word == "true"


def _read_computation_name(cursor: Cursor) -> str:
    return cursor.match(_COMPUTATION_NAME, "a computation name").group(1)


def _read_computation_list(cursor: Cursor) -> tuple[str, ...]:
    return tuple(cursor.delimited("{", "}", lambda: _read_computation_name(cursor), "a list of computations"))


def _read_slice(cursor: Cursor) -> tuple[SliceDimension, ...]:
    cursor.expect("{", "to start the slice")
    dims = []
    if not cursor.eat("}"):
        while True:
            cursor.expect("[", "to start a slice dimension")
            numbers = [cursor.int("the slice start")]
            while cursor.eat(":"):
                numbers.append(cursor.int("a slice bound"))
            cursor.expect("]", "to end a slice dimension")
            if len(numbers) not in (2, 3):
                raise cursor.error("a slice dimension is [start:limit] or [start:limit:stride]")
            dims.append(SliceDimension(*numbers))
            if cursor.eat("}"):
                break
            cursor.expect(",", "or '}' in the slice")
    return tuple(dims)


def _print_slice(dims: tuple[SliceDimension, ...]) -> str:
    # XLA prints every stride as soon as one is not 1.
    strides = any(d.stride != 1 for d in dims)
    return "{" + ", ".join(f"[{d.start}:{d.limit}" + (f":{d.stride}]" if strides else "]") for d in dims) + "}"


def _read_padding(cursor: Cursor) -> tuple[PaddingDimension, ...]:
    start = cursor.pos
    text = _read_word(cursor)
    dims = []
    for part in text.split("x"):
        numbers = part.split("_")
        if len(numbers) not in (2, 3) or not all(re.fullmatch(r"-?[0-9]+", n) for n in numbers):
            raise cursor.error(f"expected padding like 0_0x1_1_0, got '{text}'", start)
        dims.append(PaddingDimension(*(cursor.checked_int(n, start) for n in numbers)))
    return tuple(dims)


def _print_padding(dims: tuple[PaddingDimension, ...]) -> str:
    # XLA adds the interior padding to every dimension only if one has some.
    interior = any(d.interior for d in dims)
    return "x".join(f"{d.low}_{d.high}" + (f"_{d.interior}" if interior else "") for d in dims)


_WINDOW_FIELDS = {"size": "size", "stride": "stride", "lhs_dilate": "base_dilation",
                  "rhs_dilate": "window_dilation", "rhs_reversal": "window_reversal"}


_DIMS = re.compile(r"-?[0-9]+(?:x-?[0-9]+)*$")
_PADS = re.compile(r"-?[0-9]+_-?[0-9]+(?:x-?[0-9]+_-?[0-9]+)*$")


def _read_window(cursor: Cursor) -> tuple[WindowDimension, ...]:
    cursor.expect("{", "to start the window")
    fields: dict[str, list] = {}
    while not cursor.eat("}"):
        key_pos = cursor.pos
        key = _read_word(cursor)
        if key != "pad" and key not in _WINDOW_FIELDS:
            raise cursor.error(f"unknown window field '{key}'", key_pos)
        if key in fields:
            raise cursor.error(f"window field '{key}' given twice", key_pos)
        cursor.expect("=", f"after window field '{key}'")
        value_pos = cursor.pos
        value = _read_word(cursor)
        if key == "pad":
            if not _PADS.match(value):
                raise cursor.error(f"expected window padding like 0_1x1_1, got '{value}'", value_pos)
            fields["pad"] = [tuple(cursor.checked_int(n, value_pos) for n in p.split("_")) for p in value.split("x")]
        else:
            if not _DIMS.match(value):
                raise cursor.error(f"expected window {key} like 3x3, got '{value}'", value_pos)
            fields[key] = [cursor.checked_int(v, value_pos) for v in value.split("x")]
        if any(len(v) != len(fields.get("size", v)) for v in fields.values()):
            raise cursor.error(f"window field '{key}' has a different rank than 'size'", value_pos)
    if fields and "size" not in fields:
        raise cursor.error("a window needs 'size='")
    rank = len(fields.get("size", []))
    dims = []
    for i in range(rank):
        args: dict[str, Any] = {_WINDOW_FIELDS[k]: v[i] for k, v in fields.items() if k != "pad"}
        if "window_reversal" in args:
            args["window_reversal"] = bool(args["window_reversal"])
        if "pad" in fields:
            args["padding_low"], args["padding_high"] = fields["pad"][i]
        dims.append(WindowDimension(**args))
    return tuple(dims)


def _print_window(dims: tuple[WindowDimension, ...]) -> str:
    # XLA prints a field only when some dimension differs from its default.
    def join(values) -> str:
        return "x".join(map(str, values))

    parts = [f"size={join(d.size for d in dims)}"]
    if any(d.stride != 1 for d in dims):
        parts.append(f"stride={join(d.stride for d in dims)}")
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append(f"lhs_dilate={join(d.base_dilation for d in dims)}")
    if any(d.window_dilation != 1 for d in dims):
        parts.append(f"rhs_dilate={join(d.window_dilation for d in dims)}")
    if any(d.window_reversal for d in dims):
        parts.append(f"rhs_reversal={join(int(d.window_reversal) for d in dims)}")
    return "{" + " ".join(parts) + "}"


def _json_dict_end(text: str, pos: int) -> int | None:
    """End of the ``{...}`` group starting at ``pos``, counting braces only and
    skipping strings, as XLA's lexer reads a JSON dict; None if unbalanced."""
    depth, i = 0, pos
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _read_backend_config(cursor: Cursor) -> str:
    """A backend config: a quoted string or a bare JSON object."""
    if cursor.peek('"'):
        return read_string(cursor)
    if not cursor.peek("{"):
        raise cursor.error(f"expected a backend config (string or {{...}}), got {cursor.found()}")
    end = _json_dict_end(cursor.text, cursor.pos)
    if end is None:
        raise cursor.error("unbalanced '{' in backend config")
    text = cursor.text[cursor.pos:end]
    cursor.pos = end
    return text


def _lexes_as_json_dict(text: str) -> bool:
    return text.startswith("{") and _json_dict_end(text, 0) == len(text)


def _print_backend_config(text: str) -> str:
    # XLA prints a config that is a JSON object bare, anything else quoted.
    return text if _lexes_as_json_dict(text) else quote(text)


_is_int_list = _is_sequence_of(is_int)
_is_int_list_list = _is_sequence_of(_is_int_list)

INT = AttributeKind(lambda c: c.int("an integer"), str, is_int, "an integer")
BOOL = AttributeKind(_read_bool, lambda v: "true" if v else "false", _is_bool, "true or false")
WORD = AttributeKind(_read_word, str, _is_str, "a word")
STRING = AttributeKind(read_string, quote, _is_str, "a string")
INT_LIST = AttributeKind(_read_int_list, _print_int_list, _is_int_list, "a list of integers")
INT_LIST_LIST = AttributeKind(_read_int_list_list, _print_int_list_list, _is_int_list_list,
                              "a list of lists of integers")
COMPUTATION = AttributeKind(_read_computation_name, lambda name: f"%{name}", _is_str, "a computation name")
COMPUTATION_LIST = AttributeKind(_read_computation_list, lambda names: "{" + ", ".join(f"%{n}" for n in names) + "}",
                                 _is_sequence_of(_is_str), "a list of computation names")
SLICE = AttributeKind(_read_slice, _print_slice, _is_sequence_of(_is_record(SliceDimension)),
                      "[start:limit:stride] per dimension")
PADDING = AttributeKind(_read_padding, _print_padding, _is_sequence_of(_is_record(PaddingDimension)),
                        "low_high_interior per dimension")
WINDOW = AttributeKind(_read_window, _print_window, _is_sequence_of(_is_record(WindowDimension)),
                       "a window (size, stride, padding, dilations per dimension)")

ATTRIBUTES: dict[str, AttributeKind] = {
    **dict.fromkeys([
        "dimensions", "lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
        "offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
        "start_indices_batching_dims", "update_window_dims", "inserted_window_dims",
        "scatter_dims_to_operand_dims", "input_batching_dims", "scatter_indices_batching_dims",
        "dynamic_slice_sizes", "fft_length",
    ], INT_LIST),
    **dict.fromkeys([
        "index", "iota_dimension", "index_vector_dim", "feature_group_count", "batch_group_count",
        "exponent_bits", "mantissa_bits", "channel_id", "all_gather_dimension", "split_dimension",
        "split_count", "concat_dimension", "k",
    ], INT),
    **dict.fromkeys([
        "indices_are_sorted", "unique_indices", "is_stable", "use_global_device_ids", "constrain_layout",
        "custom_call_has_side_effect", "is_cross_program_prefetch",
    ], BOOL),
    **dict.fromkeys(["kind", "direction", "type", "distribution", "algorithm", "fft_type", "api_version",
                     "schedule", "custom_call_schedule"], WORD),
    "dim_labels": AttributeKind(_read_dim_labels, str, _is_str, "dimension labels like b01f_01io->b01f"),
    **dict.fromkeys(["custom_call_target"], STRING),
    **dict.fromkeys(["to_apply", "calls", "condition", "body", "true_computation", "false_computation",
                     "select", "scatter"], COMPUTATION),
    **dict.fromkeys(["branch_computations", "called_computations"], COMPUTATION_LIST),
    "source_target_pairs": INT_LIST_LIST,
    "slice_sizes": AttributeKind(_read_int_list_or_lists, _print_int_list_or_lists,
                                 lambda v: _is_int_list(v) or _is_int_list_list(v), "a list of integers or of lists"),
    "slice": SLICE,
    "padding": PADDING,
    "window": WINDOW,
    "backend_config": AttributeKind(_read_backend_config, _print_backend_config, _is_str, "a string"),
}


def read_attribute(name: str, cursor: Cursor) -> Any:
    """The value of attribute ``name`` at the cursor: typed if modelled, else verbatim."""
    kind = ATTRIBUTES.get(name)
    if kind is None:
        return Verbatim(scan_value(cursor))
    return kind.read(cursor)


# Values XLA does not print because they are the default.
DEFAULTS: dict[str, Any] = {
    "feature_group_count": 1, "batch_group_count": 1,
    **dict.fromkeys([name for name, kind in ATTRIBUTES.items() if kind is BOOL], False),
}


def is_default(name: str, value: Any) -> bool:
    return name in DEFAULTS and not isinstance(value, Verbatim) and value == DEFAULTS[name]


def print_attribute(name: str, value: Any) -> str:
    if isinstance(value, Verbatim):
        return str(value)
    kind = ATTRIBUTES.get(name)
    if kind is None:
        return str(value)
    return kind.print(value)
