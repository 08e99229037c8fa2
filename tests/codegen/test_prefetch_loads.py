"""Software prefetches (`prefetch-loads`): which loads of which loops get them (the vector loads of loops marked
``xla.prefetch_bytes``, one prefetch per cache line, the mark removed; no scalar load, no unmarked loop); the op's
text (MLIR's ``llvm.intr.prefetch``), the LLVM IR and machine code it becomes; kernels reading to the end of their
buffers, prefetching past it, compute what they computed without; an entry function marked (the body of the loops
over blocks and threads) with a locality; and which emitters ask for them (the argmax and argmin rows' fold and the
loop emitter's copies of large operands, into the second-level cache; not the row or column sums, not smaller
copies, not arithmetic)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from llvmlite import binding as llvm

import xlapy
from tests.codegen.emitter_cases import only_fusion
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import assert_within_ulps, ulp_tolerance
from xlapy.codegen.backends.cpu import CpuKernel, translate_module
from xlapy.codegen.emitters.common import MATH_PREFETCH_BYTES
from xlapy.codegen.emitters.loop import COPY_PREFETCH_BYTES, COPY_PREFETCH_MIN_BYTES
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.passes.prefetch_loads import ALL_LEVELS, PREFETCH_ATTR, PREFETCH_LOCALITY_ATTR, PrefetchLoadsPass
from xlapy.codegen.pipeline import emitter_name, lower_fusion, target_passes

X86 = llvm.get_process_triple().startswith("x86_64")
DATA = Path(__file__).parent / "data" / "reduction"

# Sums of the 128 rows of 32 floats of %in (a marked loop reading two cache lines a step, and a scalar), then of
# its first 16 rows (an unmarked loop).
_SUMS = """
func.func @main(%in: tensor<4096xf32>, %out: tensor<48xf32>) -> tensor<48xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %zero16 = arith.constant dense<0.0> : vector<16xf32>
  %th = gpu.thread_id x {xla.range = [0 : index, 0 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 0 : index]}
  %rows, %firsts = scf.for %i = %c0 to %c128 step %c1 iter_args(%acc = %zero, %first = %pad) -> (vector<32xf32>, f32) {
    %at = arith.muli %i, %c32 : index
    %v = vector.transfer_read %in[%at], %pad {in_bounds = [true]} : tensor<4096xf32>, vector<32xf32>
    %s = arith.addf %acc, %v : vector<32xf32>
    %x = tensor.extract %in[%at] : tensor<4096xf32>
    %f = arith.addf %first, %x : f32
    scf.yield %s, %f : vector<32xf32>, f32
  } {xla.prefetch_bytes = 8192 : i64}
  %some = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %zero16) -> (vector<16xf32>) {
    %at = arith.muli %j, %c32 : index
    %v = vector.transfer_read %in[%at], %pad {in_bounds = [true]} : tensor<4096xf32>, vector<16xf32>
    %s = arith.addf %acc, %v : vector<16xf32>
    scf.yield %s : vector<16xf32>
  }
  %w = vector.transfer_write %rows, %out[%c0] {in_bounds = [true]} : vector<32xf32>, tensor<48xf32>
  %w2 = vector.transfer_write %some, %w[%c32] {in_bounds = [true]} : vector<16xf32>, tensor<48xf32>
  %w3 = tensor.insert %firsts into %w2[%c0] : tensor<48xf32>
  return %w3 : tensor<48xf32>
}
"""

PREFETCHED = """
CHECK:      scf.for
CHECK:        %[[AT:.*]] = llvm.getelementptr inbounds %in[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK-NEXT:   %[[LINE0:.*]] = llvm.getelementptr %[[AT]][8192] : (!llvm.ptr) -> !llvm.ptr, i8
CHECK-NEXT:   "llvm.intr.prefetch"(%[[LINE0]]) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
CHECK-NEXT:   %[[LINE1:.*]] = llvm.getelementptr %[[AT]][8256] : (!llvm.ptr) -> !llvm.ptr, i8
CHECK-NEXT:   "llvm.intr.prefetch"(%[[LINE1]]) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
CHECK-NEXT:   llvm.load %[[AT]] {{.*}} : !llvm.ptr -> vector<32xf32>
CHECK-NOT:    llvm.intr.prefetch
CHECK:        llvm.load {{.*}} : !llvm.ptr -> f32
CHECK-NOT:    llvm.intr.prefetch
CHECK:      }
CHECK-NOT:  xla.prefetch_bytes
CHECK:      scf.for
CHECK-NOT:    llvm.intr.prefetch
CHECK:        llvm.load {{.*}} : !llvm.ptr -> vector<16xf32>
CHECK-NOT:  llvm.intr.prefetch
"""


def _lowered(text: str):
    module = parse_mlir(text)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    PrefetchLoadsPass().apply(None, module)  # type: ignore[arg-type]
    return module


def test_vector_loads_of_marked_loops_prefetch_each_line_ahead(tmp_path: Path) -> None:
    filecheck(print_mlir(_lowered(_SUMS)), PREFETCHED, tmp_path)


def test_the_prefetch_is_mlirs_op() -> None:
    op = '"llvm.intr.prefetch"(%p) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()'
    printed = print_mlir(parse_mlir(f"func.func @f(%p: !llvm.ptr) {{\n  {op}\n  func.return\n}}"))
    assert op in printed.splitlines()[2]


def test_prefetches_in_llvm_ir_and_machine_code_change_no_result(tmp_path: Path) -> None:
    module = _lowered(_SUMS)
    llvm_ir = str(translate_module(module)[0])
    checks = """
CHECK: call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 3, i32 1)
CHECK: call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 3, i32 1)
CHECK-NOT: call void @"llvm.prefetch
"""
    filecheck(llvm_ir, checks, tmp_path)
    kernel = CpuKernel.from_llvm_ir(llvm_ir)
    if X86:
        assert len(re.findall(r"^\s+prefetcht0\s", kernel.asm, re.M)) >= 2
    # The loop reads to the end of its buffer and prefetches up to 8 KiB past it: small integers, exact sums.
    x = (np.arange(4096) % 7 - 3).astype(np.float32)
    out = np.zeros(48, np.float32)
    kernel([x, out])
    rows = x.reshape(128, 32)
    np.testing.assert_array_equal(out[1:32], rows.sum(0)[1:])
    np.testing.assert_array_equal(out[0], rows[:, 0].sum())
    np.testing.assert_array_equal(out[32:], rows[:16, :16].sum(0))


def test_only_the_cpu_prefetches() -> None:
    assert "prefetch-loads" in [p.name for p in target_passes("cpu")]
    assert "prefetch-loads" not in [p.name for p in target_passes("gpu")]


def _prefetches(hlo: str, slice_indices: tuple[int, ...] | None = None) -> tuple[int, str]:
    module = lower_fusion(only_fusion(xlapy.parse_hlo(hlo)), Device.host(), slice_indices=slice_indices).module
    text = print_mlir(module)
    return text.count('"llvm.intr.prefetch"'), text


@pytest.mark.parametrize("name", ["argmax_rows.hlo", "argmin_rows_u8.hlo"])
def test_arg_row_folds_prefetch_every_line_they_read(name: str) -> None:
    count, text = _prefetches((DATA / name).read_text())
    assert PREFETCH_ATTR not in text
    loads = re.findall(r"llvm\.load .* -> vector<(\d+)x(f32|i8)>", text)
    lines = sum(int(lanes) * {"f32": 4, "i8": 1}[kind] // 64 for lanes, kind in loads)
    assert loads and count == lines


def test_row_sums_do_not_prefetch() -> None:
    # Their loops spend few instructions per vector: the out-of-order window covers the memory's latency.
    count, _ = _prefetches((DATA / "row_sum.hlo").read_text())
    assert count == 0


# A thread copies 64 floats (four lines) and reads one more float, in the body of the loops over blocks and threads.
_COPY = """
func.func @main(%in: tensor<1024xf32>, %out: tensor<1025xf32>) -> tensor<1025xf32>
    attributes {xla.prefetch_bytes = 16384 : i64, xla.prefetch_locality = 2 : i64} {
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %pad = arith.constant 0.0 : f32
  %th = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 0 : index]}
  %at = arith.muli %th, %c64 : index
  %v = vector.transfer_read %in[%at], %pad {in_bounds = [true]} : tensor<1024xf32>, vector<64xf32>
  %x = tensor.extract %in[%at] : tensor<1024xf32>
  %w = vector.transfer_write %v, %out[%at] {in_bounds = [true]} : vector<64xf32>, tensor<1025xf32>
  %w2 = tensor.insert %x into %w[%c1024] : tensor<1025xf32>
  return %w2 : tensor<1025xf32>
}
"""

PREFETCHED_IN_MAIN = """
CHECK:      func.func @main
CHECK-NOT:    xla.prefetch
CHECK-SAME:   {
CHECK:        %[[AT:.*]] = llvm.getelementptr inbounds %in[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK-NEXT:   %[[LINE0:.*]] = llvm.getelementptr %[[AT]][16384] : (!llvm.ptr) -> !llvm.ptr, i8
CHECK-NEXT:   "llvm.intr.prefetch"(%[[LINE0]]) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
CHECK:        %[[LINE3:.*]] = llvm.getelementptr %[[AT]][16576] : (!llvm.ptr) -> !llvm.ptr, i8
CHECK-NEXT:   "llvm.intr.prefetch"(%[[LINE3]]) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
CHECK-NEXT:   llvm.load %[[AT]] {{.*}} : !llvm.ptr -> vector<64xf32>
CHECK-NOT:    llvm.intr.prefetch
CHECK:        llvm.load {{.*}} : !llvm.ptr -> f32
CHECK-NOT:    llvm.intr.prefetch
"""


def test_a_marked_entry_function_prefetches_its_vector_loads_at_its_locality(tmp_path: Path) -> None:
    module = _lowered(_COPY)
    text = print_mlir(module)
    assert text.count('"llvm.intr.prefetch"') == 4
    filecheck(text, PREFETCHED_IN_MAIN, tmp_path)
    llvm_ir = str(translate_module(module)[0])
    assert llvm_ir.count('call void @"llvm.prefetch.p0"(ptr') == 4
    kernel = CpuKernel.from_llvm_ir(llvm_ir)
    if X86:  # locality 2: into the second-level cache
        assert re.search(r"^\s+prefetcht1\s", kernel.asm, re.M) and not re.search(r"prefetcht0", kernel.asm)
    # Every thread prefetches 16 KiB past the buffer's 4 KiB: hints, which never fault.
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros(1025, np.float32)
    kernel([x, out])
    np.testing.assert_array_equal(out, np.append(x, x[960]))


def _copy_hlo(rows: int, body: str = "t = f32[256,{rows},256]{{2,1,0}} transpose(p), dimensions={{1,0,2}}\n"
              "  ROOT c = f32[256,{rows},256]{{2,0,1}} copy(t)") -> str:
    """A 102 transpose of f32[rows,256,256] into the layout that makes it a copy (jax's ``x.transpose(1, 0, 2)``
    result), or another ``body`` on ``p``, an f32[rows,256,256] parameter, with a root ``c``."""
    return f"""HloModule copy

fused_computation {{
  p = f32[{rows},256,256]{{2,1,0}} parameter(0)
  {body.format(rows=rows)}
}}

ENTRY main {{
  x = f32[{rows},256,256]{{2,1,0}} parameter(0)
  ROOT f = f32[256,{rows},256]{{2,0,1}} fusion(x), kind=kLoop, calls=fused_computation
}}
"""


def test_copies_of_large_operands_prefetch_every_line_into_the_second_level_cache() -> None:
    rows = COPY_PREFETCH_MIN_BYTES // (256 * 256 * 4)
    count, text = _prefetches(_copy_hlo(rows))
    assert PREFETCH_ATTR not in text and PREFETCH_LOCALITY_ATTR not in text
    loads = re.findall(r"llvm\.load .* -> vector<(\d+)xf32>", text)
    assert loads and count == sum(int(lanes) * 4 // 64 for lanes in loads)
    prefetches = re.findall(r'llvm.getelementptr %\S+\[(\d+)\].*\n.*"llvm.intr.prefetch".*hint = (\d+)', text)
    assert len(prefetches) == count
    assert {int(hint) for _, hint in prefetches} == {2}
    assert min(int(offset) for offset, _ in prefetches) == COPY_PREFETCH_BYTES


@pytest.mark.parametrize("body", [
    # A smaller copy: its operand stays in the caches, where the prefetches only cost instructions.
    None,
    # Arithmetic: not a copy.
    "t = f32[256,{rows},256]{{2,1,0}} transpose(p), dimensions={{1,0,2}}\n"
    "  n = f32[256,{rows},256]{{2,1,0}} negate(t)\n  ROOT c = f32[256,{rows},256]{{2,0,1}} copy(n)",
])
def test_other_loop_fusions_do_not_prefetch(body: str | None) -> None:
    rows = COPY_PREFETCH_MIN_BYTES // (256 * 256 * 4)
    hlo = _copy_hlo(rows // 2) if body is None else _copy_hlo(rows, body)
    count, text = _prefetches(hlo)
    assert count == 0 and PREFETCH_ATTR not in text


def test_a_prefetching_copy_copies_every_element() -> None:
    rows = COPY_PREFETCH_MIN_BYTES // (256 * 256 * 4)
    module = xlapy.parse_hlo(_copy_hlo(rows))
    assert _prefetches(_copy_hlo(rows))[0] > 0
    x = np.random.default_rng(0).standard_normal((rows, 256, 256)).astype(np.float32)
    result = xlapy.compile(module, backend="cpu")(x)
    np.testing.assert_array_equal(np.asarray(result), x.transpose(1, 0, 2))


def test_column_sums_do_not_prefetch() -> None:
    # Measured on f32[4096,1024]: no faster from memory, 20-45% slower from the third-level cache.
    hlo = """HloModule column

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
}

fused_computation {
  p = f32[4096,1024]{1,0} parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[1024]{0} reduce(p, zero), dimensions={0}, to_apply=add
}

ENTRY main {
  x = f32[4096,1024]{1,0} parameter(0)
  ROOT f = f32[1024]{0} fusion(x), kind=kLoop, calls=fused_computation
}
"""
    count, text = _prefetches(hlo)
    assert count == 0 and re.search(r"llvm\.load .* -> vector<\d+xf32>", text)


def _math_hlo(op: str) -> str:
    """``op`` of an f32[1024,1024] parameter, times 2, in a loop fusion."""
    return f"""HloModule math

fused_computation {{
  p = f32[1024,1024]{{1,0}} parameter(0)
  m = f32[1024,1024]{{1,0}} {op}(p)
  two = f32[] constant(2)
  b = f32[1024,1024]{{1,0}} broadcast(two), dimensions={{}}
  ROOT r = f32[1024,1024]{{1,0}} multiply(m, b)
}}

ENTRY main {{
  x = f32[1024,1024]{{1,0}} parameter(0)
  ROOT f = f32[1024,1024]{{1,0}} fusion(x), kind=kLoop, calls=fused_computation
}}
"""


# A scan step: tanh of row i of the rows, times 2, written over row i of the carried buffer in place (the output is
# passed in the buffer's slice: ``_IN_PLACE``).
_SCAN_STEP = """HloModule scan_step

fused_computation {
  buffer = f32[64,4096]{1,0} parameter(0)
  rows = f32[64,4096]{1,0} parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  row = f32[1,4096]{1,0} dynamic-slice(rows, i, zero), dynamic_slice_sizes={1,4096}
  t = f32[1,4096]{1,0} tanh(row)
  two = f32[] constant(2)
  b = f32[1,4096]{1,0} broadcast(two), dimensions={}
  m = f32[1,4096]{1,0} multiply(t, b)
  ROOT u = f32[64,4096]{1,0} dynamic-update-slice(buffer, m, i, zero)
}

ENTRY main {
  buffer = f32[64,4096]{1,0} parameter(0)
  rows = f32[64,4096]{1,0} parameter(1)
  i = s32[] parameter(2)
  ROOT f = f32[64,4096]{1,0} fusion(buffer, rows, i), kind=kLoop, calls=fused_computation
}
"""


_IN_PLACE = (0, 1, 2, 0)


@pytest.mark.parametrize(("hlo", "slices"), [(_math_hlo("tanh"), None), (_math_hlo("exponential"), None),
                                             (_SCAN_STEP, _IN_PLACE)],
                         ids=["tanh", "exponential", "dynamic-update-slice"])
def test_fusions_calling_a_math_function_prefetch_every_line_ahead(hlo: str, slices: tuple[int, ...] | None) -> None:
    expected_emitter = "loop" if slices is None else "in_place_dynamic_update_slice"
    assert emitter_name(only_fusion(xlapy.parse_hlo(hlo)), slices) == expected_emitter
    count, text = _prefetches(hlo, slices)
    assert PREFETCH_ATTR not in text
    loads = re.findall(r"llvm\.load .* -> vector<(\d+)xf32>", text)
    assert loads and count == sum(int(lanes) * 4 // 64 for lanes in loads)
    prefetches = re.findall(r'llvm.getelementptr %\S+\[(\d+)\].*\n.*"llvm.intr.prefetch".*hint = (\d+)', text)
    assert len(prefetches) == count and {int(hint) for _, hint in prefetches} == {ALL_LEVELS}
    assert min(int(offset) for offset, _ in prefetches) == MATH_PREFETCH_BYTES


@pytest.mark.parametrize("op", ["rsqrt", "sqrt", "negate"])
def test_fusions_of_cheap_ops_do_not_prefetch(op: str) -> None:
    count, text = _prefetches(_math_hlo(op))
    assert count == 0 and PREFETCH_ATTR not in text


def test_a_prefetching_math_fusion_computes_what_the_interpreter_does() -> None:
    module = xlapy.parse_hlo(_SCAN_STEP)
    rng = np.random.default_rng(0)
    buffer, rows = (rng.standard_normal((64, 4096)).astype(np.float32) for _ in range(2))
    executable = xlapy.compile(module, backend="cpu")
    for i in (np.int32(0), np.int32(63), np.int32(70)):  # the last start is clamped to 63
        expected = xlapy.evaluate(module, buffer, rows, i)
        assert_within_ulps(executable(buffer, rows, i), expected, module, ulp_tolerance(module), context=f"i={i}")
