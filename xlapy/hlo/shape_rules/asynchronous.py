"""Shape rules of asynchronous pairs (copy, send and recv, infeed and
outfeed) and of XLA's generic async wrapping of any op."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.shape_rules.helpers import (
    SCALAR_U32,
    TOKEN,
    check_parameters,
    declared_tuple,
    fail,
    operand_count,
    root_shape,
    show,
    tuple_operand,
    tuple_shape,
    without_layout,
)
from xlapy.hlo.shape_rules.registry import SHAPE_RULES, shape_rule
from xlapy.shapes import Shape


@shape_rule("copy-start")
def _copy_start(instr: HloInstruction) -> Shape:
    # -> (destination, source, context)
    operand_count(instr, 1)
    declared = declared_tuple(instr, 2)
    operand = instr.operands[0].shape
    return tuple_shape([operand, operand, *declared.tuple_shapes[2:]])


@shape_rule("copy-done")
def _copy_done(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    return without_layout(tuple_operand(instr, 0, "the copy-start", 2).tuple_shapes[0])


@shape_rule("send")
def _send(instr: HloInstruction) -> Shape:
    # send(data, token) -> (data, u32[] context, token)
    operand_count(instr, 2)
    if not instr.operands[1].shape.is_token:
        fail(f"the second operand of send must be a token, got {show(instr.operands[1].shape)}")
    return tuple_shape([instr.operands[0].shape, SCALAR_U32, TOKEN])


@shape_rule("send-done", "outfeed")
def _token_result(instr: HloInstruction) -> Shape:
    if instr.opcode == "outfeed":
        operand_count(instr, 2)
        if not instr.operands[1].shape.is_token:
            fail(f"the second operand of outfeed must be a token, got {show(instr.operands[1].shape)}")
    else:
        operand_count(instr, 1)
        tuple_operand(instr, 0, "the send", 3)
    return TOKEN


def _token_operand(instr: HloInstruction) -> None:
    operand_count(instr, 1)
    if not instr.operands[0].shape.is_token:
        fail(f"the operand of {instr.opcode} must be a token, got {show(instr.operands[0].shape)}")


@shape_rule("recv")
def _recv(instr: HloInstruction) -> Shape:
    # recv(token) -> (data of the declared shape, u32[] context, token)
    _token_operand(instr)
    declared = declared_tuple(instr, 3)
    return tuple_shape([declared.tuple_shapes[0], SCALAR_U32, TOKEN])


@shape_rule("recv-done")
def _recv_done(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    recv = tuple_operand(instr, 0, "the recv", 3)
    return tuple_shape([recv.tuple_shapes[0], TOKEN])


@shape_rule("infeed")
def _infeed(instr: HloInstruction) -> Shape:
    # infeed(token) -> (data of the declared shape, token)
    _token_operand(instr)
    declared = declared_tuple(instr, 2)
    return tuple_shape([declared.tuple_shapes[0], TOKEN])


def _async_start(instr: HloInstruction) -> Shape:
    # -> ((operands...), result of the wrapped computation, contexts...)
    declared = declared_tuple(instr, 2)
    result = declared.tuple_shapes[1]
    if len(instr.called_computations) == 1:
        wrapped = instr.called_computations[0]
        check_parameters(instr, wrapped, [o.shape for o in instr.operands], "wrapped computation")
        result = root_shape(wrapped)
    return tuple_shape([tuple_shape([o.shape for o in instr.operands]), result, *declared.tuple_shapes[2:]])


def _async_update(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    tuple_operand(instr, 0, "the async start", 2)
    return without_layout(instr.operands[0].shape)


def _async_done(instr: HloInstruction) -> Shape:
    operand_count(instr, 1)
    return without_layout(tuple_operand(instr, 0, "the async start", 2).tuple_shapes[1])


def register_async_wrappings() -> None:
    """Give every `X-start` / `X-update` / `X-done` opcode without a rule of its own the
    rule of XLA's async wrapping of X (the async-start/update/done shapes); called once
    every family has registered its rules."""
    for name in sorted(OPCODES):
        if name in SHAPE_RULES:
            continue
        if name.endswith("-start"):
            shape_rule(name)(_async_start)
        elif name.endswith("-update"):
            shape_rule(name)(_async_update)
        elif name.endswith("-done"):
            shape_rule(name)(_async_done)
