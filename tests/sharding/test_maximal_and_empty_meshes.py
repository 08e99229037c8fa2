# ruff: noqa: E501  (MLIR lines are longer than the code's limit)
"""Shardings on maximal meshes (``<[], device_ids=[0]>``, a rank-0 sharding
for a tensor of any rank), on the empty mesh ``<[]>``, and on different
meshes side by side, propagated by xlapy and by Shardy itself (jaxlib's
passes, in child processes): the printed modules must be the same.

Shardy leaves an op alone when its shardings are on different meshes or all
on a maximal mesh (an empty mesh goes with any other). A ``sdy.data_flow_edge``
op on a value that is not a result or region argument of a data-flow op
passes Shardy's verifier but crashes its propagation; xlapy rejects it.
Needs jax; only ``XLAPY_NO_JAX=1`` skips the module (``shardy_oracle.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sharding.shardy_oracle import canonical, require_shardy, shardy_output
from tools.shardy import Outcome, run_isolated
from xlapy.cli import main
from xlapy.errors import VerifyError
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding import propagate

require_shardy()

STRATEGIES = ("basic", "aggressive", "op-priority", "user-priority", "pipeline")

MESHES = """sdy.mesh @mesh = <["a"=4]>
sdy.mesh @maximal = <[], device_ids=[0]>
sdy.mesh @empty = <[]>
"""

PROGRAMS = {
    # A maximal result sharding next to an argument on a real mesh.
    "maximal_result": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) {
  %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}""",
    # Only a maximal sharding: nothing to propagate.
    "maximal_only": """
func.func @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) {
  %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}""",
    "maximal_op": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x4xf32> {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@maximal, []>]>} : tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}""",
    "maximal_and_mesh_operands": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) -> tensor<8x4xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x4xf32>
  %1 = stablehlo.negate %arg1 : tensor<8x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}""",
    "maximal_in_sharding_group": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) -> tensor<8x4xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
  %1 = stablehlo.negate %arg1 : tensor<8x4xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x4xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}""",
    "maximal_group_with_unsharded": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}, %arg1: tensor<8x4xf32>) -> tensor<8x4xf32> {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x4xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x4xf32>
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}""",
    "maximal_constraint_and_reshard": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x4xf32> {
  %0 = sdy.sharding_constraint %arg0 <@maximal, []> : tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  %2 = sdy.reshard %1 <@maximal, []> : tensor<8x4xf32>
  %3 = stablehlo.negate %2 : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}""",
    "maximal_around_manual_computation": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) -> tensor<8x4xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<2x4xf32>) {
    %1 = stablehlo.negate %arg1 : tensor<2x4xf32>
    sdy.return %1 : tensor<2x4xf32>
  } : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@maximal, []>]>} : tensor<8x4xf32>
  %3 = stablehlo.add %2, %arg0 : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}""",
    "maximal_scalar_and_dot": """
func.func @main(%arg0: tensor<f32> {sdy.sharding = #sdy.sharding<@maximal, []>}, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> (tensor<8x4xf32>, tensor<f32>) {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
  %1 = stablehlo.add %0, %arg1 : tensor<8x4xf32>
  %2 = stablehlo.dot_general %arg1, %arg1, contracting_dims = [0, 1] x [0, 1] {sdy.sharding = #sdy.sharding_per_value<[<@maximal, []>]>} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  return %1, %2 : tensor<8x4xf32>, tensor<f32>
}""",
    "empty_mesh_with_maximal": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@empty, [{?}, {}]>}, %arg1: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@empty, [{}, {}]>}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x4xf32>
  %1 = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{}, {?}]>]>} : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}""",
    "empty_mesh_op": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x4xf32> {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{?}, {?}]>]>} : tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}""",
    # Sub-axes, priorities, replicated axes, an empty mesh, a barrier, a
    # constant and a maximal result together.
    "shardings_everywhere": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)2, ?}p0, {}], replicated={"a":(2)2}>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>, jax.result_info = "out"}) {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{?}, {?}]>]>} : tensor<8x4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD : tensor<8x4xf32>
  %3 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %5 = stablehlo.add %2, %4 : tensor<8x4xf32>
  return %5 : tensor<8x4xf32>
}""",
}

CASES = [(name, strategy) for name in PROGRAMS for strategy in STRATEGIES]


@pytest.fixture(scope="module")
def shardy_outcomes() -> dict[tuple[str, str], Outcome]:
    outcomes = run_isolated([(MESHES + PROGRAMS[name], strategy) for name, strategy in CASES])
    return dict(zip(CASES, outcomes, strict=True))


@pytest.mark.parametrize("name, strategy", CASES)
def test_propagates_as_shardy_does(name: str, strategy: str, shardy_outcomes: dict[tuple[str, str], Outcome]) -> None:
    expected = shardy_output(shardy_outcomes[(name, strategy)], None)  # Shardy handles every one of them
    text = MESHES + PROGRAMS[name]
    assert canonical(print_module(propagate(parse_module(text), strategy=strategy))) == canonical(expected)


# A data-flow edge op on a value no data-flow op owns: on an op result, on a
# function argument.
STRAY_EDGES = {
    "after_op": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x4xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}""",
    "after_argument": """
func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x4xf32> {
  %0 = sdy.data_flow_edge %arg0 sharding=<@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}""",
}


@pytest.mark.parametrize("name", STRAY_EDGES)
def test_a_data_flow_edge_without_owner_is_rejected(name: str) -> None:
    text = MESHES + STRAY_EDGES[name]
    # Shardy accepts the module but cannot propagate it: it dereferences the
    # owner the edge does not have.
    outcomes = run_isolated([(text, "basic"), (text, "pipeline")])
    assert [(o.output, (o.failure or "").split("\n")[0]) for o in outcomes] == [(None, "crashed: SIGSEGV")] * 2
    module = parse_module(text)
    for strategy in STRATEGIES:
        with pytest.raises(VerifyError, match=r"sdy\.data_flow_edge %\d+: its input .* is not a result or region "
                                              r"argument of a data-flow op"):
            propagate(module, strategy=strategy)


def test_cli_reports_a_data_flow_edge_without_owner_on_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(MESHES + STRAY_EDGES["after_op"])
    code = main(["sdy", "propagate", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == ("xlapy: error: sdy.data_flow_edge %1: its input (stablehlo.negate %0) is not a result or region "
                   "argument of a data-flow op (while, case, optimization_barrier, named or manual computation, "
                   "call), so it has no data-flow edge\n")
