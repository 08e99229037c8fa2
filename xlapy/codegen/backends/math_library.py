"""Vectorizable elementwise math functions for the CPU backend (LLVM IR via llvmlite).

`math_function(module, op, type)` returns (creating once per module) `xlapy.<op>.<f64|f32|f16|bf16>`, an internal
`alwaysinline` function computing `op` on one scalar (two for atan2 and pow/powf). The ops are MLIR's math op
names (`MATH_OPS`), plus `logistic` (1 / (1 + e^-x)) and `rsqrt`.

Every function is straight-line code: no branches (all cases are computed and chosen with `select`), no calls but
LLVM intrinsics that lower to instructions (fma, fmuladd, fabs, floor, roundeven, sqrt, copysign); the only memory
accesses are constant tables, for sin/cos/tan of huge arguments and for the f32 logistic's exp (read with a masked
gather in the vector forms: a load per lane would be hundreds of instructions at 64 lanes; exp's 16 entries are held
in two registers instead on AVX-512 hosts, read with permutes). After inlining into a loop, LLVM's loop vectorizer
widens the scalar forms (<8 x double> on AVX-512).

f32 arguments (and f16/bf16, extended to f32 first) are computed in f64 and rounded once, with a relative error of
~1e-16 (far below the 2^-45 at which the single rounding would often differ from the f64 result's): the results are
numpy's f64 result rounded to f32 (the interpreter's oracle) except for a few arguments in 10^8, where the f64 value
lies within ~1e-16 of a rounding boundary. Most ops use their f64 kernel; erf has its own rational approximation,
logistic an exp of a table of 2^(j/16) and a degree-6 polynomial, log no subnormal scaling, cbrt no final Newton
step. The exceptions are tanh and exp: for f32 (and f16/bf16) XLA:CPU evaluates approximations of its own in f32,
tanh up to 5 ulps from the exact value and exp up to 1 (6 just below overflow), and that is what they mean here: the
interpreter (`xlapy/interpreter/xla_cpu_math.py`) and this library (`mathlib/xla_cpu_f32.py`) compute them, bit for
bit as XLA:CPU. f64 uses fdlibm-style algorithms (Cody-Waite and Payne-Hanek reductions, minimax polynomials) with
double-double arithmetic (2Sum, fma products) where a rounding would cost an ulp. f64 logistic is XLA's 1 / (1 +
e^-x) rounded as the interpreter rounds it (see `logistic64`). The kernels live in the `mathlib` package (one module
per family); the polynomial and rational coefficients in `mathlib/constants.py` come from
tools/fit_math_coefficients.py (which also checks the tables of exp).

IEEE special values follow numpy / C99: NaN propagates, exp(-inf) = 0, log(0) = -inf, log(-1) = NaN,
tanh(-0) = -0, sin(inf) = NaN, erf(+-inf) = +-1, pow(x, 0) = 1, pow(-8, 1/3) = NaN, overflow gives inf and
underflow 0 or a subnormal.

Measured accuracy (max ulps; 6M arguments per op and type over all magnitudes, tests/codegen/test_math_library.py
`-m slow`): f32 vs numpy's f64 result rounded to f32: 0 on every sample of the default tests (at most one
argument in a million may differ, by 1 ulp, in the slow sweeps), but tanh and exp (XLA:CPU's approximations:
5 and 6 over every f32, tests/codegen/test_xla_cpu_f32.py); f64 vs numpy's functions evaluated in long double and
rounded once (host-independent, unlike numpy's f64 ones; erf/erfc: `math`; logistic: the interpreter's formula) and
vs the correctly rounded result (mpmath, 8000-30000 arguments; rsqrt is 1/sqrt, two roundings, like the
interpreter's; logistic rounds like the interpreter's formula, not correctly).

    op        f32   f64 vs numpy   f64 vs exact     op        f32   f64 vs numpy   f64 vs exact
    exp        6         1              1           sin        0         1              1
    exp2       0         1              1           cos        0         1              1
    expm1      0         1              1           tan        0         1              1
    log        0         1              1           atan       0         1              1
    log2       0         1              1           atan2      0         1              1
    log10      0         1              1           asin       0         1              1
    log1p      0         1              1           acos       0         1              1
    tanh       5         1              1           atanh      0         1              1
    logistic   0         1              -           asinh      0         2              1
    sinh       0         1              1           acosh      0         2              2
    cosh       0         1              1           erf        0         1              1
    pow        0         1              1           erfc       0         3              2
    cbrt       0         1              0           sqrt       0         0              0
    rsqrt      0         0              1

Throughput (a loop over 12.5M f32 values, measured on a shared, busy 2-core machine, so only ratios mean much):
XLA:CPU's f32 tanh and exp take 0.47x and 0.7x the time of the correctly rounded kernels they replaced on 4M values
(docs/emitters.md), the 1e-16 erf about 1.3x its former 1e-10 rational; the ops now on their f64 kernels
(sin/cos/tan, pow, the inverse and hyperbolic functions, exp2, expm1, log1p, erfc) are 1.3-3x slower than their
former f32-only approximations. gelu stays faster than XLA:CPU (benchmarks/loop_fusion_vs_xla.py).
"""

from __future__ import annotations

from llvmlite import ir

# the kernel modules register their ops on import
from xlapy.codegen.backends.mathlib import exponential, logarithm, special, trigonometric  # noqa: F401
from xlapy.codegen.backends.mathlib.emitter import (
    F32,
    F64,
    OPS,
    Emitter,
    bf16_rounded_bits,
    bf16_to_f32,
    clamp_in_type,
    like,
    pack_bf16,
)
from xlapy.errors import UnimplementedError

MATH_OPS: tuple[str, ...] = tuple(sorted(OPS))


def _type_suffix(type: ir.Type) -> str:
    if isinstance(type, ir.VectorType):
        return f"v{type.count}{_type_suffix(type.element)}"
    if isinstance(type, ir.DoubleType):
        return "f64"
    if isinstance(type, ir.FloatType):
        return "f32"
    if isinstance(type, ir.HalfType):
        return "f16"
    if str(type) == "bfloat":  # llvmlite has no class for it; the CPU backend defines one
        return "bf16"
    raise UnimplementedError(f"math library: no functions on {type}")


def math_function(module: ir.Module, op: str, type: ir.Type) -> ir.Function:
    """The internal always-inline function computing `op` (a name of MATH_OPS, MLIR's math op names) on values
    of the float type `type` (a scalar or a vector of one: then every lane at once, with vector instructions);
    created once per module, named `xlapy.<op>.<suffix>` (f64, f32, f16, bf16, or e.g. v16f32 for vectors)."""
    suffix = _type_suffix(type)
    name = f"xlapy.{op}.{suffix}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    spec = OPS.get(op)
    if spec is None:
        raise UnimplementedError(f"math library: no function `{op}` (supported: {', '.join(MATH_OPS)})")
    fn = ir.Function(module, ir.FunctionType(type, [type] * spec.arity), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    e = Emitter(builder, type.count if isinstance(type, ir.VectorType) else None)
    args = list(fn.args)
    element = type.element if isinstance(type, ir.VectorType) else type
    if isinstance(element, ir.DoubleType):
        builder.ret(spec.f64(e, *args))
        return fn
    is_bf16 = str(element) == "bfloat"  # llvmlite has no class for it
    if not isinstance(element, ir.FloatType):
        # 16-bit floats go through f32: both conversions are exact or single roundings
        args = [bf16_to_f32(builder, a) if is_bf16 else builder.fpext(a, like(type, F32)) for a in args]

    def in_f64(*f32_args: ir.Value) -> ir.Value:
        """The f32 kernel on f32 values (of ``type``'s lanes, or fewer): evaluated in f64, rounded once."""
        lanes = f32_args[0].type.count if isinstance(f32_args[0].type, ir.VectorType) else None
        if spec.f32_domain is not None:
            f32_args = tuple(clamp_in_type(builder, a, *spec.f32_domain) for a in f32_args)
        kernel = spec.f32 or spec.f64
        wide = kernel(Emitter(builder, lanes), *(builder.fpext(a, like(a.type, F64)) for a in f32_args))
        return builder.fptrunc(wide, like(wide.type, F32))

    result = spec.f32_native(builder, *args) if spec.f32_native is not None else in_f64(*args)
    if is_bf16:
        result = pack_bf16(builder, bf16_rounded_bits(builder, result), type)
    elif not isinstance(element, ir.FloatType):
        result = builder.fptrunc(result, type)  # f16: F16C's vcvtps2ph
    builder.ret(result)
    return fn


__all__ = ["MATH_OPS", "math_function"]
