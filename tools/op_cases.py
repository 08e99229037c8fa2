"""The op-by-op cases that check the reference interpreter against XLA:CPU
(``tests/interpreter/test_ops_vs_xla.py`` runs them; ``benchmarks/interpreter_coverage.py``
tabulates them).

Every case is a small HLO module (parameters and the op under test) run on
seeded inputs rich in special values, by ``xlapy.interpreter.evaluate`` and by
XLA:CPU, and compared: integers, pred and data movement bit for bit, float
arithmetic exactly where IEEE fixes the result, within the ulps measured for
the ops where XLA uses its own approximations.

Cases come in groups that share parameters and arguments. XLA runs a group as
one module (a tuple of every case's result), so a group compiles once; the
interpreter evaluates each case's own module.

XLA:CPU runs with denormals flushed to zero (inputs and results), which the
interpreter does not model: float arithmetic is fed normal numbers only and
its results are compared with denormals flushed on both sides. Data movement
and bitcasts see every bit pattern, denormals and NaN payloads included.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from tools.compare import assert_same
from tools.xla_cpu import run_on_xla_cpu
from xlapy.hlo import parse_module
from xlapy.interpreter.evaluator import evaluate
from xlapy.shapes import ELEMENT_TYPES

SIGNED = ("s8", "s16", "s32", "s64")
UNSIGNED = ("u8", "u16", "u32", "u64")
INTEGERS = SIGNED + UNSIGNED
WIDE_FLOATS = ("f16", "bf16", "f32", "f64")
FP8 = ("f8e4m3fn", "f8e5m2")
FLOATS = WIDE_FLOATS + FP8
COMPLEX = ("c64",)
DTYPES = ("pred", *INTEGERS, *WIDE_FLOATS, "c64", *FP8)

N_RANDOM = 48


def np_dtype(element_type: str) -> np.dtype:
    return ELEMENT_TYPES[element_type].dtype


def bit_width(element_type: str) -> int:
    return ELEMENT_TYPES[element_type].bit_width


# -- comparisons ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """How a case's results are compared (see ``compare.assert_same``)."""

    exact_bits: bool = False
    ulps: float = 0
    rtol: float = 0
    atol: float = 0
    # The absolute tolerance applies only where |expected| is below this.
    atol_below: float = float("inf")
    normwise: bool = False
    flush: bool = True


EXACT_BITS = Check(exact_bits=True)
EXACT = Check()


def check_results(got: Any, expected: Any, check: Check, context: str) -> None:
    assert_same(got, expected, exact_bits=check.exact_bits, ulps=check.ulps, rtol=check.rtol, atol=check.atol,
                atol_below=check.atol_below, normwise=check.normwise, flush=check.flush, context=context)


# -- cases and groups -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One op under test. ``lines`` are entry instructions (their names and the
    names of ``computations`` already prefixed to be unique in the group); the
    last line is the result. ``xla_lines``, when given, replace ``lines`` in
    the module XLA runs: an equivalent of an op XLA:CPU does not take as input.
    ``opcode``/``dtype`` are the coverage keys."""

    id: str
    opcode: str
    dtype: str
    group: str
    lines: tuple[str, ...]
    computations: tuple[str, ...]
    check: Check
    slow: bool
    xla_lines: tuple[str, ...] | None = None

    def entry_lines(self, for_xla: bool) -> tuple[str, ...]:
        return self.xla_lines if for_xla and self.xla_lines is not None else self.lines

    def result(self, for_xla: bool = False) -> tuple[str, str]:
        """Name and shape text of the result instruction."""
        last = self.entry_lines(for_xla)[-1]
        name, rhs = (part.strip() for part in last.split("=", 1))
        if not rhs.startswith("("):
            return name, rhs.split()[0]
        depth = 0
        for i, ch in enumerate(rhs):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return name, rhs[: i + 1]
        raise ValueError(f"unbalanced shape in {last!r}")


@dataclass
class Group:
    name: str
    params: tuple[str, ...]
    args: tuple[np.ndarray, ...]
    slow: bool = False
    # Labels of cases that stay in the default run when the group is slow.
    core: frozenset[str] = frozenset()
    cases: list[Case] = field(default_factory=list)

    def add(self, opcode: str, dtype: str, label: str, lines: Iterable[str], *, computations: Iterable[str] = (),
            check: Check = EXACT, xla_lines: Iterable[str] | None = None) -> None:
        """Add a case; ``$`` in ``lines`` and ``computations`` is replaced by the case's unique prefix."""
        prefix = f"c{len(self.cases)}_"
        self.cases.append(Case(
            id=f"{self.name}-{label}", opcode=opcode, dtype=dtype, group=self.name,
            lines=tuple(line.replace("$", prefix) for line in lines),
            computations=tuple(c.replace("$", prefix) for c in computations), check=check,
            slow=self.slow and label not in self.core,
            xla_lines=None if xla_lines is None else tuple(line.replace("$", prefix) for line in xla_lines)))

    def text(self, cases: list[Case], for_xla: bool = False) -> str:
        """A module with the group's parameters and ``cases``; its result is the
        case's result for one case, the tuple of the results otherwise."""
        name = "m_" + "".join(ch if ch.isalnum() else "_" for ch in (cases[0].id if len(cases) == 1 else self.name))
        out = [f"HloModule {name}", ""]
        for case in cases:
            out += [*case.computations, ""] if case.computations else []
        out.append("ENTRY main {")
        out += [f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(self.params)]
        for case in cases:
            out += [f"  {line}" for line in case.entry_lines(for_xla)]
        if len(cases) == 1:
            out[-1] = "  ROOT " + out[-1].strip()
        else:
            results = [c.result(for_xla) for c in cases]
            shapes = ", ".join(shape for _, shape in results)
            out.append(f"  ROOT results = ({shapes}) tuple({', '.join(name for name, _ in results)})")
        out.append("}")
        return "\n".join(out) + "\n"


GROUPS: dict[str, Group] = {}


def _group(name: str, params: Iterable[str], args: Iterable[Any], slow: bool = False,
           core: Iterable[str] = ()) -> Group:
    params = tuple(params)
    args = tuple(np.asarray(a) for a in args)
    assert len(params) == len(args), name
    group = GROUPS[name] = Group(name, params, args, slow, frozenset(core))
    return group


def _seeded(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


# -- input values -------------------------------------------------------------------------------


def _finfo(element_type: str) -> Any:
    return ml_dtypes.finfo(np_dtype(element_type))


def _cast(values: Iterable[Any], element_type: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(list(values), np.float64).astype(np_dtype(element_type))


def special_values(element_type: str) -> np.ndarray:
    """Values every elementwise op should see: zeros of both signs, ±1, halves
    (ties of rounding), bounds of the type, infinities, NaN; denormals of the
    types XLA:CPU computes in f32 without flushing them (f16, fp8)."""
    if element_type == "pred":
        return np.array([False, True])
    if element_type in INTEGERS:
        info = np.iinfo(np_dtype(element_type))
        width = bit_width(element_type)
        candidates = [0, 1, -1, 2, -2, 3, -7, 7, 8, 100, width - 1, width, width + 1, 2 * width,
                      info.min, info.min + 1, info.max, info.max - 1]
        return np.array(sorted({v for v in candidates if info.min <= v <= info.max}), np_dtype(element_type))
    if element_type in COMPLEX:
        parts = [(0, 0), (-0.0, 0), (1, 0), (0, 1), (-1, -1), (0.5, -2), (3, 4), (-2.5, 1.5), (1e3, -1e-3),
                 (-0.0, -0.0)]
        return np.array([complex(r, i) for r, i in parts], np_dtype(element_type))
    info = _finfo(element_type)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3.0, -7.0, 0.1, -100.25, np.inf, -np.inf, np.nan,
              float(info.max), -float(info.max), float(info.tiny), -2 * float(info.tiny), 1 + float(info.eps),
              float(info.max) / 3]
    if element_type in ("f16", *FP8):  # normal numbers in the f32 XLA:CPU computes these types in
        values += [float(info.smallest_subnormal), -3 * float(info.smallest_subnormal)]
    return _cast(values, element_type)


def nonfinite_complex_values(element_type: str) -> np.ndarray:
    """Complex values with an infinite or NaN part, and huge ones."""
    parts = [(np.inf, 0), (0, -np.inf), (-np.inf, 1), (np.inf, np.inf), (np.nan, 0), (1, np.nan), (1e30, -1e30),
             (0, 0), (1, -1)]
    return np.array([complex(r, i) for r, i in parts], np_dtype(element_type))


def random_values(element_type: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` values spread over the type's range (half of them small for integers)."""
    dtype = np_dtype(element_type)
    if element_type == "pred":
        return rng.random(n) < 0.5
    if element_type in INTEGERS:
        info = np.iinfo(dtype)
        wide = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        small = rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True).astype(dtype)
        return np.where(rng.random(n) < 0.5, wide, small)
    if element_type in COMPLEX:
        real = rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)
        imag = rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)
        return (real + 1j * imag).astype(dtype)
    info = _finfo(element_type)
    top = min(np.log2(float(info.max)) - 1, 60)
    bottom = max(np.log2(float(info.tiny)) + 1, -60)
    magnitude = 2.0 ** rng.uniform(bottom, top, n) * rng.choice([-1.0, 1.0], n)
    ordinary = rng.standard_normal(n) * 4
    halves = rng.integers(-40, 40, n) / 2
    choice = rng.integers(0, 3, n)
    return _cast(np.where(choice == 0, magnitude, np.where(choice == 1, ordinary, halves)), element_type)


def random_bits(element_type: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniformly random bit patterns (every NaN payload, denormal and infinity can appear)."""
    if element_type == "pred":
        return rng.random(shape) < 0.5
    dtype = np_dtype(element_type)
    raw = rng.integers(0, 256, int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _pairs(element_type: str, rng: np.random.Generator, specials: np.ndarray | None = None,
           n_random: int = N_RANDOM) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random pairs."""
    specials = special_values(element_type) if specials is None else specials
    a = np.concatenate([np.repeat(specials, len(specials)), random_values(element_type, rng, n_random)])
    b = np.concatenate([np.tile(specials, len(specials)), random_values(element_type, rng, n_random)])
    return a, b


# -- elementwise ops ----------------------------------------------------------------------------

_FLOAT_UNARY = ("cbrt", "ceil", "cosine", "erf", "exponential", "exponential-minus-one", "floor", "is-finite",
                "log", "log-plus-one", "logistic", "round-nearest-afz", "round-nearest-even", "rsqrt", "sine",
                "sqrt", "tan", "tanh")
_COMPLEX_UNARY = ("cosine", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt",
                  "sine", "sqrt", "tan", "tanh")
_TRANSCENDENTAL = {"cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one",
                   "logistic", "rsqrt", "sine", "tan", "tanh", "atan2", "power"}
_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def unary_opcodes(element_type: str) -> tuple[str, ...]:
    if element_type == "pred":
        return ("copy", "not")
    if element_type in SIGNED:
        return ("abs", "copy", "negate", "not", "popcnt", "count-leading-zeros", "sign")
    if element_type in UNSIGNED:
        return ("copy", "negate", "not", "popcnt", "count-leading-zeros")
    if element_type in FP8:
        return ("abs", "copy", "negate", "sign", "floor", "ceil", "is-finite")
    if element_type in COMPLEX:
        return ("abs", "copy", "negate", "real", "imag", "sign", *_COMPLEX_UNARY)
    return ("abs", "copy", "negate", "real", "imag", "sign", *_FLOAT_UNARY)


def binary_opcodes(element_type: str) -> tuple[str, ...]:
    if element_type == "pred":
        return ("and", "or", "xor", "maximum", "minimum")
    if element_type in INTEGERS:
        return ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "and", "or",
                "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical")
    if element_type in FP8:
        return ("add", "subtract", "multiply", "divide", "maximum", "minimum")
    if element_type in COMPLEX:
        return ("add", "subtract", "multiply", "divide", "power")
    return ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2")


# The ulps the interpreter's transcendental functions are off XLA:CPU's, per element type: measured as the
# largest distance over the elementwise cases' inputs with ten seeds and the slow sweep's 4096 values with three
# (with denormals flushed, as the cases compare). Where the interpreter differs, XLA:CPU's approximation is
# mostly the one off the correctly rounded value (e.g. f64 tanh(19) is 1 - 8e-16, f64 log1p(-0.41) 126 ulp). f32
# tanh and exp are XLA:CPU's approximations in the interpreter too (xlapy/interpreter/xla_cpu_math.py): 0.
_TRANSCENDENTAL_ULPS = {
    "f32": {"atan2": 1, "cbrt": 1, "cosine": 1, "erf": 4, "exponential-minus-one": 4, "log": 1,
            "log-plus-one": 2, "logistic": 2, "power": 1, "rsqrt": 2, "sine": 1, "tan": 1},
    "f64": {"atan2": 1, "cbrt": 3, "cosine": 0, "erf": 0, "exponential": 1, "exponential-minus-one": 3, "log": 1,
            "log-plus-one": 128, "logistic": 2, "power": 1, "rsqrt": 2, "sine": 0, "tan": 1, "tanh": 7},
    # The 16-bit floats go through f32: all but two results are the f32 value rounded once, as the interpreter's.
    "f16": {"exponential-minus-one": 2, "logistic": 2},
    "bf16": {},
}
# f16 logistic below f16's smallest normal (x < -9.7): XLA:CPU gives 0 where the interpreter gives the f16
# denormal (measured: up to 1.5e-5 apart); compared absolutely there only.
_F16_DENORMAL_RESULTS = {"atol": 2.0**-14, "atol_below": 2.0**-14}

# Complex functions: XLA:CPU has formulas of its own. Measured over the elementwise cases' inputs with ten seeds.
# Where a part is small next to the other, XLA's part can be off by much more than an ulp of itself: its
# sinh(b) in sin/cos(a + bi) cancels for small |b| (up to 6.4e-8 off), its expm1(a + bi) real part cancels, so
# those parts are compared absolutely below 0.1 (|part|); power multiplies log's error by |w| and is compared
# normwise (errors in ulps of the larger part), absolutely where XLA's intermediate values underflow.
_COMPLEX_CHECKS = {
    "cosine": Check(ulps=3, atol=2.0**-24, atol_below=0.1),  # 3 ulp at |part| >= 0.1, 4.6e-8 below
    "sine": Check(ulps=6, atol=2.0**-23, atol_below=0.1),  # 6 ulp at |part| >= 0.1, 6.4e-8 below
    "exponential-minus-one": Check(ulps=5, atol=2.0**-25, atol_below=0.1),  # 5 ulp at |part| >= 0.1, 2.6e-8 below
    "exponential": Check(ulps=2),  # 2 ulp
    "log": Check(ulps=1),  # 1 ulp
    "log-plus-one": Check(ulps=2),  # 2 ulp
    "logistic": Check(ulps=10),  # 10 ulp
    "rsqrt": Check(ulps=3),  # 3 ulp
    "sqrt": Check(ulps=2),  # 2 ulp
    "tan": Check(ulps=4),  # 4 ulp
    "tanh": Check(ulps=6),  # 6 ulp
    # 41 ulp normwise where the larger part is >= 2^-100; below, XLA gives 0 for values up to 1.9e-35.
    "power": Check(ulps=48, normwise=True, atol=2.0**-100, atol_below=2.0**-100),
}


def _float_check(opcode: str, element_type: str) -> Check:
    """Exact for ops IEEE rounds correctly; the ulps measured for XLA's approximations."""
    if element_type in COMPLEX:
        # The interpreter computes XLA:CPU's formulas for products, quotients, abs and sign, its fused
        # multiply-adds included (test_complex_vs_xla.py).
        return _COMPLEX_CHECKS.get(opcode, EXACT)
    if opcode not in _TRANSCENDENTAL:
        return EXACT
    ulps = _TRANSCENDENTAL_ULPS.get(element_type, {}).get(opcode, 0)
    if element_type == "f16" and opcode == "logistic":
        return Check(ulps=ulps, **_F16_DENORMAL_RESULTS)
    return Check(ulps=ulps) if ulps else EXACT


def _result_type(opcode: str, element_type: str) -> str:
    if opcode in ("abs", "real", "imag") and element_type in COMPLEX:
        return {"c64": "f32", "c128": "f64"}[element_type]
    if opcode == "is-finite":
        return "pred"
    return element_type


def _build_elementwise(element_type: str) -> None:
    rng = _seeded(f"elementwise-{element_type}")
    a, b = _pairs(element_type, rng)
    n = len(a)
    c = np.concatenate([special_values(element_type)[::-1], random_values(element_type, rng, n)])[:n]
    mask = rng.random(n) < 0.5
    t = element_type
    group = _group(f"elementwise-{t}", (f"{t}[{n}]", f"{t}[{n}]", f"{t}[{n}]", f"pred[{n}]"), (a, b, c, mask))
    is_float = t in FLOATS or t in COMPLEX
    for op in unary_opcodes(t):
        check = _float_check(op, t) if is_float else EXACT
        group.add(op, t, op, [f"$r = {_result_type(op, t)}[{n}] {op}(p0)"], check=check)
    for op in binary_opcodes(t):
        check = _float_check(op, t) if is_float else EXACT
        group.add(op, t, op, [f"$r = {t}[{n}] {op}(p0, p1)"], check=check)
    directions = ("EQ", "NE") if t in COMPLEX else _DIRECTIONS
    for direction in directions:
        group.add("compare", t, f"compare-{direction}", [f"$r = pred[{n}] compare(p0, p1), direction={direction}"])
        if t in FLOATS:
            group.add("compare", t, f"compare-{direction}-totalorder",
                      [f"$r = pred[{n}] compare(p0, p1), direction={direction}, type=TOTALORDER"])
    # NaN payloads are not kept bit for bit: XLA:CPU selects f8e5m2 through a wider type, and a quiet
    # NaN 0x7e comes back as 0x7f. Data movement tests (select included) check payloads of the other types.
    group.add("select", t, "select", [f"$r = {t}[{n}] select(p3, p0, p1)"])
    if t not in COMPLEX:
        group.add("clamp", t, "clamp", [f"$r = {t}[{n}] clamp(p2, p0, p1)"])
        group.add("clamp", t, "clamp-scalar-bounds", [
            f"$lo1 = {t}[1] slice(p1), slice={{[3:4]}}", f"$lo = {t}[] reshape($lo1)",
            f"$hi1 = {t}[1] slice(p2), slice={{[{n - 2}:{n - 1}]}}", f"$hi = {t}[] reshape($hi1)",
            f"$r = {t}[{n}] clamp($lo, p0, $hi)"])
    if t == "f64":
        group.add("complex", t, "complex", [f"$r = c128[{n}] complex(p0, p1)"], check=EXACT_BITS)
    if t in FLOATS:
        exponent, mantissa = {"f64": (11, 52), "f32": (8, 23), "f16": (5, 10), "bf16": (8, 7), "f8e4m3fn": (4, 3),
                              "f8e5m2": (5, 2)}[t]
        for e, m in sorted({(exponent, mantissa), (min(exponent, 8), min(mantissa, 7)), (min(exponent, 5), 2),
                            (min(exponent, 4), min(mantissa, 3)), (min(exponent, 5), min(mantissa, 10))}):
            group.add("reduce-precision", t, f"reduce-precision-e{e}m{m}",
                      [f"$r = {t}[{n}] reduce-precision(p0), exponent_bits={e}, mantissa_bits={m}"])


def _build_complex_nonfinite(element_type: str) -> None:
    """Complex ops on infinities, NaN and huge values, where C99's Annex G and
    XLA's own formulas decide the result."""
    t = element_type
    a, b = _pairs(t, _seeded(f"nonfinite-{t}"), nonfinite_complex_values(t), n_random=0)
    n = len(a)
    group = _group(f"nonfinite-{t}", (f"{t}[{n}]", f"{t}[{n}]"), (a, b))
    for op in unary_opcodes(t):
        group.add(op, t, op, [f"$r = {_result_type(op, t)}[{n}] {op}(p0)"], check=_float_check(op, t))
    for op in binary_opcodes(t):
        group.add(op, t, op, [f"$r = {t}[{n}] {op}(p0, p1)"], check=_float_check(op, t))


def _build_complex_construction() -> None:
    """complex(re, im) keeps both parts bit for bit: signed zeros, infinities, NaN."""
    parts = np.concatenate([special_values("f32"), [1e30, -1e30]]).astype(np.float32)
    re, im = _pairs("f32", _seeded("complex-f32"), parts)
    n = len(re)
    group = _group("complex-f32", (f"f32[{n}]", f"f32[{n}]"), (re, im))
    group.add("complex", "f32", "complex", [f"$r = c64[{n}] complex(p0, p1)"], check=EXACT_BITS)


def _build_stochastic_convert(source: str) -> None:
    """Float to integer with the rounding direction chosen by random bits of the source's width."""
    rng = _seeded(f"stochastic-convert-{source}")
    values = _conversion_inputs(source)
    n = len(values)
    random_type = {16: "u16", 32: "u32", 64: "u64"}[bit_width(source)]
    group = _group(f"stochastic-convert-{source}", (f"{source}[{n}]", f"{random_type}[{n}]"),
                   (values, random_bits(random_type, rng, (n,))))
    for target in ("s8", "s16", "s32", "s64"):
        group.add("stochastic-convert", source, f"to-{target}", [f"$r = {target}[{n}] stochastic-convert(p0, p1)"])


def _build_elementwise_sweep(element_type: str) -> None:
    """Many random inputs (slow): the unary and binary ops on 4096 values."""
    rng = _seeded(f"sweep-{element_type}")
    n = 4096
    t = element_type
    group = _group(f"sweep-{t}", (f"{t}[{n}]", f"{t}[{n}]"),
                   (random_values(t, rng, n), random_values(t, rng, n)), slow=True)
    is_float = t in FLOATS
    for op in unary_opcodes(t):
        group.add(op, t, op, [f"$r = {_result_type(op, t)}[{n}] {op}(p0)"],
                  check=_float_check(op, t) if is_float else EXACT)
    for op in binary_opcodes(t):
        group.add(op, t, op, [f"$r = {t}[{n}] {op}(p0, p1)"], check=_float_check(op, t) if is_float else EXACT)


# -- conversions --------------------------------------------------------------------------------


def _conversion_inputs(source: str) -> np.ndarray:
    """Values that probe a conversion: bounds of every integer type (and just
    past them), ties of every narrower float type, overflow and NaN."""
    rng = _seeded(f"convert-{source}")
    if source == "pred":
        return np.array([False, True, True, False])
    if source in INTEGERS:
        info = np.iinfo(np_dtype(source))
        candidates = {0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65535, 65536, 65504, 65520,
                      2**24 + 1, 2**24 + 3, 2**31 - 1, -(2**31), 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1,
                      -(2**63), 2**64 - 1, 448, 464, 57344, 61440, 0x1008001, 0x7FFFFFC0, info.min, info.max}
        specials = np.array(sorted(v for v in candidates if info.min <= v <= info.max), np_dtype(source))
        return np.concatenate([specials, random_values(source, rng, N_RANDOM)])
    if source in COMPLEX:
        return np.concatenate([special_values(source), random_values(source, rng, N_RANDOM)])
    bounds = [127.0, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, 32767.9, 32768.0, -32769.0, 65535.5, 65536.0,
              2.0**31 - 64, 2.0**31, -(2.0**31), -(2.0**31) - 256, 2.0**32, 2.0**63, -(2.0**63), 2.0**64, 1e20, -1e20,
              -0.9, 0.9, -1.5]
    ties = [1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-4, 1 + 3 * 2.0**-4, 1 + 2.0**-3,
            1 + 3 * 2.0**-3, 1 + 2.0**-24, 1 + 3 * 2.0**-24, 65504.0, 65519.0, 65520.0, 448.0, 464.0, 480.0,
            57344.0, 61440.0, 3.4e38, 3.4028235677973366e38, 2.0**-14 * 1.5, 2.0**-24, 2.0**-25, 2.0**-9, 2.0**-10,
            2.0**-17, 2.0**-16 * 3]
    values = np.concatenate([special_values(source), _cast(bounds + ties, source),
                             random_values(source, rng, N_RANDOM)])
    # Values that are denormal in f32 (or f64) would be flushed to zero by XLA:CPU before converting.
    wide = values.astype(np.float64)
    tiny = np.finfo(np.float64 if source == "f64" else np.float32).tiny
    return values[~((np.abs(wide) < tiny) & (wide != 0))]


def _build_convert(source: str) -> None:
    values = _conversion_inputs(source)
    n = len(values)
    group = _group(f"convert-{source}", (f"{source}[{n}]",), (values,))
    for target in DTYPES:
        if source in COMPLEX and target == "pred":
            continue  # XLA:CPU crashes compiling c64 -> pred
        group.add("convert", source, f"to-{target}", [f"$r = {target}[{n}] convert(p0)"])


def _build_bitcast_convert(source: str) -> None:
    rng = _seeded(f"bitcast-{source}")
    width = bit_width(source)
    n = 16
    group = _group(f"bitcast-convert-{source}", (f"{source}[{n}]",), (random_bits(source, rng, (n,)),))
    same_width = [t for t in DTYPES if bit_width(t) == width and t != "pred" and (t in COMPLEX) == (source in COMPLEX)]
    for target in same_width:
        group.add("bitcast-convert", source, f"to-{target}", [f"$r = {target}[{n}] bitcast-convert(p0)"],
                  check=EXACT_BITS)
    if source in COMPLEX:
        return
    for target in ("u8", "s16", "f16", "s32", "f32", "u64", "f64"):
        target_width = bit_width(target)
        if target_width < width:
            shape = f"{target}[{n},{width // target_width}]"
        elif target_width > width:
            ratio = target_width // width
            shape = f"{target}[{n // ratio}]"
            group.add("bitcast-convert", source, f"to-{target}", [
                f"$v = {source}[{n // ratio},{ratio}] reshape(p0)", f"$r = {shape} bitcast-convert($v)"],
                check=EXACT_BITS)
            continue
        else:
            continue
        group.add("bitcast-convert", source, f"to-{target}", [f"$r = {shape} bitcast-convert(p0)"], check=EXACT_BITS)


# -- data movement ------------------------------------------------------------------------------

_INDEX_PARAMS = (("s32", 1), ("s32", 2), ("s32", -1), ("s32", 5), ("s64", 100), ("s64", -(2**40)),
                 ("u32", 2**32 - 1), ("u32", 1), ("s8", -128), ("s8", 3))


def _build_data_movement(element_type: str, slow: bool = False) -> None:
    rng = _seeded(f"data-movement-{element_type}")
    t = element_type
    params = [f"{t}[4,6]", f"{t}[2,3]", f"{t}[]", "pred[4,6]"] + [f"{it}[]" for it, _ in _INDEX_PARAMS]
    args = [random_bits(t, rng, (4, 6)), random_bits(t, rng, (2, 3)), random_bits(t, rng, ()), rng.random((4, 6)) < 0.5]
    args += [np.array(v, np_dtype(it)) for it, v in _INDEX_PARAMS]
    group = _group(f"data-movement-{t}", params, args, slow, core=_CORE_DATA_MOVEMENT)

    def add(opcode: str, label: str, lines: list[str], computations: Iterable[str] = ()) -> None:
        group.add(opcode, t, label, lines, computations=computations, check=EXACT_BITS)

    add("copy", "copy", [f"$r = {t}[4,6] copy(p0)"])
    add("broadcast", "broadcast", [f"$r = {t}[2,4,6] broadcast(p0), dimensions={{1,2}}"])
    add("broadcast", "broadcast-transposing", [f"$r = {t}[6,3,4] broadcast(p0), dimensions={{2,0}}"])
    add("broadcast", "broadcast-scalar", [f"$r = {t}[3,2] broadcast(p2), dimensions={{}}"])
    add("reshape", "reshape", [f"$r = {t}[3,8] reshape(p0)"])
    add("reshape", "reshape-rank", [f"$a = {t}[2,2,6,1] reshape(p0)", f"$r = {t}[24] reshape($a)"])
    add("transpose", "transpose", [f"$r = {t}[6,4] transpose(p0), dimensions={{1,0}}"])
    add("transpose", "transpose-3d", [f"$a = {t}[2,3,4] reshape(p0)",
                                      f"$r = {t}[4,2,3] transpose($a), dimensions={{2,0,1}}"])
    add("slice", "slice-strided", [f"$r = {t}[2,2] slice(p0), slice={{[1:4:2], [0:6:4]}}"])
    add("slice", "slice", [f"$r = {t}[4,3] slice(p0), slice={{[0:4], [2:5]}}"])
    index_pairs = {"in-range": (4, 5), "negative-and-past-end": (6, 7), "s64-clamped": (8, 9),
                   "u32-clamped": (10, 11), "s8": (12, 13)}
    for label, (i, j) in index_pairs.items():
        add("dynamic-slice", f"dynamic-slice-{label}",
            [f"$r = {t}[2,3] dynamic-slice(p0, p{i}, p{j}), dynamic_slice_sizes={{2,3}}"])
        add("dynamic-update-slice", f"dynamic-update-slice-{label}",
            [f"$r = {t}[4,6] dynamic-update-slice(p0, p1, p{i}, p{j})"])
    add("concatenate", "concatenate-0", [f"$a = {t}[2,6] slice(p0), slice={{[1:3], [0:6]}}",
                                         f"$r = {t}[6,6] concatenate(p0, $a), dimensions={{0}}"])
    add("concatenate", "concatenate-1", [f"$r = {t}[2,9] concatenate(p1, p1, p1), dimensions={{1}}"])
    add("pad", "pad", [f"$r = {t}[7,17] pad(p0, p2), padding=1_2x0_1_2"])
    add("pad", "pad-negative", [f"$r = {t}[7,8] pad(p0, p2), padding=-1_1_1x-3_0_1"])
    add("reverse", "reverse", [f"$r = {t}[4,6] reverse(p0), dimensions={{0,1}}"])
    add("reverse", "reverse-1", [f"$r = {t}[4,6] reverse(p0), dimensions={{1}}"])
    if t != "pred":
        add("iota", "iota", [f"$r = {t}[4,6] iota(), iota_dimension=1"])
        add("iota", "iota-0", [f"$r = {t}[5,2] iota(), iota_dimension=0"])
    add("tuple", "tuple", [f"$r = ({t}[4,6], {t}[2,3]) tuple(p0, p1)"])
    add("get-tuple-element", "get-tuple-element",
        [f"$b = ({t}[2,3]) tuple(p1)", f"$a = ({t}[4,6], ({t}[2,3])) tuple(p0, $b)",
         f"$c = ({t}[2,3]) get-tuple-element($a), index=1", f"$r = {t}[2,3] get-tuple-element($c), index=0"])
    add("opt-barrier", "opt-barrier",
        [f"$a = ({t}[4,6], {t}[2,3]) tuple(p0, p1)", f"$b = ({t}[4,6], {t}[2,3]) opt-barrier($a)",
         f"$r = {t}[2,3] get-tuple-element($b), index=1"])
    add("select", "select", [f"$a = {t}[4,6] reverse(p0), dimensions={{0}}", f"$r = {t}[4,6] select(p3, p0, $a)"])
    add("get-dimension-size", "get-dimension-size", ["$r = s32[] get-dimension-size(p0), dimensions={1}"])
    # XLA takes bitcasts only after layout assignment; the same values come from a reshape or transpose.
    group.add("bitcast", t, "bitcast-reshape", [f"$r = {t}[24]{{0}} bitcast(p0)"],
              xla_lines=[f"$r = {t}[24] reshape(p0)"], check=EXACT_BITS)
    group.add("bitcast", t, "bitcast-layout", [f"$r = {t}[6,4]{{0,1}} bitcast(p0)"],
              xla_lines=[f"$r = {t}[6,4] transpose(p0), dimensions={{1,0}}"], check=EXACT_BITS)
    scalar = [f"$a = {t}[1,1] slice(p0), slice={{[2:3], [3:4]}}", f"$s = {t}[] reshape($a)"]
    group.add("bitcast", t, "bitcast-scalar", [*scalar, f"$r = {t}[1]{{0}} bitcast($s)"],
              xla_lines=[*scalar, f"$r = {t}[1] reshape($s)"], check=EXACT_BITS)


# -- reductions ---------------------------------------------------------------------------------


def _scalar_computation(name: str, t: str, opcode: str) -> str:
    return (f"{name} {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT r = {t}[] {opcode}(a, b)\n}}")


def _argmax_computation(name: str, t: str) -> str:
    return "\n".join([
        f"{name} {{", f"  a = {t}[] parameter(0)", "  ai = s32[] parameter(1)", f"  b = {t}[] parameter(2)",
        "  bi = s32[] parameter(3)", "  gt = pred[] compare(a, b), direction=GT",
        "  eq = pred[] compare(a, b), direction=EQ", "  lower = pred[] compare(ai, bi), direction=LT",
        "  tie = pred[] and(eq, lower)", "  pick = pred[] or(gt, tie)", f"  v = {t}[] select(pick, a, b)",
        "  i = s32[] select(pick, ai, bi)", f"  ROOT r = ({t}[], s32[]) tuple(v, i)", "}"])


def _reduction_inputs(t: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values whose sums and products are exact in any order (small integers and
    halves), so reductions compare exactly whatever order XLA adds in."""
    size = int(np.prod(shape))
    if t in ("pred", *INTEGERS):
        return random_values(t, rng, size).reshape(shape)
    if t in COMPLEX:
        return (rng.integers(-4, 5, size) / 2 + 1j * rng.integers(-4, 5, size) / 2).astype(np_dtype(t)).reshape(shape)
    return (rng.integers(-6, 7, size) / 2).astype(np_dtype(t)).reshape(shape)


def _build_reduce(element_type: str, slow: bool = False) -> None:
    rng = _seeded(f"reduce-{element_type}")
    t = element_type
    shape = (3, 4, 5)
    x = _reduction_inputs(t, rng, shape)
    if t == "pred":
        inits = [False, True, False, True]
    elif t in INTEGERS:
        info = np.iinfo(np_dtype(t))
        inits = [0, 1, info.min, info.max]
    elif t in COMPLEX:
        inits = [0, 1, 0, 0]
    else:
        inits = [0.0, 1.0, -np.inf, np.inf]
    special = random_values(t, rng, 60).reshape(shape) if t not in COMPLEX else x
    if t in FLOATS:
        special.reshape(-1)[:6] = _cast([np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan], t)
    group = _group(f"reduce-{t}", (f"{t}[3,4,5]", *(f"{t}[]" for _ in inits), f"{t}[3,4,5]"),
                   (x, *(np.array(v).astype(np_dtype(t)) for v in inits), special), slow, core=_CORE_REDUCE)
    reducers = {"add": 1, "multiply": 2, "maximum": 3, "minimum": 4} if t != "pred" else {"and": 2, "or": 1}
    if t in INTEGERS:
        reducers.update({"and": 4 if t in UNSIGNED else 1, "or": 1, "xor": 1})
    if t in COMPLEX:
        reducers = {"add": 1, "multiply": 2}
    for op, init in reducers.items():
        comp = _scalar_computation("$reducer", t, op)
        # Products of 15 halves need more bits than f16 has, so they are rounded along the way, differently in
        # every order (measured: 1 ulp over ten seeds; the other types 0).
        check = Check(ulps=1) if op == "multiply" and t == "f16" else EXACT
        group.add("reduce", t, f"reduce-{op}-1",
                  [f"$r = {t}[3,5] reduce(p0, p{init}), dimensions={{1}}, to_apply=$reducer"], computations=[comp],
                  check=check)
        group.add("reduce", t, f"reduce-{op}-02",
                  [f"$r = {t}[4] reduce(p0, p{init}), dimensions={{0,2}}, to_apply=$reducer"], computations=[comp],
                  check=check)
        if t in FLOATS and op in ("maximum", "minimum"):
            # NaN, infinities and signed zeros in max/min reductions: NaN wins in any order.
            group.add("reduce", t, f"reduce-{op}-specials",
                      [f"$r = {t}[] reduce(p5, p{init}), dimensions={{0,1,2}}, to_apply=$reducer"],
                      computations=[comp])
    if t in COMPLEX or t == "pred":
        return
    group.add("reduce", t, "reduce-variadic-argmax", [
        "$i = s32[3,4,5] iota(), iota_dimension=2", "$zero = s32[] constant(0)",
        f"$r = ({t}[3,4], s32[3,4]) reduce(p0, $i, p3, $zero), dimensions={{2}}, to_apply=$argmax"],
        computations=[_argmax_computation("$argmax", t)])


# -- dot ----------------------------------------------------------------------------------------


def _build_dot(element_type: str, result_type: str | None = None, slow: bool = False) -> None:
    t = element_type
    r = result_type or t
    name = f"dot-{t}" if result_type is None else f"dot-{t}-to-{r}"
    rng = _seeded(name)

    def operand(*shape: int) -> np.ndarray:
        if t in INTEGERS:  # full range: products and sums wrap
            return random_values(t, rng, int(np.prod(shape))).reshape(shape)
        if t == "pred":
            return rng.random(shape) < 0.5
        if t in COMPLEX:
            return (rng.integers(-4, 5, shape) + 1j * rng.integers(-4, 5, shape)).astype(np_dtype(t))
        return rng.integers(-4, 5, shape).astype(np_dtype(t))  # exact sums in any order

    group = _group(name, (f"{t}[4,5]", f"{t}[5,3]", f"{t}[2,4,5]", f"{t}[2,5,3]"),
                   (operand(4, 5), operand(5, 3), operand(2, 4, 5), operand(2, 5, 3)), slow, core=_CORE_DOT)
    group.add("dot", t, "matmul",
              [f"$r = {r}[4,3] dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"])
    group.add("dot", t, "transposed-lhs",
              [f"$r = {r}[5,5] dot(p0, p0), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"])
    group.add("dot", t, "batch", [f"$r = {r}[2,4,3] dot(p2, p3), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
                                  "rhs_batch_dims={0}, rhs_contracting_dims={1}"])
    group.add("dot", t, "batch-minor", [
        f"$b = {t}[5,2,3] transpose(p3), dimensions={{1,0,2}}",
        f"$r = {r}[2,4,3] dot(p2, $b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
        "rhs_batch_dims={1}, rhs_contracting_dims={0}"])
    group.add("dot", t, "two-contracting",
              [f"$r = {r}[4,4] dot(p2, p2), lhs_contracting_dims={{0,2}}, rhs_contracting_dims={{0,2}}"])
    group.add("dot", t, "outer", [f"$r = {r}[4,5,5,3] dot(p0, p1)"])
    group.add("dot", t, "vector", [f"$a = {t}[5,1] slice(p1), slice={{[0:5], [1:2]}}",
                                   f"$v = {t}[5] reshape($a)",
                                   f"$r = {r}[4] dot(p0, $v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"])


def _build_dot_random_f32() -> None:
    rng = _seeded("dot-f32-random")
    group = _group("dot-f32-random", ("f32[6,40]", "f32[40,5]"),
                   (rng.standard_normal((6, 40)).astype(np.float32), rng.standard_normal((40, 5)).astype(np.float32)))
    # Sums of 40 products of normal values: XLA's order differs from the interpreter's, and the rounding errors
    # are absolute (about n * eps * sum |a * b|, ~3e-6 here) however much the sum cancels (measured: 1.9e-6 over
    # ten seeds).
    group.add("dot", "f32", "matmul-random", ["$r = f32[6,5] dot(p0, p1), lhs_contracting_dims={1}, "
                                             "rhs_contracting_dims={0}"], check=Check(atol=4e-6))


# -- control flow -------------------------------------------------------------------------------


def _build_control_flow(element_type: str) -> None:
    t = element_type
    rng = _seeded(f"control-flow-{t}")
    x = _reduction_inputs(t, rng, (4,))
    y = _reduction_inputs(t, rng, (4,))
    group = _group(f"control-flow-{t}", (f"{t}[4]", f"{t}[4]", "pred[]", "s32[]", "s32[]", "s32[]"),
                   (x, y, np.bool_(True), np.int32(1), np.int32(-1), np.int32(7)))
    step = "or" if t == "pred" else "add"
    body = "\n".join([
        "$body {", f"  s = (s32[], {t}[4], {t}[4]) parameter(0)", "  i = s32[] get-tuple-element(s), index=0",
        f"  x = {t}[4] get-tuple-element(s), index=1", f"  y = {t}[4] get-tuple-element(s), index=2",
        "  one = s32[] constant(1)", "  j = s32[] add(i, one)", f"  x2 = {t}[4] {step}(x, y)",
        f"  ROOT r = (s32[], {t}[4], {t}[4]) tuple(j, x2, y)", "}"])
    cond = "\n".join([
        "$cond {", f"  s = (s32[], {t}[4], {t}[4]) parameter(0)", "  i = s32[] get-tuple-element(s), index=0",
        "  n = s32[] constant(5)", "  ROOT lt = pred[] compare(i, n), direction=LT", "}"])
    group.add("while", t, "while", [
        "$zero = s32[] constant(0)", f"$init = (s32[], {t}[4], {t}[4]) tuple($zero, p0, p1)",
        f"$loop = (s32[], {t}[4], {t}[4]) while($init), condition=$cond, body=$body",
        f"$r = {t}[4] get-tuple-element($loop), index=1"], computations=[cond, body])

    def branch(name: str, opcode: str) -> str:
        return (f"{name} {{\n  a = ({t}[4], {t}[4]) parameter(0)\n  x = {t}[4] get-tuple-element(a), index=0\n"
                f"  y = {t}[4] get-tuple-element(a), index=1\n  ROOT r = {t}[4] {opcode}(x, y)\n}}")

    ops = ("or", "and", "xor") if t == "pred" else ("add", "subtract", "maximum")
    branches = [branch(f"$b{k}", op) for k, op in enumerate(ops)]
    group.add("conditional", t, "conditional-pred", [
        f"$a = ({t}[4], {t}[4]) tuple(p0, p1)", f"$r = {t}[4] conditional(p2, $a, $a), true_computation=$b0, "
        "false_computation=$b1"], computations=branches[:2])
    for label, index in (("in-range", 3), ("negative", 4), ("past-end", 5)):
        group.add("conditional", t, f"conditional-index-{label}", [
            f"$a = ({t}[4], {t}[4]) tuple(p0, p1)",
            f"$r = {t}[4] conditional(p{index}, $a, $a, $a), branch_computations={{$b0, $b1, $b2}}"],
            computations=branches)
    group.add("call", t, "call", [f"$a = ({t}[4], {t}[4]) tuple(p0, p1)", f"$r = {t}[4] call($a), to_apply=$b2"],
              computations=[branches[2]])
    group.add("map", t, "map", [f"$r = {t}[4] map(p0, p1), dimensions={{0}}, to_apply=$f"],
              computations=[_scalar_computation("$f", t, ops[0])])
    fused = "\n".join([
        "$fused {", f"  x = {t}[4] parameter(0)", f"  y = {t}[4] parameter(1)", f"  a = {t}[4] {ops[0]}(x, y)",
        f"  b = {t}[4] {ops[2]}(a, x)", f"  ROOT r = {t}[4] reverse(b), dimensions={{0}}", "}"])
    group.add("fusion", t, "fusion", [f"$r = {t}[4] fusion(p0, p1), kind=kLoop, calls=$fused"], computations=[fused])


def _build_collectives(element_type: str) -> None:
    t = element_type
    rng = _seeded(f"collectives-{t}")
    group = _group(f"collectives-{t}", (f"{t}[4,6]",), (_reduction_inputs(t, rng, (4, 6)),))
    add = [_scalar_computation("$sum", t, "add")]
    group.add("all-reduce", t, "all-reduce", [f"$r = {t}[4,6] all-reduce(p0), replica_groups={{}}, to_apply=$sum"],
              computations=add)
    group.add("all-gather", t, "all-gather",
              [f"$r = {t}[4,6] all-gather(p0), replica_groups={{}}, dimensions={{0}}"])
    group.add("reduce-scatter", t, "reduce-scatter",
              [f"$r = {t}[4,6] reduce-scatter(p0), replica_groups={{}}, dimensions={{1}}, to_apply=$sum"],
              computations=add)
    group.add("all-to-all", t, "all-to-all",
              [f"$r = {t}[4,6] all-to-all(p0), replica_groups={{{{0}}}}, dimensions={{0}}"])
    group.add("collective-permute", t, "collective-permute",
              [f"$r = {t}[4,6] collective-permute(p0), source_target_pairs={{{{0,0}}}}"])
    group.add("replica-id", "u32", "replica-id", ["$r = u32[] replica-id()"])
    group.add("partition-id", "u32", "partition-id", ["$r = u32[] partition-id()"])


def _build_rng() -> None:
    rng = _seeded("rng-bit-generator")
    group = _group("rng-bit-generator", ("u64[2]", "u64[3]"),
                   (rng.integers(0, 2**63, 2, dtype=np.uint64), rng.integers(0, 2**63, 3, dtype=np.uint64)))
    # Threefry and Philox as XLA:CPU implements them: new state and bits, bit for bit.
    variants = (("rng_three_fry", 0, "u32"), ("rng_three_fry", 0, "u64"), ("rng_three_fry", 0, "u8"),
                ("rng_philox", 1, "u32"), ("rng_philox", 1, "u16"), ("rng_philox", 0, "u64"), ("rng_default", 0, "u32"))
    for algorithm, state, t in variants:
        shape = {"u64": "[7]", "u8": "[2,3]"}.get(t, "[3,5]")
        group.add("rng-bit-generator", t, f"{algorithm}-{'u64x3' if state else 'u64x2'}-{t}", [
            f"$r = (u64[{3 if state else 2}], {t}{shape}) rng-bit-generator(p{state}), algorithm={algorithm}"],
            check=EXACT_BITS)


# The default run covers every op on every dtype where types behave differently (sign, width,
# narrow floats); the slow run adds the remaining dtypes of data movement, reduce and dot, of which
# the default run keeps a few cases of each family (the core labels below), so that every dtype is
# seen by every family: 31 cases, ~3 s in all, against ~38 s for the whole slow part.
# Data movement: the type's own values (iota), padding with a scalar of the type, clamped indices.
_CORE_DATA_MOVEMENT = ("iota", "pad-negative", "dynamic-update-slice-negative-and-past-end")
# Reductions: a sum in the type's arithmetic, and for floats NaN, infinities and signed zeros in a maximum.
_CORE_REDUCE = ("reduce-add-1", "reduce-maximum-specials")
_CORE_DOT = ("matmul",)
_FAST_LAYOUT_DTYPES = ("pred", "s8", "s32", "u64", "f16", "bf16", "f32", "f64", "c64", "f8e4m3fn")
_FAST_REDUCE_DTYPES = ("pred", "s32", "u8", "f16", "bf16", "f32", "c64")
_FAST_DOT_DTYPES = ("pred", "s32", "u8", "bf16", "f32", "f64", "c64")


def _build_all() -> None:
    for t in DTYPES:
        _build_elementwise(t)
        _build_data_movement(t, slow=t not in _FAST_LAYOUT_DTYPES)
        if t not in FP8:
            _build_reduce(t, slow=t not in _FAST_REDUCE_DTYPES)
    _build_complex_nonfinite("c64")
    _build_complex_construction()
    for t in ("f16", "f32", "f64"):
        _build_stochastic_convert(t)
    for t in ("pred", "s32", "u8", "f32", "f64", "bf16", "f16"):
        _build_elementwise_sweep(t)
    for t in DTYPES:
        _build_convert(t)
        if t != "pred":
            _build_bitcast_convert(t)
    for t in ("s8", "s32", "s64", "u8", "u32", "f16", "bf16", "f32", "f64", "c64", "pred"):
        _build_dot(t, slow=t not in _FAST_DOT_DTYPES)
    _build_dot("bf16", "f32")
    _build_dot("s8", "s32")
    _build_dot("f16", "f32", slow=True)
    _build_dot_random_f32()
    for t in ("pred", "s32", "f32", "bf16", "u64"):
        _build_control_flow(t)
    for t in ("f32", "s32"):
        _build_collectives(t)
    _build_rng()


_build_all()

CASES: list[Case] = [case for group in GROUPS.values() for case in group.cases]
CASE_BY_ID = {case.id: case for case in CASES}
assert len(CASE_BY_ID) == len(CASES), "case ids must be unique"


# -- running --------------------------------------------------------------------------------------


@functools.cache
def case_text(case_id: str) -> str:
    case = CASE_BY_ID[case_id]
    return GROUPS[case.group].text([case])


@functools.cache
def _xla_group_results(group_name: str, slow: bool) -> dict[str, Any]:
    """XLA:CPU's result of every case of a group in the default (or only the slow) run, from one module."""
    cases = [case for case in GROUPS[group_name].cases if case.slow == slow]
    results = run_on_xla_cpu(xla_group_text(group_name, slow), *GROUPS[group_name].args)
    if len(cases) == 1:
        results = (results,)
    return {case.id: result for case, result in zip(cases, results)}


def xla_group_text(group_name: str, slow: bool) -> str:
    """The module XLA:CPU runs for the cases of a group in the default (or only the slow) run."""
    group = GROUPS[group_name]
    return group.text([case for case in group.cases if case.slow == slow], for_xla=True)


def xla_result(case: Case) -> Any:
    return _xla_group_results(case.group, case.slow)[case.id]


def interpreter_result(case: Case) -> Any:
    # XLA's HLO verifier (and xlapy's) refuses convert from complex to real, which
    # XLA:CPU's StableHLO route runs (keeping the real part): compared unverified.
    unverified = case.opcode == "convert" and case.dtype in COMPLEX
    return evaluate(parse_module(case_text(case.id)), *GROUPS[case.group].args, verify=not unverified)


def check_case(case: Case) -> None:
    """Compare the interpreter with XLA:CPU on one case (raises AssertionError)."""
    expected = xla_result(case)
    got = interpreter_result(case)
    check_results(got, expected, case.check, context=f"{case.opcode} {case.dtype} ({case.id})")
