"""``lower-apply-indexing``: ``xla.apply_indexing`` → arith on ``index``
(XLA lowers it the same way, in lower_xla_to_scf / simplify_affine).

The map's bounds decide the operations: a floordiv or mod of a value known
to be non-negative uses ``divui``/``remui`` (what XLA's simplify-affine does
with its range analysis); otherwise ``floordivsi`` and a ``remsi`` corrected
to the divisor's sign, which is what affine ``mod`` means.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineDimExpr, AffineExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.indexing.affine import ADD, CEILDIV, FLOORDIV, MOD, MUL
from xlapy.indexing.simplifier import RangeEvaluator


class LowerApplyIndexingPass(ModulePass):
    name = "lower-apply-indexing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for apply in [o for o in op.walk() if isinstance(o, ApplyIndexingOp)]:
            _ExprLowering(apply).run()


class _ExprLowering:
    def __init__(self, op: ApplyIndexingOp):
        self.op = op
        self.map = op.indexing_map
        self.ranges = RangeEvaluator(self.map)
        self.builder = Builder(InsertPoint.before(op))
        self.dims = list(op.operands[:self.map.num_dims])
        self.symbols = list(op.operands[self.map.num_dims:])
        self.cache: dict[AffineExpr, SSAValue] = {}

    def run(self) -> None:
        values = [self.emit(expr) for expr in self.map.results]
        Rewriter.replace_op(self.op, [], values)

    def constant(self, value: int) -> SSAValue:
        return self.builder.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result

    def emit(self, expr: AffineExpr) -> SSAValue:
        found = self.cache.get(expr)
        if found is not None:
            return found
        if isinstance(expr, AffineConstantExpr):
            value = self.constant(expr.value)
        elif isinstance(expr, AffineDimExpr):
            value = self.dims[expr.position]
        elif not isinstance(expr, AffineBinaryOpExpr):
            value = self.symbols[expr.position]
        else:
            value = self.binary(expr)
        self.cache[expr] = value
        return value

    def binary(self, expr: AffineBinaryOpExpr) -> SSAValue:
        lhs = self.emit(expr.lhs)
        rhs = self.emit(expr.rhs)
        insert = self.builder.insert
        if expr.kind is ADD:
            return insert(arith.AddiOp(lhs, rhs)).result
        if expr.kind is MUL:
            return insert(arith.MuliOp(lhs, rhs)).result
        divisor = expr.rhs.value if isinstance(expr.rhs, AffineConstantExpr) else None
        non_negative = self.ranges.range(expr.lhs).lower >= 0 and divisor is not None and divisor > 0
        if expr.kind is FLOORDIV:
            return insert((arith.DivUIOp if non_negative else arith.FloorDivSIOp)(lhs, rhs)).result
        if expr.kind is CEILDIV:
            return insert((arith.CeilDivUIOp if non_negative else arith.CeilDivSIOp)(lhs, rhs)).result
        assert expr.kind is MOD
        if non_negative:
            return insert(arith.RemUIOp(lhs, rhs)).result
        # remsi takes the dividend's sign; affine mod takes the (positive) divisor's.
        rest = insert(arith.RemSIOp(lhs, rhs)).result
        negative = insert(arith.CmpiOp(rest, self.constant(0), "slt")).result
        shifted = insert(arith.AddiOp(rest, rhs)).result
        return insert(arith.SelectOp(negative, shifted, rest)).result
