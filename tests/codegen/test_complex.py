"""Complex numbers (c64, c128) in the CPU code generator, beyond the corpus of data/loop_fusions/complex_*.hlo:

- the dumps show the `complex` dialect on `complex<f32>`, its lowering (fused multiply-adds, C library calls) and
  the `!llvm.struct<(f32, f32)>` accesses of lower-tensors (FileCheck);
- `lower-complex` + `lower-tensors` + the CPU backend, on MLIR written by hand, against the interpreter's complex
  formulas (XLA's, in `xlapy.interpreter.complex_math`) and numpy's complex functions;
- complex power against the interpreter, bit for bit, on ordinary and special arguments;
- kernels calling C functions work from the disk cache;
- ops complex numbers do not have raise UnimplementedError naming the op and the type;
- the comparison helpers on complex arrays.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import xlapy
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import (
    assert_within_ulps,
    max_ulp_difference,
    normwise_ulp_difference,
    random_arguments,
    ulp_tolerance,
)
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.backends.cpu import CpuKernel, translate_module
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.codegen.passes.lower_complex import LowerComplexPass
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.pipeline import lower_fusion
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.interpreter import complex_math
from xlapy.runtime.kernel_cache import clear_memory_cache


@pytest.fixture(autouse=True)
def fresh_kernel_cache(tmp_path, monkeypatch):
    """Kernels compiled here, not ones an earlier version of the code generator left in a cache."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path / "kernel_cache"))
    clear_memory_cache()


def _part(dtype: np.dtype) -> type:
    return np.float32 if np.dtype(dtype) == np.complex64 else np.float64


def _special_pairs(dtype: np.dtype) -> np.ndarray:
    """Every pair of special parts (NaN, ±inf, ±0, ±max, ±tiny, ±1, 0.5) as complex numbers."""
    part = _part(dtype)
    info = np.finfo(part)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, info.max, -info.max, info.tiny, -info.tiny,
                         1.0, -1.0, 0.5], part)
    values = np.empty(len(specials) ** 2, dtype)
    values.real, values.imag = np.repeat(specials, len(specials)), np.tile(specials, len(specials))
    return values


# -- dumps ----------------------------------------------------------------------------------------------------------

DUMPED = single_fusion(["c64[8]", "c64[8]"], [
    "product = c64[8] multiply(p0, p1)",
    "exp = c64[8] exponential(product)",
    "ROOT magnitude = f32[8] abs(exp)",
], "f32[8]")

EMITTER_CHECKS = """
CHECK:      func.func @main(%{{.*}}: tensor<8xcomplex<f32>>, %{{.*}}: tensor<8xcomplex<f32>>, %{{.*}}: tensor<8xf32>)
CHECK:      func.func private @{{.*}}(%{{.*}}: tensor<8xcomplex<f32>>, %{{.*}}: tensor<8xcomplex<f32>>, %{{.*}}: index)
CHECK-SAME:   -> f32
CHECK:        %[[A:.*]] = tensor.extract %{{.*}} : tensor<8xcomplex<f32>>
CHECK:        %[[B:.*]] = tensor.extract %{{.*}} : tensor<8xcomplex<f32>>
CHECK:        %[[P:.*]] = complex.mul %[[A]], %[[B]] : complex<f32>
CHECK:        %[[E:.*]] = complex.exp %[[P]] : complex<f32>
CHECK:        %[[M:.*]] = complex.abs %[[E]] : complex<f32>
CHECK:        func.return %[[M]] : f32
"""

LOWER_COMPLEX_CHECKS = """
CHECK:      %[[A:.*]] = tensor.extract %{{.*}} : tensor<8xcomplex<f32>>
CHECK:      %[[B:.*]] = tensor.extract %{{.*}} : tensor<8xcomplex<f32>>
CHECK-DAG:  %[[AR:.*]] = complex.re %[[A]] : complex<f32>
CHECK-DAG:  %[[AI:.*]] = complex.im %[[A]] : complex<f32>
CHECK-DAG:  %[[BR:.*]] = complex.re %[[B]] : complex<f32>
CHECK-DAG:  %[[BI:.*]] = complex.im %[[B]] : complex<f32>
CHECK:      %[[II:.*]] = arith.mulf %[[AI]], %[[BI]] : f32
CHECK:      %[[NII:.*]] = arith.negf %[[II]] : f32
CHECK:      %[[RE:.*]] = math.fma %[[AR]], %[[BR]], %[[NII]] : f32
CHECK:      %[[RI:.*]] = arith.mulf %[[AR]], %[[BI]] : f32
CHECK:      %[[IM:.*]] = math.fma %[[AI]], %[[BR]], %[[RI]] : f32
CHECK:      %[[P:.*]] = complex.create %[[RE]], %[[IM]] : complex<f32>
CHECK:      %[[E:.*]] = func.call @cexpf(%[[P]]) : (complex<f32>) -> complex<f32>
CHECK-NOT:  complex.abs
CHECK:      math.sqrt
CHECK:      func.func private @cexpf(complex<f32>) -> complex<f32>
"""

LOWER_TENSORS_CHECKS = """
CHECK:      %[[ADDRESS:.*]] = llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr,
CHECK-SAME:   !llvm.struct<(f32, f32)>
CHECK-NEXT: %[[LOADED:.*]] = llvm.load %[[ADDRESS]] {invariant, alignment = 4 : i64} : !llvm.ptr
CHECK-SAME:   -> !llvm.struct<(f32, f32)>
CHECK-NEXT: %{{.*}} = builtin.unrealized_conversion_cast %[[LOADED]] : !llvm.struct<(f32, f32)> to complex<f32>
CHECK:      func.call @cexpf(%{{.*}}) : (complex<f32>) -> complex<f32>
CHECK:      llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr
"""


def test_dumps_show_the_complex_dialect(tmp_path):
    module = xlapy.parse_hlo(DUMPED)
    executable = xlapy.compile(xlapy.parse_hlo(DUMPED), dump_to=str(tmp_path / "dump"))
    stages = {re.sub(r"^.*\.\d\d\.", "", p.stem): p.read_text() for p in (tmp_path / "dump").glob("*.mlir")}
    filecheck(stages["fusion-emitter"], EMITTER_CHECKS, tmp_path)
    filecheck(stages["lower-complex"], LOWER_COMPLEX_CHECKS, tmp_path)
    filecheck(stages["lower-tensors"], LOWER_TENSORS_CHECKS, tmp_path)
    lowered = lower_fusion(module.entry.root, Device.host())
    llvm_ir = str(translate_module(lowered.module)[0])
    assert re.search(r'declare <2 x float> @"?cexpf"?\(<2 x float>', llvm_ir), "cexpf takes a float complex as C does"
    args = random_arguments(module, 0)
    assert_within_ulps(executable(*args), xlapy.evaluate(module, *args), module, 0)


# -- lower-complex on MLIR written by hand, against the interpreter's formulas and numpy ---------------------------

_UNARY = {
    "complex.neg": np.negative, "complex.exp": np.exp, "complex.log": np.log, "complex.sqrt": np.sqrt,
    "complex.sin": np.sin, "complex.cos": np.cos, "complex.tan": np.tan, "complex.tanh": np.tanh,
    "complex.expm1": np.expm1, "complex.log1p": complex_math.log_plus_one, "complex.rsqrt": complex_math.rsqrt,
    "complex.sign": complex_math.sign,
}
_BINARY = {"complex.add": np.add, "complex.sub": np.subtract, "complex.mul": complex_math.product,
           "complex.div": complex_math.quotient, "complex.pow": complex_math.power}


def _kernel(op: str, type_: str, count: int, binary: bool) -> CpuKernel:
    tensor = f"tensor<{count}x{type_}>"
    operands = "%x, %y" if binary else "%x"
    text = f"""
func.func @main(%a: {tensor}, %b: {tensor}, %out: {tensor}) -> {tensor} {{
  %th = gpu.thread_id x {{xla.range = [0 : index, {count - 1} : index]}}
  %x = tensor.extract %a[%th] : {tensor}
  %y = tensor.extract %b[%th] : {tensor}
  %r = {op} {operands} : {type_}
  %stored = tensor.insert %r into %out[%th] : {tensor}
  func.return %stored : {tensor}
}}"""
    module = parse_mlir(text)
    LowerComplexPass().apply(None, module)  # type: ignore[arg-type]
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    assert not any(o.name in _UNARY or o.name in _BINARY for o in module.walk()), print_mlir(module)
    return CpuKernel.compile(module)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("op", sorted({**_UNARY, **_BINARY}))
def test_lowered_ops_compute_what_the_interpreter_computes(op: str, dtype):
    """Bit for bit, on every pair of special parts and on ordinary numbers."""
    type_ = "complex<f32>" if dtype == np.complex64 else "complex<f64>"
    specials = _special_pairs(dtype)
    random = np.random.default_rng(3)
    ordinary = (random.standard_normal(len(specials)) + 1j * random.standard_normal(len(specials))).astype(dtype)
    a = np.concatenate([specials, ordinary])
    b = np.concatenate([np.roll(specials, 5), ordinary[::-1]])
    binary = op in _BINARY
    out = np.empty_like(a)
    _kernel(op, type_, len(a), binary)([a, b, out])
    with np.errstate(all="ignore"):
        expected = (_BINARY[op](a, b) if binary else _UNARY[op](a)).astype(dtype)
    assert max_ulp_difference(out, expected, dtype) == 0
    for part in ("real", "imag"):
        got_part, want_part = getattr(out, part), getattr(expected, part)
        same_sign = (np.signbit(got_part) == np.signbit(want_part)) | np.isnan(want_part)
        assert same_sign.all(), f"{op}: signs of zeros differ in the {part} part at {np.flatnonzero(~same_sign)[:5]}"


# -- complex power ----------------------------------------------------------------------------------------------------

# The interpreter and the compiled code call the same C library functions (powf, atan2f, expf, logf, cosf, sinf) in
# the same formula: bit for bit, where the phase is well defined and where it is not (huge exponents, overflow).


def _power_arguments(dtype, random: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    count = 1024
    base = np.ldexp(1.0, random.integers(-8, 9, count)) * random.uniform(0.5, 1.0, count) * \
        np.exp(1j * random.uniform(-math.pi, math.pi, count))
    exponent = random.uniform(-3, 3, count) + 1j * random.uniform(-3, 3, count)
    exponent[::4] = exponent[::4].real  # real exponents
    base[1::8] = base[1::8].real  # real bases
    special_bases = np.array([0, -0.0, 1, -1, 2, np.inf, -np.inf, np.nan, 1j, complex(0, -0.0)], complex)
    special_exponents = np.array([0, 1, 2, -1, 0.5, -2.5, 1j, complex(2, 0.5), complex(-1, -1)], complex)
    base = np.concatenate([base, np.repeat(special_bases, len(special_exponents))])
    exponent = np.concatenate([exponent, np.tile(special_exponents, len(special_bases))])
    return base.astype(dtype), exponent.astype(dtype)


@pytest.mark.parametrize("type_name", ["c64", "c128"])
def test_power_matches_the_interpreter(type_name: str):
    shape = "1114"  # 1024 random and 90 special pairs
    text = single_fusion([f"{type_name}[{shape}]"] * 2, [f"ROOT power = {type_name}[{shape}] power(p0, p1)"],
                          f"{type_name}[{shape}]")
    module = xlapy.parse_hlo(text)
    dtype = np.complex64 if type_name == "c64" else np.complex128
    base, exponent = _power_arguments(dtype, np.random.default_rng(11))
    exponent[:64] *= 100  # overflow and huge phases
    got = xlapy.compile(xlapy.parse_hlo(text))(base, exponent)
    assert_within_ulps(got, xlapy.evaluate(module, base, exponent), module, 0)


# -- C functions from the disk cache ----------------------------------------------------------------------------------


def test_kernels_calling_c_functions_load_from_the_disk_cache():
    text = single_fusion(["c128[16]"], ["log = c128[16] log(p0)", "ROOT tanh = c128[16] tanh(log)"], "c128[16]")
    module = xlapy.parse_hlo(text)
    args = random_arguments(module, 0)
    first = xlapy.compile(xlapy.parse_hlo(text))(*args)
    clear_memory_cache()
    second = xlapy.compile(xlapy.parse_hlo(text))(*args)
    assert_within_ulps(second, first, module, 0, context="from disk")
    assert_within_ulps(second, xlapy.evaluate(module, *args), module, 0, context="from disk")


# -- what complex numbers do not have -----------------------------------------------------------------------------

UNSUPPORTED = {
    "maximum": (["c64[8]", "c64[8]"], "ROOT r = c64[8] maximum(p0, p1)", "c64[8]"),
    "minimum": (["c128[8]", "c128[8]"], "ROOT r = c128[8] minimum(p0, p1)", "c128[8]"),
    "clamp": (["c64[8]", "c64[8]", "c64[8]"], "ROOT r = c64[8] clamp(p0, p1, p2)", "c64[8]"),
    "remainder": (["c128[8]", "c128[8]"], "ROOT r = c128[8] remainder(p0, p1)", "c128[8]"),
    "atan2": (["c64[8]", "c64[8]"], "ROOT r = c64[8] atan2(p0, p1)", "c64[8]"),
    "cbrt": (["c128[8]"], "ROOT r = c128[8] cbrt(p0)", "c128[8]"),
    "compare": (["c64[8]", "c64[8]"], "ROOT r = pred[8] compare(p0, p1), direction=GE", "pred[8]"),
    "bitcast-convert": (["c128[8]"], "ROOT r = c64[8,2] bitcast-convert(p0)", "c64[8,2]"),
    "convert": (["c64[8]"], "ROOT r = f32[8] convert(p0)", "f32[8]"),
}


@pytest.mark.parametrize("opcode", sorted(UNSUPPORTED))
def test_unsupported_complex_ops_are_named(opcode: str):
    params, line, result = UNSUPPORTED[opcode]
    module = xlapy.parse_hlo(single_fusion(params, [line], result))
    type_name = params[0].split("[")[0]
    if opcode == "convert":  # invalid HLO (XLA's shape inference refuses it too): the verifier names it
        with pytest.raises(VerifyError, match=r"\br\b.*convert.* c64"):
            xlapy.compile(module)
        return
    with pytest.raises(UnimplementedError, match=rf"{opcode} \(r\).* (on|from) {type_name}"):
        xlapy.compile(module)


# -- comparison helpers -------------------------------------------------------------------------------------------


def test_complex_distances_are_the_larger_of_the_parts():
    one = np.float32(1.0)
    a = np.array([complex(1.0, 2.0), complex(-0.0, np.nan)], np.complex64)
    b = a.copy()
    assert max_ulp_difference(a, b, "c64") == 0
    b[0] = complex(np.nextafter(one, np.float32(2)), 2.0)
    assert max_ulp_difference(a, b, "c64") == 1
    b[0] = complex(1.0, np.nextafter(np.float32(2.0), np.float32(0)) - np.float32(2 ** -22))
    assert max_ulp_difference(a, b, "c64") == 3
    b[1] = complex(0.0, 0.0)
    assert max_ulp_difference(a, b, "c64") == 1 << 64  # NaN against a number


def test_normwise_distances_count_ulps_of_the_magnitude():
    a = np.array([complex(1.0, 2.0 ** -30), complex(np.inf, 0.0)], np.complex128)
    b = np.array([complex(1.0, 2.0 ** -29), complex(np.inf, 0.0)], np.complex128)
    assert max_ulp_difference(a, b, "c128") == 1 << 52  # the small part doubled
    assert normwise_ulp_difference(a, b, "c128") == 1 << 22  # 2^-30 in ulps of 1 (2^-52)
    b[1] = complex(-np.inf, 0.0)
    assert normwise_ulp_difference(a, b, "c128") > 1 << 60


def test_complex_modules_are_exact_even_with_functions():
    """The C library computes complex functions for numpy and for the compiled code alike."""
    exact = single_fusion(["c64[8]"], ["ROOT e = c64[8] exponential(p0)"], "c64[8]")
    real = single_fusion(["f64[8]"], ["ROOT e = f64[8] exponential(p0)"], "f64[8]")
    assert ulp_tolerance(xlapy.parse_hlo(exact)) == 0
    assert ulp_tolerance(xlapy.parse_hlo(real)) == 1


def test_random_complex_arguments_reach_the_edges():
    module = xlapy.parse_hlo(single_fusion(["c64[64,64]"], ["ROOT n = c64[64,64] negate(p0)"], "c64[64,64]"))
    (value,) = random_arguments(module, 0)
    for part in (value.real, value.imag):
        assert np.isnan(part).any() and np.isposinf(part).any() and np.isneginf(part).any()
        assert (part == 0).any() and np.signbit(part[part == 0]).any()
        finite = np.abs(part[np.isfinite(part) & (part != 0)])
        assert finite.max() > 1e15 and finite.min() < 1e-15
