"""Ops that create or move data without arithmetic: constant, iota,
broadcast_in_dim, reshape, transpose, slice, dynamic slices, concatenate,
pad, reverse, gather, tuples."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xlapy.frontends.mlir_syntax import (
    DenseElementsAttr,
    IntegerAttr,
    OpaqueAttr,
    TensorType,
    TupleType,
    expect_keyword,
    parse_attribute,
    read_int,
)
from xlapy.frontends.stablehlo_ops.common import (
    I32,
    I64,
    bool_value,
    format_ints,
    gather_scatter_dims,
    i64_array,
    int_value,
    ints,
    read_int_list,
)
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register
from xlapy.hlo.attributes import PaddingDimension, SliceDimension


def _keyword_ints(p, keyword: str) -> tuple[int, ...]:
    expect_keyword(p.cursor, keyword, "in the op")
    p.expect("=", f"after '{keyword}'")
    return read_int_list(p.cursor)


def _keyword_int(p, keyword: str) -> int:
    expect_keyword(p.cursor, keyword, "in the op")
    p.expect("=", f"after '{keyword}'")
    return read_int(p.cursor)


def _tail(p, d: OpDraft) -> None:
    """``{attrs} : (types) -> types``."""
    p.attr_dict(d)
    p.expect(":", "before the op's type")
    p.functional_type(d)


def _print(q, instr, middle: str = "", elided: tuple[str, ...] = ()) -> str:
    return f"{q.op_name(instr)} {q.uses(instr.operands)}{middle}{q.attr_dict(instr, elided)} : {q.functional(instr)}"


# -- constant ------------------------------------------------------------------------------

def _parse_constant(p, d: OpDraft) -> None:
    p.attr_dict(d)
    start = p.cursor.pos
    value = parse_attribute(p.cursor)
    if isinstance(value, DenseElementsAttr):
        d.result_types = [value.type]
        d.extra["literal"] = value.array
    elif isinstance(value, OpaqueAttr) and value.text.startswith("dense_resource<") and ":" in value.text:
        type_text = value.text.rsplit(":", 1)[1]
        d.result_types = [p.parse_type_text(type_text, start)]
        d.attributes["value"] = value
    else:
        raise p.error("expected a dense<...> literal and its type", start)
    d.operand_types = []


def generic_constant(p, d: OpDraft) -> None:
    """``"stablehlo.constant"() <{value = dense<...> : tensor<...>}>``: the value is the literal."""
    value = d.attributes.get("value")
    if isinstance(value, DenseElementsAttr):
        d.extra["literal"] = d.attributes.pop("value").array


def literal_attr(q, instr) -> str:
    literal = instr.literal
    record = q.record(instr)
    if isinstance(literal, np.ndarray):
        type_ = q.result_types(instr)[0]
        return str(DenseElementsAttr(type_, literal))
    return str(record.attributes.get("value", ""))


def _print_constant(q, instr) -> str:
    return f"{q.op_name(instr)}{q.attr_dict(instr, ('value',))} {literal_attr(q, instr)}"


def constant_literal(d: OpDraft):
    literal = d.extra.get("literal")
    if literal is None:
        return "{...}"
    return literal


def constant_result_names(q, instr) -> tuple[str, ...]:
    """MLIR names a float (or complex) constant ``%cst``, any other ``%c``."""
    type_ = q.value_type(instr)
    element = type_.element if isinstance(type_, TensorType) else ""
    return ("cst",) if element.startswith(("f", "bf", "complex")) else ("c",)


register(OpSpec("stablehlo.constant", "constant", _parse_constant, _print_constant, elided=("value",),
                from_generic=generic_constant))


# -- iota ------------------------------------------------------------------------------------

def _parse_iota(p, d: OpDraft) -> None:
    d.attributes["iota_dimension"] = IntegerAttr(_keyword_int(p, "dim"), I64)
    p.attr_dict(d)
    p.expect(":", "before the iota's type")
    d.operand_types = []
    d.result_types = [p.type()]


def _print_iota(q, instr) -> str:
    dim = int_value(q.record(instr).attributes["iota_dimension"])
    return f"{q.op_name(instr)} dim = {dim}{q.attr_dict(instr, ('iota_dimension',))} : {q.result_types(instr)[0]}"


register(OpSpec("stablehlo.iota", "iota", _parse_iota, _print_iota,
                lambda d: {"iota_dimension": int_value(d.attributes["iota_dimension"])}, elided=("iota_dimension",)))


# -- ops of one operand and a list of dimensions ----------------------------------------------

def _dims_op(name: str, opcode: str | Callable[[OpDraft], str], attr: str, keyword: str = "dims",
             same_type: bool = False) -> None:
    def parse(p, d: OpDraft) -> None:
        p.operand(d)
        p.expect(",", f"before '{keyword}'")
        d.attributes[attr] = i64_array(_keyword_ints(p, keyword))
        if same_type:
            p.attr_dict(d)
            p.expect(":", "before the op's type")
            p.same_type_or_functional(d)
        else:
            _tail(p, d)

    def print_(q, instr) -> str:
        middle = f", {keyword} = {format_ints(ints(q.record(instr).attributes[attr]))}"
        if same_type:
            return (f"{q.op_name(instr)} {q.uses(instr.operands)}{middle}{q.attr_dict(instr, (attr,))} : "
                    f"{q.same_or_functional(instr)}")
        return _print(q, instr, middle, (attr,))

    register(OpSpec(name, opcode, parse, print_, lambda d: {"dimensions": ints(d.attributes[attr])}, elided=(attr,)))


def _broadcast_opcode(d: OpDraft) -> str:
    """HLO's broadcast, unless an operand dimension of size 1 stretches to a
    larger result dimension: only StableHLO's broadcast_in_dim does that."""
    dims = ints(d.attributes.get("broadcast_dimensions"))
    operand = d.operand_types[0] if d.operand_types else None
    result = d.result_types[0] if d.result_types else None
    if not isinstance(operand, TensorType) or not isinstance(result, TensorType) or len(dims) != len(operand.dims):
        return "broadcast"  # malformed: HLO's rule says why
    stretches = any(0 <= r < len(result.dims) and operand.dims[i] == 1 and result.dims[r] != 1
                    for i, r in enumerate(dims))
    return "stablehlo.broadcast_in_dim" if stretches else "broadcast"


_dims_op("stablehlo.broadcast_in_dim", _broadcast_opcode, "broadcast_dimensions")
_dims_op("stablehlo.transpose", "transpose", "permutation")
_dims_op("stablehlo.reverse", "reverse", "dimensions", same_type=True)


def _parse_dynamic_broadcast(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "before the output dimensions")
    p.operand(d)
    p.expect(",", "before 'dims'")
    d.attributes["broadcast_dimensions"] = i64_array(_keyword_ints(p, "dims"))
    _tail(p, d)


def _print_dynamic_broadcast(q, instr) -> str:
    dims = format_ints(ints(q.record(instr).attributes["broadcast_dimensions"]))
    return _print(q, instr, f", dims = {dims}", ("broadcast_dimensions",))


register(OpSpec("stablehlo.dynamic_broadcast_in_dim", "", _parse_dynamic_broadcast, _print_dynamic_broadcast,
                elided=("broadcast_dimensions",)))


def _parse_dynamic_iota(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "before 'dim'")
    d.attributes["iota_dimension"] = IntegerAttr(_keyword_int(p, "dim"), I64)
    _tail(p, d)


register(OpSpec("stablehlo.dynamic_iota", "", _parse_dynamic_iota,
                lambda q, i: _print(q, i, f", dim = {int_value(q.record(i).attributes['iota_dimension'])}",
                                    ("iota_dimension",)),
                elided=("iota_dimension",)))


# -- reshape -----------------------------------------------------------------------------------

def _parse_one_operand(p, d: OpDraft) -> None:
    p.operands(d)
    _tail(p, d)


register(OpSpec("stablehlo.reshape", "reshape", _parse_one_operand, lambda q, i: _print(q, i)))
register(OpSpec("stablehlo.dynamic_update_slice", "dynamic-update-slice", _parse_one_operand,
                lambda q, i: _print(q, i)))
register(OpSpec("stablehlo.real_dynamic_slice", "", _parse_one_operand, lambda q, i: _print(q, i)))
register(OpSpec("stablehlo.dynamic_reshape", "dynamic-reshape", _parse_one_operand, lambda q, i: _print(q, i)))


# -- concatenate ---------------------------------------------------------------------------------

def _parse_concatenate(p, d: OpDraft) -> None:
    p.operands(d)
    if d.operands:
        p.expect(",", "before 'dim'")
    d.attributes["dimension"] = IntegerAttr(_keyword_int(p, "dim"), I64)
    _tail(p, d)


def _print_concatenate(q, instr) -> str:
    dim = int_value(q.record(instr).attributes["dimension"])
    separator = ", " if instr.operands else " "
    return (f"{q.op_name(instr)} {q.uses(instr.operands)}{separator}dim = {dim}"
            f"{q.attr_dict(instr, ('dimension',))} : {q.functional(instr)}")


register(OpSpec("stablehlo.concatenate", "concatenate", _parse_concatenate, _print_concatenate,
                lambda d: {"dimensions": (int_value(d.attributes["dimension"]),)}, elided=("dimension",)))


# -- slice: `%x [0:4, 1:8:2]` ----------------------------------------------------------------------

def _parse_slice(p, d: OpDraft) -> None:
    p.operand(d)
    starts, limits, strides = [], [], []

    def read_range() -> None:
        starts.append(read_int(p.cursor))
        p.expect(":", "in a slice range")
        limits.append(read_int(p.cursor))
        strides.append(read_int(p.cursor) if p.eat(":") else 1)

    p.cursor.delimited("[", "]", read_range, "the slice ranges")
    d.attributes["start_indices"] = i64_array(starts)
    d.attributes["limit_indices"] = i64_array(limits)
    d.attributes["strides"] = i64_array(strides)
    _tail(p, d)


_SLICE_ATTRS = ("start_indices", "limit_indices", "strides")


def _print_slice(q, instr) -> str:
    attrs = q.record(instr).attributes
    starts, limits = ints(attrs["start_indices"]), ints(attrs["limit_indices"])
    strides = ints(attrs.get("strides"), (1,) * len(starts))
    ranges = ", ".join(f"{s}:{limit}" + (f":{st}" if st != 1 else "") for s, limit, st in zip(starts, limits, strides))
    return _print(q, instr, f" [{ranges}]", _SLICE_ATTRS)


def _slice_hlo(d: OpDraft) -> dict:
    starts, limits = ints(d.attributes["start_indices"]), ints(d.attributes["limit_indices"])
    strides = ints(d.attributes.get("strides"), (1,) * len(starts))
    return {"slice": tuple(SliceDimension(*t) for t in zip(starts, limits, strides))}


register(OpSpec("stablehlo.slice", "slice", _parse_slice, _print_slice, _slice_hlo, elided=_SLICE_ATTRS))


# -- dynamic_slice: `%x, %i, %j, sizes = [1, 4]` ---------------------------------------------------

def _parse_dynamic_slice(p, d: OpDraft) -> None:
    p.operands(d)
    p.expect(",", "before 'sizes'")
    d.attributes["slice_sizes"] = i64_array(_keyword_ints(p, "sizes"))
    _tail(p, d)


def _print_dynamic_slice(q, instr) -> str:
    sizes = format_ints(ints(q.record(instr).attributes["slice_sizes"]))
    return _print(q, instr, f", sizes = {sizes}", ("slice_sizes",))


register(OpSpec("stablehlo.dynamic_slice", "dynamic-slice", _parse_dynamic_slice, _print_dynamic_slice,
                lambda d: {"dynamic_slice_sizes": ints(d.attributes["slice_sizes"])}, elided=("slice_sizes",)))


# -- pad: `%x, %v, low = [..], high = [..], interior = [..]` ---------------------------------------

_PAD_ATTRS = ("edge_padding_low", "edge_padding_high", "interior_padding")


def _parse_pad(p, d: OpDraft) -> None:
    p.operands(d)
    for attr, keyword in zip(_PAD_ATTRS, ("low", "high", "interior")):
        p.expect(",", f"before '{keyword}'")
        d.attributes[attr] = i64_array(_keyword_ints(p, keyword))
    _tail(p, d)


def _print_pad(q, instr) -> str:
    attrs = q.record(instr).attributes
    middle = "".join(f", {keyword} = {format_ints(ints(attrs[attr]))}"
                     for attr, keyword in zip(_PAD_ATTRS, ("low", "high", "interior")))
    return _print(q, instr, middle, _PAD_ATTRS)


def _pad_hlo(d: OpDraft) -> dict:
    low, high, interior = (ints(d.attributes[a]) for a in _PAD_ATTRS)
    return {"padding": tuple(PaddingDimension(*t) for t in zip(low, high, interior))}


register(OpSpec("stablehlo.pad", "pad", _parse_pad, _print_pad, _pad_hlo, elided=_PAD_ATTRS))


# -- get_dimension_size: `%x, dim = 0` -------------------------------------------------------------

def _parse_get_dimension_size(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect(",", "before 'dim'")
    d.attributes["dimension"] = IntegerAttr(_keyword_int(p, "dim"), I64)
    _tail(p, d)


register(OpSpec("stablehlo.get_dimension_size", "get-dimension-size", _parse_get_dimension_size,
                lambda q, i: _print(q, i, f", dim = {int_value(q.record(i).attributes['dimension'])}",
                                    ("dimension",)),
                lambda d: {"dimensions": (int_value(d.attributes["dimension"]),)}, elided=("dimension",)))


# -- tuples ----------------------------------------------------------------------------------------

def _parse_get_tuple_element(p, d: OpDraft) -> None:
    p.operand(d)
    p.expect("[", "before the tuple index")
    d.attributes["index"] = IntegerAttr(read_int(p.cursor), I32)
    p.expect("]", "after the tuple index")
    _tail(p, d)


register(OpSpec("stablehlo.get_tuple_element", "get-tuple-element", _parse_get_tuple_element,
                lambda q, i: (f"{q.op_name(i)} {q.use(i.operands[0])}[{int_value(q.record(i).attributes['index'])}]"
                              f"{q.attr_dict(i, ('index',))} : {q.functional(i)}"),
                lambda d: {"index": int_value(d.attributes["index"])}, elided=("index",)))


def _parse_tuple(p, d: OpDraft) -> None:
    p.operands(d)
    p.attr_dict(d)
    p.expect(":", "before the tuple's type")
    start = p.cursor.pos
    result = p.type()
    if not isinstance(result, TupleType):
        raise p.error(f"expected a tuple type, got {result}", start)
    d.operand_types = list(result.types)
    d.result_types = [result]


register(OpSpec("stablehlo.tuple", "tuple", _parse_tuple,
                lambda q, i: f"{q.op_name(i)} {q.uses(i.operands)}{q.attr_dict(i)} : {q.result_types(i)[0]}"))


# -- gather (generic form) -------------------------------------------------------------------------

def _gather_hlo(d: OpDraft) -> dict:
    numbers = d.attributes.get("dimension_numbers")
    hlo = gather_scatter_dims(numbers, ("offset_dims", "collapsed_slice_dims", "start_index_map"),
                              ("operand_batching_dims", "start_indices_batching_dims"))
    hlo["slice_sizes"] = ints(d.attributes.get("slice_sizes"))
    if bool_value(d.attributes.get("indices_are_sorted")):
        hlo["indices_are_sorted"] = True
    return hlo


register(OpSpec("stablehlo.gather", "gather", hlo=_gather_hlo,
                properties=("dimension_numbers", "indices_are_sorted", "slice_sizes")))
register(OpSpec("stablehlo.dynamic_gather", "", hlo=None))

