"""The pass pipeline is one list: the CPU runs the GPU's passes (XLA's order) with its own steps inserted and its
own unroll limit; a target without a pipeline is refused."""

from __future__ import annotations

import pytest

from xlapy.codegen.launch import Device
from xlapy.codegen.passes.unroll_loops import UnrollLoopsPass
from xlapy.codegen.pipeline import CPU_MAX_UNROLLED_COST, PIPELINE, device_passes, target_passes
from xlapy.errors import UnimplementedError, XlapyError

CPU_ONLY = ["lower-complex", "vectorize-lanes", "nontemporal-stores", "prefetch-loads"]


def _names(target: str) -> list[str]:
    return [p.name for p in target_passes(target)]


def test_cpu_steps_are_inserted_into_the_gpu_order() -> None:
    cpu, gpu = _names("cpu"), _names("gpu")
    assert [name for name in cpu if name not in CPU_ONLY] == gpu
    assert set(cpu) - set(gpu) == set(CPU_ONLY)
    # lower-complex before canonicalize (whose folders would evaluate complex ops); vectorize-lanes after the
    # index arithmetic is lowered and simplified, before lower-tensors.
    assert cpu.index("lower-complex") < cpu.index("canonicalize")
    assert cpu.index("lower-apply-indexing") < cpu.index("canonicalize") < cpu.index("vectorize-lanes")
    assert cpu.index("vectorize-lanes") == cpu.index("lower-tensors") - 1
    # nontemporal-stores marks LLVM stores and prefetch-loads prefetches ahead of LLVM loads: after lower-tensors.
    assert cpu[-3:] == ["lower-tensors", "nontemporal-stores", "prefetch-loads"]
    assert len(PIPELINE) == len(cpu)


def test_unroll_limit_is_per_target() -> None:
    (cpu_unroll,) = [p for p in target_passes("cpu") if isinstance(p, UnrollLoopsPass)]
    (gpu_unroll,) = [p for p in target_passes("gpu") if isinstance(p, UnrollLoopsPass)]
    assert cpu_unroll.max_unrolled_cost == CPU_MAX_UNROLLED_COST
    assert gpu_unroll == UnrollLoopsPass()


def test_devices_take_their_targets_passes() -> None:
    assert [p.name for p in device_passes(Device.gpu())] == _names("gpu")
    assert [p.name for p in device_passes(Device.host())] == _names("cpu")


def test_each_call_builds_fresh_passes() -> None:
    first, second = target_passes("cpu"), target_passes("cpu")
    assert all(a is not b for a, b in zip(first, second))


def test_unknown_target_is_refused() -> None:
    with pytest.raises(UnimplementedError, match="no pass pipeline for target 'tpu'") as raised:
        target_passes("tpu")
    assert isinstance(raised.value, XlapyError)
