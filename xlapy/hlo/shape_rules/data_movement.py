"""Shape rules of ops that move or re-describe data without arithmetic:
broadcast, reshape, transpose, slices, concatenate, pad, iota, constants and
parameters, copy, tuples, bitcast, dynamic sizes, and the ops that only pass a
value through (domain, optimization barrier, Shardy's annotations)."""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    SCALAR_S32,
    TOKEN,
    array_operand,
    array_shape,
    at_least,
    braces,
    check_dimension_numbers,
    declared_array,
    declared_dynamic,
    element_count,
    fail,
    int_attr,
    ints_attr,
    operand_count,
    records_attr,
    same_shape,
    scalar_operand,
    show,
    tuple_operand,
    tuple_shape,
    union_dynamic,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape, physical_byte_size


# copy (of arrays and tuples) and Shardy's annotations (imported under their MLIR
# names), which only mark a value for propagation: the result is the operand.
@shape_rule("copy", "sdy.sharding_constraint", "sdy.reshard", "sdy.data_flow_edge", "sdy.propagation_barrier")
def _operand_shape(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


def broadcast_shape(instr: HloInstruction, stretches: bool) -> Shape:
    """The result of a broadcast: ``dimensions[i]`` is the result dimension operand dimension i becomes; the
    other result dimensions are new and come from the declared shape. With ``stretches`` (StableHLO's
    broadcast_in_dim) an operand dimension of size 1 may become a larger one; HLO's broadcast may not (XLA's
    verifier refuses it: reshape the dimension away first)."""
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    declared = declared_array(instr)
    dims = ints_attr(instr, "dimensions")
    if len(dims) != operand.rank:
        fail(f"dimensions={braces(dims)} of {instr.opcode} must name one result dimension for each of the "
             f"{operand.rank} operand dimensions")
    check_dimension_numbers(instr, "dimensions", dims, declared.rank, "the result")
    dynamic = list(declared.dynamic_dimensions)
    for i, d in enumerate(dims):
        size = operand.dimensions[i]
        if declared.dimensions[d] != size and not (stretches and size == 1):
            if stretches:
                rule = "the sizes must be equal, or the operand's 1"
            else:
                rule = "the sizes must be equal" + ("; HLO's broadcast does not stretch a size-1 dimension "
                                                    "(reshape it away first)" if size == 1 else "")
            fail(f"{instr.opcode} maps operand dimension {i} (size {size}) to result dimension {d} "
                 f"(size {declared.dimensions[d]}) of {show(declared)}; {rule}")
        dynamic[d] = operand.dynamic_dimensions[i] and declared.dimensions[d] == size
    return array_shape(operand.element_type, declared.dimensions, dynamic)


@shape_rule("broadcast")
def _broadcast(instr: HloInstruction) -> Shape:
    return broadcast_shape(instr, stretches=False)


@shape_rule("reshape")
def _reshape(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    declared = declared_array(instr)
    before, after = element_count(operand), element_count(declared)
    if before is not None and after is not None and before != after:
        fail(f"reshape cannot change the number of elements: {show(operand)} has {before}, "
              f"{show(declared)} has {after}")
    return array_shape(operand.element_type, declared.dimensions, declared.dynamic_dimensions)


@shape_rule("dynamic-reshape")
def _dynamic_reshape(instr: HloInstruction) -> Shape:
    # dynamic-reshape(operand, size...): one s32 scalar per result dimension.
    at_least(instr, 1)
    operand = array_operand(instr, 0)
    declared = declared_array(instr)
    if len(instr.operands) - 1 != declared.rank:
        fail(f"dynamic-reshape takes one size per result dimension: {declared.rank} for {show(declared)}, "
              f"got {len(instr.operands) - 1}")
    for i in range(1, len(instr.operands)):
        size = scalar_operand(instr, i, f"size operand {i}")
        if size.element_type != "s32":
            fail(f"size operand {i} of dynamic-reshape must be s32[], got {show(size)}")
    return array_shape(operand.element_type, declared.dimensions, declared.dynamic_dimensions)


@shape_rule("transpose")
def _transpose(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    perm = ints_attr(instr, "dimensions")
    if sorted(perm) != list(range(operand.rank)):
        fail(f"dimensions={braces(perm)} of transpose must be a permutation of the {operand.rank} "
              f"dimensions of {show(operand)}")
    return array_shape(operand.element_type, [operand.dimensions[p] for p in perm],
                        [operand.dynamic_dimensions[p] for p in perm])


@shape_rule("reverse")
def _reverse(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    check_dimension_numbers(instr, "dimensions", ints_attr(instr, "dimensions"), operand.rank)
    return without_layout(operand)


@shape_rule("slice")
def _slice(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    slices = records_attr(instr, "slice")
    if len(slices) != operand.rank:
        fail(f"slice has {len(slices)} dimensions, but the operand {show(operand)} has rank {operand.rank}")
    dims = []
    for i, s in enumerate(slices):
        if s.stride < 1:
            fail(f"slice stride must be positive, got {s.stride} in dimension {i}")
        if not 0 <= s.start <= s.limit <= operand.dimensions[i]:
            fail(f"slice [{s.start}:{s.limit}] of dimension {i} must satisfy 0 <= start <= limit <= "
                  f"{operand.dimensions[i]} (the size of {show(operand)})")
        dims.append(-(-(s.limit - s.start) // s.stride))
    return array_shape(operand.element_type, dims, declared_dynamic(instr, len(dims)))


def _check_start_indices(instr: HloInstruction, first: int, rank: int) -> None:
    """Operands ``first``.. are the start indices: one integral scalar per
    dimension (all of one type), or (XLA's older form) one rank-1 array."""
    indices = [array_operand(instr, i, f"start index {i - first}") for i in range(first, len(instr.operands))]
    if len(indices) == 1 and indices[0].rank == 1 and rank != 0:
        if indices[0].dimensions[0] != rank or not indices[0].type.is_integral:
            fail(f"start indices of {instr.opcode} must be {rank} integers, got {show(indices[0])}")
        return
    if len(indices) != rank:
        fail(f"{instr.opcode} needs one start index per operand dimension: {rank}, got {len(indices)}")
    for i, index in enumerate(indices):
        if index.rank or not index.type.is_integral:
            fail(f"start index {i} of {instr.opcode} must be an integral scalar, got {show(index)}")
        if index.element_type != indices[0].element_type:
            fail(f"start indices of {instr.opcode} must all have one type, got {show(indices[0])} and {show(index)}")


@shape_rule("dynamic-slice")
def _dynamic_slice(instr: HloInstruction) -> Shape:
    at_least(instr, 1)
    operand = array_operand(instr, 0)
    _check_start_indices(instr, 1, operand.rank)
    sizes = ints_attr(instr, "dynamic_slice_sizes")
    if len(sizes) != operand.rank:
        fail(f"dynamic_slice_sizes={braces(sizes)} of dynamic-slice must have one size per dimension of "
              f"{show(operand)}")
    for i, (size, bound) in enumerate(zip(sizes, operand.dimensions)):
        if not 0 <= size <= bound:
            fail(f"dynamic_slice_sizes={braces(sizes)} of dynamic-slice: size {size} of dimension {i} is not "
                  f"within the {bound} of {show(operand)}")
    return array_shape(operand.element_type, sizes, declared_dynamic(instr, len(sizes)))


@shape_rule("dynamic-update-slice")
def _dynamic_update_slice(instr: HloInstruction) -> Shape:
    at_least(instr, 2)
    operand, update = array_operand(instr, 0), array_operand(instr, 1, "the update")
    if update.element_type != operand.element_type or update.rank != operand.rank:
        fail(f"the update of dynamic-update-slice must have the operand's element type and rank, "
              f"got {show(update)} for {show(operand)}")
    for i, (u, o) in enumerate(zip(update.dimensions, operand.dimensions)):
        if not 0 <= u <= o:
            fail(f"the update {show(update)} of dynamic-update-slice is larger than the operand {show(operand)} "
                  f"in dimension {i}")
    _check_start_indices(instr, 2, operand.rank)
    return without_layout(operand)


@shape_rule("concatenate")
def _concatenate(instr: HloInstruction) -> Shape:
    at_least(instr, 1)
    shapes = [array_operand(instr, i) for i in range(len(instr.operands))]
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(f"concatenate needs exactly one dimension, got dimensions={braces(dims)}")
    d = dims[0]
    first = shapes[0]
    if not 0 <= d < first.rank:
        fail(f"concatenate dimension {d} is out of range for {show(first)}")
    for shape in shapes[1:]:
        if shape.element_type != first.element_type or shape.rank != first.rank or any(
                a != b for i, (a, b) in enumerate(zip(shape.dimensions, first.dimensions)) if i != d):
            fail(f"operands of concatenate must agree in element type and in every dimension but {d}, "
                  f"got {show(first)} and {show(shape)}")
    result = list(first.dimensions)
    result[d] = sum(s.dimensions[d] for s in shapes)
    return array_shape(first.element_type, result, union_dynamic(shapes))


@shape_rule("pad")
def _pad(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    operand = array_operand(instr, 0)
    value = scalar_operand(instr, 1, "the padding value")
    if value.element_type != operand.element_type:
        fail(f"the padding value of pad must have the operand's element type, got {show(value)} for {show(operand)}")
    padding = records_attr(instr, "padding")
    if len(padding) != operand.rank:
        fail(f"padding of pad has {len(padding)} dimensions, but the operand {show(operand)} has rank {operand.rank}")
    dims = []
    for i, (p, size) in enumerate(zip(padding, operand.dimensions)):
        if p.interior < 0:
            fail(f"interior padding of pad must not be negative, got {p.interior} in dimension {i}")
        padded = p.low + p.high + size + max(size - 1, 0) * p.interior
        if padded < 0:
            fail(f"padding {p.low}_{p.high}_{p.interior} of pad leaves dimension {i} of {show(operand)} "
                  "with a negative size")
        dims.append(padded)
    return array_shape(operand.element_type, dims, operand.dynamic_dimensions)


@shape_rule("iota")
def _iota(instr: HloInstruction) -> Shape:
    operand_count(instr, 0)
    declared = declared_array(instr)
    if not declared.rank:
        fail("iota cannot produce a scalar")
    d = int_attr(instr, "iota_dimension")
    if not 0 <= d < declared.rank:
        fail(f"iota_dimension={d} is out of range for {show(declared)}")
    return without_layout(declared)


def _check_literal(value: Any, shape: Shape) -> None:
    if value is None or isinstance(value, str):  # a token, or an elided `{...}` constant
        return
    if shape.is_tuple:
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            fail(f"the literal of constant does not have the {len(shape.tuple_shapes)} elements of {show(shape)}")
        for element, sub in zip(value, shape.tuple_shapes):
            _check_literal(element, sub)
        return
    array = np.asarray(value)
    if array.shape != shape.dimensions:
        fail(f"the literal of constant has dimensions {list(array.shape)}, but the instruction declares "
              f"{show(shape)}")
    if shape.dtype is not None and array.dtype != shape.dtype:
        fail(f"the literal of constant holds {array.dtype} values, but the instruction declares {show(shape)}")


@shape_rule("constant")
def _constant(instr: HloInstruction) -> Shape:
    operand_count(instr, 0)
    _check_literal(instr.literal, instr.shape)
    return without_layout(instr.shape)


@shape_rule("parameter")
def _parameter(instr: HloInstruction) -> Shape:
    # The numbering across the computation is the verifier's to check.
    operand_count(instr, 0)
    number = instr.parameter_number
    if not isinstance(number, int) or number < 0:
        fail(f"parameter needs a non-negative parameter number, got {number}")
    return without_layout(instr.shape)


@shape_rule("tuple")
def _tuple_rule(instr: HloInstruction) -> Shape:
    return tuple_shape([o.shape for o in instr.operands])


@shape_rule("get-tuple-element")
def _get_tuple_element(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = tuple_operand(instr, 0)
    index = int_attr(instr, "index")
    if not 0 <= index < len(operand.tuple_shapes):
        fail(f"index={index} of get-tuple-element is out of range for {show(operand)}")
    return without_layout(operand.tuple_shapes[index])


@shape_rule("bitcast")
def _bitcast(instr: HloInstruction) -> Shape:
    # A bitcast reinterprets the buffer: the result must occupy as many bytes, as the layouts lay them out
    # (tile and tail padding included).
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    declared = declared_array(instr)
    before, after = _byte_size(operand), _byte_size(declared)
    if before is not None and after is not None and before != after:
        fail(f"bitcast must keep the byte size: {_show_layout(operand)} has {before} bytes, "
              f"{_show_layout(declared)} has {after}")
    return without_layout(declared)


def _byte_size(shape: Shape) -> int | None:
    """The bytes of ``shape``'s physical buffer; None while a dimension is unbounded."""
    if element_count(shape) is None:
        return None
    try:
        return physical_byte_size(shape)
    except XlapyError as error:
        fail(f"{shape}: {error}")


def _show_layout(shape: Shape) -> str:
    # The layout only matters to a byte size when it pads or packs.
    layout = shape.layout
    plain = layout is None or (not layout.tiles and not layout.element_size_in_bits
                               and layout.tail_padding_alignment_in_elements == 1)
    return show(shape) if plain else str(shape)


@shape_rule("domain")
def _pass_through(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


@shape_rule("opt-barrier")
def _optimization_barrier(instr: HloInstruction) -> Shape:
    return _pass_through(instr)


@shape_rule("after-all")
def _after_all(instr: HloInstruction) -> Shape:
    for i, operand in enumerate(instr.operands):
        if not operand.shape.is_token:
            fail(f"operands of after-all must be tokens, operand {i} is {show(operand.shape)}")
    return TOKEN


@shape_rule("add-dependency")
def _add_dependency(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    if not instr.operands[1].shape.is_token:
        fail(f"the second operand of add-dependency must be a token, got {show(instr.operands[1].shape)}")
    return without_layout(instr.operands[0].shape)


@shape_rule("get-dimension-size")
def _get_dimension_size(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        fail(f"get-dimension-size needs one dimension of {show(operand)}, got dimensions={braces(dims)}")
    return SCALAR_S32


@shape_rule("set-dimension-size")
def _set_dimension_size(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    operand = array_operand(instr, 0)
    size = instr.operands[1].shape
    if not same_shape(size, SCALAR_S32):
        fail(f"the size operand of set-dimension-size must be s32[], got {show(size)}")
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        fail(f"set-dimension-size needs one dimension of {show(operand)}, got dimensions={braces(dims)}")
    dynamic = list(operand.dynamic_dimensions)
    dynamic[dims[0]] = True
    return array_shape(operand.element_type, operand.dimensions, dynamic)
