"""The range-aware simplifier of the expressions of indexing maps (XLA's
docs/indexing.md); ``IndexingMap.simplify`` applies it to a whole map.

MLIR's own folds cannot assume anything about the values of variables; these
rewrites use the bounds of the variables (and of the sub-expressions, by
interval arithmetic) to remove ``floordiv`` and ``mod`` where they cannot
change the value, to split sums by common factors, and to tighten or drop
constraints. Each rewrite keeps the value of the expression at every point of
the domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineSymExpr

from xlapy.indexing import affine
from xlapy.indexing.affine import ADD, FLOORDIV, MOD, MUL, binary_rhs_constant
from xlapy.indexing.interval import Interval

if TYPE_CHECKING:  # the maps are read, never built, here: indexing_map imports this module
    from xlapy.indexing.indexing_map import IndexingMap

ZERO = affine.const(0)


class RangeEvaluator:
    """Interval bounds of expressions over a map's variables; with
    ``use_constraints`` an expression that is constrained is also bounded by
    its constraint."""

    def __init__(self, indexing_map: IndexingMap, use_constraints: bool = False):
        self.dims = [v.bounds for v in indexing_map.dim_vars]
        self.symbols = [v.bounds for v in indexing_map.symbol_vars]
        self.constraints = indexing_map.constraints if use_constraints else {}
        self._cache: dict[AffineExpr, Interval] = {}

    def range(self, expr: AffineExpr) -> Interval:
        cached = self._cache.get(expr)
        if cached is not None:
            return cached
        if isinstance(expr, AffineConstantExpr):
            result = Interval(expr.value, expr.value)
        elif isinstance(expr, AffineDimExpr):
            result = self.dims[expr.position]
        elif isinstance(expr, AffineSymExpr):
            result = self.symbols[expr.position]
        else:
            lhs = self.range(expr.lhs)
            rhs = self.range(expr.rhs)
            kind = expr.kind
            if kind is ADD:
                result = lhs + rhs
            elif kind is MUL:
                result = lhs * rhs
            elif not rhs.is_point() or rhs.lower == 0:
                result = Interval(-(2**62), 2**62)
            elif kind is FLOORDIV:
                result = lhs.floordiv(rhs.lower)
            elif kind is MOD:
                result = lhs.mod(rhs.lower)
            else:
                result = -((-lhs).floordiv(rhs.lower))
        constraint = self.constraints.get(expr)
        if constraint is not None:
            result = result.intersect(constraint)
        self._cache[expr] = result
        return result


def summands(expr: AffineExpr) -> Iterator[AffineExpr]:
    """The terms of an arbitrarily nested sum, left to right."""
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind is ADD:
        yield from summands(expr.lhs)
        yield from summands(expr.rhs)
    else:
        yield expr


def sum_of(terms: list[AffineExpr]) -> AffineExpr:
    result: AffineExpr = ZERO
    for term in terms:
        result = affine.add(result, term)
    return result


def map_summands(expr: AffineExpr, fn: Callable[[AffineExpr], AffineExpr]) -> AffineExpr:
    return sum_of([fn(term) for term in summands(expr)])


def split_factor(expr: AffineExpr) -> tuple[AffineExpr, int]:
    """``(x, c)`` for ``x * c``; ``(expr, 1)`` otherwise."""
    factor = binary_rhs_constant(expr, MUL)
    return (expr.lhs, factor) if factor is not None else (expr, 1)


class ExprSimplifier:
    """Rewrites expressions until they stop changing."""

    def __init__(self, ranges: RangeEvaluator):
        self.ranges = ranges

    def simplify(self, expr: AffineExpr) -> AffineExpr:
        for _ in range(64):
            simplified = self.simplify_once(expr)
            if simplified == expr:
                return expr
            expr = simplified
        return expr

    def simplify_once(self, expr: AffineExpr) -> AffineExpr:
        if not isinstance(expr, AffineBinaryOpExpr):
            if isinstance(expr, AffineConstantExpr):
                return expr
            bounds = self.ranges.range(expr)
            return affine.const(bounds.lower) if bounds.is_point() else expr
        bounds = self.ranges.range(expr)
        if bounds.is_point():
            return affine.const(bounds.lower)
        kind = expr.kind
        if kind is ADD:
            return self._sum(expr)
        if kind is MUL:
            return self._mul(expr)
        if kind is MOD:
            return self._mod(expr)
        if kind is FLOORDIV:
            return self._floordiv(expr)
        return affine.ceildiv(self.simplify_once(expr.lhs), expr.rhs)

    # --- products ---

    def _mul(self, expr: AffineBinaryOpExpr) -> AffineExpr:
        factor = expr.rhs.value
        lhs = self.simplify_once(expr.lhs)
        if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind is ADD:
            return map_summands(lhs, lambda term: affine.mul(term, factor))
        return expr if lhs == expr.lhs else affine.mul(lhs, factor)

    # --- sums ---

    def _sum(self, expr: AffineExpr) -> AffineExpr:
        """Simplifies each term, merges equal terms and constants (in the order
        terms first appear) and folds ``(x mod c) * k + (x floordiv c) * (c * k)``
        into ``x * k``."""
        order: list[AffineExpr] = []
        factors: dict[AffineExpr, int] = {}
        constant = 0
        for term in summands(expr):
            for part in summands(self.simplify_once(term)):
                if isinstance(part, AffineConstantExpr):
                    constant += part.value
                    continue
                base, factor = split_factor(part)
                if base not in factors:
                    order.append(base)
                    factors[base] = 0
                factors[base] += factor
        self._fold_mod_and_div(order, factors)
        terms = [affine.mul(base, factors[base]) for base in order if factors[base] != 0]
        if constant:
            terms.append(affine.const(constant))
        return sum_of(terms)

    def _fold_mod_and_div(self, order: list[AffineExpr], factors: dict[AffineExpr, int]) -> None:
        """``(x mod c) * k + (x floordiv c) * (c * k)`` → ``x * k``, in place."""
        if not any(binary_rhs_constant(b, FLOORDIV) is not None for b in order):
            return
        for base in list(order):
            modulus = binary_rhs_constant(base, MOD)
            k = factors[base]
            if modulus is None or modulus <= 0 or k == 0:
                continue
            quotient = self.simplify(affine.floordiv(base.lhs, modulus))
            if factors.get(quotient, 0) != k * modulus:
                continue
            factors[quotient] = factors[base] = 0
            for term in summands(base.lhs):
                term_base, term_factor = split_factor(term)
                if term_base not in factors:
                    order.insert(order.index(base), term_base)
                    factors[term_base] = 0
                factors[term_base] += term_factor * k

    # --- mod ---

    def _mod(self, expr: AffineBinaryOpExpr) -> AffineExpr:
        modulus = expr.rhs.value
        if modulus == 0:
            return ZERO
        lhs = self.simplify_once(expr.lhs)
        if modulus < 0:
            return expr if lhs == expr.lhs else affine.mod(lhs, modulus)
        bounds = self.ranges.range(lhs)
        # No wrap-around: the mod is a shift.
        offset = -(bounds.lower // modulus) * modulus
        if bounds.upper + offset < modulus:
            return affine.add(lhs, offset)
        # (x * a) mod (a * b) == (x mod b) * a
        factor = binary_rhs_constant(lhs, MUL)
        if factor is not None and factor > 0 and modulus % factor == 0:
            return affine.mul(affine.mod(lhs.lhs, modulus // factor), factor)
        # Multiples of the modulus and whole periods of the constant do not matter.
        extracted_constant = 0
        kept = []
        for term in summands(lhs):
            if isinstance(term, AffineConstantExpr):
                extracted_constant += term.value
                continue
            term_factor = binary_rhs_constant(term, MUL)
            if term_factor is not None and term_factor % modulus == 0:
                continue
            kept.append(term)
        if extracted_constant % modulus:
            kept.append(affine.const(extracted_constant % modulus))
        new_lhs = sum_of(kept)
        multiplied, gcd, not_multiplied = self.split_sum_by_gcd(new_lhs)
        if gcd != 1 and modulus % gcd == 0:
            rest = self.ranges.range(not_multiplied)
            if rest == Interval(0, 0):
                # (x * g) mod m == (x mod (m / g)) * g
                return affine.mul(affine.mod(multiplied, modulus // gcd), gcd)
            if Interval(0, gcd - 1).contains(rest):
                # (x * g + y) mod m == y + (x * g) mod m when 0 <= y < g divides m
                return affine.add(not_multiplied, affine.mod(affine.mul(multiplied, gcd), modulus))
        return expr if new_lhs == expr.lhs else affine.mod(new_lhs, modulus)

    # --- floordiv ---

    def _floordiv(self, expr: AffineBinaryOpExpr) -> AffineExpr:
        divisor = expr.rhs.value
        lhs = self.simplify_once(expr.lhs)
        if divisor > 1:
            # (x mod (a * b)) floordiv a == (x floordiv a) mod b
            modulus = binary_rhs_constant(lhs, MOD)
            if modulus is not None and modulus > 0 and modulus % divisor == 0:
                return affine.mod(affine.floordiv(lhs.lhs, divisor), modulus // divisor)
            # (x floordiv a) floordiv b == x floordiv (a * b)
            inner = binary_rhs_constant(lhs, FLOORDIV)
            if inner is not None and inner > 0:
                return affine.floordiv(lhs.lhs, inner * divisor)
            rewritten = self._sum_div(lhs, divisor)
            if rewritten is not None:
                return rewritten
        return expr if lhs == expr.lhs else affine.floordiv(lhs, divisor)

    def _sum_div(self, dividend: AffineExpr, divisor: int) -> AffineExpr | None:
        """``(a * divisor * k + rest) floordiv divisor`` → ``a * k + rest
        floordiv divisor``, with the rest reduced by the common factor of its
        terms when the unscaled terms cannot carry into the quotient."""
        extracted: AffineExpr = ZERO
        kept = []
        for term in summands(dividend):
            factor = binary_rhs_constant(term, MUL)
            if factor is not None and factor % divisor == 0:
                extracted = affine.add(extracted, affine.mul(term.lhs, factor // divisor))
                continue
            if isinstance(term, AffineConstantExpr):
                count = term.value // divisor
                if count:
                    extracted = affine.add(extracted, count)
                    term = affine.const(term.value - count * divisor)
                    if term.value == 0:
                        continue
            kept.append(term)
        new_dividend = sum_of(kept)
        multiplied, gcd, not_multiplied = self.split_sum_by_gcd(new_dividend)
        common = math.gcd(divisor, gcd)
        rest = self.ranges.range(not_multiplied)
        if common != 1 and Interval(0, common - 1).contains(rest):
            # (x * 6 + y) floordiv 9 == (x * 2) floordiv 3 when 0 <= y < 3
            new_dividend = affine.mul(multiplied, gcd // common)
            divisor //= common
        elif rest.is_point() and rest.lower != 0:
            common = math.gcd(rest.lower, common)
            if common != 1:
                new_dividend = affine.add(affine.mul(multiplied, gcd // common), rest.lower // common)
                divisor //= common
        # One inner division: (x floordiv c + y) floordiv d == (x + y * c) floordiv (c * d)
        inner = [c for c in (binary_rhs_constant(t, FLOORDIV) for t in summands(new_dividend)) if c is not None]
        if len(inner) == 1 and inner[0] > 0:
            c = inner[0]
            new_dividend = map_summands(
                new_dividend,
                lambda t: t.lhs if binary_rhs_constant(t, FLOORDIV) is not None else affine.mul(t, c),
            )
            divisor *= c
        if new_dividend == dividend and extracted == ZERO:
            return None
        return affine.add(extracted, affine.floordiv(new_dividend, divisor))

    def split_sum_by_gcd(self, expr: AffineExpr) -> tuple[AffineExpr, int, AffineExpr]:
        """``(x, g, y)`` with ``expr == x * g + y``: ``g`` is the gcd of the
        constant factors of the scaled terms, ``y`` the sum of the others."""
        gcd = 0
        for term in summands(expr):
            factor = binary_rhs_constant(term, MUL)
            if factor is not None:
                gcd = math.gcd(gcd, factor)
        if gcd <= 1:
            return ZERO, 1, expr
        scaled, rest = [], []
        for term in summands(expr):
            factor = binary_rhs_constant(term, MUL)
            if factor is not None:
                scaled.append(affine.mul(term.lhs, factor // gcd))
            else:
                rest.append(term)
        return sum_of(scaled), gcd, sum_of(rest)


# --- constraints ---


def narrow_constraint_once(
    simplifier: ExprSimplifier, expr: AffineExpr, bounds: Interval
) -> tuple[AffineExpr, Interval] | None:
    """The first rule of XLA's range-aware simplification: ``lb <= x (+, *, floordiv) c <= ub`` becomes
    bounds on ``x``. Returns the new ``(expr, bounds)`` or None."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    rhs = simplifier.ranges.range(expr.rhs)
    kind = expr.kind
    if kind is ADD:
        if rhs.is_point():
            return expr.lhs, Interval(bounds.lower - rhs.lower, bounds.upper - rhs.lower)
        if bounds.lower != 0:
            return None
        # 0 <= x * g + y <= ub: when (ub - y) floordiv g is one value, y is irrelevant.
        multiplied, gcd, not_multiplied = simplifier.split_sum_by_gcd(expr)
        if gcd == 1:
            return None
        difference = Interval(bounds.upper, bounds.upper) - simplifier.ranges.range(not_multiplied)
        if not difference.floordiv(gcd).is_point():
            return None
        return affine.mul(multiplied, gcd), bounds
    if not rhs.is_point():
        return None
    c = rhs.lower
    if kind is MUL and c != 0:
        lower, upper = (bounds.lower, bounds.upper) if c > 0 else (-bounds.upper, -bounds.lower)
        c = abs(c)
        return expr.lhs, Interval(-(-lower // c), upper // c)
    if kind is FLOORDIV and c > 0:
        return expr.lhs, Interval(bounds.lower * c, (bounds.upper + 1) * c - 1)
    return None
