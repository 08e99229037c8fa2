"""Elemental rule of ``convolution`` (XLA's ``ElementalIrEmitter::EmitConvolution`` in
``xla/service/elemental_ir_emitter.cc``; the MLIR emitters' ``EmitConvolution`` in
``xla/codegen/emitters/elemental_hlo_to_mlir.cc`` loops the same way over an indexing map).

One output element ``out[b, o, y...]`` (any ``dim_labels``) is a sum over the window offsets ``k...`` (row-major,
the last spatial dimension fastest) and, innermost, the input features ``c`` of the output feature's group:
``acc = 0; acc = acc + lhs[b', g * C + c, x...] * rhs[o, c, k'...]``, where

- ``x = (y * stride + k * window_dilation - padding_low) / base_dilation`` in each spatial dimension: offsets
  landing in the padding, in a hole of the base dilation or past a negative padding are skipped (they are outside
  the loop's indexing map, whose constraints say so);
- ``k' = size - 1 - k`` where the window is reversed, else ``k``;
- ``g = o / (output features / feature_group_count)`` with ``C`` the kernel's input features (feature groups);
- ``b' = (o / (output features / batch_group_count)) * output batch + b`` (batch groups: each group of output
  features reads its own slice of the input batch).

Both operands are converted to the accumulation type first, then multiplied and added, each rounded. Floats
narrower than 32 bits (f16, bf16, the 8- and 4-bit floats) accumulate in f32 and are rounded once at the end, as
XLA's elemental emitter upcasts f16 accumulators and XLA:CPU computes bf16 convolutions in f32; integers wrap
around in the result type; pred ors the ands; complex numbers use the ``complex`` dialect's product and sum.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects import complex as cplx
from xdsl.ir import SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, complex_rule, elemental_rule
from xlapy.codegen.elemental_arith import convert
from xlapy.codegen.types import is_complex, is_float, is_narrow_float
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval


def accumulation_type(result: str) -> str:
    """The HLO element type a convolution producing ``result`` sums in."""
    return "f32" if result in ("f16", "bf16") or is_narrow_float(result) else result


def _positions(labels: str, first: str, second: str, spatial_rank: int, name: str) -> list[int]:
    """Where the ``first`` and ``second`` labelled dimensions, then spatial dimensions 0, 1, ... are."""
    spatial = [labels.find(str(d)) for d in range(spatial_rank)]
    if len(labels) != spatial_rank + 2 or labels.count(first) != 1 or labels.count(second) != 1 or -1 in spatial:
        raise UnimplementedError(f"convolution {name}: bad dimension labels '{labels}'")
    return [labels.index(first), labels.index(second), *spatial]


def convolution_map(instr: HloInstruction) -> IndexingMap:
    """From the output's indices and the loop's range variables (window offsets, then the input feature within
    the group) to the input's indices followed by the kernel's; points in the padding or in a hole of the base
    dilation are outside its domain."""
    labels = str(instr.attr("dim_labels", ""))
    lhs_shape, rhs_shape = (o.shape.dimensions for o in instr.operands)
    out_shape = instr.shape.dimensions
    window = tuple(instr.attr("window", ()))
    rank = len(window)
    try:
        lhs_labels, rest = labels.split("_", 1)
        rhs_labels, out_labels = rest.split("->")
    except ValueError:
        raise UnimplementedError(f"convolution {instr.name}: bad dimension labels '{labels}'") from None
    lhs = _positions(lhs_labels, "b", "f", rank, instr.name)
    rhs = _positions(rhs_labels, "o", "i", rank, instr.name)
    out = _positions(out_labels, "b", "f", rank, instr.name)
    batch, feature = affine.dim(out[0]), affine.dim(out[1])
    in_features = rhs_shape[rhs[1]]
    out_features = out_shape[out[1]]
    feature_groups = int(instr.attr("feature_group_count", 1))
    batch_groups = int(instr.attr("batch_group_count", 1))
    channel = affine.sym(rank)

    lhs_exprs: list = [None] * len(lhs_shape)
    rhs_exprs: list = [None] * len(rhs_shape)
    lhs_exprs[lhs[0]] = batch
    if batch_groups > 1:
        group = affine.floordiv(feature, max(1, out_features // batch_groups))
        lhs_exprs[lhs[0]] = affine.add(affine.mul(group, out_shape[out[0]]), batch)
    lhs_exprs[lhs[1]] = channel
    if feature_groups > 1:
        group = affine.floordiv(feature, max(1, out_features // feature_groups))
        lhs_exprs[lhs[1]] = affine.add(affine.mul(group, in_features), channel)
    rhs_exprs[rhs[0]], rhs_exprs[rhs[1]] = feature, channel
    constraints = []
    for i, d in enumerate(window):
        offset = affine.sym(i)
        # The position in the input dilated by base_dilation and padded.
        position = affine.sub(affine.add(affine.mul(affine.dim(out[2 + i]), d.stride),
                                         affine.mul(offset, d.window_dilation)), d.padding_low)
        size = lhs_shape[lhs[2 + i]]
        constraints.append((position, Interval(0, (size - 1) * d.base_dilation)))
        if d.base_dilation > 1:
            constraints.append((affine.mod(position, d.base_dilation), Interval(0, 0)))
            position = affine.floordiv(position, d.base_dilation)
        lhs_exprs[lhs[2 + i]] = position
        rhs_exprs[rhs[2 + i]] = affine.sub(d.size - 1, offset) if d.window_reversal else offset
    ranges = [Variable(Interval(0, d.size - 1)) for d in window] + [Variable(Interval(0, in_features - 1))]
    return IndexingMap.from_exprs([*lhs_exprs, *rhs_exprs], [Variable(Interval(0, n - 1)) for n in out_shape],
                                  ranges, constraints=constraints).simplify()


@elemental_rule("convolution")
@complex_rule("convolution")
def _convolution(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    result = instr.shape.element_type
    operand_types = [o.shape.element_type for o in instr.operands]
    if is_complex(result) and any(t != result for t in operand_types):
        raise UnimplementedError(f"convolution ({instr.name}) of {'/'.join(operand_types)} into {result}")
    accumulate_in = accumulation_type(result)
    zero = em.constant(0, accumulate_in)
    both = convolution_map(instr)
    if both.is_known_empty() or any(v.bounds.is_empty() for v in both.range_vars):
        return convert(em, zero, accumulate_in, result)  # no input feature, or every window offset in the padding
    lhs_rank = len(instr.operands[0].shape.dimensions)
    multiply = (cplx.MulOp if is_complex(result) else arith.MulfOp if is_float(accumulate_in)
                else arith.AndIOp if result == "pred" else arith.MuliOp)
    add = (cplx.AddOp if is_complex(result) else arith.AddfOp if is_float(accumulate_in)
           else arith.OrIOp if result == "pred" else arith.AddiOp)

    def multiply_add(operand_indices: Indices, accumulators: Indices) -> list[SSAValue]:
        lhs = convert(em, em.operand(instr, 0, operand_indices[:lhs_rank]), operand_types[0], accumulate_in)
        rhs = convert(em, em.operand(instr, 1, operand_indices[lhs_rank:]), operand_types[1], accumulate_in)
        product = em.insert(multiply(lhs, rhs)).results[0]
        return [em.insert(add(accumulators[0], product)).results[0]]

    def summed() -> SSAValue:
        return em.loop(indices, both, [zero], multiply_add)[0]

    # Simplification moves a constraint on one output index into its bounds (an output position whose every
    # window offset is in the padding): those bounds are checked here, the loop checks only its constraints.
    in_bounds = None
    for index, variable, size in zip(indices, both.dim_vars, instr.shape.dimensions):
        bounds = variable.bounds
        for limit, predicate, needed in ((bounds.lower, "sge", bounds.lower > 0),
                                         (bounds.upper, "sle", bounds.upper < size - 1)):
            if needed:
                check = em.insert(arith.CmpiOp(index, em.index(limit), predicate)).result
                in_bounds = check if in_bounds is None else em.insert(arith.AndIOp(in_bounds, check)).result
    value = summed() if in_bounds is None else em.if_else(in_bounds, zero.type, summed, lambda: zero)
    return convert(em, value, accumulate_in, result)
