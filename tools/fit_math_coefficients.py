"""Regenerates the constants of `xlapy/codegen/backends/mathlib/constants.py` (needs `mpmath`).

    python tools/fit_math_coefficients.py [name ...]

prints, for each approximation, the coefficients (as Python floats, exact) and the maximal weighted error before
and after rounding them to doubles. Polynomials come from a discrete Remez exchange on a Chebyshev grid; the
rational f32 approximation of erf from Lawson-weighted linearised least squares. Also prints the split constants
(ln 2, pi/2, ...) and the bits of 2/pi used by Payne & Hanek's reduction, and checks the tables of the f32 exp
(`exponential.exp_table` and `exponential.exp_scale_table`, made at run time in decimal arithmetic) entry by entry
against mpmath. (Some committed values came from slightly different grids: their
last digits may differ from this script's, with the same errors.)
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Callable

import mpmath as mp

from xlapy.codegen.backends.mathlib.exponential import EXP_SCALE_SHIFT, EXP_TABLE_SIZE, exp_scale_table, exp_table

mp.mp.dps = 60
Function = Callable[[mp.mpf], mp.mpf]


def remez(g: Function, w: Function, a: float, b: float, degree: int, grid: int = 1500) -> tuple[list, mp.mpf]:
    """Coefficients c (increasing degree) minimising max |w(x) (g(x) - sum c_j x^j)| on [a, b], and that max."""
    a, b = mp.mpf(a), mp.mpf(b)
    n = degree + 1
    xs = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / (grid - 1)) for i in range(grid)]
    # weights vanishing at an end (relative errors of x * (...)) would make the system singular there
    xs = [x if w(x) != 0 else x + (b - a) * mp.mpf("1e-9") * (1 if x == a else -1) for x in xs]
    gs, ws = [g(x) for x in xs], [w(x) for x in xs]
    reference = [round((grid - 1) * (1 - mp.cos(mp.pi * i / n)) / 2) for i in range(n + 1)]
    best: tuple[list, mp.mpf] | None = None
    for _ in range(30):
        rows = [[xs[i] ** p for p in range(n)] + [(-1) ** k / ws[i]] for k, i in enumerate(reference)]
        solution = mp.lu_solve(mp.matrix(rows), mp.matrix([gs[i] for i in reference]))
        c = [solution[j] for j in range(n)]
        err = [ws[i] * (gs[i] - mp.polyval(c[::-1], xs[i])) for i in range(grid)]
        worst = max(abs(v) for v in err)
        if best is None or worst < best[1]:
            best = (c, worst)
        if worst <= abs(solution[n]) * (1 + mp.mpf("1e-4")):
            break
        extrema, i = [], 0  # the largest |error| of each run of equal sign
        while i < grid:
            j, k = i, i
            while j < grid and mp.sign(err[j]) == mp.sign(err[i]):
                k = j if abs(err[j]) > abs(err[k]) else k
                j += 1
            extrema.append(k)
            i = j
        while len(extrema) > n + 1:
            extrema.pop(0 if abs(err[extrema[0]]) < abs(err[extrema[-1]]) else -1)
        if len(extrema) < n + 1:
            break
        reference = extrema
    assert best is not None
    return best


def rational(f: Function, z_max: float, p: int, q: int, points: int = 400) -> tuple[list, list, mp.mpf]:
    """P (degree p), Q (degree q, Q(0) = 1) with P/Q ~ f on [0, z_max] in relative error."""
    zs = [z_max * (1 - mp.cos(mp.pi * (i + 0.5) / points)) / 2 for i in range(points)]
    fs = [f(z) for z in zs]
    q_previous, weights = [mp.mpf(1)] * points, [mp.mpf(1)] * points
    best = None
    for _ in range(40):
        rows, rhs = [], []
        for z, fz, qp, weight in zip(zs, fs, q_previous, weights):
            s = weight / (fz * qp)
            rows.append([s * z**j for j in range(p + 1)] + [-s * fz * z**k for k in range(1, q + 1)])
            rhs.append(s * fz)
        a = mp.matrix(rows)
        solution = mp.lu_solve(a.T * a, a.T * mp.matrix(rhs))
        num = [solution[j] for j in range(p + 1)]
        den = [mp.mpf(1)] + [solution[p + 1 + k] for k in range(q)]
        errors = []
        for i, (z, fz) in enumerate(zip(zs, fs)):
            q_previous[i] = mp.polyval(den[::-1], z)
            errors.append((mp.polyval(num[::-1], z) / q_previous[i] - fz) / fz)
        worst = max(abs(e) for e in errors)
        if best is None or worst < best[2]:
            best = (num, den, worst)
        total = sum(wt * abs(e) for wt, e in zip(weights, errors))
        weights = [max(wt * abs(e) / total * points, mp.mpf("1e-30")) for wt, e in zip(weights, errors)]
    assert best is not None
    return best


def rounded_error(g: Function, w: Function, a: float, b: float, c: list, points: int = 3000) -> mp.mpf:
    c = [mp.mpf(float(v)) for v in c]
    xs = [mp.mpf(a) + (mp.mpf(b) - a) * i / (points - 1) for i in range(points)]
    return max(abs(w(x) * (g(x) - mp.polyval(c[::-1], x))) for x in xs)


def _series(small: Callable[[mp.mpf], mp.mpf], exact: Function) -> Function:
    """exact(x), or the series `small` next to 0 where exact cancels."""
    return lambda x: small(x) if abs(x) < mp.mpf("1e-30") else exact(x)


def _erfcx(x: mp.mpf) -> mp.mpf:
    return mp.exp(x * x) * mp.erfc(x)


LN2_HALF = mp.log(2) / 2
EXP32_R = LN2_HALF / EXP_TABLE_SIZE * (1 + mp.mpf(2) ** -20)  # |r| of the f32 exp's reduction, with a margin
LOG_Z = ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2
TRIG_Z = (mp.pi / 4) ** 2
ERF_T = mp.mpf(0.84375)


def _erfc_h(k: float, x_max: float) -> tuple[Function, Function, float, float]:
    x_of_t = lambda t: k * (1 + t) / (1 - t)  # noqa: E731
    h = lambda t: (1 + 2 * x_of_t(t)) * _erfcx(x_of_t(t))  # noqa: E731
    return h, lambda t: 1 / h(t), (ERF_T - k) / (ERF_T + k), (x_max - k) / (x_max + k)


# name: (g, w, a, b, degrees): P of the given degrees minimising max |w (g - P)| on [a, b]
POLYNOMIALS = {
    "EXP_P": (_series(lambda r: mp.mpf(1) / 2 + r / 6, lambda r: (mp.exp(r) - 1 - r) / r**2),
              lambda r: r * r / mp.exp(r), -LN2_HALF, LN2_HALF, (9,)),
    "EXP32_P": (_series(lambda r: mp.mpf(1) / 2 + r / 6, lambda r: (mp.exp(r) - 1 - r) / r**2),
                lambda r: r * r / mp.exp(r), -EXP32_R, EXP32_R, (4,)),
    "LOG_P": (_series(lambda z: mp.mpf(2) / 3, lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z),
              lambda z: z, 0, LOG_Z, (6,)),
    "POW_LOG_Q": (_series(lambda z: mp.mpf(2) / 5, lambda z: (2 * mp.atanh(mp.sqrt(z)) - 2 * mp.sqrt(z)
                                                              - 2 * mp.sqrt(z) ** 3 / 3) / mp.sqrt(z) ** 5),
                  lambda z: z * z, 0, LOG_Z, (6,)),
    "SIN_P": (_series(lambda z: -mp.mpf(1) / 6, lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3),
              lambda z: z, 0, TRIG_Z, (5,)),
    "COS_P": (_series(lambda z: mp.mpf(1) / 24, lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2),
              lambda z: z * z, 0, TRIG_Z, (5,)),
    "ATAN_P": (_series(lambda z: -mp.mpf(1) / 3, lambda z: (mp.atan(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3),
               lambda z: z, 0, (mp.mpf(7) / 16) ** 2, (10,)),
    "ASIN_P": (_series(lambda z: mp.mpf(1) / 6, lambda z: (mp.asin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3),
               lambda z: z, 0, mp.mpf(1) / 4, (12,)),
    "ERF_P": (_series(lambda z: 2 / mp.sqrt(mp.pi) - 1, lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) - 1),
              lambda z: 1 / (mp.erf(mp.sqrt(z)) / mp.sqrt(z)) if z > 0 else mp.sqrt(mp.pi) / 2, 0, ERF_T**2,
              (10,)),
    "CBRT_P": (mp.cbrt, lambda t: 1 / mp.cbrt(t), 1, 2, (4,)),
    "ERFC_H64": (*_erfc_h(4, 27.3), (20,)),
}  # fmt: skip

# name: (f, z_max, p, q): f(z) ~ P(z) / Q(z) on [0, z_max] (the function is x f(x^2))
RATIONALS = {
    "ERF_32": (lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi), 16, 10, 10),
}


def split(value: mp.mpf, bits: int) -> tuple[str, str]:
    """value = hi + lo with hi rounded to `bits` significant bits."""
    scale = mp.mpf(2) ** (bits - 1 - mp.floor(mp.log(abs(value), 2)))
    hi = mp.nint(value * scale) / scale
    return float(hi).hex(), float(value - hi).hex()


def constants() -> None:
    pio2 = mp.pi / 2
    print("ln2 (29 bits):", split(mp.log(2), 32), " 1/ln2:", split(1 / mp.log(2), 32), " 1/ln10:",
          split(1 / mp.log(10), 32), " log10(2):", split(mp.log10(2), 33))  # fmt: skip
    print("ln2 - double(ln2):", float(mp.log(2) - mp.mpf(float(mp.log(2)))).hex())
    parts, rest = [], pio2
    for _ in range(3):  # pi/2 in 33-bit parts (truncated) and the rest
        scale = mp.mpf(2) ** (32 - mp.floor(mp.log(rest, 2)))
        parts.append(mp.floor(rest * scale) / scale)
        rest -= parts[-1]
    print("pi/2 parts:", [float(p).hex() for p in [*parts, rest]])
    named = [("pi/2", pio2), ("pi", mp.pi), ("2/3", mp.mpf(2) / 3)]
    for c in (0.5, 1, 1.5):
        named += [(f"atan({c})", mp.atan(c)), (f"pi - atan({c})", mp.pi - mp.atan(c))]
    for name, v in named:
        print(f"{name}: hi {float(v).hex()} lo {float(v - mp.mpf(float(v))).hex()}")
    print("cbrt(2), cbrt(4):", float(mp.cbrt(2)).hex(), float(mp.cbrt(4)).hex())
    with mp.workprec(1400):
        print("floor(2/pi * 2^1216):", format(int(mp.floor(2 / mp.pi * mp.mpf(2) ** 1216)), "x"))


def _exp_scale_entries() -> list[float]:
    """exp_scale_table()'s entries with j << EXP_SCALE_SHIFT added back to their bits (2^(j/16) if it is right)."""
    bits = struct.unpack(f"<{EXP_TABLE_SIZE}q", struct.pack(f"<{EXP_TABLE_SIZE}d", *exp_scale_table()))
    restored = [b + (j << EXP_SCALE_SHIFT) for j, b in enumerate(bits)]
    return list(struct.unpack(f"<{EXP_TABLE_SIZE}d", struct.pack(f"<{EXP_TABLE_SIZE}q", *restored)))


def check_tables() -> None:
    """Every entry of the table of the f32 exp (made at run time in decimal arithmetic) is the exact value rounded
    to the nearest double; so is every entry of its scale table once its exponent field gets j back."""
    power_of_two = lambda j: mp.mpf(2) ** (mp.mpf(j) / EXP_TABLE_SIZE)  # noqa: E731
    for name, table, exact in [
        (f"2^(j/{EXP_TABLE_SIZE})", exp_table(), power_of_two),
        (f"2^(j/{EXP_TABLE_SIZE}) (scale table)", _exp_scale_entries(), power_of_two),
    ]:
        wrong = [j for j, value in enumerate(table) if value != float(exact(j))]
        print(f"table of {name}: {len(table)} entries, {len(wrong)} not correctly rounded" +
              (f": {wrong[:10]}" if wrong else ""))


def main(names: list[str]) -> None:
    for name, (g, w, a, b, degrees) in POLYNOMIALS.items():
        if names and name not in names:
            continue
        for degree in degrees:
            c, err = remez(g, w, a, b, degree)
            after = rounded_error(g, w, a, b, c)
            print(f"{name} degree {degree}: error {mp.nstr(err, 3)}, rounded {mp.nstr(after, 3)}")
            print("   ", tuple(float(v) for v in c))
            if name == "ERFC_H64":
                print("    first coefficient's rest:", float(c[0] - mp.mpf(float(c[0]))))
    for name, (f, z_max, p, q) in RATIONALS.items():
        if not names or name in names:
            num, den, err = rational(f, z_max, p, q, points=600)
            print(f"{name} [{p}/{q}]: relative error {mp.nstr(err, 3)}")
            print("    P", tuple(float(v) for v in num))
            print("    Q", tuple(float(v) for v in den))
    if not names or "constants" in names:
        constants()
    if not names or "tables" in names:
        check_tables()


def parse_arguments(argv: list[str] | None = None) -> list[str]:
    known = [*POLYNOMIALS, *RATIONALS, "constants", "tables"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("names", nargs="*", metavar="name",
                        help=f"the approximations to fit (default: all): {', '.join(known)}")
    names = parser.parse_args(argv).names
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown name(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


if __name__ == "__main__":
    main(parse_arguments())
