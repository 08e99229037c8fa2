"""Helpers the op families share: reading and printing the small pieces of
StableHLO's pretty syntax, and reading MLIR attribute values as Python ones."""

from __future__ import annotations

from typing import Any

from xlapy.frontends.mlir_syntax import (
    ArrayAttr,
    Attr,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DialectAttr,
    IntegerAttr,
    ScalarType,
    StringAttr,
    TensorType,
    UnitAttr,
    expect_keyword,
    read_int,
    read_keyword,
)
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.syntax import Cursor

I64 = ScalarType("i64")
I32 = ScalarType("i32")


def ints(attr: Attr | None, default: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The integers of an ``array<i64: ...>``, ``[1, 2]`` or ``dense<...>`` attribute."""
    if attr is None:
        return default
    if isinstance(attr, DenseArrayAttr):
        return tuple(int(v) for v in attr.values)
    if isinstance(attr, ArrayAttr):
        return tuple(int(item.value) for item in attr.items if isinstance(item, IntegerAttr | BoolAttr))
    if isinstance(attr, DenseElementsAttr):
        return tuple(int(v) for v in attr.array.reshape(-1))
    raise ValueError(f"expected a list of integers, got {attr}")


def int_value(attr: Attr | None, default: int = 0) -> int:
    if attr is None:
        return default
    if isinstance(attr, IntegerAttr | BoolAttr):
        return int(attr.value)
    raise ValueError(f"expected an integer, got {attr}")


def bool_value(attr: Attr | None) -> bool:
    if attr is None:
        return False
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, BoolAttr | IntegerAttr):
        return bool(attr.value)
    raise ValueError(f"expected a boolean, got {attr}")


def string_value(attr: Attr | None, default: str = "") -> str:
    if attr is None:
        return default
    if isinstance(attr, StringAttr):
        return attr.value
    raise ValueError(f"expected a string, got {attr}")


def i64_array(values) -> DenseArrayAttr:
    return DenseArrayAttr("i64", tuple(int(v) for v in values))


def bool_array(values) -> DenseArrayAttr:
    return DenseArrayAttr("i1", tuple(bool(v) for v in values))


def enum_attr(kind: str, value: str) -> DialectAttr:
    """``#stablehlo<kind VALUE>``."""
    return DialectAttr("stablehlo", f"{kind} {value}")


def enum_value(attr: Attr | None, default: str | None = None) -> str | None:
    """``VALUE`` of ``#stablehlo<kind VALUE>``."""
    if attr is None:
        return default
    if isinstance(attr, DialectAttr) and attr.body is not None:
        return attr.body.split()[-1]
    raise ValueError(f"expected an enum attribute, got {attr}")


def struct_ints(attr: Attr | None, name: str) -> tuple[int, ...]:
    """The integer list field ``name`` of a struct-like dialect attribute
    (``#stablehlo.gather<offset_dims = [1], ...>``), empty if absent."""
    if attr is None:
        return ()
    value = attr.fields().get(name) if isinstance(attr, DialectAttr) else None
    if value is None:
        return ()
    if isinstance(value, IntegerAttr):
        return (int(value.value),)
    return ints(value)


def struct_int(attr: Attr | None, name: str, default: int = 0) -> int:
    value = attr.fields().get(name) if isinstance(attr, DialectAttr) else None
    return default if value is None else int_value(value)


def gather_scatter_dims(numbers: Attr | None, required: tuple[str, ...], batching: tuple[str, ...]) -> dict:
    """HLO's attributes for a gather's or scatter's dimension numbers: the
    ``required`` lists, the ``batching`` ones when not empty, ``index_vector_dim``."""
    hlo: dict = {name: struct_ints(numbers, name) for name in required}
    hlo.update({name: struct_ints(numbers, name) for name in batching if struct_ints(numbers, name)})
    hlo["index_vector_dim"] = struct_int(numbers, "index_vector_dim")
    return hlo


# -- pretty-syntax pieces ---------------------------------------------------------------

def read_int_list(cursor: Cursor, what: str = "a list of integers") -> tuple[int, ...]:
    """``[1, 2, 3]``."""
    return tuple(cursor.delimited("[", "]", lambda: read_int(cursor), what))


def format_ints(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def read_enum_option(cursor: Cursor, op: str, keyword: str, allowed, what: str, noun: str) -> str:
    """``keyword = VALUE`` in ``op``, VALUE one of ``allowed`` (``what`` says what
    is expected there, ``noun`` names a value that is not allowed)."""
    expect_keyword(cursor, keyword, f"in {op}")
    cursor.expect("=", f"after '{keyword}'")
    start = cursor.pos
    value = read_keyword(cursor, what)
    if value not in allowed:
        raise cursor.error(f"unknown {noun} '{value}'", start)
    return value


def element_type_of(type_) -> str | None:
    return type_.element if isinstance(type_, TensorType) else None


def rank_of(type_) -> int:
    return type_.rank if isinstance(type_, TensorType) else 0


def dims_of(type_) -> tuple[int, ...]:
    return tuple(d if d is not None else -1 for d in type_.dims) if isinstance(type_, TensorType) else ()


def operand_type(draft: OpDraft, index: int):
    return draft.operand_types[index] if draft.operand_types is not None else None


def put(hlo: dict[str, Any], name: str, value: Any, keep: bool = True) -> None:
    if keep:
        hlo[name] = value
