"""Ops in the forms XLA and Shardy print them, checked against XLA and Shardy
themselves (through jaxlib): an optimization_barrier with its attributes first,
``mhlo.topk``, ``custom_call @Sharding`` with ``mhlo.sharding``, ``all_to_all``
and ``broadcast_in_dim``. Each prints back byte for byte and becomes the HLO
instruction XLA converts it to (``tests/frontends/test_jax_round_trip.py``
evaluates the JAX programs using them against JAX)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.hlo import HloInstruction, HloModule
from xlapy.hlo import parse_module as parse_hlo
from xlapy.hlo.mlir_structure import op_results
from xlapy.hlo.shape_rules.helpers import same_shape
from xlapy.hlo.shape_rules.inference import infer_shape

require_jax()

from tests.frontends.jax_programs import lowered_text  # noqa: E402
from tests.hlo.xla import hlo_to_mlir, mlir_to_hlo  # noqa: E402
from tools.shardy import run_shardy  # noqa: E402
from tools.xla_cpu import run_on_xla_cpu  # noqa: E402


def _only(module: HloModule, opcode: str) -> HloInstruction:
    found = [i for i in module.instructions if i.opcode == opcode]
    assert len(found) == 1, [i.name for i in found]
    return found[0]


def _canonical(text: str) -> str:
    """``text`` as jaxlib's MLIR prints it."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        return str(ir.Module.parse(text))


# -- optimization_barrier -------------------------------------------------------------------------

def test_barrier_as_shardy_prints_it() -> None:
    shardy = run_shardy(lowered_text("optimization_barrier"))
    line = next(line for line in shardy.splitlines() if "stablehlo.optimization_barrier" in line)
    assert "stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<" in line
    module = parse_module(shardy)
    assert print_module(module) == shardy
    barrier = _only(module, "stablehlo.optimization_barrier")
    printed = [s.body() for s in (r.sdy_sharding for r in op_results(barrier))]
    assert f"#sdy.sharding_per_value<[{', '.join(printed)}]>" in line


def test_barrier_with_attributes_after_its_operands_prints_as_mlir_does() -> None:
    # Earlier xlapy versions printed the attributes after the operands; that still reads.
    written = """module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %0:2 = stablehlo.optimization_barrier %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}]>, \
<@mesh, [{}]>]>} : tensor<8xf32>, tensor<8xf32>
    return %0#0, %0#1 : tensor<8xf32>, tensor<8xf32>
  }
}
"""
    printed = print_module(parse_module(written))
    assert printed == _canonical(printed)
    assert "optimization_barrier {sdy.sharding" in printed


# -- mhlo.topk ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("largest", ["true", "false"])
def test_mhlo_topk_is_hlo_topk(largest: str) -> None:
    hlo = f"""HloModule m

ENTRY e {{
  p = f32[4,8] parameter(0)
  ROOT t = (f32[4,3], s32[4,3]) topk(p), k=3, largest={largest}
}}
"""
    text = hlo_to_mlir(hlo)
    assert "mhlo.topk(%arg0, k = 3" in text
    module = parse_module(text)
    assert print_module(module) == text
    topk = _only(module, "topk")
    assert topk.attributes == parse_hlo(hlo).entry.root.attributes
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    x[1, 2] = x[1, 6]  # a tie: the lower index first
    for got, want in zip(xlapy.evaluate(module, x), run_on_xla_cpu(hlo, x)):
        np.testing.assert_array_equal(got, want)


# -- custom_call @Sharding and mhlo.sharding ------------------------------------------------------------

def test_gspmd_shardings_are_hlo_shardings() -> None:
    text = lowered_text("sharding_constraint_gspmd")
    module = parse_module(text)
    xla = parse_hlo(mlir_to_hlo(text))
    ours, theirs = _only(module, "custom-call"), _only(xla, "custom-call")
    assert ours.attributes == theirs.attributes
    assert ours.attributes["custom_call_target"] == "Sharding"
    assert [p.attributes for p in module.entry.parameters] == [p.attributes for p in xla.entry.parameters]
    assert print_module(module).rstrip() == text.rstrip()


# -- all_to_all -----------------------------------------------------------------------------------------

def test_all_to_all_splitting_one_dimension_is_xlas() -> None:
    hlo = """HloModule m

ENTRY e {
  p = f32[4,8] parameter(0)
  ROOT a = f32[4,8] all-to-all(p), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={1}
}
"""
    text = hlo_to_mlir(hlo)
    module = parse_module(text)
    assert print_module(module) == text
    ours = _only(module, "all-to-all")
    assert ours.attributes == parse_hlo(hlo).entry.root.attributes
    assert same_shape(infer_shape(ours), ours.shape)


def test_all_to_all_concatenating_another_dimension() -> None:
    # XLA's HLO splits and concatenates one dimension (all-to-all, dimensions={split})
    # and moves the received blocks to the concatenated dimension with reshapes.
    text = lowered_text("all_to_all_gspmd")
    ours = _only(parse_module(text), "stablehlo.all_to_all")
    xla = parse_hlo(mlir_to_hlo(text))
    theirs = _only(xla, "all-to-all")
    body = xla.computation(theirs.parent.name)
    assert ours.attributes == {"channel_id": theirs.attributes["channel_id"],
                               "replica_groups": theirs.attributes["replica_groups"],
                               "split_dimension": theirs.attributes["dimensions"][0], "concat_dimension": 1,
                               "split_count": 4}
    assert same_shape(ours.shape, body.root.shape) and same_shape(infer_shape(ours), ours.shape)


# -- broadcast_in_dim ---------------------------------------------------------------------------------

def _broadcast(operand: str, result: str) -> str:
    return f"""module {{
  func.func @main(%arg0: tensor<{operand}xf32>) -> tensor<{result}xf32> {{
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<{operand}xf32>) -> tensor<{result}xf32>
    return %0 : tensor<{result}xf32>
  }}
}}
"""


def test_broadcast_in_dim_stretches_only_size_one_dimensions() -> None:
    stretching = parse_module(_broadcast("1x4", "3x4"))
    broadcast = _only(stretching, "stablehlo.broadcast_in_dim")
    _canonical(_broadcast("1x4", "3x4"))  # MLIR accepts it
    assert same_shape(infer_shape(broadcast), broadcast.shape)
    # MLIR's verifier rejects a size-2 dimension broadcast to 3; so does shape inference.
    with pytest.raises(Exception, match="is not equal to 1 or size of result dimension"):
        _canonical(_broadcast("2x4", "3x4"))
    message = r"operand dimension 0 \(size 2\) to result dimension 0 \(size 3\) of f32\[3,4\]; the sizes must be equal"
    with pytest.raises(xlapy.VerifyError, match=message):
        parse_module(_broadcast("2x4", "3x4"))  # the import verifies
    wrong = _only(parse_module(_broadcast("2x4", "3x4"), verify=False), "broadcast")
    with pytest.raises(xlapy.VerifyError, match=message):
        infer_shape(wrong)
