"""Shape rules of collectives: all-reduce, all-gather, reduce-scatter,
all-to-all, collective permutes and broadcasts, and the device ids."""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.replica_groups import parse_replica_groups
from xlapy.hlo.shape_rules.helpers import (
    SCALAR_U32,
    array_operand,
    array_shape,
    at_least,
    braces,
    callees,
    check_reducer,
    declared_tuple,
    fail,
    ints_attr,
    one_or_tuple,
    operand_count,
    show,
    tuple_operand,
    tuple_shape,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


@shape_rule("partition-id", "replica-id")
def _device_id(instr: HloInstruction) -> Shape:
    operand_count(instr, 0)
    return SCALAR_U32


def replica_group_size(instr: HloInstruction) -> int | None:
    """The number of devices in each replica group, when the groups say it:
    ``{{0,1},{2,3}}`` lists them, ``[2,2]<=[4]`` is an iota list of 2 groups of 2;
    ``{}`` (all devices) leaves it unknown."""
    try:
        groups = parse_replica_groups(instr.attributes.get("replica_groups"))
    except XlapyError as e:
        fail(f"{instr.opcode}: {e}")
    size = groups.group_size
    if size is None and groups.listed and len({len(g) for g in groups.listed}) > 1:
        fail(f"replica_groups {groups.text} of {instr.opcode} have different sizes")
    return size


def collective_arrays(instr: HloInstruction) -> list[Shape]:
    at_least(instr, 1)
    return [array_operand(instr, i) for i in range(len(instr.operands))]


def _all_reduce_shape(instr: HloInstruction) -> Shape:
    shapes = collective_arrays(instr)
    (computation,) = callees(instr, 1, "to_apply")
    for shape in shapes[1:]:
        if shape.element_type != shapes[0].element_type:
            fail(f"operands of {instr.opcode} share one reduction, so they need one element type, "
                  f"got {show(shapes[0])} and {show(shape)}")
    scalar = Shape(shapes[0].element_type)
    check_reducer(instr, computation, [scalar], [scalar.element_type])
    return one_or_tuple(shapes)


@shape_rule("all-reduce", "all-reduce-start")
def _all_reduce(instr: HloInstruction) -> Shape:
    return _all_reduce_shape(instr)


@shape_rule("all-reduce-done")
def _all_reduce_done(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    return without_layout(instr.operands[0].shape)


def _gathered_shapes(instr: HloInstruction, declared: Sequence[Shape], gather: bool) -> list[Shape]:
    """Results of all-gather (``gather``) or reduce-scatter: equal to the
    operands except along ``dimensions``, where the gathered side is the
    other times the group size (the declared size where that is unknown)."""
    shapes = collective_arrays(instr)
    dims = ints_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(f"{instr.opcode} needs one dimension, got dimensions={braces(dims)}")
    d = dims[0]
    group = replica_group_size(instr)
    if len(declared) != len(shapes):
        fail(f"{instr.opcode} has {len(shapes)} operands, so it produces {len(shapes)} results, "
              f"but the instruction declares {len(declared)}")
    results = []
    for operand, result in zip(shapes, declared):
        if not 0 <= d < operand.rank:
            fail(f"dimension {d} of {instr.opcode} is out of range for {show(operand)}")
        if not result.is_array or result.rank != operand.rank:
            fail(f"{instr.opcode} of {show(operand)} cannot produce {show(result)}")
        small, large = (operand, result) if gather else (result, operand)
        if group is not None:
            size = operand.dimensions[d] * group if gather else operand.dimensions[d] // group
            if not gather and operand.dimensions[d] % group:
                fail(f"dimension {d} of {show(operand)} must be divisible by the group size {group} of reduce-scatter")
        else:
            size = result.dimensions[d]
            if small.dimensions[d] == 0 or large.dimensions[d] % small.dimensions[d]:
                fail(f"dimension {d} of {show(large)} must be a multiple of that of {show(small)} in {instr.opcode}")
        dims_out = list(operand.dimensions)
        dims_out[d] = size
        results.append(array_shape(operand.element_type, dims_out, operand.dynamic_dimensions))
    return results


def _declared_parts(shape: Shape, count: int) -> list[Shape]:
    return list(shape.tuple_shapes) if count > 1 and shape.is_tuple else [shape]


@shape_rule("all-gather")
def _all_gather(instr: HloInstruction) -> Shape:
    declared = _declared_parts(instr.shape, len(instr.operands))
    return one_or_tuple(_gathered_shapes(instr, declared, gather=True))


@shape_rule("all-gather-start")
def _all_gather_start(instr: HloInstruction) -> Shape:
    # all-gather-start -> (operand(s), gathered result(s))
    count = len(instr.operands)
    declared = declared_tuple(instr, 2)
    results = _gathered_shapes(instr, _declared_parts(declared.tuple_shapes[1], count), gather=True)
    return tuple_shape([one_or_tuple([o.shape for o in instr.operands]), one_or_tuple(results)])


@shape_rule("all-gather-done", "collective-permute-done")
def _second_of_start(instr: HloInstruction) -> Shape:
    # The -done of a start that returns (operand, result, ...) gives the result.
    operand_count(instr, 1)
    return without_layout(tuple_operand(instr, 0, "the start", 2).tuple_shapes[1])


@shape_rule("reduce-scatter")
def _reduce_scatter(instr: HloInstruction) -> Shape:
    shapes = collective_arrays(instr)
    (computation,) = callees(instr, 1, "to_apply")
    scalar = Shape(shapes[0].element_type)
    check_reducer(instr, computation, [scalar], [scalar.element_type])
    declared = _declared_parts(instr.shape, len(instr.operands))
    return one_or_tuple(_gathered_shapes(instr, declared, gather=False))


@shape_rule("all-to-all")
def _all_to_all(instr: HloInstruction) -> Shape:
    # Split and concatenated along dimensions={d}, or (without) the tuple
    # form exchanging whole operands; StableHLO's form is stablehlo.all_to_all.
    shapes = collective_arrays(instr)
    if "dimensions" not in instr.attributes:
        return tuple_shape(shapes)
    dims = ints_attr(instr, "dimensions")
    if len(shapes) != 1 or len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        fail(f"an all-to-all with dimensions={braces(dims)} takes one array operand and one of its dimensions")
    group = replica_group_size(instr)
    if group and shapes[0].dimensions[dims[0]] % group:
        fail(f"dimension {dims[0]} of {show(shapes[0])} must be divisible by the group size {group} of all-to-all")
    return without_layout(shapes[0])


@shape_rule("ragged-all-to-all")
def _ragged_all_to_all(instr: HloInstruction) -> Shape:
    # (input, output, input offsets, send sizes, output offsets, receive sizes) -> output
    operand_count(instr, 6)
    data, output = array_operand(instr, 0, "the input"), array_operand(instr, 1, "the output")
    if data.element_type != output.element_type or data.dimensions[1:] != output.dimensions[1:]:
        fail(f"input and output of ragged-all-to-all must agree in element type and all but the major dimension, "
              f"got {show(data)} and {show(output)}")
    for i in range(2, 6):
        sizes = array_operand(instr, i)
        if not sizes.type.is_integral:
            fail(f"operand {i} of ragged-all-to-all must hold integer offsets or sizes, got {show(sizes)}")
    return without_layout(output)


@shape_rule("collective-permute")
def _collective_permute(instr: HloInstruction) -> Shape:
    if len(instr.operands) == 1:
        array_operand(instr, 0)
        return without_layout(instr.operands[0].shape)
    # In-place and combined forms: the declared result stands.
    at_least(instr, 1)
    return without_layout(instr.shape)


@shape_rule("collective-permute-start")
def _collective_permute_start(instr: HloInstruction) -> Shape:
    # -> (operand, result, contexts...)
    at_least(instr, 1)
    declared = declared_tuple(instr, 2)
    if len(instr.operands) != 1:
        return without_layout(declared)
    operand = array_operand(instr, 0)
    return tuple_shape([operand, operand, *declared.tuple_shapes[2:]])


@shape_rule("collective-broadcast")
def _collective_broadcast(instr: HloInstruction) -> Shape:
    return one_or_tuple(collective_arrays(instr))
