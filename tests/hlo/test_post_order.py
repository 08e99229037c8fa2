"""``HloComputation.post_order`` on computations whose ops have regions that
use the computation's values directly (StableHLO's implicit capture): such a
value comes before the op, as one more operand of it after the real ones
(XLA's conversion to HLO passes captured values as operands the same way)."""

from __future__ import annotations

import re

import pytest

from tools.oracles import require_jax
from xlapy.errors import VerifyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule, parse_module
from xlapy.shapes import Shape

F32 = Shape("f32", (4,))
S32 = Shape("s32", ())


def _param(computation: HloComputation, name: str, number: int, shape: Shape) -> HloInstruction:
    param = HloInstruction(name, "parameter", shape)
    param.parameter_number = number
    return computation.add_instruction(param)


def _op(computation: HloComputation, name: str, opcode: str, operands: list[HloInstruction],
        called: list[HloComputation] | None = None, shape: Shape = F32) -> HloInstruction:
    return computation.add_instruction(HloInstruction(name, opcode, shape, operands, {}, called))


def _branch(module: HloModule, name: str, opcode: str, captured: HloInstruction) -> HloComputation:
    branch = HloComputation(name)
    branch.root = _op(branch, f"{name}.op", opcode, [captured])
    module.add_computation(branch)
    return branch


def _conditional_module() -> tuple[HloModule, dict[str, HloInstruction]]:
    # main: p, i, s = negate(p), c = conditional(i) whose branches use s, r = add(c, p)
    module = HloModule("m")
    main = HloComputation("main")
    module.add_computation(main, entry=True)
    p = _param(main, "p", 0, F32)
    s = _op(main, "s", "negate", [p])
    i = _param(main, "i", 1, S32)
    branches = [_branch(module, "b0", "sine", s), _branch(module, "b1", "cosine", s)]
    c = _op(main, "c", "conditional", [i], branches)
    r = _op(main, "r", "add", [c, p])
    main.root = r
    return module, {"p": p, "s": s, "i": i, "c": c, "r": r}


def _names(order: list[HloInstruction]) -> list[str]:
    return [i.name for i in order]


def test_a_captured_value_comes_before_the_op_using_it() -> None:
    module, _ = _conditional_module()
    # From r: c first (its operand i, then the captured s and s's operand p), then p.
    assert _names(module.entry.post_order()) == ["i", "p", "s", "c", "r"]


def test_a_region_orders_only_its_own_instructions() -> None:
    module, _ = _conditional_module()
    assert _names(module.computation("b0").post_order()) == ["b0.op"]


def test_values_captured_by_nested_regions_count_for_the_outermost_op() -> None:
    # main: p, t = exponential(p), w = while whose body holds a conditional using t.
    module = HloModule("m")
    main = HloComputation("main")
    module.add_computation(main, entry=True)
    p = _param(main, "p", 0, F32)
    t = _op(main, "t", "exponential", [p])
    body = HloComputation("body")
    module.add_computation(body)
    state = _param(body, "state", 0, F32)
    index = _op(body, "index", "constant", [], shape=S32)
    inner = _op(body, "inner", "conditional", [index], [_branch(module, "only", "negate", t)])
    body.root = _op(body, "next", "add", [state, inner])
    condition = HloComputation("condition")
    module.add_computation(condition)
    _param(condition, "value", 0, F32)
    condition.root = _op(condition, "go", "constant", [], shape=Shape("pred", ()))
    main.root = _op(main, "w", "while", [p], [body, condition])
    assert _names(main.post_order()) == ["p", "t", "w"]
    assert _names(body.post_order()) == ["state", "index", "inner", "next"]


def test_a_region_using_its_own_op_is_a_cycle() -> None:
    module, values = _conditional_module()
    # Branch b1 now uses r, which uses c: c would have to come before itself.
    b1 = module.computation("b1")
    b1.root.replace_operand(0, values["r"])
    with pytest.raises(VerifyError, match="computation main has a cycle through"):
        module.entry.post_order()


def test_without_captures_the_order_is_xlas() -> None:
    # XLA prints an unscheduled computation in its post order.
    require_jax()
    from tests.hlo import xla
    text = """HloModule m

ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  unused = f32[4] negate(b)
  c = f32[4] constant({1, 2, 3, 4})
  ROOT sum = f32[4] add(b, a)
}
"""
    printed = xla.xla_reprint(text)
    xla_order = re.findall(r"^  (?:ROOT )?%(\w+) = ", printed, re.MULTILINE)
    assert _names(parse_module(text).entry.post_order()) == xla_order == ["b", "unused", "c", "a", "sum"]
