"""Shape rules of linear algebra: dot, ragged dot, convolution, FFT,
Cholesky, triangular solve and batch normalisation."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    FLOAT,
    FLOAT_OR_COMPLEX,
    array_operand,
    array_shape,
    attr,
    bool_attr,
    braces,
    check_dimension_numbers,
    component_type,
    declared_dynamic,
    fail,
    int_attr,
    ints_attr,
    operand_count,
    require_kind,
    same_shape,
    show,
    tuple_shape,
    window_output,
    without_layout,
    word_attr,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape, TypeKind


def _contraction_type(instr: HloInstruction, lhs: Shape, rhs: Shape) -> str:
    """The result type of a dot/convolution: operand types agree (floating-point
    precisions may differ); the declared type is the preferred one, which an
    integral op may not narrow."""
    a, b = lhs.type, rhs.type
    if a.name != b.name and not (a.is_floating_point and b.is_floating_point):
        fail(f"operands of {instr.opcode} must have the same element type, got {show(lhs)} and {show(rhs)}")
    natural = a if a.bit_width >= b.bit_width else b
    if not instr.shape.is_array:
        return natural.name
    preferred = instr.shape.type
    if preferred.name != natural.name and not natural.is_floating_point and preferred.bit_width < natural.bit_width:
        fail(f"the result type {preferred.name} of {instr.opcode} must not be narrower than its operands' "
              f"{natural.name}")
    return preferred.name


def _dot_dimensions(instr: HloInstruction, lhs: Shape, rhs: Shape,
                    rhs_group: Sequence[int] = ()) -> tuple[list[int], list[bool]]:
    """Dimensions of a dot: batch dimensions, then lhs free dimensions, then rhs
    free dimensions (``rhs_group``, a ragged dot's group dimension, is not free)."""
    lb, rb = ints_attr(instr, "lhs_batch_dims", ()), ints_attr(instr, "rhs_batch_dims", ())
    lc, rc = ints_attr(instr, "lhs_contracting_dims", ()), ints_attr(instr, "rhs_contracting_dims", ())
    op = instr.opcode
    if len(lb) != len(rb):
        fail(f"{op} needs as many lhs_batch_dims as rhs_batch_dims, got {braces(lb)} and {braces(rb)}")
    if len(lc) != len(rc):
        fail(f"{op} needs as many lhs_contracting_dims as rhs_contracting_dims, got {braces(lc)} and {braces(rc)}")
    check_dimension_numbers(instr, "lhs batch and contracting dims", lb + lc, lhs.rank, f"lhs {show(lhs)}")
    check_dimension_numbers(instr, "rhs batch, contracting and group dims", (*rb, *rc, *rhs_group), rhs.rank,
                             f"rhs {show(rhs)}")
    for what, ldims, rdims in (("batch", lb, rb), ("contracting", lc, rc)):
        for ld, rd in zip(ldims, rdims):
            if lhs.dimensions[ld] != rhs.dimensions[rd]:
                fail(f"{what} dimensions of {op} must have equal sizes: lhs dimension {ld} of {show(lhs)} is "
                      f"{lhs.dimensions[ld]}, rhs dimension {rd} of {show(rhs)} is {rhs.dimensions[rd]}")
    lfree = [d for d in range(lhs.rank) if d not in lb + lc]
    rfree = [d for d in range(rhs.rank) if d not in (*rb, *rc, *rhs_group)]
    picks = [(lhs, d) for d in lb] + [(lhs, d) for d in lfree] + [(rhs, d) for d in rfree]
    return [s.dimensions[d] for s, d in picks], [s.dynamic_dimensions[d] for s, d in picks]


@shape_rule("dot")
def _dot(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    lhs, rhs = array_operand(instr, 0, "lhs"), array_operand(instr, 1, "rhs")
    dims, dynamic = _dot_dimensions(instr, lhs, rhs)
    return array_shape(_contraction_type(instr, lhs, rhs), dims, dynamic)


@shape_rule("ragged-dot")
def _ragged_dot(instr: HloInstruction) -> Shape:
    # ragged-dot(lhs, rhs, group_sizes): lhs_ragged_dims={r} is split into groups of group_sizes.
    # r free in lhs: rhs has a group dimension (rhs_group_dims) picking each group's matrix;
    # r contracting: the result gets a leading group dimension; r batch: a plain dot.
    operand_count(instr, 3)
    lhs, rhs = array_operand(instr, 0, "lhs"), array_operand(instr, 1, "rhs")
    group_sizes = array_operand(instr, 2, "group_sizes")
    if not group_sizes.type.is_integral or not group_sizes.rank:
        fail(f"group_sizes of ragged-dot must be an integral array, got {show(group_sizes)}")
    groups = group_sizes.dimensions[-1]
    ragged = ints_attr(instr, "lhs_ragged_dims")
    rhs_group = ints_attr(instr, "rhs_group_dims", ())
    if len(ragged) != 1 or not 0 <= ragged[0] < lhs.rank:
        fail(f"ragged-dot needs one lhs ragged dimension of {show(lhs)}, got lhs_ragged_dims={braces(ragged)}")
    contracting = ragged[0] in ints_attr(instr, "lhs_contracting_dims", ())
    batch = ragged[0] in ints_attr(instr, "lhs_batch_dims", ())
    if contracting or batch:
        if rhs_group:
            fail("ragged-dot has rhs_group_dims only when the ragged dimension is a free lhs dimension")
    else:
        if len(rhs_group) != 1 or not 0 <= rhs_group[0] < rhs.rank:
            fail(f"ragged-dot with a free ragged dimension needs one rhs group dimension of {show(rhs)}, "
                  f"got rhs_group_dims={braces(rhs_group)}")
        if rhs.dimensions[rhs_group[0]] != groups:
            fail(f"the rhs group dimension of ragged-dot has size {rhs.dimensions[rhs_group[0]]}, but "
                  f"group_sizes {show(group_sizes)} has {groups} groups")
    dims, dynamic = _dot_dimensions(instr, lhs, rhs, rhs_group)
    if contracting:
        dims, dynamic = [groups, *dims], [False, *dynamic]
    return array_shape(_contraction_type(instr, lhs, rhs), dims, dynamic)


def _parse_labels(instr: HloInstruction, text: str, letters: str, spatial: int, what: str) -> tuple[int, ...]:
    """Positions of ``letters`` then of the spatial digits 0..spatial-1 in one part of ``dim_labels``."""
    expected = sorted(letters + "".join(str(i) for i in range(spatial)))
    if sorted(text) != expected:
        fail(f"dim_labels {what} part '{text}' must name {letters[0]}, {letters[1]} and spatial dimensions "
              f"0..{spatial - 1} once each")
    return tuple(text.index(c) for c in letters + "".join(str(i) for i in range(spatial)))


@shape_rule("convolution")
def _convolution(instr: HloInstruction) -> Shape:
    operand_count(instr, 2)
    lhs, rhs = array_operand(instr, 0, "lhs"), array_operand(instr, 1, "rhs")
    labels = word_attr(instr, "dim_labels")
    match = re.fullmatch(r"(\w+)_(\w+)->(\w+)", labels)
    if not match:
        fail(f"dim_labels of convolution must look like b01f_01io->b01f, got {labels}")
    window = attr(instr, "window", ())
    spatial = len(window)
    lhs_text, rhs_text, out_text = match.groups()
    for text, shape, name in ((lhs_text, lhs, "lhs"), (rhs_text, rhs, "rhs")):
        if len(text) != shape.rank:
            fail(f"dim_labels {name} part '{text}' has {len(text)} dimensions, but {name} {show(shape)} has "
                  f"rank {shape.rank}")
    if len(out_text) != spatial + 2 or len(lhs_text) != spatial + 2:
        fail(f"convolution has {spatial} window dimensions, but dim_labels {labels} has "
              f"{len(lhs_text) - 2} spatial dimensions")
    batch, feature, *lhs_spatial = _parse_labels(instr, lhs_text, "bf", spatial, "lhs")
    kin, kout, *rhs_spatial = _parse_labels(instr, rhs_text, "io", spatial, "rhs")
    out_batch, out_feature, *out_spatial = _parse_labels(instr, out_text, "bf", spatial, "output")
    groups = int_attr(instr, "feature_group_count", 1)
    batch_groups = int_attr(instr, "batch_group_count", 1)
    if groups < 1 or batch_groups < 1:
        fail(f"feature_group_count ({groups}) and batch_group_count ({batch_groups}) of convolution must be positive")
    if groups > 1 and batch_groups > 1:
        fail("convolution cannot have both feature_group_count and batch_group_count above 1")
    in_features, in_batch = lhs.dimensions[feature], lhs.dimensions[batch]
    kernel_in, kernel_out = rhs.dimensions[kin], rhs.dimensions[kout]
    if in_features % groups:
        fail(f"input features ({in_features}) of convolution must be divisible by feature_group_count ({groups})")
    if in_features // groups != kernel_in:
        fail(f"input features ({in_features}) / feature_group_count ({groups}) of convolution must equal the "
              f"kernel's input features ({kernel_in})")
    if kernel_out % groups:
        fail(f"kernel output features ({kernel_out}) of convolution must be divisible by feature_group_count "
              f"({groups})")
    if in_batch % batch_groups or kernel_out % batch_groups:
        fail(f"input batch ({in_batch}) and kernel output features ({kernel_out}) of convolution must be "
              f"divisible by batch_group_count ({batch_groups})")
    element_type = _contraction_type(instr, lhs, rhs)
    spatial_out = window_output(instr, [lhs.dimensions[d] for d in lhs_spatial], window,
                                 [rhs.dimensions[d] for d in rhs_spatial])
    dims = [0] * (spatial + 2)
    dims[out_batch] = in_batch // batch_groups
    dims[out_feature] = kernel_out
    for d, size in zip(out_spatial, spatial_out):
        dims[d] = size
    return array_shape(element_type, dims, declared_dynamic(instr, len(dims)))


@shape_rule("fft")
def _fft(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    kind = word_attr(instr, "fft_type")
    lengths = ints_attr(instr, "fft_length")
    if not 1 <= len(lengths) <= 3 or len(lengths) > operand.rank:
        fail(f"fft_length={braces(lengths)} of fft must name 1 to 3 of the dimensions of {show(operand)}")
    inner = list(operand.dimensions[-len(lengths):])
    dims = list(operand.dimensions)
    if kind in ("FFT", "IFFT"):
        require_kind(instr, operand, frozenset({TypeKind.COMPLEX}), f"operands for {kind}")
        expected, element_type = list(lengths), operand.element_type
    elif kind == "RFFT":
        if operand.element_type not in ("f32", "f64"):
            fail(f"RFFT needs an f32 or f64 operand, got {show(operand)}")
        expected, element_type = list(lengths), "c64" if operand.element_type == "f32" else "c128"
        dims[-1] = lengths[-1] // 2 + 1
    elif kind == "IRFFT":
        require_kind(instr, operand, frozenset({TypeKind.COMPLEX}), f"operands for {kind}")
        expected, element_type = [*lengths[:-1], lengths[-1] // 2 + 1], component_type(operand.element_type)
        dims[-1] = lengths[-1]
    else:
        fail(f"fft_type must be FFT, IFFT, RFFT or IRFFT, got {kind}")
    if inner != expected:
        fail(f"{kind} with fft_length={braces(lengths)} needs minor dimensions {braces(expected)}, "
              f"got {show(operand)}")
    return array_shape(element_type, dims, operand.dynamic_dimensions)


def _square_matrices(instr: HloInstruction, shape: Shape, what: str) -> None:
    if shape.rank < 2 or shape.dimensions[-1] != shape.dimensions[-2]:
        fail(f"{what} of {instr.opcode} must be (batches of) square matrices, got {show(shape)}")
    require_kind(instr, shape, FLOAT_OR_COMPLEX)


@shape_rule("cholesky")
def _cholesky(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    _square_matrices(instr, operand, "the operand")
    return without_layout(operand)


@shape_rule("triangular-solve")
def _triangular_solve(instr: HloInstruction) -> Shape:
    # Solves a x = b (left_side) or x a = b for x, a triangular.
    operand_count(instr, 2)
    a, b = array_operand(instr, 0, "a"), array_operand(instr, 1, "b")
    _square_matrices(instr, a, "a")
    if b.element_type != a.element_type or b.rank != a.rank or b.dimensions[:-2] != a.dimensions[:-2]:
        fail(f"b of triangular-solve must match a in element type and batch dimensions, got {show(a)} and {show(b)}")
    left = bool_attr(instr, "left_side")
    shared = b.dimensions[-2] if left else b.dimensions[-1]
    if shared != a.dimensions[-1]:
        side = "rows" if left else "columns"
        fail(f"the {side} of b {show(b)} must match the size of a {show(a)} in triangular-solve")
    return without_layout(b)


def _feature_index(instr: HloInstruction, operand: Shape) -> int:
    index = int_attr(instr, "feature_index")
    if not 0 <= index < operand.rank:
        fail(f"feature_index={index} of {instr.opcode} is out of range for {show(operand)}")
    return index


def _check_per_feature(instr: HloInstruction, indices: Sequence[int], operand: Shape, features: int) -> Shape:
    per_feature = array_shape(operand.element_type, [features])
    for i in indices:
        if not same_shape(instr.operands[i].shape, per_feature):
            fail(f"operand {i} of {instr.opcode} must be {show(per_feature)} (one value per feature), "
                  f"got {show(instr.operands[i].shape)}")
    return per_feature


@shape_rule("batch-norm-inference")
def _batch_norm_inference(instr: HloInstruction) -> Shape:
    # (operand, scale, offset, mean, variance)
    operand_count(instr, 5)
    operand = array_operand(instr, 0)
    require_kind(instr, operand, FLOAT)
    _check_per_feature(instr, range(1, 5), operand, operand.dimensions[_feature_index(instr, operand)])
    return without_layout(operand)


@shape_rule("batch-norm-training")
def _batch_norm_training(instr: HloInstruction) -> Shape:
    # (operand, scale, offset) -> (normalised, batch mean, batch variance)
    operand_count(instr, 3)
    operand = array_operand(instr, 0)
    require_kind(instr, operand, FLOAT)
    per_feature = _check_per_feature(instr, (1, 2), operand, operand.dimensions[_feature_index(instr, operand)])
    return tuple_shape([operand, per_feature, per_feature])


@shape_rule("batch-norm-grad")
def _batch_norm_grad(instr: HloInstruction) -> Shape:
    # (operand, scale, mean, variance, grad_output) -> (grad operand, grad scale, grad offset)
    operand_count(instr, 5)
    operand = array_operand(instr, 0)
    require_kind(instr, operand, FLOAT)
    per_feature = _check_per_feature(instr, (1, 2, 3), operand, operand.dimensions[_feature_index(instr, operand)])
    if not same_shape(instr.operands[4].shape, operand):
        fail(f"grad_output of batch-norm-grad must have the operand's shape {show(operand)}, "
              f"got {show(instr.operands[4].shape)}")
    return tuple_shape([operand, per_feature, per_feature])
