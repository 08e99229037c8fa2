"""Collectives in a program of one replica and one partition, compiled for the CPU: each is a copy of its
operands (collective-permute: zeros when no pair sends device 0 to itself; replica-id and partition-id: 0),
against the reference interpreter, XLA:CPU and JAX. Programs on several devices are refused at compile time."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, leaves
from tools.oracles import NO_JAX
from xlapy.errors import UnimplementedError

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


_SUM = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# name -> entry body over p = f32[4,6] and q = f32[3].
_PROGRAMS = {
    "all-reduce": ("ROOT r = f32[4,6] all-reduce(p), replica_groups={{0}}, to_apply=sum", "f32[4,6]"),
    "all-reduce-variadic": ("ROOT r = (f32[4,6], f32[3]) all-reduce(p, q), replica_groups={}, to_apply=sum",
                            "(f32[4,6], f32[3])"),
    "all-gather": ("ROOT r = f32[4,6] all-gather(p), replica_groups={{0}}, dimensions={1}", "f32[4,6]"),
    "reduce-scatter": ("ROOT r = f32[4,6] reduce-scatter(p), channel_id=1, replica_groups={{0}}, "
                       "use_global_device_ids=true, dimensions={0}, to_apply=sum", "f32[4,6]"),
    "all-to-all": ("ROOT r = f32[4,6] all-to-all(p), replica_groups={{0}}, dimensions={0}", "f32[4,6]"),
    "all-to-all-tuple": ("ROOT r = (f32[4,6]) all-to-all(p), replica_groups={{0}}", "(f32[4,6])"),
    "collective-broadcast": ("ROOT r = f32[4,6] collective-broadcast(p), replica_groups={{0}}", "f32[4,6]"),
    "collective-permute-to-itself": ("ROOT r = f32[4,6] collective-permute(p), source_target_pairs={{0,0}}",
                                     "f32[4,6]"),
    "collective-permute-to-no-one": ("ROOT r = f32[4,6] collective-permute(p), channel_id=2, "
                                     "source_target_pairs={}", "f32[4,6]"),
    "replica-id": ("ROOT r = u32[] replica-id()", "u32[]"),
    "partition-id": ("ROOT r = u32[] partition-id()", "u32[]"),
}

# XLA:CPU's thunk emitter has no collective-broadcast, and the jaxlib the tests use crashes (a segmentation
# fault) on the tuple form of all-to-all: these compare with the interpreter alone.
_NOT_ON_XLA_CPU = {"collective-broadcast", "all-to-all-tuple"}


def _text(name: str) -> str:
    body, _ = _PROGRAMS[name]
    return f"""HloModule {name.replace("-", "_")}
{_SUM}
ENTRY e {{
  p = f32[4,6] parameter(0)
  q = f32[3] parameter(1)
  {body}
}}"""


def _arguments() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(3).astype(np.float32)


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_one_device_collective_matches_the_interpreter_and_xla(name: str):
    text = _text(name)
    module = xlapy.parse_hlo(text)
    args = _arguments()
    executable = xlapy.compile(module, run_hlo_passes=False)
    got = executable(*args)
    assert executable.summary.kernels == 0
    assert_same(got, xlapy.evaluate(module, *args), exact_bits=True)
    if name.startswith("collective-permute-to-no-one"):
        np.testing.assert_array_equal(got, np.zeros((4, 6), np.float32))
    if not NO_JAX and name not in _NOT_ON_XLA_CPU:
        from tools.xla_cpu import run_on_xla_cpu

        expected = run_on_xla_cpu(text, *args)
        for g, e in zip(leaves(got), leaves(expected)):
            np.testing.assert_array_equal(g, np.asarray(e))


def test_collectives_of_several_devices_are_refused_at_compile_time():
    module = xlapy.parse_hlo("""HloModule two_replicas, replica_count=2
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  r = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=sum
  i = u32[] replica-id()
  ROOT t = (f32[4], u32[]) tuple(r, i)
}""")
    with pytest.raises(UnimplementedError) as caught:
        xlapy.compile(module, run_hlo_passes=False)
    message = str(caught.value)
    assert "all-reduce (r) on 2 devices (replica_count=2, num_partitions=1)" in message
    assert "replica-id (i) on 2 devices" in message


@pytest.mark.skipif(NO_JAX, reason="XLAPY_NO_JAX=1")
@pytest.mark.parametrize("optimized", [False, True], ids=["lowered", "xla_optimized"])
def test_shard_map_over_one_device_matches_jax(optimized: bool):
    import jax

    from tools.jax_corpus import PROGRAMS, flat_arguments
    from xlapy.frontends.jax import from_jax, optimized_from_jax

    fn, args = PROGRAMS["collectives_one_device"]
    module = (optimized_from_jax if optimized else from_jax)(fn, *args)
    executable = xlapy.compile(module, run_hlo_passes=not optimized)
    got = executable(*flat_arguments("collectives_one_device"))
    expected = [np.asarray(r) for r in jax.jit(fn)(*args)]
    assert len(leaves(got)) == len(expected)
    for g, e in zip(leaves(got), expected):
        np.testing.assert_array_equal(g, e)
