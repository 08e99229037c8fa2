"""Shape rules of ops that call computations: while, conditional, call and fusion."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction, while_condition_and_body
from xlapy.hlo.shape_rules.helpers import (
    SCALAR_PRED,
    SCALAR_S32,
    at_least,
    callees,
    check_parameters,
    fail,
    operand_count,
    root_shape,
    same_shape,
    show,
    without_layout,
    word_attr,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


@shape_rule("while")
def _while(instr: HloInstruction) -> Shape:
    # One state (usually a tuple): the condition's and body's one parameter, the body's result.
    callees(instr, 2, "body, condition")
    condition, body = while_condition_and_body(instr)
    operand_count(instr, 1)
    state = instr.operands[0].shape
    check_parameters(instr, body, [state], "body")
    check_parameters(instr, condition, [state], "condition")
    if not same_shape(root_shape(body), state):
        fail(f"body {body.name} of while must return the loop state {show(state)}, "
             f"returns {show(root_shape(body))}")
    if not same_shape(root_shape(condition), SCALAR_PRED):
        fail(f"condition {condition.name} of while must return pred[], returns {show(root_shape(condition))}")
    return without_layout(state)


@shape_rule("conditional")
def _conditional(instr: HloInstruction) -> Shape:
    # conditional(index, operand of branch 0, operand of branch 1, ...); a pred index picks true/false.
    at_least(instr, 1)
    index = instr.operands[0].shape
    branches = instr.called_computations
    if not branches:
        fail("conditional needs at least one branch computation")
    if same_shape(index, SCALAR_PRED):
        if len(branches) != 2:
            fail(f"a conditional with a pred[] branch index needs 2 branches, got {len(branches)}")
    elif not same_shape(index, SCALAR_S32):
        fail(f"the branch index of conditional must be pred[] or s32[], got {show(index)}")
    if len(instr.operands) - 1 != len(branches):
        fail(f"conditional has {len(branches)} branches, so it takes {len(branches) + 1} operands, "
             f"got {len(instr.operands)}")
    roots = []
    for i, branch in enumerate(branches):
        check_parameters(instr, branch, [instr.operands[i + 1].shape], f"branch {i}")
        roots.append(root_shape(branch))
        if not same_shape(roots[-1], roots[0]):
            fail(f"branches of conditional must return the same shape, {branches[0].name} returns "
                 f"{show(roots[0])} and {branch.name} returns {show(roots[-1])}")
    return without_layout(roots[0])


@shape_rule("call")
def _call(instr: HloInstruction) -> Shape:
    (computation,) = callees(instr, 1, "to_apply")
    check_parameters(instr, computation, [o.shape for o in instr.operands], "to_apply computation")
    return without_layout(root_shape(computation))


_FUSION_KINDS = {"kLoop", "kInput", "kOutput", "kCustom"}


@shape_rule("fusion")
def _fusion(instr: HloInstruction) -> Shape:
    kind = word_attr(instr, "kind", "kLoop")
    if kind not in _FUSION_KINDS:
        fail(f"fusion kind must be one of {', '.join(sorted(_FUSION_KINDS))}, got {kind}")
    (computation,) = callees(instr, 1, "calls")
    check_parameters(instr, computation, [o.shape for o in instr.operands], "fused computation")
    return without_layout(root_shape(computation))
