"""Shape rules of Shardy's ops that carry regions or results of their own
(imported from StableHLO under their MLIR names). The annotations that only
mark a value (sharding constraint, reshard, ...) share copy's rule in
``data_movement``."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.mlir_structure import region_results
from xlapy.hlo.shape_rules.helpers import (
    bool_attr,
    callees,
    check_parameters,
    fail,
    one_or_tuple,
    operand_count,
    parameter_shapes,
    show,
    tuple_shape,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import OP_CHECKS, shape_rule
from xlapy.shapes import Shape


@shape_rule("sdy.sharding_group")
def _sdy_sharding_group(instr: HloInstruction) -> Shape:
    # Shardy's form has no result (an empty tuple); the compiler API's form returns the operand.
    operand_count(instr, 1)
    return without_layout(instr.operands[0].shape) if bool_attr(instr, "has_result") else tuple_shape([])


@shape_rule("sdy.named_computation")
def _sdy_named_computation(instr: HloInstruction) -> Shape:
    # A call of its region, whose results are the op's.
    (body,) = callees(instr, 1, "the body")
    check_parameters(instr, body, [o.shape for o in instr.operands], "body")
    return one_or_tuple([v.shape for v in region_results(body)] or [tuple_shape([])])


@shape_rule("sdy.manual_computation")
def _sdy_manual_computation(instr: HloInstruction) -> Shape:
    # The body sees each operand's local shard and returns each result's: the
    # counts and element types are checked here, the sizes against the mesh
    # and the shardings by the sharding verifier (Shardy's invariants).
    (body,) = callees(instr, 1, "the body")
    params = parameter_shapes(body)
    if len(params) != len(instr.operands):
        fail(f"body {body.name} of sdy.manual_computation must take {len(instr.operands)} parameters, "
              f"takes {len(params)}")
    for number, (param, operand) in enumerate(zip(params, instr.operands)):
        if not (param.is_array and operand.shape.is_array and param.element_type == operand.shape.element_type
                and param.rank == operand.shape.rank):
            fail(f"parameter {number} of body {body.name} must be a shard of {show(operand.shape)}, "
                  f"got {show(param)}")
    declared = instr.shape
    results = list(declared.tuple_shapes) if declared.is_tuple else [declared]
    returned = [v.shape for v in region_results(body)]
    if len(returned) != len(results) or not all(
            r.is_array and d.is_array and r.element_type == d.element_type and r.rank == d.rank
            for r, d in zip(returned, results)):
        fail(f"body {body.name} of sdy.manual_computation must return shards of ({', '.join(map(show, results))}), "
              f"returns ({', '.join(map(show, returned))})")
    _check_manual_shardings(instr)
    return without_layout(declared)


def _check_manual_shardings(instr: HloInstruction) -> None:
    check = OP_CHECKS.get(instr.opcode)
    if check is not None:
        check(instr)
