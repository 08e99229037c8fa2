"""Shape rules of StableHLO's forms of ops HLO has too (``xlapy.hlo.stablehlo_forms``):
while, case and if, optimization_barrier, broadcast_in_dim, all_to_all,
convert and rng, as the StableHLO specification defines them."""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.mlir_structure import region_results
from xlapy.hlo.shape_rules.collectives import collective_arrays, replica_group_size
from xlapy.hlo.shape_rules.helpers import (
    FLOAT,
    SCALAR_PRED,
    SCALAR_S32,
    array_operand,
    array_shape,
    braces,
    callees,
    check_dimension_numbers,
    check_parameters,
    declared_array,
    fail,
    int_attr,
    ints_attr,
    one_or_tuple,
    operand_count,
    require_kind,
    same_shape,
    scalar_operand,
    show,
    tuple_shape,
    word_attr,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


def _shapes(values: list[HloInstruction]) -> str:
    return f"({', '.join(show(v.shape) for v in values)})"


def _returns(instr: HloInstruction, region: HloComputation, role: str, expected: list[Shape]) -> None:
    returned = region_results(region)
    if len(returned) != len(expected) or not all(same_shape(v.shape, s) for v, s in zip(returned, expected)):
        fail(f"{role} {region.name} of {instr.opcode} must return ({', '.join(map(show, expected))}), "
             f"returns {_shapes(returned)}")


@shape_rule("stablehlo.while")
def _while(instr: HloInstruction) -> Shape:
    # One operand, condition parameter, body parameter and body result per loop value.
    condition, body = callees(instr, 2, "condition, body")
    states = [o.shape for o in instr.operands]
    check_parameters(instr, body, states, "body")
    check_parameters(instr, condition, states, "condition")
    _returns(instr, body, "body", states)
    _returns(instr, condition, "condition", [SCALAR_PRED])
    return one_or_tuple(states) if states else tuple_shape([])


@shape_rule("stablehlo.case", "stablehlo.if")
def _case(instr: HloInstruction) -> Shape:
    # The branch index is the only operand (s32[] for case, pred[] for if);
    # branches take no parameters and return the op's results.
    operand_count(instr, 1)
    index = instr.operands[0].shape
    branches = instr.called_computations
    if instr.opcode == "stablehlo.if":
        branches = callees(instr, 2, "true branch, false branch")
        if not same_shape(index, SCALAR_PRED):
            fail(f"the condition of stablehlo.if must be pred[], got {show(index)}")
    elif not branches:
        fail("stablehlo.case needs at least one branch")
    elif not same_shape(index, SCALAR_S32):
        fail(f"the branch index of stablehlo.case must be s32[], got {show(index)}")
    results = [v.shape for v in region_results(branches[0])]
    for i, branch in enumerate(branches):
        check_parameters(instr, branch, [], f"branch {i}")
        _returns(instr, branch, f"branch {i}", results)
    return one_or_tuple(results) if results else tuple_shape([])


@shape_rule("stablehlo.optimization_barrier")
def _optimization_barrier(instr: HloInstruction) -> Shape:
    # Each operand passes through as one result.
    shapes = [o.shape for o in instr.operands]
    return one_or_tuple(shapes) if shapes else tuple_shape([])


@shape_rule("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(instr: HloInstruction) -> Shape:
    # HLO's broadcast, except that an operand dimension of size 1 may map to a larger one.
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    declared = declared_array(instr)
    dims = ints_attr(instr, "dimensions")
    if len(dims) != operand.rank:
        fail(f"dimensions={braces(dims)} of stablehlo.broadcast_in_dim must name one result dimension for each of "
             f"the {operand.rank} operand dimensions")
    check_dimension_numbers(instr, "dimensions", dims, declared.rank, "the result")
    dynamic = list(declared.dynamic_dimensions)
    for i, d in enumerate(dims):
        if declared.dimensions[d] != operand.dimensions[i] and operand.dimensions[i] != 1:
            fail(f"stablehlo.broadcast_in_dim maps operand dimension {i} (size {operand.dimensions[i]}) to result "
                 f"dimension {d} (size {declared.dimensions[d]}) of {show(declared)}; the sizes must be equal, or "
                 "the operand's 1")
        dynamic[d] = operand.dynamic_dimensions[i] and declared.dimensions[d] == operand.dimensions[i]
    return array_shape(operand.element_type, declared.dimensions, dynamic)


@shape_rule("stablehlo.all_to_all")
def _all_to_all(instr: HloInstruction) -> Shape:
    # Each operand is split in split_count blocks along split_dimension, and
    # the blocks received are concatenated along concat_dimension.
    shapes = collective_arrays(instr)
    split, concat, count = (int_attr(instr, name) for name in ("split_dimension", "concat_dimension", "split_count"))
    if count <= 0:
        fail(f"split_count={count} of stablehlo.all_to_all must be positive")
    group = replica_group_size(instr)
    if group and group != count:
        fail(f"split_count={count} of stablehlo.all_to_all must be the size {group} of its replica groups")
    results = []
    for shape in shapes:
        for name, d in (("split_dimension", split), ("concat_dimension", concat)):
            if not 0 <= d < shape.rank:
                fail(f"{name}={d} of stablehlo.all_to_all is out of range for {show(shape)}")
        if shape.dimensions[split] % count:
            fail(f"dimension {split} of {show(shape)} must be divisible by split_count={count} of "
                 "stablehlo.all_to_all")
        dims = list(shape.dimensions)
        dims[split] //= count
        dims[concat] *= count
        results.append(array_shape(shape.element_type, dims))
    return one_or_tuple(results)


@shape_rule("stablehlo.convert")
def _convert(instr: HloInstruction) -> Shape:
    # Any element type to any other; from complex to real numbers, the real part.
    operand_count(instr, 1)
    operand = array_operand(instr, 0)
    return array_shape(declared_array(instr).element_type, operand.dimensions, operand.dynamic_dimensions)


@shape_rule("stablehlo.rng")
def _rng(instr: HloInstruction) -> Shape:
    # rng(a, b, shape): HLO's rng, with the result's dimensions as a rank-1 integer operand.
    operand_count(instr, 3)
    declared = declared_array(instr)
    sizes = array_operand(instr, 2, "the shape operand")
    if sizes.rank != 1 or not sizes.type.is_integral or sizes.dimensions[0] != declared.rank:
        fail(f"the shape operand of stablehlo.rng must hold one integer per result dimension, got {show(sizes)} "
             f"for {show(instr.shape)}")
    a, b = scalar_operand(instr, 0, "the first parameter"), scalar_operand(instr, 1, "the second parameter")
    if a.element_type != b.element_type:
        fail(f"parameters of stablehlo.rng must have one element type, got {show(a)} and {show(b)}")
    distribution = word_attr(instr, "distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        fail(f"stablehlo.rng distribution must be rng_uniform or rng_normal, got {distribution}")
    if distribution == "rng_normal":
        require_kind(instr, a, FLOAT, "parameters for rng_normal")
    return array_shape(a.element_type, declared.dimensions, declared.dynamic_dimensions)
