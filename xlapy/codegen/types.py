"""HLO element types and shapes as MLIR types, as XLA's emitters spell them:
signless integers (the op picks the signedness), ``i1`` for pred, tensors
with an ``#xla.layout`` encoding when the layout is not row-major."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute

from xlapy.codegen.dialect import LayoutAttr
from xlapy.errors import UnimplementedError
from xlapy.shapes import ELEMENT_TYPES, Shape, TypeKind

_FLOATS: dict[str, type] = {"f16": Float16Type, "bf16": BFloat16Type, "f32": Float32Type, "f64": Float64Type}


def element_type(name: str, what: str = "") -> Attribute:
    """The MLIR type of HLO element type ``name``."""
    if name in _FLOATS:
        return _FLOATS[name]()
    info = ELEMENT_TYPES.get(name)
    if info is not None and info.kind is TypeKind.PRED:
        return IntegerType(1)
    if info is not None and info.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED) and info.bit_width >= 8:
        return IntegerType(info.bit_width)
    where = f" ({what})" if what else ""
    raise UnimplementedError(f"element type {name}{where} is not supported by the code generator")


def is_unsigned(name: str) -> bool:
    """Unsigned integers and pred compare and convert as unsigned."""
    return ELEMENT_TYPES[name].kind in (TypeKind.UNSIGNED, TypeKind.PRED)


def is_float(name: str) -> bool:
    return name in _FLOATS


def tensor_type(shape: Shape, what: str = "") -> TensorType:
    """``tensor<AxBxT>``, with ``#xla.layout<[...]>`` for a non-default layout."""
    layout = shape.layout
    encoding = None
    if layout is not None:
        if layout.tiles:
            raise UnimplementedError(f"tiled layout {shape} ({what}) is not supported by the code generator")
        rank = len(shape.dimensions)
        if tuple(layout.minor_to_major) != tuple(range(rank - 1, -1, -1)):
            encoding = LayoutAttr(layout.minor_to_major)
    elem = element_type(shape.element_type, what)
    if encoding is None:
        return TensorType(elem, list(shape.dimensions))
    return TensorType(elem, list(shape.dimensions), encoding)
