"""A kernel bound to its buffers once (``CpuKernel.bind``, or ``bind_all_blocks`` for a launch of all its
blocks: what kernel thunks prepare per execution context) refuses what a direct call refuses: the wrong number
of buffers, a buffer that is not contiguous or too small, blocks outside its launch. Bound launches compute
what the interpreter computes."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import lower_fusion
from xlapy.errors import VerifyError

# 4096 elements: several blocks, so that block ranges can be launched one at a time.
SCALE = """HloModule scale
f { x = f32[4096] parameter(0)  y = f32[4096] parameter(1)  m = f32[4096] multiply(x, y)
    ROOT a = f32[4096] add(m, x) }
ENTRY e { x = f32[4096] parameter(0)  y = f32[4096] parameter(1)
          ROOT fusion = f32[4096] fusion(x, y), kind=kLoop, calls=f }
"""


@pytest.fixture(scope="module")
def compiled():
    module = xlapy.parse_hlo(SCALE)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    lowered = lower_fusion(fusion, Device.host())
    return module, CpuKernel.compile(lowered.module)


def _arguments() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return tuple((rng.integers(-16, 17, 4096) / 8).astype(np.float32) for _ in range(2))


def test_a_bound_kernel_launched_block_range_by_block_range(compiled) -> None:
    module, kernel = compiled
    x, y = _arguments()
    out = np.zeros(4096, np.float32)
    launch = kernel.bind([x, y, out])
    blocks = kernel.signature.blocks
    assert blocks > 1
    for begin in range(blocks):
        launch(begin, begin + 1)
    assert_same(out, xlapy.evaluate(module, x, y), exact_bits=True)
    out[:] = 0
    launch(0, blocks)  # the same binding, launched again
    assert_same(out, xlapy.evaluate(module, x, y), exact_bits=True)


def test_a_kernel_bound_over_all_its_blocks(compiled) -> None:
    module, kernel = compiled
    x, y = _arguments()
    out = np.zeros(4096, np.float32)
    launch = kernel.bind_all_blocks([x, y, out])
    launch()
    assert_same(out, xlapy.evaluate(module, x, y), exact_bits=True)
    with pytest.raises(VerifyError, match="buffer 2 has 4096 bytes, the kernel reads 16384"):
        kernel.bind_all_blocks([x, y, np.zeros(1024, np.float32)])


def test_binding_checks_the_buffers(compiled) -> None:
    _, kernel = compiled
    x, y = _arguments()
    out = np.zeros(4096, np.float32)
    with pytest.raises(VerifyError, match="expected 3 buffers, got 2"):
        kernel.bind([x, y])
    with pytest.raises(VerifyError, match="buffer 1 is not contiguous"):
        kernel.bind([x, np.zeros(8192, np.float32)[::2], out])
    with pytest.raises(VerifyError, match="buffer 2 has 16380 bytes, the kernel reads 16384"):
        kernel.bind([x, y, out[:-1]])


@pytest.mark.parametrize(("begin", "end"), [(-1, 1), (1, 0), (0, 10 ** 6)])
def test_a_bound_kernel_refuses_blocks_outside_its_launch(compiled, begin: int, end: int) -> None:
    _, kernel = compiled
    x, y = _arguments()
    out = np.zeros(4096, np.float32)
    launch = kernel.bind([x, y, out])
    with pytest.raises(VerifyError, match="block range"):
        launch(begin, end)
    assert not out.any()
