"""JAX programs with shardings evaluated on one device give JAX's global results:
Shardy's annotations are the identity and a manual computation (shard_map)
runs its body per device of its manual axes, the devices exchanging values at
collectives."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_bound, gamma
from tools.oracles import require_jax
from xlapy.frontends.stablehlo import parse_module
from xlapy.interpreter.xla_cpu_math import TANH_MAX_ULPS

jax = require_jax()

from tests.interpreter.sharded_programs import programs  # noqa: E402

_NAMES = ("psum_rows", "collectives", "all_to_all", "ring_and_index", "two_results_untiled_gather",
          "loop_with_psum", "constraint_then_manual", "partial_manual")


# The programs not named here give JAX's results bit for bit (measured: 0 ulps, 6 seeds).
_ULPS = {"ring_and_index": 1}  # measured: 1 ulp (6 seeds)
# Results summing values that can cancel (sums of 64 values in 'collectives'): within this many eps of the
# largest |result|, the scale of the terms.
_EPSILONS_OF_LARGEST = {
    "collectives": 3,  # measured: up to 1.72 eps of the largest |result| (6 seeds), 2048 ulps near zero
}


def _constraint_then_manual_bound(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """How far the interpreter's tanh(4 y + y') can be from XLA:CPU's, element by element, from the arguments:
    y = sin(x) @ w, y' the row of y 4 rows away (psum over "x" adds y * 3 to the sum of the two rows).

    The dot sums k = 6 products in an order XLA leaves to its libraries, which pick their kernels by the host's
    instruction set: on an AVX2 host XLA:CPU's per-device f32[4,6] x f32[6,2] dot adds them in two interleaved
    accumulators with fused multiply-adds, the interpreter's BLAS (numpy's OpenBLAS, whose kernel is the CPU's)
    the global f32[8,6] x f32[6,8] one after the other with fused multiply-adds. sin is within 2 ulps of the
    exact sine on both sides (measured: XLA:CPU's 0.56, numpy's 1.41), a relative error of at most 4 (eps/2),
    which counts as 4 roundings. A term of z then goes through at most 12: sin's 4, the dot's 6, the rounding
    of 3 y or of the psum's addition (XLA:CPU fuses y * 3 + psum into one rounding), and the last addition; so
    each z is within gamma(12) Z of the exact z, Z = 4 S + S', S = |sin(x)| @ |w|, and the two within
    2 gamma(12) Z of each other. tanh's slope is at most 1, and each side's tanh (XLA:CPU's on both) is within
    TANH_MAX_ULPS + 1/2 ulps of the exact tanh of its argument."""
    eps = float(np.finfo(np.float32).eps)
    s, w = np.sin(x.astype(np.float64)), w.astype(np.float64)
    y, magnitudes = s @ w, np.abs(s) @ np.abs(w)
    z = 4 * y + np.roll(y, 4, axis=0)
    z_magnitudes = 4 * magnitudes + np.roll(magnitudes, 4, axis=0)
    return 2 * gamma(12, np.float32) * z_magnitudes + 2 * (TANH_MAX_ULPS + 0.5) * eps * np.abs(np.tanh(z))


# Results compared with JAX's within a bound computed from the arguments (one result each). Measured on the
# program's arguments and 12 more draws: up to 0.028 of the bound (up to 5.6 eps of the largest |result|).
_BOUNDS = {"constraint_then_manual": _constraint_then_manual_bound}


def _assert_close(name: str, got, expected: list[np.ndarray], args: list[np.ndarray] | None = None) -> None:
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(expected)
    if name in _BOUNDS:
        (g,), (e,) = got, expected
        assert_within_bound(np.asarray(g), e, _BOUNDS[name](*args), context=name, what="the bound of the sums' orders")
        return
    for g, e in zip(got, expected):
        atol = _EPSILONS_OF_LARGEST.get(name, 0) * float(np.finfo(e.dtype).eps) * float(np.abs(e).max(initial=0))
        assert_same(np.asarray(g), e, ulps=_ULPS.get(name, 0), atol=atol, context=name)


@pytest.mark.parametrize("name", _NAMES)
def test_manual_computation_on_eight_devices_matches_jax(name: str) -> None:
    program = programs()[name]
    module = parse_module(program["stablehlo"], implicit_manual_replication=True)
    _assert_close(name, xlapy.evaluate(module, *program["args"]), program["results"], program["args"])


@pytest.mark.parametrize("name", _NAMES)
def test_hlo_exported_with_shardy_on_eight_devices_matches_jax(name: str) -> None:
    # The manual computation as a call between xla.sdy.GlobalToLocalShape and xla.sdy.LocalToGlobalShape.
    program = programs()[name]
    _assert_close(name, xlapy.evaluate(xlapy.parse_hlo(program["hlo"]), *program["args"]), program["results"],
                  program["args"])


def test_per_device_shapes_outside_a_manual_call_are_refused() -> None:
    text = """HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2]>}}
ENTRY e {
  p = f32[8] parameter(0)
  l = f32[4] custom-call(p), custom_call_target="xla.sdy.GlobalToLocalShape", frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\"}>"}
  ROOT n = f32[4] negate(l)
}
"""  # noqa: E501
    with pytest.raises(xlapy.UnimplementedError, match=r"'xla\.sdy\.GlobalToLocalShape' \(l\) turns f32\[8\]"):
        xlapy.evaluate(xlapy.parse_hlo(text), np.zeros(8, np.float32))


def test_collectives_of_diverging_devices_fail_instead_of_hanging() -> None:
    # Only device 0 of the manual axis reaches the all-reduce.
    text = """module attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>]
        manual_axes={"x"} (%arg1: tensor<2xf32>) {
      %id = stablehlo.partition_id : tensor<ui32>
      %zero = stablehlo.constant dense<0> : tensor<ui32>
      %first = stablehlo.compare EQ, %id, %zero : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
      %1 = "stablehlo.if"(%first) ({
        %2 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %s = stablehlo.add %a, %b : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }) : (tensor<2xf32>) -> tensor<2xf32>
        stablehlo.return %2 : tensor<2xf32>
      }, {
        stablehlo.return %arg1 : tensor<2xf32>
      }) : (tensor<i1>) -> tensor<2xf32>
      sdy.return %1 : tensor<2xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
    module = parse_module(text, implicit_manual_replication=True)
    with pytest.raises(xlapy.XlapyError, match="do not meet"):
        xlapy.evaluate(module, np.arange(4, dtype=np.float32))


def test_psum_without_collectives_across_devices_is_exact() -> None:
    # Two devices, each computing on its half; no threads involved.
    text = """module {
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>]
        manual_axes={"x"} (%arg1: tensor<2xf32>) {
      %id = stablehlo.partition_id : tensor<ui32>
      %f = stablehlo.convert %id : (tensor<ui32>) -> tensor<f32>
      %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<2xf32>
      %r = stablehlo.add %arg1, %b : tensor<2xf32>
      sdy.return %r : tensor<2xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
    got = xlapy.evaluate(parse_module(text, implicit_manual_replication=True), np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(got, np.array([0, 1, 3, 4], np.float32))


# -- one device: JAX in this process --------------------------------------------------------------------


def _one_device_program():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))

    def f(x):
        y = jax.lax.with_sharding_constraint(jnp_sin(x) * 2.0, NamedSharding(mesh, P("x")))
        z = jax.shard_map(lambda a: jax.lax.psum(a, "x") + 1.0, mesh=mesh, in_specs=P("x"), out_specs=P())(y)
        return z, jax.lax.with_sharding_constraint(z * y, NamedSharding(mesh, P(None)))

    return f, np.linspace(-2, 2, 8, dtype=np.float32)


def jnp_sin(x):
    return jax.numpy.sin(x)


@pytest.mark.parametrize("form", ["stablehlo", "hlo", "optimized_hlo"])
def test_sharded_program_on_one_device_matches_jax(form: str) -> None:
    f, x = _one_device_program()
    lowered = jax.jit(f).lower(x)
    if form == "stablehlo":
        module = parse_module(lowered.as_text(), implicit_manual_replication=True)
    elif form == "hlo":
        text = lowered.compiler_ir(dialect="hlo").as_hlo_text()
        module = xlapy.parse_hlo(text)
    else:
        module = xlapy.parse_hlo(lowered.compile().as_text())
    expected = [np.asarray(r) for r in jax.jit(f)(x)]
    _assert_close("one_device", xlapy.evaluate(module, x), expected)  # measured: 0 ulps (8 inputs)


def test_shardy_annotations_are_the_identity() -> None:
    text = """module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = sdy.reshard %arg0 <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
    sdy.sharding_group %0 group_id=0 : tensor<8x4xf32>
    %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x4xf32>
    %2 = sdy.named_computation<"foo">(%1) (%arg1: tensor<8x4xf32>) {
      %3 = stablehlo.negate %arg1 : tensor<8x4xf32>
      sdy.return %3 : tensor<8x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %4 = sdy.data_flow_edge %2 : tensor<8x4xf32>
    %5 = sdy.sharding_constraint %4 <@mesh, [{}, {"y"}]> : tensor<8x4xf32>
    return %5 : tensor<8x4xf32>
  }
}
"""
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_array_equal(xlapy.evaluate(parse_module(text, implicit_manual_replication=True), x), -x)


@pytest.mark.parametrize("target", ["Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape",
                                    "SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.LocalToGlobalShape"])
def test_sharding_custom_calls_keeping_the_shape_are_the_identity(target: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  p = f32[3,2] parameter(0)
  c = f32[3,2] custom-call(p), custom_call_target="{target}", sharding={{replicated}}
  ROOT n = f32[3,2] negate(c)
}}
"""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(xlapy.evaluate(xlapy.parse_hlo(text), x), -x)


def test_shape_changing_sharding_custom_call_is_refused() -> None:
    text = """HloModule m, num_partitions=2
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
}
"""
    with pytest.raises(xlapy.UnimplementedError, match=r"SPMDFullToShardShape.*c\b"):
        xlapy.evaluate(xlapy.parse_hlo(text), np.zeros(4, np.float32))
