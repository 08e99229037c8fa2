# ruff: noqa: E501  (MLIR lines are longer than the code's limit)
"""A model of repeated layers: ops of the same form (and so the same rule)
see different shardings from layer to layer (sharding constraints, some
prioritized, some open or closed), and different directions from stage to
stage of the priority strategies. Propagation works each combination out
once and reuses it; every strategy must still give what Shardy's passes
give (run by jaxlib in a child process). Needs jax; only ``XLAPY_NO_JAX=1``
skips the module (``shardy_oracle.py``)."""

from __future__ import annotations

import pytest

from tests.sharding.shardy_oracle import canonical, require_shardy, shardy_output
from tools.shardy import PASSES, Outcome, run_isolated
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding import propagate

require_shardy()

T = "tensor<16x8xf32>"
CONSTRAINTS = ('[{"y"}, {?}]', '[{?}, {"x"}p1]', '[{}, {?}]', '[{?}, {?}]', '[{"x", "y"}, {}]', '[{?}, {"y"}p2]')


def layers(count: int) -> str:
    lines, x = [], "%arg0"
    for layer in range(count):
        def name(what: str, layer: int = layer) -> str:
            return f"%{what}{layer}"
        lines += [
            f"{name('d')} = stablehlo.dot_general {x}, %arg1, contracting_dims = [1] x [0] : ({T}, tensor<8x8xf32>) -> {T}",
            f"{name('t')} = stablehlo.tanh {name('d')} : {T}",
            f"{name('c')} = stablehlo.constant dense<5.000000e-01> : tensor<f32>",
            f"{name('b')} = stablehlo.broadcast_in_dim {name('c')}, dims = [] : (tensor<f32>) -> {T}",
            f"{name('m')} = stablehlo.multiply {name('t')}, {name('b')} : {T}",
            f"{name('y')} = stablehlo.add {name('m')}, {x} : {T}",
        ]
        x = name("y")
        if layer % 3 == 1:
            sharding = CONSTRAINTS[layer // 3 % len(CONSTRAINTS)]
            lines.append(f"{name('s')} = sdy.sharding_constraint {x} <@mesh, {sharding}> : {T}")
            x = name("s")
        if layer % 4 == 3:
            lines += [
                f"{name('r')} = stablehlo.reshape {x} : ({T}) -> tensor<4x4x8xf32>",
                f"{name('p')} = stablehlo.transpose {name('r')}, dims = [1, 0, 2] : (tensor<4x4x8xf32>) -> tensor<4x4x8xf32>",
                f"{name('q')} = stablehlo.reshape {name('p')} : (tensor<4x4x8xf32>) -> {T}",
                f"{name('e')} = stablehlo.dot_general {name('q')}, %arg2, contracting_dims = [1] x [0] : ({T}, tensor<8x8xf32>) -> {T}",
            ]
            x = name("e")
    body = "\n".join("    " + line for line in lines)
    return f"""module {{
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}, {{?}}]>}}, %arg1: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{"y", ?}}p1]>}}, %arg2: tensor<8x8xf32>) -> {T} {{
{body}
    return {x} : {T}
  }}
}}
"""


@pytest.fixture(scope="module")
def shardy_outcomes() -> dict[str, Outcome]:
    text = layers(24)
    return dict(zip(PASSES, run_isolated([(text, strategy) for strategy in PASSES]), strict=True))


@pytest.mark.parametrize("strategy", list(PASSES))
def test_repeated_layers_propagate_as_in_shardy(strategy: str, shardy_outcomes: dict[str, Outcome]) -> None:
    reference = shardy_output(shardy_outcomes[strategy], None)  # Shardy handles the program
    got = print_module(propagate(parse_module(layers(24)), strategy))
    assert canonical(got) == canonical(reference)
