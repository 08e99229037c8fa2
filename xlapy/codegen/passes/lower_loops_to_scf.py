"""``lower-xla-loops-to-scf`` (one step of the example in XLA's docs/emitters.md; XLA's
``lower_xla_gpu_to_scf.cc``, pattern ``LowerXlaGpuLoopsToScf``).

An ``xla.loop`` becomes one ``scf.for`` per range variable of its map (first
variable outermost, from its lower bound to its upper bound + 1, step 1, the
iter values threaded through ``iter_args``). In the innermost loop the point
(dims, symbols) is checked against the map's domain:

- each dimension operand ``d`` with bounds ``[lo, hi]``:
  ``arith.cmpi sge, d, lo`` and ``arith.cmpi sle, d, hi`` joined by ``arith.andi``
  (always, as in the emitters document's example; a later pass folds what ``xla.range`` already implies);
- each constraint ``e in [lo, hi]``: ``e`` computed by an
  ``xla.apply_indexing`` of a one-result map and checked the same way, unless
  the variables' bounds already imply it;
- the range variables need no check: the loops only visit their bounds.

All checks are ``arith.andi``-ed into ``%inbounds`` and guard
``scf.if %inbounds -> (iter types) { %i:N = xla.apply_indexing #map(dims)[symbols];
<the loop body>; scf.yield <the xla.yield values> } else { scf.yield <iter values> }``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp, YieldOp
from xlapy.indexing import IndexingMap, Interval
from xlapy.indexing.simplifier import RangeEvaluator


class _Constants:
    """``index`` constants, each emitted once, before the loop nest (named ``%c<value>`` as MLIR does)."""

    def __init__(self, insertion_point: InsertPoint):
        self.builder = Builder(insertion_point)
        self.values: dict[int, SSAValue] = {}

    def __call__(self, value: int) -> SSAValue:
        if value not in self.values:
            result = self.builder.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result
            result.name_hint = f"c{value}"
            self.values[value] = result
        return self.values[value]


class _LoopLowering:
    def __init__(self, loop: LoopOp):
        self.loop = loop
        self.map = loop.indexing_map
        self.dims = list(loop.dims)
        self.constants = _Constants(InsertPoint.before(loop))

    def run(self) -> None:
        loop = self.loop
        if self.map.is_known_empty():  # no iteration runs: the results are the inits
            results: Sequence[SSAValue] = list(loop.inits)
        else:
            # The loop bounds and the dimension bounds first, so that the constants lead the lowered code.
            for var in self.map.range_vars:
                self.constants(var.bounds.lower), self.constants(var.bounds.upper + 1), self.constants(1)
            for var in self.map.dim_vars:
                self.constants(var.bounds.lower), self.constants(var.bounds.upper)
            results = self.loops(Builder(InsertPoint.before(loop)), [], list(loop.inits))
        for old, new in zip(loop.results, results):
            if new.name_hint is None:
                new.name_hint = old.name_hint
        Rewriter.replace_op(loop, [], list(results))

    def loops(self, builder: Builder, symbols: list[SSAValue], iters: list[SSAValue]) -> Sequence[SSAValue]:
        """The ``scf.for`` over range variable ``len(symbols)`` and those inside it."""
        depth = len(symbols)
        if depth == len(self.map.range_vars):
            return self.guarded_body(builder, symbols, iters)
        var = self.map.range_vars[depth]
        body = Block(arg_types=[IndexType(), *(v.type for v in iters)])
        induction, *inner_iters = body.args
        if var.name and SSAValue.is_valid_name(var.name):
            induction.name_hint = var.name
        for arg, loop_arg in zip(inner_iters, self.loop.iter_args):
            arg.name_hint = loop_arg.name_hint
        inner = Builder(InsertPoint.at_end(body))
        inner.insert(scf.YieldOp(*self.loops(inner, [*symbols, induction], inner_iters)))
        lower, upper, step = self.constants(var.bounds.lower), self.constants(var.bounds.upper + 1), self.constants(1)
        return builder.insert(scf.ForOp(lower, upper, step, iters, body)).results

    def in_bounds(self, builder: Builder, value: SSAValue, bounds: Interval) -> SSAValue:
        low = builder.insert(arith.CmpiOp(value, self.constants(bounds.lower), "sge")).result
        high = builder.insert(arith.CmpiOp(value, self.constants(bounds.upper), "sle")).result
        return builder.insert(arith.AndIOp(low, high)).result

    def domain_checks(self, builder: Builder, symbols: list[SSAValue]) -> list[SSAValue]:
        checks = [self.in_bounds(builder, d, var.bounds) for d, var in zip(self.dims, self.map.dim_vars)]
        ranges = RangeEvaluator(self.map)
        for expr, bounds in self.map.constraints.items():
            implied = ranges.range(expr)
            if bounds.lower <= implied.lower and implied.upper <= bounds.upper:
                continue
            single = IndexingMap.from_exprs([expr], self.map.dim_vars, self.map.range_vars)
            value = builder.insert(ApplyIndexingOp(self.dims, symbols, single)).indices[0]
            checks.append(self.in_bounds(builder, value, bounds))
        return checks

    def guarded_body(self, builder: Builder, symbols: list[SSAValue], iters: list[SSAValue]) -> Sequence[SSAValue]:
        checks = self.domain_checks(builder, symbols)
        if not checks:
            return self.body(builder, symbols, iters)
        inbounds = checks[0]
        for check in checks[1:]:
            inbounds = builder.insert(arith.AndIOp(inbounds, check)).result
        inbounds.name_hint = "inbounds"
        then_block = Block()
        then_builder = Builder(InsertPoint.at_end(then_block))
        then_builder.insert(scf.YieldOp(*self.body(then_builder, symbols, iters)))
        else_region = Region(Block([scf.YieldOp(*iters)])) if iters else Region()
        if_op = scf.IfOp(inbounds, [v.type for v in iters], Region(then_block), else_region)
        return builder.insert(if_op).results

    def body(self, builder: Builder, symbols: list[SSAValue], iters: list[SSAValue]) -> Sequence[SSAValue]:
        """Moves the loop's body to the builder's position; returns the yielded values."""
        indices: Sequence[SSAValue] = ()
        if self.map.results:
            indices = builder.insert(ApplyIndexingOp(self.dims, symbols, self.map)).indices
            for new, old in zip(indices, self.loop.index_args):
                new.name_hint = old.name_hint
        block = self.loop.body.block
        terminator = block.last_op
        assert isinstance(terminator, YieldOp)
        Rewriter.inline_block(block, builder.insertion_point, [*symbols, *indices, *iters])
        yielded = list(terminator.arguments)
        Rewriter.erase_op(terminator)
        return yielded


class LowerLoopsToScfPass(ModulePass):
    """Every ``xla.loop`` → ``scf.for`` nest + in-domain ``scf.if``."""

    name = "lower-xla-loops-to-scf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in [o for o in op.walk() if isinstance(o, LoopOp)]:
            _LoopLowering(loop).run()
