"""Records for instructions a pass created (they have no MLIR text): the
StableHLO op that prints each HLO opcode, with the MLIR attributes rebuilt
from the HLO ones for the ops passes create."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlapy.frontends.mlir_syntax import Attr, IntegerAttr, StringAttr, SymbolRefAttr, Type
from xlapy.frontends.stablehlo_ops.common import I32, I64, enum_attr, i64_array
from xlapy.frontends.stablehlo_ops.records import OpRecord
from xlapy.hlo import HloInstruction

# Where several ops share an HLO opcode, or an op's opcode depends on its
# operands, the op printed for the opcode.
_PREFERRED = {"after-all": "stablehlo.after_all", "call": "func.call", "constant": "stablehlo.constant",
              "dot": "stablehlo.dot_general", "broadcast": "stablehlo.broadcast_in_dim",
              "convert": "stablehlo.convert", "all-to-all": "stablehlo.all_to_all"}
_BY_OPCODE: dict[str, str] = {}


def op_name_for(opcode: str) -> str:
    if not _BY_OPCODE:
        from xlapy.frontends.stablehlo_ops.catalog import all_specs

        for name, spec in all_specs().items():
            if isinstance(spec.opcode, str) and not spec.terminator:
                _BY_OPCODE.setdefault(spec.opcode or name, name)
        _BY_OPCODE.update(_PREFERRED)
    return _BY_OPCODE.get(opcode, opcode if "." in opcode else f"hlo.{opcode}")


def _dims(name: str) -> Callable[[HloInstruction], dict[str, Attr]]:
    return lambda instr: {name: i64_array(instr.attributes.get("dimensions", ()))}


def _dot(instr: HloInstruction) -> dict[str, Attr]:
    from xlapy.frontends.mlir_syntax import DialectAttr

    fields = []
    for mlir, hlo in (("lhs_batching_dimensions", "lhs_batch_dims"), ("rhs_batching_dimensions", "rhs_batch_dims"),
                      ("lhs_contracting_dimensions", "lhs_contracting_dims"),
                      ("rhs_contracting_dimensions", "rhs_contracting_dims")):
        values = tuple(instr.attributes.get(hlo, ()))
        if values:
            fields.append(f"{mlir} = [{', '.join(map(str, values))}]")
    return {"dot_dimension_numbers": DialectAttr("stablehlo.dot", ", ".join(fields))}


def _slice(instr: HloInstruction) -> dict[str, Attr]:
    dims = instr.attributes.get("slice", ())
    return {"start_indices": i64_array(d.start for d in dims), "limit_indices": i64_array(d.limit for d in dims),
            "strides": i64_array(d.stride for d in dims)}


def _compare(instr: HloInstruction) -> dict[str, Attr]:
    attrs: dict[str, Attr] = {"comparison_direction": enum_attr("comparison_direction",
                                                                instr.attributes.get("direction", "EQ"))}
    if "type" in instr.attributes:
        attrs["compare_type"] = enum_attr("comparison_type", instr.attributes["type"])
    return attrs


_ATTRIBUTES: dict[str, Callable[[HloInstruction], dict[str, Attr]]] = {
    "broadcast": _dims("broadcast_dimensions"),
    "stablehlo.broadcast_in_dim": _dims("broadcast_dimensions"),
    "transpose": _dims("permutation"),
    "reverse": _dims("dimensions"),
    "reduce": _dims("dimensions"),
    "concatenate": lambda i: {"dimension": IntegerAttr(i.attributes.get("dimensions", (0,))[0], I64)},
    "iota": lambda i: {"iota_dimension": IntegerAttr(i.attributes.get("iota_dimension", 0), I64)},
    "get-tuple-element": lambda i: {"index": IntegerAttr(i.attributes.get("index", 0), I32)},
    "dynamic-slice": lambda i: {"slice_sizes": i64_array(i.attributes.get("dynamic_slice_sizes", ()))},
    "dot": _dot,
    "slice": _slice,
    "compare": _compare,
    "call": lambda i: {"callee": SymbolRefAttr((i.called_computations[0].name,))} if i.called_computations else {},
    "sdy.named_computation": lambda i: {"name": StringAttr(str(i.attributes.get("name", "")))},
}


def synthesized_record(instr: HloInstruction, result_types: list[Type]) -> OpRecord:
    attributes: dict[str, Any] = {}
    build = _ATTRIBUTES.get(instr.opcode)
    if build is not None:
        attributes = build(instr)
    return OpRecord(op_name_for(instr.opcode), [], attributes, (), list(result_types), extra={"synthesized": True})
