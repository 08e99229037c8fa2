"""The GPU model on the CPU: ``xla.allocate_shared`` (a block's shared tile) and ``xla.sync_threads`` (a barrier
of the block's threads) in small hand-written kernels, lowered by the pass pipeline and the CPU backend and
compared exactly with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.codegen.filecheck import filecheck
from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.mlir_text import make_context, parse_mlir, print_mlir
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.pipeline import target_passes
from xlapy.errors import UnimplementedError, VerifyError

# An 8x8 transpose in 4x4 tiles, one block per tile, one thread per row of a tile: each thread copies a row of the
# input tile into the shared tile, and after the barrier writes a row of the output tile, read from a column of
# the shared tile (written by the other threads).
TILED_TRANSPOSE = """
#read = #xla.indexing_map<"(th, bl)[s0] -> ((bl floordiv 2) * 4 + th, (bl mod 2) * 4 + s0, th, s0),"
  " domain: th in [0, 3], bl in [0, 3], s0 in [0, 3]">
#write = #xla.indexing_map<"(th, bl)[s0] -> ((bl mod 2) * 4 + th, (bl floordiv 2) * 4 + s0, s0, th),"
  " domain: th in [0, 3], bl in [0, 3], s0 in [0, 3]">
func.func @main(%input: tensor<8x8xf32>, %output: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 3 : index]}
  %shmem = xla.allocate_shared : tensor<4x4xf32>
  %written = xla.loop (%th, %bl)[%s0] -> (%i0, %i1, %t0, %t1) in #read iter_args(%tile = %shmem)
      -> (tensor<4x4xf32>) {
    %x = tensor.extract %input[%i0, %i1] : tensor<8x8xf32>
    %t = tensor.insert %x into %tile[%t0, %t1] : tensor<4x4xf32>
    xla.yield %t : tensor<4x4xf32>
  }
  %synced = xla.sync_threads %written : tensor<4x4xf32>
  %result = xla.loop (%th, %bl)[%s0] -> (%o0, %o1, %t0, %t1) in #write iter_args(%out = %output)
      -> (tensor<8x8xf32>) {
    %x = tensor.extract %synced[%t0, %t1] : tensor<4x4xf32>
    %o = tensor.insert %x into %out[%o0, %o1] : tensor<8x8xf32>
    xla.yield %o : tensor<8x8xf32>
  }
  return %result : tensor<8x8xf32>
}
"""


def _pipeline(text: str):
    module = parse_mlir(text)
    context = make_context()
    for pass_ in target_passes("cpu"):
        pass_.apply(context, module)
    return module


def test_a_tile_staged_through_shared_memory_is_transposed(tmp_path: Path) -> None:
    module = _pipeline(TILED_TRANSPOSE)
    filecheck(print_mlir(module), """
CHECK: func.func @main(
CHECK: %[[SHMEM:.*]] = llvm.alloca %{{.*}} x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
CHECK: llvm.store
CHECK: xla.sync_threads{{$}}
CHECK-NOT: invariant
CHECK: llvm.load
""", tmp_path)
    x = np.arange(64, dtype=np.float32).reshape(8, 8) * 1.5
    out = np.zeros_like(x)
    CpuKernel.compile(module)([x, out])
    np.testing.assert_array_equal(out, x.T)
    # Any block range, in any order, writes its own tiles (the tile is the CPU thread's, not the kernel's).
    out = np.zeros_like(x)
    kernel = CpuKernel.compile(module)
    for begin in (3, 1, 0, 2):
        kernel([x, out], begin, begin + 1)
    np.testing.assert_array_equal(out, x.T)


# One thread's value of the first phase (its index arithmetic) used after the barrier is computed again there, with
# that thread's id: thread th writes element 3 - th of the output from element th of the tile.
RECOMPUTED = """
func.func @main(%input: tensor<4xi32>, %output: tensor<4xi32>) -> tensor<4xi32> {
  %c3 = arith.constant 3 : index
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 0 : index]}
  %mirror = arith.subi %c3, %th : index
  %shmem = xla.allocate_shared : tensor<4xi32>
  %x = tensor.extract %input[%mirror] : tensor<4xi32>
  %t = tensor.insert %x into %shmem[%th] : tensor<4xi32>
  %synced = xla.sync_threads %t : tensor<4xi32>
  %y = tensor.extract %synced[%mirror] : tensor<4xi32>
  %o = tensor.insert %y into %output[%th] : tensor<4xi32>
  return %o : tensor<4xi32>
}
"""


def test_index_values_are_computed_again_after_the_barrier() -> None:
    module = parse_mlir(RECOMPUTED)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    x = np.array([10, 20, 30, 40], dtype=np.int32)
    out = np.zeros_like(x)
    CpuKernel.compile(module)([x, out])
    # Thread th stored input[3 - th] at tile[th]; after the barrier it reads tile[3 - th] = input[th].
    np.testing.assert_array_equal(out, x)


# A loop at the top level holding barriers (every thread runs it alike): at step i, thread th adds input[4i + th] to
# what its right-hand neighbour (th + 1 mod 4) accumulated, through two tiles; each barrier orders the steps
# across threads, so that the values rotate by one thread per step.
ROTATING_SUMS = """
func.func @main(%input: tensor<24xi32>, %output: tensor<4xi32>) -> tensor<4xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i32
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 0 : index]}
  %sums = xla.allocate_shared : tensor<4xi32>
  %next = xla.allocate_shared : tensor<4xi32>
  %zeroed = tensor.insert %zero into %sums[%th] : tensor<4xi32>
  %start = xla.sync_threads %zeroed : tensor<4xi32>
  %final:2 = scf.for %i = %c0 to %c6 step %c1 iter_args(%a = %start, %b = %next) -> (tensor<4xi32>, tensor<4xi32>) {
    %plus = arith.addi %th, %c1 : index
    %right = arith.remui %plus, %c4 : index
    %neighbour = tensor.extract %a[%right] : tensor<4xi32>
    %first = arith.muli %i, %c4 : index
    %at = arith.addi %first, %th : index
    %x = tensor.extract %input[%at] : tensor<24xi32>
    %sum = arith.addi %neighbour, %x : i32
    %b1 = tensor.insert %sum into %b[%th] : tensor<4xi32>
    %b2 = xla.sync_threads %b1 : tensor<4xi32>
    %moved = tensor.extract %b2[%th] : tensor<4xi32>
    %a1 = tensor.insert %moved into %a[%th] : tensor<4xi32>
    %a2, %b3 = xla.sync_threads %a1, %b2 : tensor<4xi32>, tensor<4xi32>
    scf.yield %a2, %b3 : tensor<4xi32>, tensor<4xi32>
  }
  %y = tensor.extract %final#0[%th] : tensor<4xi32>
  %o = tensor.insert %y into %output[%th] : tensor<4xi32>
  return %o : tensor<4xi32>
}
"""


def test_a_loop_holding_barriers_runs_its_phases_step_by_step() -> None:
    module = parse_mlir(ROTATING_SUMS)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    x = np.arange(24, dtype=np.int32).reshape(6, 4) ** 2
    out = np.zeros(4, dtype=np.int32)
    CpuKernel.compile(module)([x, out])
    expected = np.zeros(4, dtype=np.int32)
    for row in x:
        expected = np.roll(expected, -1) + row
    np.testing.assert_array_equal(out, expected)


LOADED_VALUE_ACROSS_THE_BARRIER = """
func.func @main(%input: tensor<4xi32>, %output: tensor<4xi32>) -> tensor<4xi32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %shmem = xla.allocate_shared : tensor<4xi32>
  %x = tensor.extract %input[%th] : tensor<4xi32>
  %t = tensor.insert %x into %shmem[%th] : tensor<4xi32>
  %synced = xla.sync_threads %t : tensor<4xi32>
  %o = tensor.insert %x into %output[%th] : tensor<4xi32>
  return %o : tensor<4xi32>
}
"""


def test_a_loaded_value_cannot_live_across_the_barrier() -> None:
    module = parse_mlir(LOADED_VALUE_ACROSS_THE_BARRIER)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    with pytest.raises(VerifyError, match="used after an xla\\.sync_threads"):
        CpuKernel.compile(module)


@pytest.mark.parametrize(("text", "message"), [
    ("""func.func @main(%out: tensor<4xf32>) -> tensor<4xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%o = %out) -> (tensor<4xf32>) {
    %s = xla.allocate_shared : tensor<4xf32>
    %x = tensor.extract %s[%th] : tensor<4xf32>
    %w = tensor.insert %x into %o[%th] : tensor<4xf32>
    scf.yield %w : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}""", "outside of the top level of the entry function"),
    ("""func.func @main(%out: tensor<4xf32>) -> tensor<4xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %s = xla.allocate_shared : tensor<4xf32>
  %y = xla.pure_call @f(%s, %th) : (tensor<4xf32>, index) -> f32
  %w = tensor.insert %y into %out[%th] : tensor<4xf32>
  return %w : tensor<4xf32>
}
func.func private @f(%s: tensor<4xf32>, %i: index) -> f32 {
  %x = tensor.extract %s[%i] : tensor<4xf32>
  return %x : f32
}""", "passed a shared tile"),
    ("""func.func @main(%out: tensor<4xf32>) -> tensor<4xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = xla.allocate_shared : tensor<4xf32>
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%t = %s) -> (tensor<4xf32>) {
    %u = scf.for %j = %c0 to %c1 step %c1 iter_args(%v = %t) -> (tensor<4xf32>) {
      %w = xla.sync_threads %v : tensor<4xf32>
      scf.yield %w : tensor<4xf32>
    }
    scf.yield %u : tensor<4xf32>
  }
  %x = tensor.extract %r[%th] : tensor<4xf32>
  %o = tensor.insert %x into %out[%th] : tensor<4xf32>
  return %o : tensor<4xf32>
}""", "sync_threads outside of the top level of the function and of the loops there"),
], ids=["allocate_shared in a loop", "shared tile passed to a function", "barrier in a nested loop"])
def test_refused_shared_memory(text: str, message: str) -> None:
    with pytest.raises(UnimplementedError, match=message):
        LowerTensorsPass().apply(None, parse_mlir(text))  # type: ignore[arg-type]
