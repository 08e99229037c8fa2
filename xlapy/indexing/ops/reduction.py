"""Ops where an output element reads a range of input elements (XLA's
docs/indexing.md): reduce, reduce-window, convolution, dot, and
sort. The range is a range variable ``s``; init values are read whole."""

from __future__ import annotations

from xdsl.ir.affine import AffineExpr

from xlapy.hlo import HloInstruction
from xlapy.hlo.attributes import PaddingDimension, WindowDimension
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops.common import (
    MalformedOp,
    broadcast_from_scalar,
    dim_exprs,
    dim_vars,
    dims,
    ints,
    output_shape,
    result_shapes,
    scalar_map,
)
from xlapy.indexing.ops.movement import pad_map
from xlapy.indexing.ops.registry import input_to_output, output_to_input

# --- reduce ---


def _input_count(instr: HloInstruction) -> int:
    count = len(instr.operands) // 2
    if count == 0 or len(instr.operands) != 2 * count:
        raise MalformedOp(f"{instr.opcode} {instr.name} needs as many inits as inputs")
    return count


@output_to_input("reduce")
def _reduce_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """Reduced dimensions become range variables, numbered in input order;
    every input gets the same map (the reducer sees all of them)."""
    count = _input_count(instr)
    reduced = set(ints(instr, "dimensions"))
    exprs: list[AffineExpr] = []
    ranges: list[int] = []
    kept = 0
    for i, size in enumerate(instr.operand(0).shape.dimensions):
        if i in reduced:
            exprs.append(affine.sym(len(ranges)))
            ranges.append(size)
        else:
            exprs.append(affine.dim(kept))
            kept += 1
    output = dims(output_shape(instr, 0))
    inputs_map = IndexingMap.from_tensor_sizes(exprs, output, ranges)
    return [{inputs_map}] * count + [{scalar_map(output)}] * count


@input_to_output("reduce")
def _reduce_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """An input element goes to the output at its kept indices, in every
    output; an init value to every output element."""
    count = _input_count(instr)
    output = dims(output_shape(instr, 0))
    if input_id >= count:
        return [{broadcast_from_scalar(output)} for _ in range(count)]
    reduced = set(ints(instr, "dimensions"))
    input_sizes = dims(instr.operand(input_id).shape)
    exprs = [affine.dim(i) for i in range(len(input_sizes)) if i not in reduced]
    return [{IndexingMap.from_tensor_sizes(exprs, input_sizes)} for _ in range(count)]


# --- reduce-window ---


def window_config(instr: HloInstruction, rank: int) -> tuple[WindowDimension, ...]:
    window = instr.attributes.get("window")
    if not isinstance(window, tuple) or len(window) != rank:
        raise MalformedOp(f"{instr.opcode} {instr.name} needs a window of rank {rank}")
    if any(d.size < 1 or d.stride < 1 or d.base_dilation < 1 or d.window_dilation < 1 for d in window):
        raise MalformedOp(f"{instr.opcode} {instr.name} has a window with a size, stride or dilation below 1")
    return window


def window_map(
    input_sizes: tuple[int, ...], output_sizes: tuple[int, ...], window: tuple[WindowDimension, ...]
) -> IndexingMap:
    """From window position ``d`` and offset ``s`` in the window to the input:
    the position ``d * stride + s * window_dilation`` of the input padded and
    base-dilated (a pad with interior padding ``base_dilation - 1``), mapped
    back through that pad (XLA's ``ComposeWindowIndexingMap``)."""
    padded_sizes, padding, exprs = [], [], []
    for i, (size, d) in enumerate(zip(input_sizes, window)):
        padded_sizes.append(size + d.padding_low + d.padding_high + (size - 1) * (d.base_dilation - 1))
        padding.append(PaddingDimension(d.padding_low, d.padding_high, d.base_dilation - 1))
        exprs.append(affine.add(affine.mul(affine.sym(i), d.window_dilation), affine.mul(affine.dim(i), d.stride)))
    no_padding = IndexingMap.from_tensor_sizes(exprs, output_sizes, [d.size for d in window])
    pad = pad_map(tuple(padded_sizes), tuple(padding))
    return no_padding.compose(pad).simplify().remove_unused_symbols()


@output_to_input("reduce-window")
def _reduce_window_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    count = _input_count(instr)
    input_sizes = dims(instr.operand(0).shape)
    output = dims(output_shape(instr, 0))
    inputs_map = window_map(input_sizes, output, window_config(instr, len(input_sizes)))
    return [{inputs_map}] * count + [{scalar_map(output)}] * count


@input_to_output("reduce-window")
def _reduce_window_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """The input element ``d`` sits at ``p = d * base_dilation + low`` of the
    padded input and is offset ``s`` of the window at ``(p - s *
    window_dilation) / stride`` when that divides and is a window position."""
    count = _input_count(instr)
    output = dims(output_shape(instr, 0))
    if input_id >= count:
        return [{broadcast_from_scalar(output)} for _ in range(count)]
    input_sizes = dims(instr.operand(input_id).shape)
    window = window_config(instr, len(input_sizes))
    exprs, constraints = [], []
    for i, (d, size) in enumerate(zip(window, output)):
        padded = affine.add(affine.mul(affine.dim(i), d.base_dilation), d.padding_low)
        start = affine.sub(padded, affine.mul(affine.sym(i), d.window_dilation))
        expr = affine.floordiv(start, d.stride)
        exprs.append(expr)
        constraints.append((affine.mod(start, d.stride), Interval(0, 0)))
        constraints.append((expr, Interval(0, size - 1)))
    indexing_map = IndexingMap.from_exprs(
        exprs, dim_vars(input_sizes), dim_vars([d.size for d in window]), constraints=constraints
    )
    return [{indexing_map.simplify().remove_unused_symbols()} for _ in range(count)]


# --- convolution ---


def _label_positions(labels: str, first: str, second: str, spatial_rank: int) -> tuple[int, int, list[int]]:
    """Where the ``first`` and ``second`` labelled dimensions and spatial
    dimensions ``0, 1, ...`` are in one side of ``dim_labels``."""
    spatial = [labels.find(str(i)) for i in range(spatial_rank)]
    if len(labels) != spatial_rank + 2 or first not in labels or second not in labels or -1 in spatial:
        raise MalformedOp(f"bad convolution dimension labels '{labels}'")
    return labels.index(first), labels.index(second), spatial


@output_to_input("convolution")
def _convolution_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    """XLA's map: the input's spatial dimensions are read through a window
    (as reduce-window's), its feature dimension is a range variable (offset
    by the feature group of the output feature), and with batch groups its
    batch dimension ranges over the groups; the kernel is read at every
    window offset and input feature, for the output feature."""
    labels = instr.attributes.get("dim_labels")
    if not isinstance(labels, str) or "_" not in labels or "->" not in labels:
        raise MalformedOp(f"convolution {instr.name} has no dim_labels")
    lhs_labels, rest = labels.split("_", 1)
    rhs_labels, out_labels = rest.split("->")
    spatial_rank = len(lhs_labels) - 2
    in_batch, in_feature, in_spatial = _label_positions(lhs_labels, "b", "f", spatial_rank)
    k_in, k_out, k_spatial = _label_positions(rhs_labels, "i", "o", spatial_rank)
    out_batch, out_feature, out_spatial = _label_positions(out_labels, "b", "f", spatial_rank)
    lhs, rhs, output = dims(instr.operand(0).shape), dims(instr.operand(1).shape), dims(instr.shape)
    window = window_config(instr, spatial_rank)
    spatial = window_map(tuple(lhs[i] for i in in_spatial), tuple(output[i] for i in out_spatial), window)
    output_dims = [affine.dim(i) for i in out_spatial]
    window_symbols = [affine.sym(i) for i in range(len(spatial.range_vars))]
    input_exprs: list[AffineExpr | None] = [None] * len(lhs)
    for i, position in enumerate(in_spatial):
        input_exprs[position] = affine.replace(spatial.results[i], output_dims, window_symbols)
    constraints = [(affine.replace(e, output_dims, window_symbols), b) for e, b in spatial.constraints.items()]
    input_ranges = list(spatial.range_vars)
    kernel_exprs: list[AffineExpr | None] = [None] * len(rhs)
    for i, position in enumerate(k_spatial):
        kernel_exprs[position] = affine.sym(i)
    kernel_ranges = [rhs[i] for i in k_spatial]
    kernel_exprs[k_out] = affine.dim(out_feature)
    group_size = rhs[k_in]
    input_feature = affine.sym(len(input_ranges))
    kernel_exprs[k_in] = affine.sym(len(kernel_ranges))
    input_ranges += dim_vars([group_size])
    kernel_ranges.append(group_size)
    feature_groups = instr.attributes.get("feature_group_count", 1)
    if feature_groups > 1:
        per_group = output[out_feature] // feature_groups
        input_feature = affine.add(
            affine.mul(affine.floordiv(affine.dim(out_feature), per_group), group_size), input_feature
        )
    input_exprs[in_feature] = input_feature
    batch_groups = instr.attributes.get("batch_group_count", 1)
    input_exprs[in_batch] = affine.dim(out_batch)
    if batch_groups > 1:
        group = affine.sym(len(input_ranges))
        input_ranges += dim_vars([batch_groups])
        input_exprs[in_batch] = affine.add(affine.mul(group, output[out_batch]), affine.dim(out_batch))
    input_map = IndexingMap.from_exprs(input_exprs, dim_vars(output), input_ranges, constraints=constraints)
    kernel_map = IndexingMap.from_tensor_sizes(kernel_exprs, output, kernel_ranges)
    return [
        {input_map.simplify().remove_unused_symbols()},
        {kernel_map.simplify().remove_unused_symbols()},
    ]


# --- dot ---


class _DotDims:
    """Where each operand dimension of a dot goes: output dimensions are the
    batch dimensions, then the lhs free ones, then the rhs free ones;
    contracting pairs become range variables."""

    def __init__(self, instr: HloInstruction):
        self.batch = (ints(instr, "lhs_batch_dims", ()), ints(instr, "rhs_batch_dims", ()))
        self.contracting = (ints(instr, "lhs_contracting_dims", ()), ints(instr, "rhs_contracting_dims", ()))
        self.sizes = (dims(instr.operand(0).shape), dims(instr.operand(1).shape))
        if len(self.batch[0]) != len(self.batch[1]) or len(self.contracting[0]) != len(self.contracting[1]):
            raise MalformedOp(f"dot {instr.name} has unpaired batch or contracting dimensions")
        self.free = tuple(
            [i for i in range(len(self.sizes[side])) if i not in self.batch[side] + self.contracting[side]]
            for side in (0, 1)
        )
        if len(self.batch[0]) + len(self.free[0]) + len(self.free[1]) != len(instr.shape.dimensions):
            raise MalformedOp(f"dot {instr.name}: dimension numbers do not fit its shape")

    def output_dims(self, side: int) -> list[int]:
        """The output dimension of each batch and free dimension of ``side``."""
        first_free = len(self.batch[0]) + (len(self.free[0]) if side else 0)
        return [*range(len(self.batch[0])), *range(first_free, first_free + len(self.free[side]))]


@output_to_input("dot")
def _dot_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    dot = _DotDims(instr)
    output = dims(instr.shape)
    contracting_sizes = [dot.sizes[0][d] for d in dot.contracting[0]]
    result = []
    for side in (0, 1):
        exprs: list[AffineExpr | None] = [None] * len(dot.sizes[side])
        for operand_dim, output_dim in zip(dot.batch[side] + tuple(dot.free[side]), dot.output_dims(side)):
            exprs[operand_dim] = affine.dim(output_dim)
        for j, operand_dim in enumerate(dot.contracting[side]):
            exprs[operand_dim] = affine.sym(j)
        result.append({IndexingMap.from_tensor_sizes(exprs, output, contracting_sizes)})
    return result


@input_to_output("dot")
def _dot_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    """An operand element reaches the output at its batch and free indices,
    for every index of the other operand's free dimensions (range
    variables); its contracting indices do not show."""
    dot = _DotDims(instr)
    side = input_id
    exprs: list[AffineExpr | None] = [None] * len(instr.shape.dimensions)
    for operand_dim, output_dim in zip(dot.batch[side] + tuple(dot.free[side]), dot.output_dims(side)):
        exprs[output_dim] = affine.dim(operand_dim)
    other = 1 - side
    other_free_sizes = [dot.sizes[other][d] for d in dot.free[other]]
    for j, output_dim in enumerate(dot.output_dims(other)[len(dot.batch[0]) :]):
        exprs[output_dim] = affine.sym(j)
    return [{IndexingMap.from_tensor_sizes(exprs, dot.sizes[side], other_free_sizes)}]


# --- sort ---


def _sort_map(instr: HloInstruction, sizes: tuple[int, ...]) -> IndexingMap:
    """``(d...)[s0] -> (d...)`` with the sorted dimension ranging over ``s0``:
    where an element ends up in its row depends on the whole row."""
    dimension = ints(instr, "dimensions")
    if len(dimension) != 1 or not 0 <= dimension[0] < len(sizes):
        raise MalformedOp(f"sort {instr.name} needs one dimension to sort")
    exprs = dim_exprs(len(sizes))
    exprs[dimension[0]] = affine.sym(0)
    return IndexingMap.from_tensor_sizes(exprs, sizes, [sizes[dimension[0]]])


@output_to_input("sort")
def _sort_output_to_input(instr: HloInstruction, output_id: int) -> list[set[IndexingMap]]:
    indexing_map = _sort_map(instr, dims(output_shape(instr, output_id)))
    return [{indexing_map} for _ in instr.operands]


@input_to_output("sort")
def _sort_input_to_output(instr: HloInstruction, input_id: int) -> list[set[IndexingMap]]:
    indexing_map = _sort_map(instr, dims(instr.operand(input_id).shape))
    return [{indexing_map} for _ in result_shapes(instr)]
