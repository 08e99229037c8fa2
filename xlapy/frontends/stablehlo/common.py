"""What the reader and the printer share: the MLIR type of a value."""

from __future__ import annotations

from xlapy.frontends.mlir_syntax import TensorType, TokenType, TupleType, Type
from xlapy.frontends.stablehlo_ops.records import ArgRecord, OpRecord
from xlapy.hlo import HloInstruction
from xlapy.hlo.mlir_structure import encodes_mlir_structure
from xlapy.shapes import Shape


def stored_type(value: HloInstruction) -> Type | None:
    """The MLIR type the text gave ``value``, if any."""
    record = value.mlir
    if isinstance(record, ArgRecord):
        return record.type
    if isinstance(record, OpRecord) and len(record.result_types) == 1:
        return record.result_types[0]
    if encodes_mlir_structure(value) and value.opcode == "get-tuple-element" and value.operands:
        parent = value.operands[0].mlir
        index = value.attributes.get("index", 0)
        if isinstance(parent, OpRecord) and index < len(parent.result_types):
            return parent.result_types[index]
    return None


def is_opaque(type_: Type) -> bool:
    """A type without an XLA shape of its own (kept as text)."""
    return not isinstance(type_, TensorType | TokenType | TupleType)


def same_shape(a: Shape, b: Shape) -> bool:
    return a.to_string(print_layout=False) == b.to_string(print_layout=False)
