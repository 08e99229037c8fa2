"""``lower-apply-indexing``: ``xla.apply_indexing`` → ``arith`` on ``index``
(XLA's ``RewriteApplyIndexingOp`` in ``simplify_affine.cc``, which simplifies
the map and expands it with MLIR's ``expandAffineExpr``, using the map's
ranges to pick unsigned division where the dividend cannot be negative).

The map is simplified first (its domain is assumed to hold, as XLA does).
Each subexpression is emitted once per op (a cache keyed by the expression):

- ``a + b`` → ``addi`` (``subi`` for ``a + (-c)`` and ``a + b * -1``); ``a * b`` → ``muli``;
- ``a floordiv c`` / ``a mod c`` / ``a ceildiv c`` with ``c > 0``: ``divui`` /
  ``remui`` / ``divui(a + c - 1)`` when the range of ``a`` over the map's
  bounds is non-negative (the common case, and much cheaper), otherwise
  ``floordivsi`` / ``remsi`` + ``select(r < 0, r + c, r)`` / ``ceildivsi``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineSymExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp, IndexingMapAttr
from xlapy.errors import UnimplementedError
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import ADD, CEILDIV, FLOORDIV, MOD, MUL, binary_rhs_constant, constant_value
from xlapy.indexing.simplifier import RangeEvaluator


@functools.lru_cache(maxsize=4096)  # unrolled loops repeat the same maps many times
def _lowering_map(attr: IndexingMapAttr) -> IndexingMap:
    """The simplified map, unless simplifying changed its arity or found it empty."""
    original = attr.indexing_map
    simplified = original.simplify()
    if (
        simplified.is_known_empty()
        or simplified.num_dims != original.num_dims
        or simplified.num_symbols != original.num_symbols
        or len(simplified.results) != len(original.results)
    ):
        return original
    return simplified


class _ExprEmitter:
    def __init__(self, op: ApplyIndexingOp):
        self.op = op
        self.map = _lowering_map(op.indexing_map_attr)
        self.ranges = RangeEvaluator(self.map)
        self.builder = Builder(InsertPoint.before(op))
        self.dims = list(op.dims)
        self.symbols = list(op.symbols)
        self.cache: dict[AffineExpr, SSAValue] = {}
        self.created: set[SSAValue] = set()

    def run(self) -> None:
        values = [self.emit(e) for e in self.map.results]
        for old, new in zip(self.op.indices, values):
            if new in self.created and new.name_hint is None:
                new.name_hint = old.name_hint
        Rewriter.replace_op(self.op, [], values)

    def insert(self, op: Operation) -> SSAValue:
        result = self.builder.insert(op).results[0]
        self.created.add(result)
        return result

    def constant(self, value: int) -> SSAValue:
        return self.emit(AffineConstantExpr(value))

    def emit(self, expr: AffineExpr) -> SSAValue:
        value = self.cache.get(expr)
        if value is None:
            value = self.cache[expr] = self._emit(expr)
        return value

    def _emit(self, expr: AffineExpr) -> SSAValue:
        if isinstance(expr, AffineConstantExpr):
            value = self.insert(arith.ConstantOp(IntegerAttr(expr.value, IndexType())))
            value.name_hint = f"c{expr.value}"
            return value
        if isinstance(expr, AffineDimExpr):
            return self.dims[expr.position]
        if isinstance(expr, AffineSymExpr):
            return self.symbols[expr.position]
        assert isinstance(expr, AffineBinaryOpExpr)
        return _BINARY[expr.kind](self, expr)

    def add(self, expr: AffineBinaryOpExpr) -> SSAValue:
        rhs = expr.rhs
        negative = constant_value(rhs)
        if negative is not None and negative < 0:
            return self.insert(arith.SubiOp(self.emit(expr.lhs), self.constant(-negative)))
        if binary_rhs_constant(rhs, MUL) == -1:
            assert isinstance(rhs, AffineBinaryOpExpr)
            return self.insert(arith.SubiOp(self.emit(expr.lhs), self.emit(rhs.lhs)))
        return self.insert(arith.AddiOp(self.emit(expr.lhs), self.emit(rhs)))

    def mul(self, expr: AffineBinaryOpExpr) -> SSAValue:
        if constant_value(expr.rhs) == -1:
            return self.insert(arith.SubiOp(self.constant(0), self.emit(expr.lhs)))
        return self.insert(arith.MuliOp(self.emit(expr.lhs), self.emit(expr.rhs)))

    def _divisor(self, expr: AffineBinaryOpExpr) -> int:
        divisor = constant_value(expr.rhs)
        if divisor is None or divisor <= 0:
            raise UnimplementedError(
                f"xla.apply_indexing: division by {expr.rhs} (only positive constant divisors are lowered)"
            )
        return divisor

    def _non_negative(self, expr: AffineExpr) -> bool:
        return self.ranges.range(expr).lower >= 0

    def floordiv(self, expr: AffineBinaryOpExpr) -> SSAValue:
        self._divisor(expr)
        lhs, rhs = self.emit(expr.lhs), self.emit(expr.rhs)
        if self._non_negative(expr.lhs):
            return self.insert(arith.DivUIOp(lhs, rhs))
        return self.insert(arith.FloorDivSIOp(lhs, rhs))

    def ceildiv(self, expr: AffineBinaryOpExpr) -> SSAValue:
        divisor = self._divisor(expr)
        lhs, rhs = self.emit(expr.lhs), self.emit(expr.rhs)
        if self._non_negative(expr.lhs):
            rounded_up = self.insert(arith.AddiOp(lhs, self.constant(divisor - 1)))
            return self.insert(arith.DivUIOp(rounded_up, rhs))
        return self.insert(arith.CeilDivSIOp(lhs, rhs))

    def mod(self, expr: AffineBinaryOpExpr) -> SSAValue:
        self._divisor(expr)
        lhs, rhs = self.emit(expr.lhs), self.emit(expr.rhs)
        if self._non_negative(expr.lhs):
            return self.insert(arith.RemUIOp(lhs, rhs))
        # remsi has the dividend's sign; affine mod is in [0, divisor).
        remainder = self.insert(arith.RemSIOp(lhs, rhs))
        negative = self.insert(arith.CmpiOp(remainder, self.constant(0), "slt"))
        shifted = self.insert(arith.AddiOp(remainder, rhs))
        return self.insert(arith.SelectOp(negative, shifted, remainder))


_BINARY: dict[object, Callable[[_ExprEmitter, AffineBinaryOpExpr], SSAValue]] = {
    ADD: _ExprEmitter.add,
    MUL: _ExprEmitter.mul,
    FLOORDIV: _ExprEmitter.floordiv,
    CEILDIV: _ExprEmitter.ceildiv,
    MOD: _ExprEmitter.mod,
}


class LowerApplyIndexingPass(ModulePass):
    """Every ``xla.apply_indexing`` → ``arith`` ops on ``index``."""

    name = "lower-apply-indexing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for apply in [o for o in op.walk() if isinstance(o, ApplyIndexingOp)]:
            _ExprEmitter(apply).run()
