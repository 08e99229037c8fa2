"""Data-movement ops (XLA's docs/indexing.md): each output element is one operand element at an affine (or, for
reshapes, delinearised) index, or the padding value."""

from __future__ import annotations

import math

from xdsl.ir.affine import AffineExpr

from xlapy.hlo import HloInstruction
from xlapy.hlo.attributes import PaddingDimension, SliceDimension
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops.common import (
    MalformedOp,
    broadcast_from_scalar,
    check_permutation,
    dim_exprs,
    dim_vars,
    dims,
    has_tiles,
    identity,
    integer,
    ints,
    inverse_permutation,
    minor_to_major,
    one_set_each,
    permutation_map,
    physical_offset,
    reshape_exprs,
    result_shapes,
    row_major_index,
    row_major_offset,
    scalar_map,
    simplify_keeping_point_dims,
)
from xlapy.indexing.ops.registry import input_to_output, output_to_input
from xlapy.shapes import Shape

# --- broadcast ---


def _broadcast_dimensions(instr: HloInstruction) -> tuple[int, ...]:
    dimensions = ints(instr, "dimensions", ())
    if len(dimensions) != len(instr.operand(0).shape.dimensions) or any(
        not 0 <= d < len(instr.shape.dimensions) for d in dimensions
    ):
        raise MalformedOp(f"broadcast dimensions {list(dimensions)} do not fit {instr.name}")
    return dimensions


@output_to_input("broadcast")
def _broadcast_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """``(d...) -> (d_{dimensions[0]}, ...)``: the added dimensions are dropped."""
    return one_set_each(permutation_map(_broadcast_dimensions(instr), dims(instr.shape)))


@input_to_output("broadcast")
def _broadcast_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """Each added output dimension becomes a range variable, in output order."""
    dimensions = _broadcast_dimensions(instr)
    added: list[int] = []
    exprs: list[AffineExpr] = []
    for output_dim, size in enumerate(instr.shape.dimensions):
        if output_dim in dimensions:
            exprs.append(affine.dim(dimensions.index(output_dim)))
        else:
            exprs.append(affine.sym(len(added)))
            added.append(size)
    return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(dims(instr.operand(0).shape)), dim_vars(added)))


# --- transpose, reverse ---


def _transpose_permutation(instr: HloInstruction) -> tuple[int, ...]:
    permutation = ints(instr, "dimensions")
    check_permutation(permutation, len(instr.shape.dimensions), "transpose dimensions")
    return permutation


@output_to_input("transpose")
def _transpose_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    inverse = inverse_permutation(_transpose_permutation(instr))
    return one_set_each(permutation_map(inverse, dims(instr.shape)))


@input_to_output("transpose")
def _transpose_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    return one_set_each(permutation_map(_transpose_permutation(instr), dims(instr.operand(0).shape)))


@output_to_input("reverse")
@input_to_output("reverse")
def _reverse(instr: HloInstruction, _: int) -> list[set[IndexingMap]]:
    """``-d_i + (size_i - 1)`` on reversed dimensions; its own inverse."""
    reversed_dims = set(ints(instr, "dimensions", ()))
    sizes = dims(instr.shape)
    exprs = [
        affine.add(affine.neg(affine.dim(i)), size - 1) if i in reversed_dims else affine.dim(i)
        for i, size in enumerate(sizes)
    ]
    return one_set_each(IndexingMap.from_tensor_sizes(exprs, sizes))


# --- slice ---


def _slice_dims(instr: HloInstruction) -> tuple[SliceDimension, ...]:
    config = instr.attributes.get("slice")
    rank = len(instr.shape.dimensions)
    if not isinstance(config, tuple) or len(config) != rank or any(d.stride < 1 for d in config):
        raise MalformedOp(f"slice {instr.name} has no valid slice={{...}}")
    return config


@output_to_input("slice")
def _slice_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """``d_i * stride_i + start_i``."""
    exprs = [affine.add(affine.mul(affine.dim(i), d.stride), d.start) for i, d in enumerate(_slice_dims(instr))]
    return one_set_each(IndexingMap.from_tensor_sizes(exprs, dims(instr.shape)))


@input_to_output("slice")
def _slice_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """``(d_i - start_i) floordiv stride_i``, for the input indices the slice
    keeps: within the sliced range and on the stride."""
    exprs, constraints = [], []
    for i, (d, size) in enumerate(zip(_slice_dims(instr), instr.shape.dimensions)):
        offset = affine.sub(affine.dim(i), d.start)
        exprs.append(affine.floordiv(offset, d.stride))
        constraints.append((affine.dim(i), Interval(d.start, (size - 1) * d.stride + d.start)))
        constraints.append((affine.mod(offset, d.stride), Interval(0, 0)))
    return one_set_each(IndexingMap.from_exprs(exprs, dim_vars(dims(instr.operand(0).shape)), constraints=constraints))


# --- reshape, bitcast ---


def _reshape_map(source: tuple[int, ...], target: tuple[int, ...]) -> IndexingMap:
    """From indices of a tensor of ``source`` sizes to those of its reshape to
    ``target`` sizes."""
    return simplify_keeping_point_dims(IndexingMap.from_tensor_sizes(reshape_exprs(target, source), source))


@output_to_input("reshape")
def _reshape_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    return one_set_each(_reshape_map(dims(instr.shape), dims(instr.operand(0).shape)))


@input_to_output("reshape")
def _reshape_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    return one_set_each(_reshape_map(dims(instr.operand(0).shape), dims(instr.shape)))


def transpose_for_bitcast(source: Shape, target: Shape) -> list[int] | None:
    """The permutation ``p`` with ``target = transpose(source, p)`` that keeps
    the physical order of elements, if there is one (XLA's
    ``DeduceTransposeDimensionsForBitcast``)."""
    if len(source.dimensions) != len(target.dimensions):
        return None
    source_order = minor_to_major(source)
    target_inverse = inverse_permutation(minor_to_major(target))
    permutation = [source_order[target_inverse[i]] for i in range(len(target_inverse))]
    if any(target.dimensions[i] != source.dimensions[p] for i, p in enumerate(permutation)):
        return None
    return permutation


def reshape_is_bitcast(source: Shape, target: Shape) -> bool:
    """Whether reshaping ``source`` to ``target`` keeps every element at its
    physical offset: XLA's check of the unit index of every dimension, both
    ways."""
    count = math.prod(source.dimensions)
    if count != math.prod(target.dimensions):
        return False
    if count == 0:
        return True

    def unit_indices_stay(a: Shape, b: Shape) -> bool:
        for dim, size in enumerate(a.dimensions):
            if size <= 1:
                continue
            unit = [0] * len(a.dimensions)
            unit[dim] = 1
            moved = row_major_index(b.dimensions, row_major_offset(a.dimensions, unit))
            if physical_offset(a, unit) != physical_offset(b, moved):
                return False
        return True

    return unit_indices_stay(source, target) and unit_indices_stay(target, source)


def bitcast_map(source: Shape, target: Shape) -> IndexingMap:
    """From indices of ``source`` to indices of ``target``, a bitcast apart:
    a transpose, a reshape, or a transpose to ``source``'s physical order, a
    reshape to ``target``'s physical order and a transpose to ``target``
    (XLA's ``GetBitcastMap``)."""
    if has_tiles(source) or has_tiles(target) or math.prod(source.dimensions) != math.prod(target.dimensions):
        return IndexingMap.undefined()
    source_sizes = dims(source)
    if source_sizes:
        permutation = transpose_for_bitcast(source, target)
        if permutation is not None:
            return permutation_map(permutation, source_sizes)
    if reshape_is_bitcast(source, target):
        return IndexingMap.from_tensor_sizes(reshape_exprs(dims(target), source_sizes), source_sizes)
    # source -> its physical order -> (reshape) target's physical order -> target.
    transpose1 = list(reversed(minor_to_major(source)))
    target_major_to_minor = list(reversed(minor_to_major(target)))
    physical_source = [source_sizes[d] for d in transpose1]
    physical_target = [target.dimensions[d] for d in target_major_to_minor]
    transpose2 = inverse_permutation(target_major_to_minor)
    physical_source_exprs = [affine.dim(d) for d in transpose1]
    reshaped = [affine.replace(e, physical_source_exprs, []) for e in reshape_exprs(physical_target, physical_source)]
    return IndexingMap.from_tensor_sizes([reshaped[p] for p in transpose2], source_sizes)


@output_to_input("bitcast")
def _bitcast_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    return one_set_each(simplify_keeping_point_dims(bitcast_map(instr.shape, instr.operand(0).shape)))


@input_to_output("bitcast")
def _bitcast_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    return one_set_each(simplify_keeping_point_dims(bitcast_map(instr.operand(0).shape, instr.shape)))


# --- concatenate ---


def _concat_dimension(instr: HloInstruction) -> int:
    dimension = ints(instr, "dimensions")
    if len(dimension) != 1 or not 0 <= dimension[0] < len(instr.shape.dimensions):
        raise MalformedOp(f"concatenate {instr.name} needs one dimension, got {list(dimension)}")
    return dimension[0]


@output_to_input("concatenate")
def _concatenate_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """Operand ``k`` is read by the output indices of its piece only: the
    concatenated dimension is bounded to ``[offset_k, offset_k + size_k - 1]``
    and shifted by ``-offset_k``."""
    dimension = _concat_dimension(instr)
    sizes = dims(instr.shape)
    result = []
    offset = 0
    for operand in instr.operands:
        size = operand.shape.dimensions[dimension]
        exprs = dim_exprs(len(sizes))
        exprs[dimension] = affine.sub(exprs[dimension], offset)
        variables = dim_vars(sizes)
        variables[dimension] = Variable(Interval(offset, offset + size - 1))
        result.append({IndexingMap.from_exprs(exprs, variables)})
        offset += size
    return result


@input_to_output("concatenate")
def _concatenate_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    dimension = _concat_dimension(instr)
    offset = sum(operand.shape.dimensions[dimension] for operand in instr.operands[:input_id])
    sizes = dims(instr.operand(input_id).shape)
    exprs = dim_exprs(len(sizes))
    exprs[dimension] = affine.add(exprs[dimension], offset)
    return one_set_each(IndexingMap.from_tensor_sizes(exprs, sizes))


# --- pad ---


def padding_config(instr: HloInstruction) -> tuple[PaddingDimension, ...]:
    config = instr.attributes.get("padding")
    if (
        not isinstance(config, tuple)
        or len(config) != len(instr.shape.dimensions)
        or any(d.interior < 0 for d in config)
    ):
        raise MalformedOp(f"pad {instr.name} has no valid padding=...")
    return config


def pad_map(output_sizes: tuple[int, ...], config: tuple[PaddingDimension, ...]) -> IndexingMap:
    """From the padded tensor to the operand: ``d - low`` (``(d - low)
    floordiv (interior + 1)`` with ``(d - low) mod (interior + 1) == 0`` when
    there is interior padding), for ``d`` between the edge paddings (XLA's
    ``ComputePadIndexingMap``)."""
    exprs, variables, constraints = [], [], []
    for i, (size, d) in enumerate(zip(output_sizes, config)):
        variables.append(Variable(Interval(max(0, d.low), min(size - 1, size - 1 - d.high))))
        shifted = affine.sub(affine.dim(i), d.low)
        if d.interior == 0:
            exprs.append(shifted)
        else:
            exprs.append(affine.floordiv(shifted, d.interior + 1))
            constraints.append((affine.mod(shifted, d.interior + 1), Interval(0, 0)))
    return IndexingMap.from_exprs(exprs, variables, constraints=constraints)


@output_to_input("pad")
def _pad_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    sizes = dims(instr.shape)
    return one_set_each(pad_map(sizes, padding_config(instr)), scalar_map(sizes))


@input_to_output("pad")
def _pad_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """The operand element ``d`` lands at ``d * (interior + 1) + low`` unless
    negative padding cuts it off; the padding value may land anywhere."""
    sizes = dims(instr.shape)
    if input_id == 1:
        return one_set_each(broadcast_from_scalar(sizes))
    exprs, constraints = [], []
    for i, (size, d) in enumerate(zip(sizes, padding_config(instr))):
        expr = affine.add(affine.mul(affine.dim(i), d.interior + 1), d.low)
        exprs.append(expr)
        constraints.append((expr, Interval(0, size - 1)))
    indexing_map = IndexingMap.from_exprs(exprs, dim_vars(dims(instr.operand(0).shape)), constraints=constraints)
    return one_set_each(indexing_map.simplify())


# --- tuples ---


@output_to_input("tuple")
def _tuple_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """Element ``output_id`` is operand ``output_id``; no other operand is read."""
    result: list[set[IndexingMap]] = [set() for _ in instr.operands]
    result[output_id] = {identity(dims(instr.operand(output_id).shape))}
    return result


@input_to_output("tuple")
def _tuple_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """Operand ``input_id`` is element ``input_id`` (XLA gives only that
    entry; here every output has its set, the others empty)."""
    result: list[set[IndexingMap]] = [set() for _ in result_shapes(instr)]
    result[input_id] = {identity(dims(result_shapes(instr)[input_id]))}
    return result


@output_to_input("get-tuple-element")
def _get_tuple_element_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """The identity, when the selected element has the result's shape."""
    operand = instr.operand(0).shape
    index = integer(instr, "index")
    if not operand.tuple_shapes or not 0 <= index < len(operand.tuple_shapes):
        raise MalformedOp(f"get-tuple-element {instr.name} of a non-tuple or out of range")
    if operand.tuple_shapes[index].dimensions != instr.shape.dimensions:
        return one_set_each(IndexingMap.undefined())
    return one_set_each(identity(dims(instr.shape)))


@input_to_output("get-tuple-element")
def _get_tuple_element_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    return _get_tuple_element_output_to_input(instr, 0)
