"""The CPU backend: lowered MLIR (after lower-tensors) → LLVM → JIT, run on numpy arrays and compared exactly
with numpy; kernels reloaded from object code; block ranges run from several Python threads; SIMD code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from llvmlite import binding as llvm

from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel, KernelSignature, translate_module
from xlapy.codegen.mlir_text import parse_mlir
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.interpreter.xla_cpu_math import exp_f32, tanh_f32

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": BF16,
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}


def compile_text(text: str, bf16_instruction: bool | None = None) -> CpuKernel:
    module = parse_mlir(text)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    return CpuKernel.compile(module, bf16_instruction=bf16_instruction)


def elementwise(n: int, inputs: list[str], outputs: list[str], body: str, threads: int = 8) -> str:
    """A kernel where thread `th` of block `bl` computes element `bl * threads + th`: the inputs are `%x0`, `%x1`,
    ..., the body defines `%y0`, `%y1`, ... (one per output)."""
    assert n % threads == 0
    tensor = [f"tensor<{n}x{t}>" for t in [*inputs, *outputs]]
    params = [f"%in{i}: {tensor[i]}" for i in range(len(inputs))]
    params += [f"%out{j}: {tensor[len(inputs) + j]}" for j in range(len(outputs))]
    out_types = tensor[len(inputs) :]
    lines = [
        f"func.func @main({', '.join(params)}) -> ({', '.join(out_types)}) {{",
        f"  %threads = arith.constant {threads} : index",
        f"  %th = gpu.thread_id x {{xla.range = [0 : index, {threads - 1} : index]}}",
        f"  %bl = gpu.block_id x {{xla.range = [0 : index, {n // threads - 1} : index]}}",
        "  %b = arith.muli %bl, %threads : index",
        "  %i = arith.addi %b, %th : index",
    ]
    lines += [f"  %x{i} = tensor.extract %in{i}[%i] : {tensor[i]}" for i in range(len(inputs))]
    lines += ["  " + line.strip() for line in body.strip().splitlines()]
    lines += [f"  %w{j} = tensor.insert %y{j} into %out{j}[%i] : {t}" for j, t in enumerate(out_types)]
    lines += [f"  return {', '.join(f'%w{j}' for j in range(len(outputs)))} : {', '.join(out_types)}", "}"]
    return "\n".join(lines)


def run(kernel: CpuKernel, inputs: list[np.ndarray], outputs: list[str], n: int) -> list[np.ndarray]:
    results = [np.zeros(n, DTYPES[t]) for t in outputs]
    kernel([*inputs, *results], 0, kernel.signature.blocks)
    return results


def same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Equal, NaNs included (any NaN matches any NaN)."""
    assert actual.dtype == expected.dtype
    if actual.dtype.kind in "biu":
        return bool(np.array_equal(actual, expected))
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(e)
    equal = (a == e) & (np.signbit(a) == np.signbit(e))
    return bool(np.all(both_nan | equal))


SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 1e30, -7.25]


def float_inputs(n: int, dtype: np.dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(n) * 4
    values[: len(SPECIALS)] = SPECIALS
    with np.errstate(over="ignore"):
        return rng.permutation(values).astype(dtype)


# --- elementwise arithmetic -------------------------------------------------------------------------------------


def test_add_mul_with_thread_and_block_loops() -> None:
    n = 1024
    body = "%s = arith.addf %x0, %x1 : f32\n%y0 = arith.mulf %s, %x0 : f32"
    kernel = compile_text(elementwise(n, ["f32", "f32"], ["f32"], body, threads=64))
    assert kernel.signature == KernelSignature((4 * n, 4 * n, 4 * n), 64, 16)
    a, b = float_inputs(n, np.float32, 1), float_inputs(n, np.float32, 2)
    (out,) = run(kernel, [a, b], ["f32"], n)
    with np.errstate(all="ignore"):
        assert same_bits(out, (a + b) * a)


@pytest.mark.parametrize("element", ["f32", "f64", "f16", "bf16"])
def test_float_ops_round_after_every_op(element: str) -> None:
    body = f"""
    %s = arith.addf %x0, %x1 : {element}
    %d = arith.subf %s, %x1 : {element}
    %m = arith.mulf %d, %x0 : {element}
    %q = arith.divf %m, %x1 : {element}
    %y0 = arith.negf %q : {element}
    """
    n = 256
    dtype = DTYPES[element]
    a, b = float_inputs(n, dtype, 3), float_inputs(n, dtype, 4)
    (out,) = run(compile_text(elementwise(n, [element, element], [element], body)), [a, b], [element], n)
    with np.errstate(all="ignore"):
        assert same_bits(out, -((((a + b) - b) * a) / b))


UNARY = {
    "math.absf": np.abs,
    "math.floor": np.floor,
    "math.ceil": np.ceil,
    "math.trunc": np.trunc,
    "math.roundeven": np.rint,
    "math.round": lambda x: np.where(np.abs(x) % 1 == 0.5, np.trunc(x) + np.sign(x), np.rint(x)).astype(x.dtype),
    "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: np.float32(1) / np.sqrt(x),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_float_unary_math(op: str) -> None:
    n = 128
    x = float_inputs(n, np.float32, 5)
    x[:4] = [0.5, -0.5, 2.5, -3.5]  # halfway cases of the roundings
    (out,) = run(compile_text(elementwise(n, ["f32"], ["f32"], f"%y0 = {op} %x0 : f32")), [x], ["f32"], n)
    with np.errstate(all="ignore"):
        assert same_bits(out, UNARY[op](x))


def test_binary_and_ternary_float_math() -> None:
    body = """
    %y0 = arith.maximumf %x0, %x1 : f32
    %y1 = arith.minimumf %x0, %x1 : f32
    %y2 = math.copysign %x0, %x1 : f32
    %y3 = math.fma %x0, %x1, %x2 : f32
    """
    n = 256
    a, b, c = (float_inputs(n, np.float32, s) for s in (6, 7, 8))
    b[a == 0] = 1.0  # maximum/minimum of signed zeros: numpy's order differs from IEEE's
    outs = run(compile_text(elementwise(n, ["f32"] * 3, ["f32"] * 4, body)), [a, b, c], ["f32"] * 4, n)
    with np.errstate(all="ignore"):
        fma = (a.astype(np.float64) * b + c).astype(np.float32)  # exact product, one rounding of the sum
        assert same_bits(outs[0], np.maximum(a, b))
        assert same_bits(outs[1], np.minimum(a, b))
        assert same_bits(outs[2], np.copysign(a, b))
        finite = np.isfinite(a * b + c)
        assert same_bits(outs[3][finite], fma[finite])


CMPF = {
    "false": lambda a, b: np.zeros(a.shape, bool),
    "oeq": lambda a, b: a == b,
    "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b,
    "olt": lambda a, b: a < b,
    "ole": lambda a, b: a <= b,
    "one": lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
    "ord": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    "ueq": lambda a, b: (a == b) | np.isnan(a) | np.isnan(b),
    "ugt": lambda a, b: ~(a <= b),
    "uge": lambda a, b: ~(a < b),
    "ult": lambda a, b: ~(a >= b),
    "ule": lambda a, b: ~(a > b),
    "une": lambda a, b: a != b,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "true": lambda a, b: np.ones(a.shape, bool),
}


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_compare_floats_and_select(element: str) -> None:
    """Every cmpf predicate into pred outputs (bytes), and a select of the inputs."""
    predicates = sorted(CMPF)
    body = "\n".join(f"%y{k} = arith.cmpf {p}, %x0, %x1 : {element}" for k, p in enumerate(predicates))
    body += f"\n%y{len(predicates)} = arith.select %y{predicates.index('oeq')}, %x0, %x1 : {element}"
    n = 256
    a, b = float_inputs(n, DTYPES[element], 9), float_inputs(n, DTYPES[element], 10)
    b[:32] = a[:32]  # equal pairs
    outputs = ["i1"] * len(predicates) + [element]
    results = run(compile_text(elementwise(n, [element, element], outputs, body)), [a, b], outputs, n)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for predicate, result in zip(predicates, results):
        assert np.array_equal(result, CMPF[predicate](af, bf)), predicate
    assert same_bits(results[-1], np.where(af == bf, a, b))


CMPI = {
    "eq": (np.equal, np.int32),
    "ne": (np.not_equal, np.int32),
    "slt": (np.less, np.int32),
    "sle": (np.less_equal, np.int32),
    "sgt": (np.greater, np.int32),
    "sge": (np.greater_equal, np.int32),
    "ult": (np.less, np.uint32),
    "ule": (np.less_equal, np.uint32),
    "ugt": (np.greater, np.uint32),
    "uge": (np.greater_equal, np.uint32),
}


def int_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(-100, 100, n, dtype=np.int64)
    values[:6] = [0, -1, 1, -(2**31), 2**31 - 1, 7]
    return rng.permutation(values).astype(np.int32)


def test_compare_integers() -> None:
    predicates = sorted(CMPI)
    body = "\n".join(f"%y{k} = arith.cmpi {p}, %x0, %x1 : i32" for k, p in enumerate(predicates))
    n = 512
    a, b = int_inputs(n, 11), int_inputs(n, 12)
    b[:64] = a[:64]
    results = run(compile_text(elementwise(n, ["i32", "i32"], ["i1"] * 10, body)), [a, b], ["i1"] * 10, n)
    for predicate, result in zip(predicates, results):
        compare, view = CMPI[predicate]
        assert np.array_equal(result, compare(a.view(view), b.view(view))), predicate


def _xla_division(x: np.ndarray, y: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """XLA's integer division: truncating, x / 0 = -1, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0."""
    if signed:
        xs, ys = x.astype(np.int64), y.astype(np.int64)
    else:
        xs, ys = x.view(np.uint32).astype(np.int64), y.view(np.uint32).astype(np.int64)
    safe = np.where(ys == 0, 1, ys)
    quotient = np.sign(xs) * np.sign(safe) * (np.abs(xs) // np.abs(safe))
    remainder = xs - quotient * safe
    quotient, remainder = np.where(ys == 0, -1, quotient), np.where(ys == 0, xs, remainder)
    return ((quotient & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
            (remainder & 0xFFFFFFFF).astype(np.uint32).view(np.int32))  # fmt: skip


def test_integer_division_never_traps() -> None:
    body = """
    %y0 = arith.divsi %x0, %x1 : i32
    %y1 = arith.remsi %x0, %x1 : i32
    %y2 = arith.divui %x0, %x1 : i32
    %y3 = arith.remui %x0, %x1 : i32
    %y4 = arith.floordivsi %x0, %x1 : i32
    %y5 = arith.ceildivsi %x0, %x1 : i32
    """
    n = 512
    x, y = int_inputs(n, 13), int_inputs(n, 14)
    x[:3], y[:3] = [-(2**31), 5, -7], [-1, 0, 2]
    outs = run(compile_text(elementwise(n, ["i32", "i32"], ["i32"] * 6, body)), [x, y], ["i32"] * 6, n)
    q, r = _xla_division(x, y, signed=True)
    qu, ru = _xla_division(x, y, signed=False)
    assert np.array_equal(outs[0], q) and np.array_equal(outs[1], r)
    assert np.array_equal(outs[2], qu) and np.array_equal(outs[3], ru)
    assert outs[0][0] == -(2**31) and outs[1][0] == 0 and outs[0][1] == -1 and outs[1][1] == 5
    big_x, big_y = x.astype(np.int64), np.where(y == 0, 1, y).astype(np.int64)
    floor, ceil = big_x // big_y, -((-big_x) // big_y)
    ok = (y != 0) & ~((x == -(2**31)) & (y == -1))
    assert np.array_equal(outs[4][ok], floor[ok].astype(np.int32))
    assert np.array_equal(outs[5][ok], ceil[ok].astype(np.int32))
    assert np.all(outs[4][y == 0] == -1) and np.all(outs[5][y == 0] == -1)


def test_integer_bit_ops() -> None:
    body = """
    %c3 = arith.constant 3 : i32
    %y0 = arith.andi %x0, %x1 : i32
    %y1 = arith.ori %x0, %x1 : i32
    %y2 = arith.xori %x0, %x1 : i32
    %y3 = arith.shli %x0, %c3 : i32
    %y4 = arith.shrsi %x0, %c3 : i32
    %y5 = arith.shrui %x0, %c3 : i32
    %y6 = math.ctpop %x0 : i32
    %y7 = math.ctlz %x0 : i32
    %y8 = math.absi %x0 : i32
    %y9 = arith.maxsi %x0, %x1 : i32
    %y10 = arith.minui %x0, %x1 : i32
    """
    n = 256
    x, y = int_inputs(n, 15), int_inputs(n, 16)
    outs = run(compile_text(elementwise(n, ["i32", "i32"], ["i32"] * 11, body)), [x, y], ["i32"] * 11, n)
    u = x.view(np.uint32)
    popcount = np.array([bin(int(v)).count("1") for v in u], np.int32)
    leading = np.array([32 - int(v).bit_length() for v in u], np.int32)
    expected = [x & y, x | y, x ^ y, x << 3, x >> 3, (u >> 3).view(np.int32), popcount, leading,
                np.abs(x), np.maximum(x, y), np.minimum(u, y.view(np.uint32)).view(np.int32)]  # fmt: skip
    for k, (out, want) in enumerate(zip(outs, expected)):
        assert np.array_equal(out, want), k


# --- conversions ------------------------------------------------------------------------------------------------


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """Correct (single) rounding to nearest even of float64 values in bf16's normal range to bf16."""
    mantissa, exponent = np.frexp(values)
    rounded = np.ldexp(np.rint(mantissa * 256), exponent - 8)  # rint: half to even
    return rounded.astype(np.float32).astype(BF16)  # exact: representable


HARD_DOUBLES = np.array([
    1 + 2**-8 + 2**-30,  # just above a bf16 halfway point; f64 → f32 → bf16 would round down
    1 + 2**-8,  # exactly halfway: to even
    1 + 3 * 2**-8 - 2**-40,
    -(1 + 2**-8 + 2**-33),
    1 + 2**-11 + 2**-40,  # just above an f16 halfway point
    3.0e38, 1.5, -0.1, 1e-3, 12345.678,
])  # fmt: skip


def test_narrowing_rounds_once() -> None:
    body = """
    %y0 = arith.truncf %x0 : f64 to bf16
    %y1 = arith.truncf %x0 : f64 to f16
    %y2 = arith.truncf %x1 : f32 to bf16
    %y3 = arith.extf %y2 : bf16 to f64
    """
    n = 16
    doubles = np.resize(HARD_DOUBLES, n)
    floats = float_inputs(n, np.float32, 17)
    kernel = compile_text(elementwise(n, ["f64", "f32"], ["bf16", "f16", "bf16", "f64"], body, threads=4))
    outs = run(kernel, [doubles, floats], ["bf16", "f16", "bf16", "f64"], n)
    assert same_bits(outs[0], round_to_bf16(doubles))
    with np.errstate(all="ignore"):
        assert same_bits(outs[1], doubles.astype(np.float16))
    assert same_bits(outs[2], floats.astype(BF16))
    assert same_bits(outs[3], outs[2].astype(np.float64))


def vector_narrowing(n: int, lanes: int) -> str:
    """A kernel narrowing f32 vectors of `lanes` lanes to bf16 (`%out`), and the bf16 vectors widened back, times
    two, narrowed again and widened (`%twice`): bf16 arithmetic's round trips."""
    f32, bf16 = f"vector<{lanes}xf32>", f"vector<{lanes}xbf16>"
    return f"""
func.func @main(%input: tensor<{n}xf32>, %out: tensor<{n}xbf16>, %twice: tensor<{n}xf32>)
    -> (tensor<{n}xbf16>, tensor<{n}xf32>) {{
  %lanes = arith.constant {lanes} : index
  %pad = arith.constant 0.0 : f32
  %two = arith.constant dense<2.0> : {f32}
  %bl = gpu.block_id x {{xla.range = [0 : index, {n // lanes - 1} : index]}}
  %i = arith.muli %bl, %lanes : index
  %x = vector.transfer_read %input[%i], %pad {{in_bounds = [true]}} : tensor<{n}xf32>, {f32}
  %h = arith.truncf %x : {f32} to {bf16}
  %w = vector.transfer_write %h, %out[%i] {{in_bounds = [true]}} : {bf16}, tensor<{n}xbf16>
  %e = arith.extf %h : {bf16} to {f32}
  %d = arith.mulf %e, %two : {f32}
  %h2 = arith.truncf %d : {f32} to {bf16}
  %e2 = arith.extf %h2 : {bf16} to {f32}
  %w2 = vector.transfer_write %e2, %twice[%i] {{in_bounds = [true]}} : {f32}, tensor<{n}xf32>
  return %w, %w2 : tensor<{n}xbf16>, tensor<{n}xf32>
}}
"""


# f32 bit patterns around bf16's rounding: ties to even, just past them, the largest finite values and the ones that
# round up to infinity, infinities, signed zeros and NaNs with payloads.
BF16_EDGE_BITS = [
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF, 0xBF808000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000,
    0x00800000, 0x80800000, 0x00808000, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,
    0x7F800001, 0xFFC12345, 0x7FA00000, 0x7F81FFFF,
]  # fmt: skip
# Subnormal f32 bit patterns: a tie, the largest, ones that round up to the smallest normal bf16.
SUBNORMAL_BITS = [0x00008000, 0x00018000, 0x007FFFFF, 0x807F8000, 0x00000001, 0x807FFFFF, 0x00400000]


def expected_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 rounding to nearest even (ml_dtypes, which keeps subnormals and makes a NaN its sign's quiet NaN, as
    XLA:CPU does)."""
    with np.errstate(invalid="ignore"):
        return bits.view(np.float32).astype(BF16).view(np.uint16)


@pytest.mark.parametrize("lanes", [16, 32, 64])
@pytest.mark.parametrize("bf16_instruction", [True, False])
def test_vector_narrowing_to_bf16_is_exact(lanes: int, bf16_instruction: bool) -> None:
    # Vectors with no subnormal lane (the host's instruction, where there is one), with one subnormal lane at each
    # position and with only subnormal lanes (the integer sequence: the instruction would flush them to zero).
    rng = np.random.default_rng(lanes)
    normal = np.resize(np.array(BF16_EDGE_BITS, np.uint32), lanes)
    chunks = [normal, rng.permutation(normal), np.resize(np.array(SUBNORMAL_BITS, np.uint32), lanes)]
    for position in range(lanes):
        chunk = rng.permutation(normal)
        chunk[position] = SUBNORMAL_BITS[position % len(SUBNORMAL_BITS)]
        chunks.append(chunk)
    bits = np.concatenate(chunks)
    n = bits.size
    kernel = compile_text(vector_narrowing(n, lanes), bf16_instruction)
    out, twice = np.zeros(n, BF16), np.zeros(n, np.float32)
    kernel([bits.view(np.float32), out, twice], 0, kernel.signature.blocks)
    expected = expected_bf16_bits(bits)
    assert np.array_equal(out.view(np.uint16), expected)
    widened = (expected.astype(np.uint32) << 16).view(np.float32)
    with np.errstate(over="ignore"):
        doubled = expected_bf16_bits((widened * np.float32(2)).view(np.uint32))
    doubled_back = (doubled.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(twice.view(np.uint32), doubled_back.view(np.uint32))


def test_vector_narrowing_uses_the_hosts_instruction() -> None:
    if "+avx512bf16" not in llvm.get_host_cpu_features().flatten().split(","):
        pytest.skip("the host has no AVX512-BF16 conversion")
    module = parse_mlir(vector_narrowing(64, 32))
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    llvm_module, _ = translate_module(module)
    assm = CpuKernel.from_llvm_ir(str(llvm_module)).asm
    assert "vcvtneps2bf16" in assm and "vfpclassps" in assm


def test_integer_and_float_conversions() -> None:
    body = """
    %y0 = arith.sitofp %x0 : i32 to f32
    %y1 = arith.uitofp %x0 : i32 to f64
    %y2 = arith.sitofp %x0 : i32 to bf16
    %y3 = arith.fptosi %x1 : f32 to i32
    %y4 = arith.extsi %x0 : i32 to i64
    %y5 = arith.extui %x0 : i32 to i64
    %y6 = arith.trunci %x0 : i32 to i8
    %y7 = arith.bitcast %x1 : f32 to i32
    %ix = arith.index_cast %x0 : i32 to index
    %y8 = arith.index_cast %ix : index to i16
    """
    n = 64
    x = int_inputs(n, 18)
    x[:2] = [2**24 + 1, 16777217 * 64 + 3]  # not representable in f32/bf16
    f = (np.random.default_rng(19).standard_normal(n) * 1000).astype(np.float32)
    outputs = ["f32", "f64", "bf16", "i32", "i64", "i64", "i8", "i32", "i16"]
    outs = run(compile_text(elementwise(n, ["i32", "f32"], outputs, body)), [x, f], outputs, n)
    expected = [x.astype(np.float32), x.view(np.uint32).astype(np.float64), round_to_bf16(x.astype(np.float64)),
                np.trunc(f).astype(np.int32), x.astype(np.int64), x.view(np.uint32).astype(np.int64),
                x.astype(np.int8), f.view(np.int32), x.astype(np.int16)]  # fmt: skip
    for k, (out, want) in enumerate(zip(outs, expected)):
        assert same_bits(out, want), k


def test_pred_inputs_and_outputs() -> None:
    body = """
    %t = arith.constant true
    %y0 = arith.xori %x0, %t : i1
    %y1 = arith.extui %x0 : i1 to i32
    """
    n = 64
    p = np.random.default_rng(20).integers(0, 2, n).astype(bool)
    outs = run(compile_text(elementwise(n, ["i1"], ["i1", "i32"], body)), [p], ["i1", "i32"], n)
    assert np.array_equal(outs[0], ~p) and np.array_equal(outs[1], p.astype(np.int32))


def test_transcendentals_call_the_math_library() -> None:
    n = 256
    x = float_inputs(n, np.float32, 21)
    body = "%y0 = math.tanh %x0 : f32\n%y1 = math.exp %x0 : f32"
    kernel = compile_text(elementwise(n, ["f32"], ["f32", "f32"], body))
    tanh, exp = run(kernel, [x], ["f32", "f32"], n)
    with np.errstate(all="ignore"):
        # XLA:CPU's approximations (measured: 0 ulps, 6 seeds of the inputs)
        for actual, expected in ((tanh, tanh_f32(x)), (exp, exp_f32(x))):
            normal = np.isfinite(expected) & (np.abs(expected) > 1e-30) & (np.abs(expected) < 1e38)
            assert_same(actual[normal], expected[normal].astype(np.float32))
            assert np.array_equal(np.isnan(actual), np.isnan(expected))
    assert "xlapy.tanh" not in kernel.llvm_ir  # inlined


# --- vectors, loops, control flow -------------------------------------------------------------------------------


def gelu_like(n: int, element: str, threads: int = 32, vector: int = 4) -> str:
    """IR like the unrolled gelu of XLA's docs/emitters.md, with apply_indexing already lowered: a vector read per
    thread, per-lane scalar code, a vector write."""
    per_block = threads * vector
    lines = [
        f"func.func @main(%input: tensor<{n}x{element}>, %out: tensor<{n}x{element}>) -> tensor<{n}x{element}> {{",
        f"  %cv = arith.constant {vector} : index",
        f"  %cb = arith.constant {per_block} : index",
        f"  %pad = arith.constant 0.0 : {element}",
        f"  %c1 = arith.constant 0.044715 : {element}",
        f"  %c2 = arith.constant 0.5 : {element}",
        f"  %zero = arith.constant dense<0.0> : vector<{vector}x{element}>",
        f"  %th = gpu.thread_id x {{xla.range = [0 : index, {threads - 1} : index]}}",
        f"  %bl = gpu.block_id x {{xla.range = [0 : index, {n // per_block - 1} : index]}}",
        "  %t = arith.muli %th, %cv : index",
        "  %b = arith.muli %bl, %cb : index",
        "  %dim = arith.addi %t, %b : index",
        f"  %v = vector.transfer_read %input[%dim], %pad {{in_bounds = [true]}} : tensor<{n}x{element}>, vector<{vector}x{element}>",  # noqa: E501
    ]
    previous = "%zero"
    for k in range(vector):
        lines += [
            f"  %k{k} = arith.constant {k} : index",
            f"  %x{k} = vector.extract %v[%k{k}] : {element} from vector<{vector}x{element}>",
            f"  %a{k} = arith.mulf %x{k}, %x{k} : {element}",
            f"  %m{k} = arith.mulf %a{k}, %c1 : {element}",
            f"  %s{k} = arith.addf %m{k}, %x{k} : {element}",
            f"  %y{k} = arith.mulf %s{k}, %c2 : {element}",
            f"  %r{k} = vector.insert %y{k}, {previous} [%k{k}] : {element} into vector<{vector}x{element}>",
        ]
        previous = f"%r{k}"
    lines += [
        f"  %w = vector.transfer_write {previous}, %out[%dim] {{in_bounds = [true]}} : vector<{vector}x{element}>, tensor<{n}x{element}>",  # noqa: E501
        f"  return %w : tensor<{n}x{element}>",
        "}",
    ]
    return "\n".join(lines)


def gelu_like_reference(x: np.ndarray) -> np.ndarray:
    c1, c2 = x.dtype.type(0.044715), x.dtype.type(0.5)
    return ((x * x) * c1 + x) * c2  # numpy (and ml_dtypes) round after every op


@pytest.mark.parametrize("element", ["f32", "bf16", "f16"])
def test_vector_transfers(element: str) -> None:
    n = 4096
    x = float_inputs(n, DTYPES[element], 22)
    kernel = compile_text(gelu_like(n, element))
    (out,) = run(kernel, [x], [element], n)
    with np.errstate(all="ignore"):
        assert same_bits(out, gelu_like_reference(x))


def test_bf16_without_native_rounding_is_identical() -> None:
    n = 4096
    x = float_inputs(n, BF16, 23)
    native, emulated = (run(compile_text(gelu_like(n, "bf16"), flag), [x], ["bf16"], n)[0] for flag in (True, False))
    assert native.view(np.uint16).tolist() == emulated.view(np.uint16).tolist()


def test_simd_code() -> None:
    if "+avx2" not in llvm.get_host_cpu_features().flatten().split(","):
        pytest.skip("host without 256-bit vectors")
    kernel = compile_text(gelu_like(1 << 16, "f32"))
    assert "ymm" in kernel.asm or "zmm" in kernel.asm
    # The thread loop is vectorized across threads: loads of many threads' vectors at once.
    widths = [int(w) for w in re.findall(r"load <(\d+) x float>", kernel.llvm_ir)]
    assert widths and min(widths) >= 32


def test_dynamic_vector_positions_and_loops_with_scalar_iter_args() -> None:
    """Row sums (an scf.for carrying an f32 per thread) stored into lane `th mod 4` of a vector."""
    text = """
func.func @main(%m: tensor<64xf32>, %out: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %zeros = arith.constant dense<0.0> : vector<4xf32>
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 3 : index]}
  %row = arith.addi %th, %c0 : index
  %block_base = arith.muli %bl, %c4 : index
  %first = arith.addi %row, %block_base : index
  %start = arith.muli %first, %c4 : index
  %sum = scf.for %j = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
    %i = arith.addi %start, %j : index
    %x = tensor.extract %m[%i] : tensor<64xf32>
    %s = arith.addf %acc, %x : f32
    scf.yield %s : f32
  }
  %lane = arith.remui %th, %c4 : index
  %vec = vector.insert %sum, %zeros [%lane] : f32 into vector<4xf32>
  %back = vector.extract %vec[%lane] : f32 from vector<4xf32>
  %w = tensor.insert %back into %out[%first] : tensor<16xf32>
  return %w : tensor<16xf32>
}
"""
    m = np.arange(64, dtype=np.float32) * 0.25
    out = np.zeros(16, np.float32)
    kernel = compile_text(text)
    kernel([m, out], 0, 4)
    assert np.array_equal(out, m.reshape(16, 4).sum(axis=1))


def test_bounds_checks_with_scf_if() -> None:
    """A launch larger than the data: threads past the end do nothing."""
    body = """
    %c100 = arith.constant 100 : index
    %inside = arith.cmpi slt, %i, %c100 : index
    %r = scf.if %inside -> (tensor<128xf32>) {
      %x = tensor.extract %in0[%i] : tensor<128xf32>
      %d = arith.addf %x, %x : f32
      %w = tensor.insert %d into %out0[%i] : tensor<128xf32>
      scf.yield %w : tensor<128xf32>
    } else {
      scf.yield %out0 : tensor<128xf32>
    }
    """
    text = elementwise(128, [], ["f32"], "").replace("%w0 = tensor.insert %y0 into %out0[%i] : tensor<128xf32>", "")
    text = text.replace("(%out0", "(%in0: tensor<128xf32>, %out0").replace("return %w0", "return %r")
    text = text.replace("  %i = arith.addi %b, %th : index", "  %i = arith.addi %b, %th : index\n" + body)
    kernel = compile_text(text)
    x = np.arange(128, dtype=np.float32)
    out = np.full(128, -1.0, np.float32)
    kernel([x, out], 0, kernel.signature.blocks)
    assert np.array_equal(out[:100], 2 * x[:100]) and np.all(out[100:] == -1)


# --- object code, threads, errors -------------------------------------------------------------------------------


def test_kernel_from_object_code_computes_the_same() -> None:
    n = 4096
    kernel = compile_text(gelu_like(n, "bf16"))
    code = kernel.object_code
    assert isinstance(code, bytes) and code[:4] == b"\x7fELF"
    reloaded = CpuKernel.from_object(code)
    signature = reloaded.signature
    assert signature == kernel.signature == KernelSignature((2 * n, 2 * n), 32, n // 128)
    x = float_inputs(n, BF16, 24)
    expected, actual = np.zeros(n, BF16), np.zeros(n, BF16)
    kernel([x, expected], 0, signature.blocks)
    reloaded([x, actual], 0, signature.blocks)
    assert expected.view(np.uint16).tolist() == actual.view(np.uint16).tolist()
    assert reloaded.llvm_ir is None
    with pytest.raises(UnimplementedError):
        _ = reloaded.asm


def test_block_ranges_from_two_python_threads() -> None:
    n = 1 << 16
    kernel = compile_text(gelu_like(n, "f32"))
    x = float_inputs(n, np.float32, 25)
    whole, parts = np.zeros(n, np.float32), np.zeros(n, np.float32)
    kernel([x, whole], 0, kernel.signature.blocks)
    half = kernel.signature.blocks // 3
    ranges = [(0, half), (half, kernel.signature.blocks)]
    workers = [threading.Thread(target=kernel, args=([x, parts], *r)) for r in ranges]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert same_bits(parts, whole)
    with np.errstate(all="ignore"):
        assert same_bits(whole, gelu_like_reference(x))


def test_partial_block_ranges_only_touch_their_blocks() -> None:
    n = 1024
    kernel = compile_text(elementwise(n, ["f32"], ["f32"], "%y0 = arith.addf %x0, %x0 : f32", threads=64))
    x = np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    kernel([x, out], 3, 5)
    assert np.array_equal(np.nonzero(out)[0], np.arange(3 * 64, 5 * 64))


def test_buffers_are_checked() -> None:
    kernel = compile_text(elementwise(64, ["f32"], ["f32"], "%y0 = arith.addf %x0, %x0 : f32"))
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(VerifyError, match="expected 2 buffers"):
        kernel([x], 0, 1)
    with pytest.raises(VerifyError, match="bytes"):
        kernel([x[:10], out], 0, 1)
    with pytest.raises(VerifyError, match="contiguous"):
        kernel([np.ones(128, np.float32)[::2], out], 0, 1)
    with pytest.raises(VerifyError, match="block range"):
        kernel([x, out], 0, 9)


def test_unlowered_ir_is_refused() -> None:
    module = parse_mlir(elementwise(64, ["f32"], ["f32"], "%y0 = arith.addf %x0, %x0 : f32"))
    with pytest.raises(VerifyError, match="lower-tensors"):
        CpuKernel.compile(module)


def test_whole_vector_arithmetic_and_broadcasts() -> None:
    """Vectors used as values (not lane by lane) are assembled from their lanes."""
    text = """
func.func @main(%a: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %c4 = arith.constant 4 : index
  %pad = arith.constant 0.0 : f32
  %th = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %i = arith.muli %th, %c4 : index
  %v = vector.transfer_read %a[%i], %pad {in_bounds = [true]} : tensor<64xf32>, vector<4xf32>
  %x = vector.extract %v[1] : f32 from vector<4xf32>
  %s = vector.broadcast %x : f32 to vector<4xf32>
  %sum = arith.addf %v, %s : vector<4xf32>
  %neg = arith.cmpf olt, %sum, %s : vector<4xf32>
  %r = arith.select %neg, %v, %sum : vector<4xi1>, vector<4xf32>
  %w = vector.transfer_write %r, %out[%i] {in_bounds = [true]} : vector<4xf32>, tensor<64xf32>
  return %w : tensor<64xf32>
}
"""
    a = float_inputs(64, np.float32, 26)
    out = np.zeros(64, np.float32)
    compile_text(text)([a, out], 0, 1)
    rows = a.reshape(16, 4)
    total = rows + rows[:, 1:2]
    with np.errstate(invalid="ignore"):
        assert same_bits(out, np.where(total < rows[:, 1:2], rows, total).reshape(-1))


def test_vectorized_loop_that_was_not_unrolled() -> None:
    """The form of the vectorized gelu of XLA's docs/emitters.md: an scf.for over the lanes carrying the output
    vector, dynamic lane positions."""
    text = """
func.func @main(%input: tensor<256xbf16>, %output: tensor<256xbf16>) -> tensor<256xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c128 = arith.constant 128 : index
  %pad = arith.constant 0.0 : bf16
  %half = arith.constant 0.5 : bf16
  %zeros = arith.constant dense<0.0> : vector<4xbf16>
  %th = gpu.thread_id x {xla.range = [0 : index, 31 : index]}
  %bl = gpu.block_id x {xla.range = [0 : index, 1 : index]}
  %t = arith.muli %th, %c4 : index
  %b = arith.muli %bl, %c128 : index
  %base = arith.addi %t, %b : index
  %v = vector.transfer_read %input[%base], %pad {in_bounds = [true]} : tensor<256xbf16>, vector<4xbf16>
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %zeros)
      -> (tensor<256xbf16>, vector<4xbf16>) {
    %x = vector.extract %v[%k] : bf16 from vector<4xbf16>
    %y = arith.mulf %x, %half : bf16
    %z = arith.addf %y, %x : bf16
    %acc2 = vector.insert %z, %acc [%k] : bf16 into vector<4xbf16>
    scf.yield %iter, %acc2 : tensor<256xbf16>, vector<4xbf16>
  }
  %w = vector.transfer_write %r#1, %output[%base] {in_bounds = [true]} : vector<4xbf16>, tensor<256xbf16>
  return %w : tensor<256xbf16>
}
"""
    x = float_inputs(256, BF16, 27)
    out = np.zeros(256, BF16)
    kernel = compile_text(text)
    kernel([x, out], 0, 2)
    with np.errstate(all="ignore"):
        assert same_bits(out, x * BF16.type(0.5) + x)


def test_merged_slices_take_one_buffer() -> None:
    """A parameter and the output in the same slice: one buffer, updated in place."""
    text = """
func.func @main(%a: tensor<64xf32> {xla.slice_index = 0 : i64}, %b: tensor<64xf32> {xla.slice_index = 1 : i64},
                %out: tensor<64xf32> {xla.slice_index = 0 : i64}) -> tensor<64xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 63 : index]}
  %x = tensor.extract %a[%th] : tensor<64xf32>
  %y = tensor.extract %b[%th] : tensor<64xf32>
  %z = arith.mulf %x, %y : f32
  %w = tensor.insert %z into %out[%th] : tensor<64xf32>
  return %w : tensor<64xf32>
}
"""
    kernel = compile_text(text)
    assert kernel.signature.buffer_sizes == (256, 256)
    a, b = float_inputs(64, np.float32, 28), float_inputs(64, np.float32, 29)
    expected = a * b
    kernel([a, b], 0, 1)
    assert same_bits(a, expected)


def test_helper_returning_several_values() -> None:
    """A function with two results returns one LLVM struct (what a multi-output fusion's root function is)."""
    text = elementwise(16, ["f32"], ["f32", "f32"], """
        %y0, %y1 = func.call @both(%x0) : (f32) -> (f32, f32)
    """) + """
func.func private @both(%x: f32) -> (f32, f32) {
  %n = arith.negf %x : f32
  %s = arith.mulf %x, %x : f32
  return %n, %s : f32, f32
}"""
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    negated, squared = run(compile_text(text), [x], ["f32", "f32"], 16)
    np.testing.assert_array_equal(negated, -x)
    np.testing.assert_array_equal(squared, x * x)


# Run in a process of its own: LLVM's x86 backend aborts the process on the masked bfloat vector loads its
# vectorizers used to make of these strided reads.
_STRIDED_BF16_READS = '''
import sys
import numpy as np
import xlapy
from tools.compare import assert_same
from xlapy.hlo.fake_arguments import make_fake_arguments

module = xlapy.parse_hlo(sys.argv[1])
args = make_fake_arguments(module, 0)
for passes in (True, False):
    assert_same(xlapy.compile(module, run_hlo_passes=passes)(*args), xlapy.evaluate(module, *args), exact_bits=True)
print("same")
'''


@pytest.mark.parametrize("body", [
    "p = bf16[40] parameter(0)\n  ROOT r = bf16[8] slice(p), slice={[0:40:5]}",
    "p = bf16[40] parameter(0)\n  s = bf16[8] slice(p), slice={[1:40:5]}\n  ROOT r = bf16[8] negate(s)",
    "p = bf16[8,5] parameter(0)\n  ROOT r = bf16[5,8] transpose(p), dimensions={1,0}",
])
def test_strided_bf16_reads_compile(body: str, tmp_path) -> None:
    text = f"HloModule strided\n\nENTRY main {{\n  {body}\n}}\n"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, XLAPY_CACHE_DIR=str(tmp_path), PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", _STRIDED_BF16_READS, text], capture_output=True, text=True,
                          env=env, cwd=root, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


def test_narrowing_to_bf16_matches_xla_cpu() -> None:
    # The same edge cases (NaN payloads of both signs included), in vectors with and without subnormal lanes,
    # through xlapy.compile and through XLA:CPU (jax).
    jax = pytest.importorskip("jax")
    import xlapy
    from xlapy.frontends.jax import from_jax

    bits = np.concatenate([np.resize(np.array(BF16_EDGE_BITS, np.uint32), 64),
                           np.resize(np.array(BF16_EDGE_BITS + SUBNORMAL_BITS, np.uint32), 64)])
    x = bits.view(np.float32).reshape(2, 64)

    def narrow(values):
        return values.astype(jax.numpy.bfloat16)

    ours = xlapy.compile(from_jax(narrow, x), backend="cpu")(x)
    theirs = np.asarray(jax.jit(narrow)(x))
    assert np.array_equal(np.asarray(ours).view(np.uint16), theirs.view(np.uint16))


# NaNs (and 1, infinity) of f32 and f64 and the f16 bits of x86's conversions of them, which quiet a NaN and keep
# the high bits of its payload (numpy keeps signaling NaNs signaling).
F16_NAN_CASES = {
    "f32": ([0x7F800001, 0xFF800123, 0x7FA00000, 0x7FC00001, 0x7F812345, 0xFFC12345, 0x3F800000, 0x7F800000],
            [0x7E00, 0xFE00, 0x7F00, 0x7E00, 0x7E09, 0xFE09, 0x3C00, 0x7C00]),
    "f64": ([0x7FF0000000000001, 0xFFF8000000000123, 0x7FF4000000000000, 0x7FF8123456789ABC, 0xFFF0040000000000,
             0x3FF0000000000000, 0x7FF0000000000000, 0x7FF00000000FFFFF],
            [0x7E00, 0xFE00, 0x7F00, 0x7E04, 0xFE01, 0x3C00, 0x7C00, 0x7E00]),
}
# Just above an f16 halfway point: rounded once it goes up (0x3C01); through f32 first, it lands on the halfway
# point and goes to even (0x3C00).
F16_DOUBLE_ROUNDING_PROBE = 1 + 2**-11 + 2**-40


@pytest.mark.parametrize("source", ["f32", "f64"])
def test_nans_narrowed_to_f16_match_x86(source: str) -> None:
    # Compiled code and the interpreter give x86's conversion bits, which are XLA:CPU's where it converts with the
    # instruction: always from f32 (F16C), from f64 with AVX512-FP16. Without it XLA:CPU calls its runtime's
    # __truncdfhf2, which goes through f32 (two roundings) and makes every NaN 0x7E00 with its sign; the test then
    # checks that this is why XLA differs.
    jax = pytest.importorskip("jax")
    import xlapy
    from xlapy.frontends.jax import from_jax

    bits, expected_bits = (np.array(v, np.uint32 if source == "f32" else np.uint64) for v in F16_NAN_CASES[source])
    x = np.resize(bits, 64).view(np.float32 if source == "f32" else np.float64).reshape(4, 16)
    expected = np.resize(expected_bits.astype(np.uint16), 64).reshape(4, 16)

    def narrow(values):
        return values.astype(jax.numpy.float16)

    with jax.enable_x64(source == "f64"):
        module = from_jax(narrow, x)
        theirs = np.asarray(jax.jit(narrow)(x)).view(np.uint16)
        probe = np.asarray(jax.jit(narrow)(np.array([F16_DOUBLE_ROUNDING_PROBE], x.dtype))).view(np.uint16)
    assert np.array_equal(np.asarray(xlapy.compile(module, backend="cpu")(x)).view(np.uint16), expected)
    assert np.array_equal(np.asarray(xlapy.evaluate(module, x)).view(np.uint16), expected)
    if source == "f32" or probe[0] == 0x3C01:  # XLA:CPU converts with the instruction
        assert np.array_equal(theirs, expected)
    else:
        assert probe[0] == 0x3C00
        assert np.array_equal(theirs, np.where(np.isnan(x), np.where(np.signbit(x), 0xFE00, 0x7E00), expected))


def test_wide_values_convert_to_bf16_through_f32() -> None:
    # XLA's elemental emitter converts f64 and integers to bf16 through f32 (two roundings), as ml_dtypes does:
    # values just above a bf16 halfway point after rounding to f32 end on the halfway point and go to even.
    jax = pytest.importorskip("jax")
    import xlapy
    from xlapy.frontends.jax import from_jax

    cases = {np.float64: [1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-33), 1.5, 3.0e38],
             np.int32: [(1 << 24) + (1 << 16) + 1, 2**31 - 1 - 2**6, -((1 << 25) + (1 << 17) + 2), 7],
             np.int64: [(1 << 40) + (1 << 32) + 1, (1 << 53) + (1 << 45) + 1, -3, 1 << 62],
             np.uint64: [(1 << 63) + (1 << 55) + 1, 3, (1 << 64) - 1, 1 << 30]}
    with jax.enable_x64(True):
        for dtype, values in cases.items():
            x = np.resize(np.array(values, dtype), 32)

            def narrow(v):
                return v.astype(jax.numpy.bfloat16)

            module = from_jax(narrow, x)
            theirs = np.asarray(jax.jit(narrow)(x)).view(np.uint16)
            assert np.array_equal(theirs, x.astype(BF16).view(np.uint16)), dtype
            assert np.array_equal(np.asarray(xlapy.compile(module, backend="cpu")(x)).view(np.uint16), theirs), dtype
            assert np.array_equal(np.asarray(xlapy.evaluate(module, x)).view(np.uint16), theirs), dtype
