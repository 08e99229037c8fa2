"""The vectorizable math library of the CPU backend: accuracy against numpy (f32: the f64 result rounded once, i.e.
the interpreter's oracle), IEEE special values, and the vectorization of a loop calling each function."""

from __future__ import annotations

import math
import re

import llvmlite.binding as llvm
import ml_dtypes
import mpmath
import numpy as np
import pytest
from llvmlite import ir

from tests.codegen.math_jit import compiled
from xlapy.codegen.backends.math_library import MATH_OPS, math_function
from xlapy.codegen.backends.mathlib.exponential import EXP_TABLE_SIZE, exp_scale_table, exp_table
from xlapy.errors import UnimplementedError
from xlapy.interpreter.xla_cpu_math import exp_f32, tanh_f32
from xlapy.runtime.ulps import ulp_distance

BINARY = {"atan2", "pow", "powf"}

_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _logistic(x: np.ndarray) -> np.ndarray:
    """XLA's formula, as the interpreter evaluates it."""
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


REFERENCE = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
    "atan2": np.arctan2, "atanh": np.arctanh, "cbrt": np.cbrt, "cos": np.cos, "cosh": np.cosh,
    "erf": lambda x: _erf(x).astype(np.float64), "erfc": lambda x: _erfc(x).astype(np.float64), "exp": np.exp,
    "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log10": np.log10, "log1p": np.log1p, "log2": np.log2,
    "logistic": _logistic, "pow": np.power, "powf": np.power, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh,
}  # fmt: skip

# numpy's f64 functions are SVML's on AVX-512 hosts (within 1 ulp of the exact value) and the C library's elsewhere
# (glibc's cbrt up to 3 ulps off, its sinh, log10, asinh and acosh 2): for f64 arguments these are evaluated in long
# double (a 64-bit significand on x86) and rounded once, within 1 ulp on every host (measured: 1-3 arguments in 10^4
# not correctly rounded). erf and erfc are Python's, logistic is the interpreter's formula, sqrt and rsqrt are exact.
IN_LONG_DOUBLE = frozenset(REFERENCE) - {"erf", "erfc", "logistic", "sqrt", "rsqrt"}

# Allowed distance (ulps) to the f64 reference (math.erfc is itself up to 3 ulps off the exact value, math.erf 1) for
# the f64 functions: the largest measured over the accuracy samples with seeds 0-2 (and the slow sweep's 3M
# arguments); 1 for the others. sqrt and rsqrt are correctly rounded, as numpy's sqrt and 1 / sqrt are.
F64_TOLERANCE = {"asinh": 2, "acosh": 2, "erfc": 3, "sqrt": 0, "rsqrt": 0}
# f32, and the 16-bit floats through f32: 0 ulp on the samples, i.e. numpy's f64 result rounded once, the
# interpreter's value (the f32 kernels are good to ~1e-16 relative, so they round the other way only where the f64
# value is within ~1e-16 of a rounding boundary, a few arguments in 10^8, allowed in the slow sweep). tanh and exp
# are XLA:CPU's f32 approximations, in the interpreter as here (tests/codegen/test_xla_cpu_f32.py).
XLA_CPU_F32 = {"tanh": tanh_f32, "exp": exp_f32}


def reference(op: str, dtype: np.dtype, *args: np.ndarray) -> np.ndarray:
    """For f32 and 16-bit floats the interpreter's value: numpy's f64 result rounded once to dtype, and for tanh and
    exp XLA:CPU's f32 approximations rounded to dtype; for f64 the result of the numpy functions in long double
    (IN_LONG_DOUBLE) rounded once, or numpy's f64 result."""
    if op in XLA_CPU_F32 and np.dtype(dtype) != np.float64:
        with np.errstate(all="ignore"):
            return XLA_CPU_F32[op](args[0].astype(np.float32)).astype(dtype)
    wide = np.longdouble if np.dtype(dtype) == np.float64 and op in IN_LONG_DOUBLE else np.float64
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCE[op](*(a.astype(wide) for a in args))).astype(np.float64).astype(dtype)


def _log_uniform(rng: np.random.Generator, n: int, low: float, high: float, sign: bool = True) -> np.ndarray:
    x = np.exp2(rng.uniform(low, high, n))
    return x * rng.choice([-1.0, 1.0], n) if sign else x


def sample(op: str, dtype: np.dtype, n: int, seed: int = 0) -> list[np.ndarray]:
    """n arguments per operand spanning the op's domain: all magnitudes (tiny, subnormal, huge), the usual range,
    and the places where the algorithms switch or lose precision."""
    rng = np.random.default_rng(seed)
    f32 = dtype == np.float32
    low, high = (-150, 128) if f32 else (-1075, 1024)
    quarter = n // 4
    generic = np.concatenate(
        [
            _log_uniform(rng, quarter, low, high),
            rng.uniform(-10, 10, quarter),
            rng.standard_normal(quarter),
            _log_uniform(rng, n - 3 * quarter, -30, 12),
        ]
    )
    if op in BINARY:
        second = sample("exp", dtype, n, seed + 1)[0].astype(np.float64)
        if op != "atan2":  # powers: mostly moderate exponents, some integers (odd and even)
            second[: n // 2] = rng.uniform(-60, 60, n // 2)
            second[::5] = np.round(second[::5])
        return [generic.astype(dtype), rng.permutation(second).astype(dtype)]
    x = generic
    if op in ("log", "log2", "log10", "sqrt", "rsqrt", "cbrt"):
        x = np.abs(x) if op != "cbrt" else x
    elif op == "acosh":
        x = 1 + np.abs(x)
    elif op == "log1p":
        x = np.where(x > -1, x, -1 + _log_uniform(rng, n, -60, 0, sign=False))
    elif op in ("asin", "acos", "atanh", "erf", "erfc", "tanh", "logistic"):
        edge = 1.0 if op in ("asin", "acos", "atanh") else 6.0
        x = np.concatenate(
            [
                rng.uniform(-edge, edge, n // 3),
                (edge - _log_uniform(rng, n // 3, -60, np.log2(edge) - 1, sign=False)) * rng.choice([-1, 1], n // 3),
                generic[: n - 2 * (n // 3)],
            ]
        )
    return [x.astype(dtype)]


def _run(op: str, dtype: np.dtype, args: list[np.ndarray]) -> np.ndarray:
    return compiled(op, np.dtype(dtype), len(args))(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", MATH_OPS)
def test_accuracy(op: str, dtype: type) -> None:
    args = sample(op, np.dtype(dtype), 200_000 if dtype == np.float32 else 100_000)
    got = _run(op, dtype, args)
    expected = reference(op, np.dtype(dtype), *args)
    distance = ulp_distance(got, expected)
    tolerance = 0 if dtype == np.float32 else F64_TOLERANCE.get(op, 1)
    worst = int(np.argmax(distance))
    assert distance[worst] <= tolerance, (
        f"{op} {np.dtype(dtype).name}({', '.join(repr(a[worst]) for a in args)}) = {got[worst]!r}, "
        f"expected {expected[worst]!r} ({distance[worst]} ulps)"
    )


_SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e-300,
            -1e-300, 5e-324, -5e-324, 1e-45, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 1.7976931348623157e308,
            -1.7976931348623157e308, 0.84375, 9.5, 22.0, 27.3, 88.72, -87.33, -103.97, 709.78, 710.5, -745.13, -746.0,
            1e20, -1e20, 2.0**19, 1 - 2.0**-53, -1 + 2.0**-53, 1 + 2.0**-52, 2.0**28]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", MATH_OPS)
def test_special_values(op: str, dtype: type) -> None:
    """NaN, infinities, signed zeros, subnormals, domain edges and overflow thresholds behave as numpy's."""
    with np.errstate(over="ignore"):
        values = np.array(_SPECIAL, np.float64).astype(dtype)
    if op in BINARY:
        x, y = (a.ravel() for a in np.meshgrid(values, values))
        args = [x, y]
    else:
        args = [values]
    got = _run(op, dtype, args)
    expected = reference(op, np.dtype(dtype), *args)
    tolerance = 0 if dtype == np.float32 else F64_TOLERANCE.get(op, 1)  # measured: 0 (f32), at most 1 (f64)
    bad = (ulp_distance(got, expected) > tolerance) | (np.isinf(got) != np.isinf(expected))
    bad |= (expected == 0) & (np.signbit(got) != np.signbit(expected))
    assert not bad.any(), [(*(a[i] for a in args), got[i], expected[i]) for i in np.flatnonzero(bad)[:10]]


def test_hardest_argument_reduction() -> None:
    """6381956970095103 * 2^797 is the double closest to a multiple of pi/2 (|x mod pi/2| ~ 2^-61); the expected
    values are correctly rounded (mpmath). numpy's own cos is ~100 ulps off here."""
    x = np.array([6381956970095103 * 2.0**797])
    assert _run("sin", np.float64, [x])[0] == 1.0
    assert _run("cos", np.float64, [x])[0] == -4.687165924254628e-19
    assert _run("tan", np.float64, [x])[0] == -2.133485385753704e18


def test_pow_special_cases() -> None:
    """C99 pow: pow(x, ±0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, ±inf) = 1, signs for odd integer powers of
    negative numbers and zeros, NaN for non-integer powers of negative numbers."""
    nan, inf = float("nan"), float("inf")
    cases = [(nan, 0.0), (nan, -0.0), (1.0, nan), (-1.0, inf), (-1.0, -inf), (-0.0, -3.0), (-0.0, 3.0), (-0.0, -2.0),
             (-0.0, 0.5), (-inf, 3.0), (-inf, -3.0), (-inf, 0.5), (-2.0, 0.5), (-2.0, 3.0), (-2.0, -3.0), (-8.0, 1 / 3),
             (0.5, inf), (0.5, -inf), (2.0, inf), (2.0, -inf), (-2.0, 2.0**60), (-2.0, 2.0**60 + 2.0**8), (10.0, 400.0),
             (10.0, -400.0), (2.0, -1074.0), (2.0, -1075.0), (2.0, 1023.0), (2.0, 1024.0)]  # fmt: skip
    for dtype in (np.float32, np.float64):
        with np.errstate(over="ignore"):
            x, y = (np.array(column, dtype) for column in zip(*cases))
        got = _run("pow", dtype, [x, y])
        expected = reference("pow", np.dtype(dtype), x, y)
        same = (got == expected) & (np.signbit(got) == np.signbit(expected)) | np.isnan(got) & np.isnan(expected)
        assert same.all(), [(x[i], y[i], got[i], expected[i]) for i in np.flatnonzero(~same)]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("op", ["exp", "tanh", "log1p", "sin", "erf", "pow"])
def test_16_bit_floats(op: str, dtype: type) -> None:
    """16-bit floats go through the f32 functions: the f64 value rounded once, or the f32 approximation of tanh or
    exp rounded (measured: 0 ulp on every sample)."""
    args = [np.linspace(-12, 12, 20001).astype(dtype)]
    if op == "pow":
        args = [np.abs(args[0]), np.linspace(-3, 3, 20001).astype(dtype)]
    got = compiled(op, np.dtype(dtype), len(args))(*args)
    expected = reference(op, np.dtype(dtype), *args)
    assert (ulp_distance(got, expected) == 0).all()


@pytest.mark.parametrize("op", MATH_OPS)
def test_loops_vectorize(op: str) -> None:
    """After inlining and O3 for the host, a loop over a math function is vectorized and calls only intrinsics."""
    for dtype in (np.float32, np.float64):
        text = compiled(op, np.dtype(dtype), 2 if op in BINARY else 1).optimized_ir
        calls = set(re.findall(r"call [^@]*@([\w.]+)\(", text))
        assert all(name.startswith("llvm.") for name in calls), calls
        lanes = {(int(n), t) for n, t in re.findall(r"<(\d+) x (float|double)>", text)}
        wide = {(n, t) for n, t in lanes if n >= (8 if t == "float" else 4)}
        assert wide, f"{op} {np.dtype(dtype).name}: no vector code in\n{text}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16], ids=["f32", "f64", "bf16"])
@pytest.mark.parametrize("op", MATH_OPS)
def test_vector_form_matches_scalar_form(op: str, dtype: type) -> None:
    """The vector form of a function (what vectorized loop fusions call) computes bit for bit what the scalar form
    computes on each lane, on the accuracy samples and the special values."""
    dtype = np.dtype(dtype)
    sampled = sample(op, np.dtype(np.float32) if dtype.itemsize < 4 else dtype, 20_000)
    with np.errstate(over="ignore"):
        special = np.array(_SPECIAL, np.float64).astype(dtype)
    args = [np.concatenate([a.astype(dtype), special]) for a in sampled]
    if op in BINARY:
        args = [np.concatenate([args[0], np.repeat(special, special.size)]),
                np.concatenate([args[1], np.tile(special, special.size)])]
    arity = len(args)
    scalar = compiled(op, dtype, arity)(*args)
    for lanes in (8, 16):
        vector = compiled(op, dtype, arity, lanes)(*args)
        assert scalar.tobytes() == vector.tobytes(), f"{op} {dtype.name} with {lanes} lanes"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_wide_trig_vectors_gather_the_reduction_table(op: str, dtype: type) -> None:
    """At 64 lanes (the CPU's gelu-sized vectors) the Payne-Hanek reduction reads its table with one masked gather
    per piece instead of one load per lane, which kept LLVM busy for seconds; the results are the scalar form's,
    huge arguments (where the table is used) included."""
    dtype = np.dtype(dtype)
    (sampled,) = sample(op, dtype, 20_000)
    rng = np.random.default_rng(1)
    huge = (rng.uniform(1, 2, 4096) * 2.0 ** rng.integers(20, 127 if dtype == np.float32 else 1023, 4096))
    args = np.concatenate([sampled, huge.astype(dtype)])
    wide = compiled(op, dtype, 1, 64)
    assert wide(args).tobytes() == compiled(op, dtype, 1)(args).tobytes()
    text = wide.optimized_ir
    assert len(re.findall(r"call <64 x double> @llvm\.masked\.gather\.v64f64", text)) == 4
    assert not re.search(r"= load double, ptr", text)  # no lane loaded on its own


def test_f32_tables_are_correctly_rounded() -> None:
    """The f32 exp reads 2^(j / 16) from a table computed in decimal arithmetic: every entry is the double nearest
    to the exact value (mpmath); its scale table holds their bits less j << 48, to which the exp kernel adds
    n << 48 (n = 16 m + j) to make 2^m 2^(j / 16)."""
    powers = exp_table()
    assert len(powers) == EXP_TABLE_SIZE == 16
    assert all(v == float(mpmath.mpf(2) ** (mpmath.mpf(j) / EXP_TABLE_SIZE)) for j, v in enumerate(powers))
    scale_bits = np.array(exp_scale_table()).view(np.int64)
    assert (scale_bits + (np.arange(16) << 48)).view(np.float64).tolist() == powers


@pytest.mark.parametrize("op", ["tanh", "exp", "logistic"])
def test_f32_wide_vectors_and_nans(op: str) -> None:
    """At 64 lanes (the CPU's vectors) the f32 logistic (through its f64 exp) reads its 16 entries with 8
    two-register permutes on AVX-512 hosts (else one gather), the f32 tanh and exp (XLA:CPU's) read no table, and
    they compute what their scalar forms compute; NaNs of every sign and payload (whose table index comes from
    garbage bits) give NaN."""
    dtype = np.dtype(np.float32)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA12345],
                    np.uint32).view(np.float32)
    args = np.concatenate([sample(op, dtype, 20_000)[0], nans])
    wide = compiled(op, dtype, 1, 64)
    got = wide(args)
    assert got.tobytes() == compiled(op, dtype, 1)(args).tobytes()
    assert np.isnan(got[-nans.size:]).all()
    gathers = len(re.findall(r"call <64 x double> @llvm\.masked\.gather\.v64f64", wide.optimized_ir))
    permutes = len(re.findall(r"call <8 x double> @llvm\.x86\.avx512\.vpermi2var\.pd\.512", wide.optimized_ir))
    avx512 = "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")
    if op in XLA_CPU_F32:
        assert (gathers, permutes) == (0, 0)
    else:
        assert (gathers, permutes) == ((0, 8) if avx512 else (1, 0))


def test_vector_function_name_and_type() -> None:
    module = ir.Module()
    v16 = ir.VectorType(ir.FloatType(), 16)
    tanh = math_function(module, "tanh", v16)
    assert tanh.name == "xlapy.tanh.v16f32" and tanh.function_type.return_type == v16
    sin = math_function(module, "sin", ir.VectorType(ir.DoubleType(), 8))
    assert sin.name == "xlapy.sin.v8f64" and "llvm.fma.v8f64" in module.globals


def test_function_is_internal_always_inline_and_cached() -> None:
    module = ir.Module()
    tanh = math_function(module, "tanh", ir.FloatType())
    assert tanh is math_function(module, "tanh", ir.FloatType())
    assert tanh.name == "xlapy.tanh.f32" and tanh.linkage == "internal" and "alwaysinline" in tanh.attributes
    assert math_function(module, "tanh", ir.DoubleType()).name == "xlapy.tanh.f64"
    assert math_function(module, "powf", ir.HalfType()).function_type.args == (ir.HalfType(), ir.HalfType())
    assert math_function(module, "sin", ir.DoubleType()) is module.globals["xlapy.sin.f64"]
    math_function(module, "cos", ir.DoubleType())  # shares the 2/pi table with sin
    assert [g for g in module.globals if "two_over_pi" in g] == ["xlapy.math.two_over_pi"]


def test_errors_name_the_op() -> None:
    module = ir.Module()
    with pytest.raises(UnimplementedError, match="lgamma"):
        math_function(module, "lgamma", ir.FloatType())
    with pytest.raises(UnimplementedError, match="i32"):
        math_function(module, "exp", ir.IntType(32))


# --- long sweeps: `pytest -m slow` -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("op", MATH_OPS)
def test_f32_sweep(op: str) -> None:
    """Millions of f32 arguments (several seeds, plus every 64th float of [2^-8, 2^8)): at most one in a million
    rounds differently from the interpreter's f64-then-f32 value, and then by 1 ulp."""
    dtype = np.dtype(np.float32)
    samples = [sample(op, dtype, 2_000_000, seed) for seed in range(1, 4)]
    if op not in BINARY:
        dense = np.arange(0x3B800000, 0x43800000, 64, dtype=np.uint32).view(np.float32)
        samples.append([np.concatenate([dense, -dense])])
    for args in samples:
        got = _run(op, dtype, args)
        expected = reference(op, dtype, *args)
        distance = ulp_distance(got, expected)
        worst = int(np.argmax(distance))
        assert distance[worst] <= 1, (op, [a[worst] for a in args], got[worst], expected[worst])
        assert np.count_nonzero(distance) <= got.size // 1_000_000, (op, np.count_nonzero(distance))


@pytest.mark.slow
@pytest.mark.parametrize("op", MATH_OPS)
def test_f64_sweep(op: str) -> None:
    dtype = np.dtype(np.float64)
    for seed in range(1, 4):
        args = sample(op, dtype, 1_000_000, seed)
        got = _run(op, dtype, args)
        expected = reference(op, dtype, *args)
        distance = ulp_distance(got, expected)
        worst = int(np.argmax(distance))
        assert distance[worst] <= F64_TOLERANCE.get(op, 1), (op, [a[worst] for a in args], got[worst])
