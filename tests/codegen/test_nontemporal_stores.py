"""Streaming stores (`nontemporal-stores`): which stores become `!nontemporal` (large write-only outputs, whole
aligned cache lines) and which stay normal (small outputs, outputs read back or written over an operand, stores
not provably aligned); the LLVM IR and the machine code they become (aligned `vmovntps`, a closing `sfence`); the
check of the buffers' alignment; and programs whose results are streamed, bit for bit equal to the interpreter."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from llvmlite import binding as llvm

import xlapy
from tests.codegen.emitter_cases import kernel_thunks
from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel, translate_module
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.passes.nontemporal_stores import NontemporalStoresPass, trailing_zero_bits
from xlapy.codegen.pipeline import device_passes, lower_fusion, target_passes
from xlapy.codegen.streaming import RESULT_STREAMING_MIN_BYTES, STREAMING_MIN_BYTES, writes_program_result
from xlapy.errors import VerifyError
from xlapy.runtime.thunks.base import ALIGNMENT, allocate

X86 = llvm.get_process_triple().startswith("x86_64")


def _lower(text: str, min_bytes: int = 4096, result_min_bytes: int = 4096, program_result: bool = False):
    module = parse_mlir(text)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    streaming = NontemporalStoresPass(program_result=program_result, min_bytes=min_bytes,
                                      result_min_bytes=result_min_bytes)
    streaming.apply(None, module)  # type: ignore[arg-type]
    return module


def _vector_copy(n: int, lanes: int, element: str = "f32", offset: int = 0, threads: int = 4) -> str:
    """Thread ``th`` of block ``bl`` copies ``lanes`` elements at ``(bl * threads + th) * lanes + offset``."""
    per_block = threads * lanes
    blocks = (n - offset) // per_block
    return f"""
func.func @main(%in: tensor<{n}x{element}>, %out: tensor<{n}x{element}>) -> tensor<{n}x{element}> {{
  %lanes = arith.constant {lanes} : index
  %per_block = arith.constant {per_block} : index
  %offset = arith.constant {offset} : index
  %pad = arith.constant 0.0 : {element}
  %th = gpu.thread_id x {{xla.range = [0 : index, {threads - 1} : index]}}
  %bl = gpu.block_id x {{xla.range = [0 : index, {blocks - 1} : index]}}
  %t = arith.muli %th, %lanes : index
  %b = arith.muli %bl, %per_block : index
  %tb = arith.addi %t, %b : index
  %i = arith.addi %tb, %offset : index
  %v = vector.transfer_read %in[%i], %pad {{in_bounds = [true]}} : tensor<{n}x{element}>, vector<{lanes}x{element}>
  %w = vector.transfer_write %v, %out[%i] {{in_bounds = [true]}} : vector<{lanes}x{element}>, tensor<{n}x{element}>
  return %w : tensor<{n}x{element}>
}}
"""


STREAMED = """
CHECK: func.func @main(%in: !llvm.ptr {{.*}}, %out: !llvm.ptr {{{.*}}llvm.align = 64 : i64})
CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 64 : i64, nontemporal} : vector<16xf32>, !llvm.ptr
"""


def test_whole_aligned_lines_of_a_large_write_only_output_are_streamed(tmp_path: Path) -> None:
    filecheck(print_mlir(_lower(_vector_copy(4096, 16))), STREAMED, tmp_path)


@pytest.mark.parametrize("case", ["small", "unaligned", "half_line", "scalar"])
def test_other_stores_stay_normal(case: str) -> None:
    text, min_bytes = {
        "small": (_vector_copy(4096, 16), 4096 * 4 + 1),
        "unaligned": (_vector_copy(4096, 16, offset=8), 4096),  # 32 bytes past a line
        "half_line": (_vector_copy(4096, 8), 4096),  # vector<8xf32>: 32 bytes
        "scalar": (_vector_copy(4096, 1), 4096),
    }[case]
    printed = print_mlir(_lower(text, min_bytes, min_bytes))
    assert "nontemporal" not in printed and "llvm.align" not in printed


READ_BACK = """
func.func @main(%in: tensor<4096xf32>, %out: tensor<4096xf32>) -> tensor<4096xf32> {
  %c16 = arith.constant 16 : index
  %pad = arith.constant 0.0 : f32
  %th = gpu.thread_id x {xla.range = [0 : index, 255 : index]}
  %i = arith.muli %th, %c16 : index
  %v = vector.transfer_read %in[%i], %pad {in_bounds = [true]} : tensor<4096xf32>, vector<16xf32>
  %w = vector.transfer_write %v, %out[%i] {in_bounds = [true]} : vector<16xf32>, tensor<4096xf32>
  %again = vector.transfer_read %w[%i], %pad {in_bounds = [true]} : tensor<4096xf32>, vector<16xf32>
  %twice = arith.addf %again, %again : vector<16xf32>
  %w2 = vector.transfer_write %twice, %w[%i] {in_bounds = [true]} : vector<16xf32>, tensor<4096xf32>
  return %w2 : tensor<4096xf32>
}
"""

# The output is the operand's slice: an update in place.
IN_PLACE = """
func.func @main(%in: tensor<4096xf32> {xla.slice_index = 0 : i64},
                %update: tensor<1024xf32> {xla.slice_index = 1 : i64},
                %out: tensor<4096xf32> {xla.slice_index = 0 : i64}) -> tensor<4096xf32> {
  %c16 = arith.constant 16 : index
  %pad = arith.constant 0.0 : f32
  %th = gpu.thread_id x {xla.range = [0 : index, 63 : index]}
  %i = arith.muli %th, %c16 : index
  %v = vector.transfer_read %update[%i], %pad {in_bounds = [true]} : tensor<1024xf32>, vector<16xf32>
  %w = vector.transfer_write %v, %out[%i] {in_bounds = [true]} : vector<16xf32>, tensor<4096xf32>
  return %w : tensor<4096xf32>
}
"""


@pytest.mark.parametrize("text", [READ_BACK, IN_PLACE], ids=["read_back", "in_place"])
def test_outputs_read_or_updated_in_place_stay_normal(text: str) -> None:
    module = _lower(text)
    printed = print_mlir(module)
    assert "llvm.store" in printed and "nontemporal" not in printed
    if text is IN_PLACE:
        assert "xla.aliased" in printed  # lower-tensors says the pointer is an operand too


def test_results_of_the_program_are_streamed_from_a_smaller_size() -> None:
    text, size = _vector_copy(4096, 16), 4096 * 4
    assert "nontemporal" not in print_mlir(_lower(text, min_bytes=size + 1, result_min_bytes=size))
    assert "nontemporal" in print_mlir(_lower(text, min_bytes=size + 1, result_min_bytes=size, program_result=True))
    assert RESULT_STREAMING_MIN_BYTES < STREAMING_MIN_BYTES
    # The pipeline's passes for a kernel writing results of the program.
    (streaming,) = [p for p in device_passes(Device.host(), program_result=True) if p.name == "nontemporal-stores"]
    assert streaming.program_result and not any(
        getattr(p, "program_result", False) for p in device_passes(Device.host()))


INDICES = """
func.func @main(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c512 = arith.constant 512 : index
  %c1792 = arith.constant 1792 : index
  %c1536 = arith.constant 1536 : index
  %th = gpu.thread_id x {xla.range = [0 : index, 1 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 4095 : index]}
  scf.for %chunk = %c0 to %c4 step %c1 {
    %r = arith.remui %bl, %c2 : index
    %rm = arith.muli %r, %c512 : index
    %q = arith.divui %bl, %c2 : index
    %qm = arith.muli %q, %c1792 : index
    %a = arith.addi %rm, %qm : index
    %t = arith.muli %th, %c64 : index
    %at = arith.addi %a, %t : index
    %k = arith.muli %chunk, %c128 : index
    %concatenate = arith.addi %at, %k : index
    %plus = arith.addi %concatenate, %c1536 : index
    %half = arith.divui %t, %c2 : index
    %shifted = arith.shli %th, %c4 : index
    %masked = arith.andi %n, %c512 : index
    %unknown = arith.addi %t, %n : index
    %odd = arith.divui %t, %c1792 : index
    %cast = arith.index_cast %plus : index to i64
  }
  scf.for %step = %c0 to %c512 step %c128 {
    %s = arith.addi %step, %c64 : index
  }
  return
}
"""


def test_known_trailing_zero_bits_of_index_arithmetic() -> None:
    # By hand: (bl mod 2) * 512 + (bl / 2) * 1792 + th * 64 + chunk * 128 is a multiple of 64 (2^6, th * 64 the
    # least), + 1536 (2^9 * 3) keeps that; th * 64 / 2 is a multiple of 32; th << 4 of 16; n & 512 of 512; th * 64
    # + n of nothing known; th * 64 / 1792 (not a power of two) of nothing known; a loop from 0 by 128, + 64: 64.
    module = parse_mlir(INDICES)
    values = {v.name_hint: v for op in module.walk() for v in op.results if v.name_hint}
    expected = {"concatenate": 6, "plus": 6, "cast": 6, "half": 5, "shifted": 4, "masked": 9, "unknown": 0, "odd": 0,
                "rm": 9, "qm": 8, "k": 7, "s": 6}
    assert {name: trailing_zero_bits(values[name]) for name in expected} == expected


def test_streaming_stores_in_llvm_ir_and_machine_code(tmp_path: Path) -> None:
    module = _lower(_vector_copy(4096, 16))
    llvm_ir = str(translate_module(module)[0])
    checks = """
CHECK: define internal void @"main.kernel"(ptr noalias %{{.*}}, ptr noalias align 64 %{{.*}}, i64 %{{.*}}, i64 %{{.*}})
CHECK: exit:
CHECK-NEXT: call void @"llvm.x86.sse.sfence"()
CHECK-NEXT: ret void
CHECK: store <16 x float> %{{.*}}, ptr %{{.*}}, align 64, !nontemporal ![[ONE:[0-9]+]]
CHECK: ![[ONE]] = !{ i32 1 }
"""
    if not X86:
        pytest.skip("the store fence checked is x86's")
    filecheck(llvm_ir, checks, tmp_path)
    kernel = CpuKernel.from_llvm_ir(llvm_ir)
    assert re.search(r"vmovntps\s+%[xyz]mm\d+, ", kernel.asm) and re.search(r"^\s+sfence", kernel.asm, re.M)
    assert not re.search(r"vmovq\s+%xmm\d+, \(", kernel.asm)  # not split into scalar pieces


def test_normal_kernels_have_no_fence() -> None:
    llvm_ir = str(translate_module(_lower(_vector_copy(4096, 16), min_bytes=1 << 30, result_min_bytes=1 << 30))[0])
    assert "nontemporal" not in llvm_ir and "sfence" not in llvm_ir and "align 64 %" not in llvm_ir


def test_buffers_of_streamed_outputs_must_start_on_a_line() -> None:
    n = 4096
    kernel = CpuKernel.compile(_lower(_vector_copy(n, 16)))
    assert kernel.signature.buffer_alignments == (1, ALIGNMENT)
    x = (np.arange(n) * 0.25 - 3).astype(np.float32)
    out = allocate(n * 4).view(np.float32)
    kernel([x, out])
    assert_same(out, x, exact_bits=True)
    # The same kernel from its object code keeps the requirement.
    reloaded = CpuKernel.from_object(kernel.object_code)
    assert reloaded.signature == kernel.signature
    shifted = allocate(n * 4 + 16)[16:].view(np.float32)
    with pytest.raises(VerifyError, match="does not start on a 64-byte boundary"):
        reloaded([x, shifted])


def test_lanes_stored_one_by_one_are_not_streamed() -> None:
    # Per-lane code (vector.extract) keeps lanes as scalars: a streamed store becomes scalar stores, each aligned
    # as its offset allows, with no `!nontemporal` (LLVM's loop vectorizer would leave the loop scalar).
    n = 4096
    text = _vector_copy(n, 16).replace(
        "  %w = vector.transfer_write %v,",
        "  %c3 = arith.constant 3 : index\n"
        "  %x3 = vector.extract %v[%c3] : f32 from vector<16xf32>\n"
        "  %y3 = arith.addf %x3, %x3 : f32\n"
        "  %u = vector.insert %y3, %v [%c3] : f32 into vector<16xf32>\n"
        "  %w = vector.transfer_write %u,")
    module = _lower(text)
    assert "nontemporal" in print_mlir(module)
    llvm_ir = str(translate_module(module)[0])
    assert "!nontemporal" not in llvm_ir and "sfence" not in llvm_ir
    alignments = re.findall(r"store float %[^,]+, ptr %[^,]+, align (\d+)", llvm_ir)
    assert alignments[:5] == ["64", "4", "8", "4", "16"]
    kernel = CpuKernel.compile(module)
    x = (np.arange(n) * 0.5 - 7).astype(np.float32)
    out = allocate(n * 4).view(np.float32)
    kernel([x, out])
    expected = x.copy()
    expected[3::16] *= 2
    assert_same(out, expected, exact_bits=True)


def test_the_gpu_pipeline_does_not_stream() -> None:
    assert "nontemporal-stores" in [p.name for p in target_passes("cpu")]
    assert "nontemporal-stores" not in [p.name for p in target_passes("gpu")]


# --- whole programs -----------------------------------------------------------------------------------------------

BF16 = np.dtype(ml_dtypes.bfloat16)

PROGRAMS = {
    # 8 MiB f32 results (4 MiB bf16): transposes, a concatenate, gelu (f32 and bf16, tanh) and a broadcast chain.
    "transpose": ("p: f32[1024,2048]", "ROOT r = f32[2048,1024]{1,0} transpose(p), dimensions={1,0}"),
    "transpose_021": ("p: f32[8,512,512]", "ROOT r = f32[8,512,512]{2,1,0} transpose(p), dimensions={0,2,1}"),
    "concatenate": ("p: f32[2048,512], q: f32[2048,384], s: f32[2048,128]",
                    "n = f32[2048,384]{1,0} negate(q)\n"
                    "ROOT r = f32[2048,1024]{1,0} concatenate(p, n, s), dimensions={1}"),
    "gelu": ("p: f32[2048,1024]", None),
    "gelu_bf16": ("p: bf16[2048,1024]", None),
    "broadcast_chain": ("p: f32[2048,1024], row: f32[1024], column: f32[2048]",
                        "b = f32[2048,1024]{1,0} broadcast(row), dimensions={1}\n"
                        "c = f32[2048,1024]{1,0} broadcast(column), dimensions={0}\n"
                        "a = f32[2048,1024]{1,0} add(p, b)\n"
                        "m = f32[2048,1024]{1,0} multiply(a, c)\n"
                        "z = f32[] constant(0)\n"
                        "zb = f32[2048,1024]{1,0} broadcast(z), dimensions={}\n"
                        "ROOT r = f32[2048,1024]{1,0} maximum(m, zb)"),
}


def _gelu_body(element: str) -> str:
    shape = f"{element}[2048,1024]{{1,0}}"

    def constant(name: str, value: float) -> str:
        return f"{name}s = {element}[] constant({value})\n{name} = {shape} broadcast({name}s), dimensions={{}}\n"

    return (constant("half", 0.5) + constant("one", 1) + constant("k", 0.044715) + constant("root", 0.7978845608)
            + f"x2 = {shape} multiply(p, p)\nx3 = {shape} multiply(x2, p)\nkx3 = {shape} multiply(k, x3)\n"
            f"inner = {shape} add(p, kx3)\nscaled = {shape} multiply(root, inner)\nt = {shape} tanh(scaled)\n"
            f"t1 = {shape} add(one, t)\nh = {shape} multiply(half, t1)\nROOT r = {shape} multiply(p, h)")


def _program(name: str) -> str:
    params, body = PROGRAMS[name]
    if body is None:
        body = _gelu_body("bf16" if name.endswith("bf16") else "f32")
    lines = [f"{p.split(':')[0].strip()} = {p.split(':')[1].strip()}{{{_layout(p)}}} parameter({i})"
             for i, p in enumerate(params.split(", "))]
    return "HloModule {}\n\nENTRY main {{\n  {}\n  {}\n}}\n".format(
        name, "\n  ".join(lines), "\n  ".join(body.split("\n")))


def _layout(parameter: str) -> str:
    rank = parameter.count(",") + 1
    return ",".join(str(d) for d in range(rank - 1, -1, -1))


def _arguments(module: xlapy.HloModule, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arguments = []
    for parameter in module.entry.parameters:
        dtype = BF16 if parameter.shape.element_type == "bf16" else np.float32
        arguments.append((rng.standard_normal(parameter.shape.dimensions) * 2).astype(dtype))
    return arguments


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_streamed_results_equal_the_interpreter(name: str) -> None:
    module = xlapy.parse_hlo(_program(name))
    executable = xlapy.compile(module, backend="cpu")
    signature = kernel_thunks(executable)[-1].kernel.signature
    # The kernel writing the result streams it (its output must start on a cache line).
    assert signature.alignment(len(signature.buffer_sizes) - 1) == ALIGNMENT
    arguments = _arguments(module, seed=5)
    assert_same(executable(*arguments), xlapy.evaluate(module, *arguments), exact_bits=True)


BARRIER = """HloModule intermediate

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[2048,1024]{1,0} parameter(0)
  a = f32[2048,1024]{1,0} multiply(p, p)
  b = f32[2048,1024]{1,0} opt-barrier(a)
  z = f32[] constant(0)
  ROOT r = f32[2048]{0} reduce(b, z), dimensions={1}, to_apply=add
}
"""


def test_an_intermediate_the_next_kernel_reads_is_not_streamed() -> None:
    # 8 MiB: below STREAMING_MIN_BYTES, so the reduce finds it in the caches.
    module = xlapy.parse_hlo(BARRIER)
    executable = xlapy.compile(module, backend="cpu")
    (square,) = [t for t in kernel_thunks(executable) if t.fusion.name == "a"]
    assert square.kernel.signature.buffer_alignments == ()
    lowered = lower_fusion(square.fusion, Device.host(), slice_indices=square.slice_indices)
    assert "nontemporal" not in print_mlir(lowered.module)


TUPLE = """HloModule results

body {
  s = f32[64] parameter(0)
  ROOT d = f32[64] add(s, s)
}

cond {
  s = f32[64] parameter(0)
  ROOT t = pred[] constant(false)
}

ENTRY main {
  p = f32[64] parameter(0)
  only = f32[64] negate(p)
  shared = f32[64] exponential(p)
  again = f32[64] add(shared, p)
  w = f32[64] while(p), condition=cond, body=body
  ROOT r = (f32[64], f32[64], f32[64], f32[64]) tuple(only, shared, again, w)
}
"""


def test_which_instructions_write_results_of_the_program() -> None:
    module = xlapy.parse_hlo(TUPLE)
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    # `shared` is also read by `again`; `d` is in a loop's body.
    assert {name: writes_program_result(by_name[name]) for name in ("only", "shared", "again", "d", "p")} == \
        {"only": True, "shared": False, "again": True, "d": False, "p": False}
