"""HLO element types and shapes as MLIR types, as XLA's emitters spell them:
signless integers (the op picks the signedness), ``i1`` for pred,
``complex<f32>`` / ``complex<f64>`` for c64 / c128, tensors with an
``#xla.layout`` encoding when the layout is not row-major."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float4E2M1FNType,
    Float8E3M4Type,
    Float8E4M3B11FNUZType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E4M3Type,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
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

# The 8- and 4-bit floats: stored as such, computed in f32 (each result rounded back, as XLA and the interpreter do).
NARROW_FLOATS: dict[str, type] = {
    "f8e5m2": Float8E5M2Type, "f8e4m3": Float8E4M3Type, "f8e3m4": Float8E3M4Type, "f8e4m3fn": Float8E4M3FNType,
    "f8e4m3fnuz": Float8E4M3FNUZType, "f8e5m2fnuz": Float8E5M2FNUZType, "f8e4m3b11fnuz": Float8E4M3B11FNUZType,
    "f8e8m0fnu": Float8E8M0FNUType, "f4e2m1fn": Float4E2M1FNType,
}  # fmt: skip
_FLOATS: dict[str, type] = {
    "f16": Float16Type, "bf16": BFloat16Type, "f32": Float32Type, "f64": Float64Type, **NARROW_FLOATS,
}  # fmt: skip
# The complex types and the float type of their parts.
_COMPLEX_PARTS: dict[str, str] = {"c64": "f32", "c128": "f64"}


def element_type(name: str, what: str = "") -> Attribute:
    """The MLIR type of HLO element type ``name``."""
    if name in _FLOATS:
        return _FLOATS[name]()
    if name in _COMPLEX_PARTS:
        return ComplexType(_FLOATS[_COMPLEX_PARTS[name]]())
    info = ELEMENT_TYPES.get(name)
    if info is not None and info.kind is TypeKind.PRED:
        return IntegerType(1)
    if info is not None and info.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED):
        return IntegerType(info.bit_width)  # sub-byte integers too: one per byte in memory
    where = f" ({what})" if what else ""
    raise UnimplementedError(f"element type {name}{where} is not supported by the code generator")


def is_unsigned(name: str) -> bool:
    """Unsigned integers and pred compare and convert as unsigned."""
    return ELEMENT_TYPES[name].kind in (TypeKind.UNSIGNED, TypeKind.PRED)


def is_float(name: str) -> bool:
    return name in _FLOATS


def is_complex(name: str) -> bool:
    return name in _COMPLEX_PARTS


def part_type(name: str) -> str:
    """The float type of the real and imaginary parts of the complex type ``name``."""
    return _COMPLEX_PARTS[name]


def is_narrow_float(name: str) -> bool:
    """The 8- and 4-bit floats, which ops compute in f32."""
    return name in NARROW_FLOATS


def compute_type(name: str) -> str:
    """The element type ops on ``name`` compute in: f32 for the 8- and 4-bit floats, else ``name``."""
    return "f32" if name in NARROW_FLOATS else name


def tensor_type(shape: Shape, what: str = "") -> TensorType:
    """``tensor<AxBxT>``, with ``#xla.layout<[...]>`` for a non-default layout."""
    layout = shape.layout
    encoding = None
    if layout is not None:
        if layout.tiles:
            raise UnimplementedError(f"tiled layout {shape} ({what}) is not supported by the code generator")
        if layout.element_size_in_bits:
            raise UnimplementedError(f"packed elements (E({layout.element_size_in_bits})) of {shape} ({what}) are "
                                     f"not supported by the code generator (one element per byte)")
        rank = len(shape.dimensions)
        if tuple(layout.minor_to_major) != tuple(range(rank - 1, -1, -1)):
            encoding = LayoutAttr(layout.minor_to_major)
    elem = element_type(shape.element_type, what)
    if encoding is None:
        return TensorType(elem, list(shape.dimensions))
    return TensorType(elem, list(shape.dimensions), encoding)
