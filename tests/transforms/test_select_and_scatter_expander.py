"""The select-and-scatter expander (XLA's ``SelectAndScatterExpander``,
``xla/service/select_and_scatter_expander.cc``): the reduce-window and scatter
it builds, and the values against the interpreter's select-and-scatter on
random windows (strides, padding, ties) and on JAX's max-pooling gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter.evaluator import evaluate
from xlapy.transforms.scatter_expander import ScatterExpander
from xlapy.transforms.select_and_scatter_expander import SelectAndScatterExpander


def _module(operand: str, source: str, window: str, direction: str = "GE", element_type: str = "f32") -> str:
    return f"""
HloModule m

select {{
  a = {element_type}[] parameter(0)
  b = {element_type}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={direction}
}}

add {{
  a = {element_type}[] parameter(0)
  b = {element_type}[] parameter(1)
  ROOT s = {element_type}[] add(a, b)
}}

ENTRY main {{
  operand = {operand} parameter(0)
  source = {source} parameter(1)
  init = {element_type}[] constant(0)
  ROOT r = {operand} select-and-scatter(operand, source, init), window={{{window}}}, select=select, scatter=add
}}
"""


POOL = _module("f32[4,6]", "f32[2,3]", "size=2x2 stride=2x2")


def _expanded(text: str) -> Any:
    module = parse_module(text)
    SelectAndScatterExpander().run(module)
    verify(module)
    return module


def test_select_and_scatter_becomes_a_reduce_window_and_a_scatter(tmp_path):
    filecheck(_expanded(POOL).to_text(), """
        CHECK:      %select.reduce_window (operand_lhs: f32[], iota_lhs: s32[], iota_lhs.1: s32[],
        CHECK-SAME: operand_rhs: f32[], iota_rhs: s32[], iota_rhs.1: s32[]) -> (f32[], s32[], s32[])
        CHECK-DAG:  %[[SELECTED:.*]] = pred[] compare(%operand_lhs, %operand_rhs), direction=GE
        CHECK-DAG:  %[[NEG:.*]] = s32[] constant(-1)
        CHECK-DAG:  %[[LHS_REAL:.*]] = pred[] compare(%iota_lhs, %[[NEG]]), direction=NE
        CHECK-DAG:  %[[BOTH:.*]] = pred[] and(%[[SELECTED]], %[[LHS_REAL]])
        CHECK-DAG:  %[[RHS_REAL:.*]] = pred[] compare(%iota_rhs, %[[NEG]]), direction=NE
        CHECK-DAG:  %[[RHS_PAD:.*]] = pred[] not(%[[RHS_REAL]])
        CHECK:      %[[KEEP:.*]] = pred[] or(%[[BOTH]], %[[RHS_PAD]])
        CHECK:      select(%[[KEEP]], %operand_lhs, %operand_rhs)
        CHECK:      ENTRY
        CHECK-DAG:  f32[4,6]{1,0} broadcast(%init), dimensions={}
        CHECK-DAG:  s32[4,6]{1,0} iota(), iota_dimension=0
        CHECK-DAG:  s32[4,6]{1,0} iota(), iota_dimension=1
        CHECK:      (f32[2,3]{1,0}, s32[2,3]{1,0}, s32[2,3]{1,0}) reduce-window({{.*}}), window={size=2x2 stride=2x2},
        CHECK-SAME: to_apply=%select.reduce_window
        CHECK:      s32[2,3,2]{2,1,0} concatenate({{.*}}), dimensions={2}
        CHECK:      ROOT {{.*}} scatter({{.*}}), update_window_dims={}, inserted_window_dims={0,1},
        CHECK-SAME: scatter_dims_to_operand_dims={0,1}, index_vector_dim=2, to_apply=%add
    """, tmp_path)


def _assert_same_values(text: str, arguments: list[Any]) -> None:
    original = parse_module(text)
    verify(original)
    expected = evaluate(original, *arguments)
    expanded = _expanded(text)
    assert not any(i.opcode == "select-and-scatter" for i in expanded.instructions)
    assert_same(evaluate(expanded, *arguments), expected, context=expanded.to_text())
    # And once the scatter is a loop too, as XLA:CPU runs both.
    ScatterExpander().run(expanded)
    verify(expanded)
    assert_same(evaluate(expanded, *arguments), expected, context=expanded.to_text())


@st.composite
def select_and_scatters(draw: Any) -> tuple[str, list[Any]]:
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 5)) for _ in range(rank)]
    window, source = [], []
    for d in range(rank):
        size, stride = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        low, high = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        padded = dims[d] + low + high
        if padded < size:
            high += size - padded
            padded = size
        window.append((size, stride, low, high))
        source.append((padded - size) // stride + 1)
    text_window = ("size=" + "x".join(str(w[0]) for w in window) + " stride=" + "x".join(str(w[1]) for w in window)
                   + " pad=" + "x".join(f"{w[2]}_{w[3]}" for w in window))
    element_type = draw(st.sampled_from(["f32", "s32"]))
    direction = draw(st.sampled_from(["GE", "GT", "LE"]))
    text = _module(f"{element_type}[{','.join(map(str, dims))}]", f"{element_type}[{','.join(map(str, source))}]",
                   text_window, direction, element_type)
    random = np.random.default_rng(draw(st.integers(0, 2**31)))
    if element_type == "s32":  # few values: ties between window elements
        arguments = [random.integers(0, 3, dims).astype(np.int32), random.integers(-5, 6, source).astype(np.int32)]
    else:
        arguments = [random.standard_normal(dims).astype(np.float32), random.standard_normal(source).astype(np.float32)]
    return text, arguments


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(select_and_scatters())
def test_expanded_select_and_scatters_compute_what_select_and_scatter_computes(case: tuple[str, list[Any]]) -> None:
    _assert_same_values(*case)


def test_jax_max_pooling_gradient():
    import jax
    import jax.numpy as jnp
    from jax import lax

    from xlapy.frontends.jax import from_jax

    def pool_gradient(x: Any) -> Any:
        pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").sum()  # noqa: E731
        return jax.grad(pool)(x)

    x = np.random.default_rng(0).standard_normal((2, 5, 6, 3)).astype(np.float32)
    module = from_jax(pool_gradient, x)
    assert any(i.opcode == "select-and-scatter" for i in module.instructions)
    _assert_same_values(module.to_text(), [x])
