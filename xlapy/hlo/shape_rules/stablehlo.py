"""Shape rules of StableHLO's forms of ops HLO has too (``xlapy.hlo.stablehlo_forms``):
while, case and if, optimization_barrier, broadcast_in_dim, all_to_all,
convert and rng, as the StableHLO specification defines them."""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.mlir_structure import region_results
from xlapy.hlo.shape_rules.collectives import collective_arrays, replica_group_size
from xlapy.hlo.shape_rules.data_movement import broadcast_shape
from xlapy.hlo.shape_rules.helpers import (
    SCALAR_PRED,
    SCALAR_S32,
    array_operand,
    array_shape,
    callees,
    check_parameters,
    declared_array,
    fail,
    int_attr,
    one_or_tuple,
    operand_count,
    same_shape,
    show,
    tuple_shape,
)
from xlapy.hlo.shape_rules.random import rng_parameter_type
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
    return broadcast_shape(instr, stretches=True)


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
    element_type = rng_parameter_type(instr)
    return array_shape(element_type, declared.dimensions, declared.dynamic_dimensions)
