"""Comparison of compiled results with the interpreter, and the seeded inputs
the comparisons run on.

``max_ulp_difference`` measures how far two arrays are apart in units in the
last place of their element type, which is how the loop-fusion acceptance is
stated (exact ops: 0 ulp; transcendental ops: the ulps ``ulp_tolerance``
gives, at most 1); complex numbers
part by part (``normwise_ulp_difference`` measures them against their
magnitude).
``random_arguments`` builds one seeded input per entry parameter; it differs
from the CLI's ``make_fake_arguments`` (which it builds on for index
parameters and the types it does not cover) in reaching the edges of every
type: special floats (NaN, infinities, signed zeros, denormals, halves) and
integers over their full range.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from tools.compare import bits, leaves, normwise_errors
from xlapy.hlo import HloInstruction, HloModule
from xlapy.hlo.fake_arguments import fake_argument, index_bound
from xlapy.hlo.opcodes import TRANSCENDENTAL_OPCODES
from xlapy.runtime import ulps
from xlapy.runtime.ulps import NAN_MISMATCH, is_float_dtype, ulp_distance
from xlapy.shapes import ELEMENT_TYPES, Shape, TypeKind

# Every float input gets about one special value in this many elements.
_SPECIAL_EVERY = 16
# Complex numbers: this share of each part's values is scaled by a power of two up to 2^±_SPREAD_C64 (c64) or
# 2^±_SPREAD_C128 (c128), so that the parts differ in magnitude (Smith's division, overflow in products, |z|).
_SPREAD_SHARE = 0.25
_SPREAD_C64 = 70
_SPREAD_C128 = 600
# Integers: this share of elements is drawn from the whole range, the rest
# (minus the edge values) from [-_SMALL, _SMALL], so that divisors, shift
# amounts and products also take ordinary values.
_FULL_RANGE_SHARE = 0.5
_SMALL = 70


def _element_dtype(element_type: str | np.dtype) -> np.dtype:
    if isinstance(element_type, str):
        dtype = ELEMENT_TYPES[element_type].dtype
        if dtype is None:
            raise ValueError(f"{element_type} has no array representation")
        return dtype
    return np.dtype(element_type)


def _is_float_like(dtype: np.dtype) -> bool:
    """Floats and complex numbers: compared in ulps, NaN matching NaN."""
    return dtype.kind == "c" or is_float_dtype(dtype)


def _checked(actual: Any, expected: Any, element_type: str | np.dtype) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    dtype = _element_dtype(element_type)
    actual, expected = np.asarray(actual), np.asarray(expected)
    for name, array in (("actual", actual), ("expected", expected)):
        if array.dtype != dtype:
            raise ValueError(f"{name} has dtype {array.dtype}, expected {dtype} ({element_type})")
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: actual {actual.shape}, expected {expected.shape}")
    return actual, expected, dtype


def max_ulp_difference(actual: Any, expected: Any, element_type: str | np.dtype) -> int:
    """The largest distance between corresponding elements of ``actual`` and
    ``expected`` (arrays of ``element_type``, an HLO type name or a dtype), as
    ``xlapy.runtime.ulps.max_ulp_difference`` measures it: floats in ulps of
    their type (+0 and -0 equal, any NaN equal to any NaN, NaN against a
    number ``NAN_MISMATCH``), complex numbers the larger distance of their
    parts, integers the absolute difference, pred 0 or 1, empty arrays 0."""
    actual, expected, _ = _checked(actual, expected, element_type)
    return ulps.max_ulp_difference(actual, expected)


def normwise_ulp_difference(actual: Any, expected: Any, element_type: str | np.dtype) -> int:
    """The largest distance between complex elements measured in ulps of the expected value's magnitude: the
    larger difference of the two parts, in units of the spacing of floats at the larger expected part (rounded
    up). Where a part is infinite or NaN, the parts are compared as ``max_ulp_difference`` does."""
    actual, expected, dtype = _checked(actual, expected, element_type)
    if dtype.kind != "c":
        raise ValueError(f"normwise distances are for complex numbers, not {dtype}")
    if actual.size == 0:
        return 0
    actual, expected = actual.reshape(-1), expected.reshape(-1)
    finite = np.isfinite(actual) & np.isfinite(expected)
    worst = max_ulp_difference(actual[~finite], expected[~finite], dtype)
    if not finite.any():
        return worst
    error, _, spacing = normwise_errors(actual[finite], expected[finite])
    return max(worst, int(np.ceil((error / spacing).max())) if np.isfinite(error).all() else NAN_MISMATCH)


def _called_instructions(module: HloModule) -> list[HloInstruction]:
    """The instructions of every computation the entry calls (directly or not)."""
    pending = list(module.entry.called_computations())
    seen: set[int] = set()
    found = []
    while pending:
        computation = pending.pop()
        if id(computation) in seen:
            continue
        seen.add(id(computation))
        found.extend(computation.instructions)
        pending.extend(computation.called_computations())
    return found


# The ulps a transcendental op's results may be off the interpreter's, by element type (1 for the types not here),
# measured over the loop-fusion corpus and GELU with six seeds: the f32 kernels compute what the interpreter
# computes, the f64 value rounded once or XLA:CPU's tanh and exp (0 ulp; about one argument in 10^8 rounds the other
# way, see test_math_library); f64 kernels and the narrow floats are up to 1 ulp off.
_TRANSCENDENTAL_ULPS = {"f32": 0}


def ulp_tolerance(module: HloModule) -> int:
    """The ulps the compiled results of ``module`` may be off the interpreter:
    the largest bound of the transcendental ops on real numbers of the
    computations the entry calls (0 for f32, 1 for the other float types),
    0 when there are none."""
    # On complex numbers both compute XLA's formulas on the C library's real functions: exact.
    return max((_TRANSCENDENTAL_ULPS.get(i.shape.element_type, 1) for i in _called_instructions(module)
                if i.opcode in TRANSCENDENTAL_OPCODES and not _is_complex_instruction(i)), default=0)


def _is_complex_instruction(instr: HloInstruction) -> bool:
    return any(ELEMENT_TYPES[o.shape.element_type].is_complex for o in instr.operands)


def result_element_types(module: HloModule) -> list[str]:
    """The element type of every array the entry computation returns, in order."""

    def walk(shape: Shape) -> list[str]:
        if shape.tuple_shapes or shape.element_type == "tuple":
            return [t for s in shape.tuple_shapes for t in walk(s)]
        return [shape.element_type]

    return walk(module.entry.root.shape)


def result_names(module: HloModule) -> list[str]:
    """A name for every array the entry computation returns: the instruction
    that computes it when the fused root is a tuple, else its position."""
    root = module.entry.root
    count = len(result_element_types(module))
    if root.opcode == "fusion" and root.fused_computation.root.opcode == "tuple":
        operands = root.fused_computation.root.operands
        if len(operands) == count:
            return [o.name for o in operands]
    return [f"#{i}" for i in range(count)]


def assert_within_ulps(actual: Any, expected: Any, module: HloModule, ulps: int, context: str = "result") -> None:
    """Assert every result array of ``module`` (``actual`` against
    ``expected``, arrays or tuples) is within ``ulps``; integers and pred must
    match bit for bit, and so must floats and complex numbers when ``ulps`` is
    0 (NaN payloads apart: any NaN matches any NaN)."""
    types = result_element_types(module)
    got, want = leaves(actual), leaves(expected)
    assert len(got) == len(types), f"{context}: {len(got)} results, the module returns {len(types)}"
    assert len(want) == len(types), f"{context}: {len(want)} expected results, the module returns {len(types)}"
    names = result_names(module)
    for i, (g, e, t) in enumerate(zip(got, want, types)):
        where = context if len(types) == 1 else f"{context}[{i}] ({names[i]})"
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, expected {e.dtype} ({t})"
        assert g.shape == e.shape, f"{where}: shape {g.shape}, expected {e.shape}"
        allowed = ulps if _is_float_like(g.dtype) else 0
        distance = max_ulp_difference(g, e, t)
        if distance > allowed:
            unit = " ulp" if _is_float_like(g.dtype) else ""
            raise AssertionError(f"{where}: {_first_mismatch(g, e, allowed)}; max difference "
                                 f"{'NaN vs number' if distance == NAN_MISMATCH else f'{distance}{unit}'}, "
                                 f"allowed {allowed}")
        if allowed == 0 and _is_float_like(g.dtype):
            # Exact means the sign of zero too (negate, sign, min/max, round give -0).
            for got_part, want_part in _parts(g, e):
                got_wide, want_wide = got_part.astype(np.float64), want_part.astype(np.float64)
                zeros = (got_wide == 0) & (want_wide == 0) & (np.signbit(got_wide) != np.signbit(want_wide))
                if zeros.any():
                    index = tuple(int(i) for i in np.argwhere(zeros)[0])
                    raise AssertionError(f"{where}: {int(zeros.sum())} zeros of the wrong sign; first at {index}: "
                                         f"got {g[index]!r}, expected {e[index]!r}")


def _parts(got: np.ndarray, expected: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The float arrays to compare: the arrays, or the real and imaginary parts of complex ones."""
    if got.dtype.kind != "c":
        return [(got, expected)]
    return [(np.ascontiguousarray(got.real), np.ascontiguousarray(expected.real)),
            (np.ascontiguousarray(got.imag), np.ascontiguousarray(expected.imag))]


def _first_mismatch(got: np.ndarray, expected: np.ndarray, allowed: int) -> str:
    """Where and how ``got`` first differs from ``expected`` by more than ``allowed``."""
    flat_got, flat_expected = got.reshape(-1), expected.reshape(-1)
    if _is_float_like(got.dtype):
        far = ulp_distance(flat_got, flat_expected) > allowed
    else:
        far = bits(flat_got) != bits(flat_expected)
    positions = np.flatnonzero(far)
    index = tuple(int(i) for i in np.unravel_index(positions[0], got.shape))
    g, e = flat_got[positions[0]], flat_expected[positions[0]]
    return (f"{len(positions)} of {got.size} elements differ; first at {index}: got {g!r} "
            f"(bits {_bits_text(g)}), expected {e!r} (bits {_bits_text(e)})")


def _bits_text(value: Any) -> str:
    """The bits of one element in hex (of each part for complex numbers)."""
    value = np.asarray(value)
    if value.dtype.kind == "c":
        return ", ".join(_bits_text(part) for part in (value.real, value.imag))
    return f"{int(bits(value)):#x}"


# -- random arguments ----------------------------------------------------------


def _float_specials(dtype: np.dtype) -> np.ndarray:
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_normal)
    denormal = float(info.smallest_subnormal)
    huge = float(info.max)
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, huge, -huge, tiny, -tiny, denormal, -denormal,
              0.5, -0.5, 1.5, -2.5, 1.0, -1.0]
    return np.array(values, np.float64).astype(dtype)


def _random_float(shape: tuple[int, ...], dtype: np.dtype, random: np.random.Generator, scale: float,
                  specials: bool, spread: int = 0) -> np.ndarray:
    """Standard normal values times ``scale``; with ``spread``, a quarter of them also times 2^k, k uniform in
    [-spread, spread]; then the special values."""
    values = np.asarray(random.standard_normal(shape) * scale)
    if spread:
        exponents = np.where(random.random(shape) < _SPREAD_SHARE, random.integers(-spread, spread + 1, shape), 0)
        values = np.ldexp(values, exponents)
    values = values.astype(dtype)
    # Arrays of fewer than 4 elements (scalars among them) keep ordinary values.
    if specials and values.size >= 4:
        flat = values.reshape(-1)
        table = _float_specials(dtype)
        # Every special once when there is room for them in half of the array.
        count = min(flat.size // 2, max(len(table), flat.size // _SPECIAL_EVERY))
        positions = random.choice(flat.size, size=count, replace=False)
        # Every special appears once before any repeats, in a random order.
        picks = np.concatenate([random.permutation(len(table)) for _ in range(-(-count // len(table)))])[:count]
        flat[positions] = table[picks]
    return values


def _random_integer(shape: tuple[int, ...], dtype: np.dtype, random: np.random.Generator) -> np.ndarray:
    info = np.iinfo(dtype)
    size = math.prod(shape)
    full = random.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
    small = random.integers(max(info.min, -_SMALL), min(info.max, _SMALL), size=size, endpoint=True).astype(dtype)
    values = np.where(random.random(size) < _FULL_RANGE_SHARE, full, small)
    edges = np.array(sorted({info.min, info.min + 1, info.max, info.max - 1, 0, 1, -1 if info.min else 2}),
                     dtype=object).astype(dtype)
    if size >= 2 * len(edges):
        positions = random.choice(size, size=len(edges), replace=False)
        values[positions] = edges
    elif size:
        values[random.integers(0, size)] = edges[random.integers(0, len(edges))]
    return values.reshape(shape)


def _index_bound(parameter: HloInstruction) -> int | None:
    """``index_bound`` of the CLI's generator, also looking through fusions:
    an entry parameter that a fused gather or dynamic slice reads as an index."""
    bounds = [b for b in [index_bound(parameter)] if b is not None]
    for user in parameter.users:
        if user.opcode != "fusion":
            continue
        fused = user.fused_computation.parameters
        for position, operand in enumerate(user.operands):
            if operand is parameter:
                bound = _index_bound(fused[position])
                if bound is not None:
                    bounds.append(bound)
    return min(bounds) if bounds else None


def random_argument(shape: Shape, random: np.random.Generator, *, scale: float = 1.0, specials: bool = True,
                    bound: int | None = None) -> Any:
    """A random value of ``shape`` (see ``random_arguments``)."""
    element = ELEMENT_TYPES[shape.element_type]
    dims = tuple(shape.dimensions)
    if shape.tuple_shapes:
        return tuple(random_argument(s, random, scale=scale, specials=specials) for s in shape.tuple_shapes)
    if element.is_integral and bound is not None:
        # Mostly valid indices, with a few out of range on either side so the clamping is seen.
        return random.integers(-2, max(bound, 1) + 2, dims).astype(element.dtype)
    if element.is_integral and element.bit_width >= 8:
        return _random_integer(dims, element.dtype, random)
    if element.is_integral:  # sub-byte integers: the whole range
        low, high = (-(1 << (element.bit_width - 1)), (1 << (element.bit_width - 1)) - 1) \
            if element.kind is TypeKind.SIGNED else (0, (1 << element.bit_width) - 1)
        return random.integers(low, high, dims, endpoint=True).astype(element.dtype)
    if element.kind is TypeKind.FLOAT and element.bit_width >= 16:
        return _random_float(dims, element.dtype, random, scale, specials)
    if element.kind is TypeKind.FLOAT:  # 8- and 4-bit floats: every bit pattern (NaN, inf, subnormals) is likely
        return random.integers(0, 1 << element.bit_width, dims, dtype=np.uint8).view(element.dtype)
    if element.is_complex:
        part, spread = (np.float32, _SPREAD_C64) if element.bit_width == 64 else (np.float64, _SPREAD_C128)
        real = _random_float(dims, np.dtype(part), random, scale, specials, spread if specials else 0)
        imag = _random_float(dims, np.dtype(part), random, scale, specials, spread if specials else 0)
        value = np.empty(dims, element.dtype)
        value.real, value.imag = real, imag
        return value
    # pred, tokens: what the CLI draws.
    return fake_argument(shape, random, bound)


def random_arguments(module: HloModule, seed: int, *, scale: float = 1.0,
                     specials: bool = True) -> list[np.ndarray]:
    """One seeded random argument per entry parameter of ``module``.

    Floats (16 bits and wider): standard normal times ``scale``, with special
    values (NaN, ±inf, ±0, ±max, ±smallest normal, ±smallest denormal, ±1,
    halves) in one element of 16, and each of them at least once where they
    fit in half the array (34 elements or more), unless ``specials`` is
    false. Integers (8 bits and wider): half drawn from the whole range of
    the type, half from [-70, 70], and the edges (min, min+1, max-1, max, 0,
    1, -1 or 2) placed once each where there is room (one of them
    otherwise). Sub-byte integers: their whole range. 8- and 4-bit floats:
    random bit patterns (all their special values). Complex numbers: real
    and imaginary parts as floats of their width, a quarter of each part's
    values scaled by powers of two far from 1. Parameters a gather or
    dynamic slice (fused or not) reads as indices: integers from -2 to 2
    past the largest valid start. Everything else (pred) as the CLI's
    ``xlapy run`` draws it."""
    random = np.random.default_rng(seed)
    return [np.asarray(random_argument(p.shape, random, scale=scale, specials=specials, bound=_index_bound(p)))
            for p in module.entry.parameters]
