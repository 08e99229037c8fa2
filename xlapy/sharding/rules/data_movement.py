"""Ops that move data without computing on it: broadcast, reshape,
transpose, slice, pad, concatenate, reverse, dynamic-slice,
dynamic-update-slice, gather and scatter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import gcd, prod

from xlapy.hlo import HloInstruction
from xlapy.sharding.rules.registry import (
    builder,
    depends_only_on_form,
    int_attr,
    ints,
    no_rule,
    operand_dims,
    result_dims,
    rule_for,
)
from xlapy.sharding.sharding_rule import NULL_DIM, FactorType, OpShardingRule

no_rule("iota", "constant")
# Not concatenate (it looks at the ops defining its operands) nor scatter
# (it looks at its body).
depends_only_on_form("broadcast", "stablehlo.broadcast_in_dim", "reshape", "transpose", "slice", "pad", "reverse",
                     "dynamic-slice", "dynamic-update-slice", "gather")


@rule_for("broadcast", "stablehlo.broadcast_in_dim")
def _broadcast(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    (in_dims,), (out_dims,) = operand_dims(instr), result_dims(instr)
    out_to_in = [NULL_DIM] * len(out_dims)
    for in_dim, out_dim in enumerate(ints(instr, "dimensions")):
        out_to_in[out_dim] = in_dim
    rule = builder(instr)
    for out_dim, out_size in enumerate(out_dims):
        in_dim = out_to_in[out_dim]
        if in_dim != NULL_DIM and in_dims[in_dim] == 1 and out_size != 1:
            # A size-1 operand dimension stretched (StableHLO's broadcast_in_dim): its own factor.
            rule.add_factor([in_dim], [NULL_DIM], 1)
            in_dim = NULL_DIM
        rule.add_factor([in_dim], [out_dim], out_size)
    return rule.build()


@rule_for("reshape")
def _reshape(instr: HloInstruction, conservative: bool = False) -> OpShardingRule | None:
    (in_dims,), (out_dims,) = operand_dims(instr), result_dims(instr)
    if prod(in_dims) == 0:
        return None  # nothing to shard, and the factoring below needs positive sizes
    rule = builder(instr)
    _factor_reshape(in_dims, out_dims, lambda i, o, size: rule.add_factor([i], [o], size))
    return rule.build()


def _factor_reshape(in_dims: Sequence[int], out_dims: Sequence[int],
                    add: Callable[[int, int, int], object]) -> None:
    """Split the input and output dimensions into factors, major to minor:
    a factor common to both sides where the running products allow (their
    gcd), else one factor per side until the products meet again."""
    in_rank, out_rank = len(in_dims), len(out_dims)
    in_dim = out_dim = 0
    in_dims_product = out_dims_product = 1  # sizes of the dimensions reached so far
    in_factors = out_factors = 1  # product of the factors added so far
    while in_dim < in_rank or out_dim < out_rank:
        if in_dim < in_rank and in_dims[in_dim] == 1:
            add(in_dim, NULL_DIM, 1)
            in_dim += 1
            continue
        if out_dim < out_rank and out_dims[out_dim] == 1:
            add(NULL_DIM, out_dim, 1)
            out_dim += 1
            continue
        if in_dim < in_rank and in_dims_product == in_factors:
            in_dims_product *= in_dims[in_dim]
        if out_dim < out_rank and out_dims_product == out_factors:
            out_dims_product *= out_dims[out_dim]
        next_in = in_dims_product // in_factors
        next_out = out_dims_product // out_factors
        common = gcd(next_in, next_out)
        if in_factors == out_factors:
            if common > 1:
                add(in_dim, out_dim, common)
                in_factors *= common
                out_factors *= common
            else:
                add(in_dim, NULL_DIM, next_in)
                in_factors *= next_in
                add(NULL_DIM, out_dim, next_out)
                out_factors *= next_out
        elif in_factors < out_factors:
            next_in = _when_diverged(next_in, in_factors, out_factors, common)
            add(in_dim, NULL_DIM, next_in)
            in_factors *= next_in
        else:
            next_out = _when_diverged(next_out, out_factors, in_factors, common)
            add(NULL_DIM, out_dim, next_out)
            out_factors *= next_out
        if in_dim < in_rank and in_dims_product == in_factors:
            in_dim += 1
        if out_dim < out_rank and out_dims_product == out_factors:
            out_dim += 1


def _when_diverged(next_factor: int, smaller: int, larger: int, common: int) -> int:
    """The next factor of the side whose factors are behind (``smaller`` <
    ``larger``), when the two sides have diverged."""
    if larger % smaller == 0 and next_factor % (larger // smaller) == 0:
        return larger // smaller  # catches up with the other side
    if next_factor > common:
        return next_factor // common  # keeps the gcd for the next step
    return next_factor


@rule_for("transpose")
def _transpose(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    (in_dims,) = operand_dims(instr)
    rule = builder(instr)
    for out_dim, in_dim in enumerate(ints(instr, "dimensions")):
        rule.add_factor([in_dim], [out_dim], in_dims[in_dim])
    return rule.build()


@rule_for("slice", "pad")
def _slice_or_pad(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # A sliced or padded dimension can stay sharded if data moves between
    # devices (the start offsets are static); in conservative mode it blocks.
    in_dims, (out_dims,) = operand_dims(instr)[0], result_dims(instr)
    return builder(instr).add_pointwise_with_diff_type_for_mismatch(
        in_dims, out_dims, FactorType.PERMUTATION, mismatch_blocked=conservative).build()


def _before_slice(value: HloInstruction) -> HloInstruction:
    return value.operands[0] if value.opcode == "slice" else value


@rule_for("concatenate")
def _concatenate(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    (concat_dim,) = ints(instr, "dimensions")
    operands = instr.operands

    # Concatenating slices (of any tensors, or of one tensor together with that
    # tensor) only shifts data between devices; anything else needs the
    # concatenated dimension replicated.
    slices = [o.opcode == "slice" for o in operands]
    source = _before_slice(operands[0])
    shifts_only = all(slices) or (any(slices) and all(_before_slice(o) is source for o in operands))

    def factor_type(dim: int) -> FactorType:
        if dim != concat_dim:
            return FactorType.PASS_THROUGH
        return FactorType.PERMUTATION if shifts_only else FactorType.NEED_REPLICATION

    return builder(instr).add_pointwise_if(result_dims(instr)[0], lambda dim: not conservative or dim != concat_dim,
                                           factor_type).build()


@rule_for("reverse")
def _reverse(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    reversed_dims = set(ints(instr, "dimensions"))
    return builder(instr).add_pointwise(
        result_dims(instr)[0],
        lambda dim: FactorType.PERMUTATION if dim in reversed_dims else FactorType.PASS_THROUGH).build()


@rule_for("dynamic-slice")
def _dynamic_slice(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # The start indices are only known at run time: a sliced dimension is
    # replicated and propagation stops there. (The indices get no factor.)
    in_dims, (out_dims,) = operand_dims(instr)[0], result_dims(instr)
    rule = builder(instr)
    for dim, (in_size, out_size) in enumerate(zip(in_dims, out_dims)):
        sliced = in_size != out_size
        rule.add_factor([dim], [dim], in_size, FactorType.NEED_REPLICATION if sliced else FactorType.PASS_THROUGH,
                        blocked=sliced)
    return rule.build()


@rule_for("dynamic-update-slice")
def _dynamic_update_slice(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    operand, update = operand_dims(instr)[:2]
    rule = builder(instr)
    for dim, (operand_size, update_size) in enumerate(zip(operand, update)):
        if operand_size == update_size:
            rule.add_factor([dim, dim], [dim], operand_size)
        else:
            # Each device updates its own part of the operand with its local
            # indices: the operand dimension passes through, the (replicated)
            # update dimension is a factor of its own.
            rule.add_factor([dim, NULL_DIM], [dim], operand_size)
            rule.add_factor([NULL_DIM, dim], [NULL_DIM], update_size, FactorType.NEED_REPLICATION)
    return rule.build()


AddFactor = Callable[[int, int, int, int, FactorType, bool], None]


def _gather_scatter_factors(is_scatter: bool, summed: bool, input_dims: Sequence[int], slices_dims: Sequence[int],
                            indices_dims: Sequence[int], index_vector_dim: int, offset_dims: Sequence[int],
                            collapsed_dims: Sequence[int], input_batching_dims: Sequence[int],
                            indices_batching_dims: Sequence[int], add: AddFactor) -> None:
    """The factors of a gather (slices = its result) or scatter (slices = its
    updates), each given to ``add(input_dim, indices_dim, slices_dim, size,
    type, blocked)``."""
    input_dim = batch_position = 0
    for slices_dim, slices_size in enumerate(slices_dims):
        if slices_dim in offset_dims:
            # The next input dimension that is neither collapsed nor a batching dimension.
            while input_dim in collapsed_dims or input_dim in input_batching_dims:
                input_dim += 1
            input_size = input_dims[input_dim]
            if input_size == slices_size:
                add(input_dim, NULL_DIM, slices_dim, input_size, FactorType.PASS_THROUGH, False)
            elif is_scatter:
                add(input_dim, NULL_DIM, NULL_DIM, input_size, FactorType.NEED_REPLICATION, False)
                add(NULL_DIM, NULL_DIM, slices_dim, slices_size, FactorType.NEED_REPLICATION, False)
            elif slices_size == 1:
                # The input dimension can stay sharded if the results are all-reduced.
                add(input_dim, NULL_DIM, NULL_DIM, input_size, FactorType.REDUCTION, False)
                add(NULL_DIM, NULL_DIM, slices_dim, slices_size, FactorType.NEED_REPLICATION, False)
            else:
                add(input_dim, NULL_DIM, slices_dim, input_size, FactorType.NEED_REPLICATION, True)
            input_dim += 1
        else:
            # A batch dimension of the slices: which one it is in the indices.
            indices_dim = batch_position if batch_position < index_vector_dim else batch_position + 1
            explicit = indices_dim in indices_batching_dims
            input_batch_dim = (input_batching_dims[list(indices_batching_dims).index(indices_dim)] if explicit
                               else NULL_DIM)
            # An implicit batch dimension of a scatter is combined by its body:
            # a reduction when the body is one, otherwise it must be replicated.
            if is_scatter and not explicit:
                factor_type = FactorType.REDUCTION if summed else FactorType.NEED_REPLICATION
            else:
                factor_type = FactorType.PASS_THROUGH
            add(input_batch_dim, indices_dim, slices_dim, slices_size, factor_type, False)
            batch_position += 1
    for collapsed in collapsed_dims:
        # A gather keeps a collapsed dimension sharded by all-reducing its
        # results (a size-1 one needs replication instead).
        if is_scatter:
            factor_type = FactorType.PASS_THROUGH
        else:
            factor_type = FactorType.REDUCTION if input_dims[collapsed] != 1 else FactorType.NEED_REPLICATION
        add(collapsed, NULL_DIM, NULL_DIM, input_dims[collapsed], factor_type, False)
    if index_vector_dim < len(indices_dims):
        add(NULL_DIM, index_vector_dim, NULL_DIM, indices_dims[index_vector_dim], FactorType.NEED_REPLICATION, False)


@rule_for("gather")
def _gather(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    input_dims, indices_dims = operand_dims(instr)
    rule = builder(instr)

    def add(input_dim: int, indices_dim: int, slices_dim: int, size: int, factor_type: FactorType,
            blocked: bool) -> None:
        rule.add_factor([input_dim, indices_dim], [slices_dim], size, factor_type, blocked)

    _gather_scatter_factors(False, False, input_dims, result_dims(instr)[0], indices_dims,
                            int_attr(instr, "index_vector_dim"), ints(instr, "offset_dims", ()),
                            ints(instr, "collapsed_slice_dims", ()), ints(instr, "operand_batching_dims", ()),
                            ints(instr, "start_indices_batching_dims", ()), add)
    return rule.build()


# Bodies of a scatter that combine colliding updates associatively, so that a
# sharded update batch can be combined by an all-reduce.
_REDUCING_BODY_OPS = frozenset({"add", "multiply", "maximum", "minimum"})


def _combines_by_reduction(instr: HloInstruction, count: int) -> bool:
    """Whether each result of the scatter's body is one reducing op of the
    current value and the update (Shardy's test for a scatter-reduce)."""
    if not instr.called_computations:
        return False
    body = instr.called_computations[0]
    params = body.parameters
    root = body.root
    returned = list(root.operands) if root is not None and root.opcode == "tuple" else [root]
    if len(returned) != count or len(body.instructions) != len(params) + count + (count > 1):
        return False
    return all(value is not None and value.opcode in _REDUCING_BODY_OPS
               and {id(o) for o in value.operands} == {id(params[i]), id(params[i + count])}
               for i, value in enumerate(returned))


@rule_for("scatter")
def _scatter(instr: HloInstruction, conservative: bool = False) -> OpShardingRule:
    # Operands: inputs..., indices, updates...; results: one per input.
    dims = operand_dims(instr)
    count = (len(dims) - 1) // 2
    rule = builder(instr)

    def add(input_dim: int, indices_dim: int, update_dim: int, size: int, factor_type: FactorType,
            blocked: bool) -> None:
        rule.add_factor([input_dim] * count + [indices_dim] + [update_dim] * count, [input_dim] * count, size,
                        factor_type, blocked)

    _gather_scatter_factors(True, _combines_by_reduction(instr, count), dims[0], dims[count + 1], dims[count],
                            int_attr(instr, "index_vector_dim"),
                            ints(instr, "update_window_dims", ()), ints(instr, "inserted_window_dims", ()),
                            ints(instr, "input_batching_dims", ()), ints(instr, "scatter_indices_batching_dims", ()),
                            add)
    return rule.build()
