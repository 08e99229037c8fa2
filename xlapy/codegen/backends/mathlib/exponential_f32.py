"""exp of 16-lane f32 vectors in f32 arithmetic, checked to round correctly, with the f64 kernel for the rest.

The f64 kernel (`exponential.exp32_in_domain`) computes exp of an f32 value to ~2e-16 and rounds once. Its vector
form spends half its instructions converting: an AVX-512 register holds 16 f32 but 8 f64, and the conversions
in and out take as many slots as the polynomial. This form stays in f32 (16 lanes per instruction) and carries
the few products that need more than 24 bits as pairs of floats; a rounding test then tells whether its f32
result is the correctly rounded exp. A vector with a lane that fails the test is computed again by the f64
kernel, on a branch marked unlikely.

For one lane (x an f32, |n| < 4096):

1. Reduction: n = round(16 x / ln2) (from x 16/ln2 + 1.5 2^23 rounded, whose low bits hold n; j = n mod 16 and
   m = floor(n / 16)), r = x - n ln2/16 as rh + rl. ln2/16 = L1 + L2 + L3 with L1 and L2 of 12 bits, so
   n L1 and n L2 are exact and so are r1 = x - n L1 and rh = r1 - n L2 (the differences fit in 24 bits); rl =
   -n L3 (|rl| < 2^-21, rounded once).
2. exp(x) = 2^m T_j e^(rh + rl), T_j = 2^(j/16) = thi + tlo (two 16-entry tables, one register each, read with a
   permute; `f32_pairs` of the f64 kernel's table), |rh| <= ln2/32.
3. e^(rh + rl) = 1 + rh + small, small = rh^2 Q(rh) + rl (1 + rh), Q the Taylor polynomial 1/2 + rh/6 + rh^2/24
   + rh^3/120 (truncation below 2^-42).
4. T e^r = s + tail: s = thi (1 + rh) rounded, e1 = thi (1 + rh) - s to 2^-48, tail = thi small + e1 + tlo (1 + rh).
   The roundings of small, of thi small and of the sum leave |s + tail - exp(x)/2^m| below 2^-34.5 thi.
5. Rounding test: up = s + (tail + d) and down = s + (tail - d), d = thi 2^-33. Rounding is monotonic, so when
   up == down every value within d of s + tail, the exact one included, rounds to it: it is the correctly
   rounded exp(x) / 2^m, scaled exactly by 2^m (`vscalefps`) when the result is a normal float or overflows (the
   overflow threshold of the scaled and of the exact value is the same rounding boundary), and rounded to 0 below
   x = -104. Lanes whose result is subnormal (-104 <= x < -87.33, where the scaling would round a second time),
   NaN lanes and lanes that fail the test take the f64 kernel: about 1 lane in 900, 4% of 16-lane vectors for
   arguments in [-12, 0] (softmax's). Every f32 gives numpy's f64 exp rounded once (tests/codegen/test_exp_f32.py,
   slow); the same computation in C with d = 2^-35 gave 580 other results, with d = 2^-34 21.

Measured on 65,536 f32 in the cache, one thread: 26.7 µs when no lane needs the f64 kernel, 29.4 µs for normally
distributed arguments, against 33.6 µs with the f64 kernel alone; softmax's kernel over f32[512,1024] takes 2,333
cycles per row instead of 2,607.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlapy.codegen.backends.mathlib.emitter import concatenate_vectors, declared, host_has_avx512, vector_lanes

F32 = ir.FloatType()
I16, I32 = ir.IntType(16), ir.IntType(32)
# The lanes of one AVX-512 register of f32: the permutes and the scaling work on that many at a time.
LANES = 16
V16F32, V16I32 = ir.VectorType(F32, LANES), ir.VectorType(I32, LANES)

# 16 / ln2 rounded to f32, and 1.5 * 2^23: x * INV_STEP + ROUND_SHIFT keeps n = round(16 x / ln2) in its low bits.
INV_STEP = float.fromhex("0x1.715476p+4")
ROUND_SHIFT = float.fromhex("0x1.8p+23")
# ln2/16 = STEP_1 + STEP_2 + STEP_3 (+ 5.5e-18): the first two of 12 significant bits, products with n exact.
STEP_1 = float.fromhex("0x1.62ep-5")
STEP_2 = float.fromhex("0x1.0cp-19")
STEP_3 = float.fromhex("-0x1.05c61p-33")
# e^r = 1 + r + r^2 (Q0 + Q1 r + Q2 r^2 + Q3 r^3) + ..., the Taylor coefficients as f32.
Q = (0.5, float(np.float32(1 / 6)), float(np.float32(1 / 24)), float(np.float32(1 / 120)))
# The rounding test's margin, relative to thi: above the error bound of s + tail (2^-34.5 thi).
MARGIN = 2.0**-33
# Arguments of normal results: below, the result is subnormal (or below -104, zero).
NORMAL_FROM, ZERO_BELOW = -87.33, -104.0
# The clamp of the argument: exp(-110) rounds to 0, exp(89) overflows; NaN stays NaN.
CLAMP = (-110.0, 89.0)


@functools.cache
def f32_pairs(powers: tuple[float, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(thi, tlo): each double of ``powers`` (2^(j/16) correctly rounded, `exponential.exp_table`) as the sum of two
    f32, to ~2^-48."""
    wide = np.array(powers)
    high = wide.astype(np.float32)
    low = (wide - high.astype(np.float64)).astype(np.float32)
    return tuple(map(float, high)), tuple(map(float, low))


def exp32_vector(b: ir.IRBuilder, x: ir.Value, slow: Callable[[ir.Value], ir.Value], *,
                 powers: tuple[float, ...]) -> ir.Value | None:
    """exp of the f32 vector ``x`` (16 times a power of two lanes, on an AVX-512 host; else None), 16 lanes at a
    time: the f32 form's correctly rounded results where all of them pass the rounding test, else ``slow(lanes)``
    (the f64 kernel, which the caller emits) on a branch marked unlikely. ``powers``: 2^(j/16)
    for j < 16, the doubles of the f64 kernel's table."""
    lanes = x.type.count
    if lanes % LANES or (lanes // LANES) & (lanes // LANES - 1) or not host_has_avx512():
        return None
    pieces = []
    for first in range(0, lanes, LANES):
        part = vector_lanes(b, x, first, LANES)
        fast, fails = _exp_lanes(b, part, f32_pairs(powers))
        fast_block = b.block
        with b.if_then(b.icmp_unsigned("!=", b.bitcast(fails, I16), ir.Constant(I16, 0)), likely=False):
            checked = slow(part)
            slow_block = b.block
        merged = b.phi(V16F32)
        merged.add_incoming(fast, fast_block)
        merged.add_incoming(checked, slow_block)
        pieces.append(merged)
    while len(pieces) > 1:  # concatenated pairwise
        pieces = [concatenate_vectors(b, pieces[k], pieces[k + 1]) for k in range(0, len(pieces), 2)]
    return pieces[0]


def _exp_lanes(b: ir.IRBuilder, x: ir.Value, tables: tuple[tuple[float, ...], tuple[float, ...]]) \
        -> tuple[ir.Value, ir.Value]:
    """(exp of the 16 lanes of ``x``, the <16 x i1> of the lanes that need the f64 kernel)."""
    module = b.module
    fma = declared(module, "llvm.fma.v16f32", V16F32, [V16F32] * 3)

    def f(value: float) -> ir.Constant:
        return ir.Constant(V16F32, [ir.Constant(F32, value)] * LANES)

    def lt(u: ir.Value, v: ir.Value) -> ir.Value:
        return b.fcmp_ordered("<", u, v)

    x = b.select(lt(x, f(CLAMP[0])), f(CLAMP[0]), x)
    x = b.select(lt(f(CLAMP[1]), x), f(CLAMP[1]), x)
    shifted = b.call(fma, [x, f(INV_STEP), f(ROUND_SHIFT)])
    n = b.fsub(shifted, f(ROUND_SHIFT))
    r1 = b.call(fma, [n, f(-STEP_1), x])
    rh = b.call(fma, [n, f(-STEP_2), r1])
    rl = b.fmul(n, f(-STEP_3))
    # vpermps reads the low 4 bits of each index: j = n mod 16, from the low bits of ``shifted``
    permute = declared(module, "llvm.x86.avx512.permvar.sf.512", V16F32, [V16F32, V16I32])
    index = b.bitcast(shifted, V16I32)
    high_table, low_table = (ir.Constant(V16F32, [ir.Constant(F32, v) for v in t]) for t in tables)
    thi, tlo = b.call(permute, [high_table, index]), b.call(permute, [low_table, index])
    r2 = b.fmul(rh, rh)
    q = b.call(fma, [rh, f(Q[3]), f(Q[2])])
    q = b.call(fma, [rh, q, f(Q[1])])
    q = b.call(fma, [rh, q, f(Q[0])])
    small = b.call(fma, [r2, q, b.call(fma, [rl, rh, rl])])
    s = b.call(fma, [thi, rh, thi])
    e1 = b.call(fma, [thi, rh, b.fsub(thi, s)])
    tail = b.fadd(b.call(fma, [thi, small, e1]), b.call(fma, [tlo, rh, tlo]))
    margin = b.fmul(thi, f(MARGIN))
    up = b.fadd(s, b.fadd(tail, margin))
    down = b.fadd(s, b.fsub(tail, margin))
    rounded = b.fcmp_ordered("==", up, down)
    subnormal = b.and_(b.fcmp_ordered(">=", x, f(ZERO_BELOW)), lt(x, f(NORMAL_FROM)))
    fails = b.or_(b.not_(rounded), subnormal)
    # up * 2^floor(n / 16): exact for normal results, 0 below x = -104, inf on overflow
    scalef = declared(module, "llvm.x86.avx512.mask.scalef.ps.512", V16F32, [V16F32, V16F32, V16F32, I16, I32])
    every_lane, current_rounding = ir.Constant(I16, -1), ir.Constant(I32, 4)
    value = b.call(scalef, [up, b.fmul(n, f(1 / 16)), up, every_lane, current_rounding])
    return value, fails
