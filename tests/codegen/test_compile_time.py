"""What keeps a kernel's compilation short: a full reduction keeps its loop over rows (unroll-loops unrolls only
the lanes of each row under the CPU's large budget), and LLVM IR compiled before in the process is not compiled
again. The reduction's value is compared with the sum in XLA's elemental order computed with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import scf

import xlapy
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.backends.cpu import CpuKernel, translate_module
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import lower_fusion

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _full_sum(rows: int, columns: int) -> str:
    return single_fusion([f"f32[{rows},{columns}]", "f32[]"],
                         ["ROOT r = f32[] reduce(p0, p1), dimensions={0,1}, to_apply=add"], "f32[]", _ADD)


# Rows too short, or not a multiple of 64 bytes, for the vectorized row order (elemental_reduce.py): these sum
# in XLA's elemental order, one element after the other.
@pytest.mark.parametrize(("rows", "columns"), [(64, 60), (32, 48), (64, 16)])
def test_full_sum_keeps_its_loop_over_rows(rows: int, columns: int) -> None:
    text = _full_sum(rows, columns)
    lowered = lower_fusion(xlapy.parse_hlo(text).entry.root, Device.host())
    # Unrolling the rows too would copy the row's unrolled lanes once per row (4096 adds for 64x64).
    assert sum(isinstance(op, scf.ForOp) for op in lowered.module.walk()) == 1
    x = np.random.default_rng(0).normal(size=(rows, columns)).astype(np.float32)
    init = np.float32(0.25)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x, init)
    # XLA's elemental order: the init value, then the elements one by one in row-major order.
    expected = np.cumsum(np.concatenate([[init], x.ravel()]), dtype=np.float32)[-1]
    np.testing.assert_array_equal(got, expected)


def test_the_same_llvm_ir_is_compiled_once() -> None:
    lowered = lower_fusion(xlapy.parse_hlo(_full_sum(8, 16)).entry.root, Device.host())
    text = str(translate_module(lowered.module)[0])
    first = CpuKernel.from_llvm_ir(text)
    assert CpuKernel.from_llvm_ir(text) is first
    assert CpuKernel.from_llvm_ir(text.replace("xlapy", "renamed", 1)) is not first
