"""``lower-xla-loops-to-scf``: ``xla.loop`` → ``scf.for`` nests with the
in-domain check in an ``scf.if`` (XLA's lower_xla_gpu_loops_to_scf, [A73]).

One ``scf.for`` per range variable (the first outermost), threading the
iter values; inside, every dimension operand is checked against its bounds
and every constraint against its interval, and only in-domain iterations
run the body, with the map's results computed by one ``xla.apply_indexing``.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp, YieldOp
from xlapy.indexing import IndexingMap


def _index(builder: Builder, value: int) -> SSAValue:
    return builder.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


class LowerLoopsToScfPass(ModulePass):
    name = "lower-xla-loops-to-scf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in [o for o in op.walk() if isinstance(o, LoopOp)]:
            _lower(loop)


def _lower(loop: LoopOp) -> None:
    indexing_map = loop.indexing_map
    builder = Builder(InsertPoint.before(loop))
    results = _nest(builder, loop, indexing_map, list(loop.dims), [], list(loop.inits))
    Rewriter.replace_op(loop, [], results)


def _nest(builder: Builder, loop: LoopOp, indexing_map: IndexingMap, dims: list[SSAValue],
          symbols: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
    """The loops over the range variables from ``len(symbols)`` on, innermost the guarded body."""
    depth = len(symbols)
    if depth == len(indexing_map.range_vars):
        return _guarded_body(builder, loop, indexing_map, dims, symbols, iters)
    bounds = indexing_map.range_vars[depth].bounds
    lower, upper, step = _index(builder, bounds.lower), _index(builder, bounds.upper + 1), _index(builder, 1)
    body = Block(arg_types=[IndexType(), *(v.type for v in iters)])
    name = indexing_map.range_vars[depth].name
    if name:
        body.args[0].name_hint = name
    inner = Builder(InsertPoint.at_end(body))
    yielded = _nest(inner, loop, indexing_map, dims, [*symbols, body.args[0]], list(body.args[1:]))
    inner.insert(scf.YieldOp(*yielded))
    for_op = builder.insert(scf.ForOp(lower, upper, step, iters, body))
    return list(for_op.results)


def _guarded_body(builder: Builder, loop: LoopOp, indexing_map: IndexingMap, dims: list[SSAValue],
                  symbols: list[SSAValue], iters: list[SSAValue]) -> list[SSAValue]:
    checks: list[SSAValue] = []
    for value, var in zip(dims, indexing_map.dim_vars):
        low = builder.insert(arith.CmpiOp(value, _index(builder, var.bounds.lower), "sge")).result
        high = builder.insert(arith.CmpiOp(value, _index(builder, var.bounds.upper), "sle")).result
        checks.append(builder.insert(arith.AndIOp(low, high)).result)
    for expr, bounds in indexing_map.constraints.items():
        single = IndexingMap.from_exprs([expr], indexing_map.dim_vars, indexing_map.range_vars)
        (value,) = builder.insert(ApplyIndexingOp(dims, symbols, single)).results
        low = builder.insert(arith.CmpiOp(value, _index(builder, bounds.lower), "sge")).result
        high = builder.insert(arith.CmpiOp(value, _index(builder, bounds.upper), "sle")).result
        checks.append(builder.insert(arith.AndIOp(low, high)).result)
    then_block, else_block = Block(), Block()
    then_builder = Builder(InsertPoint.at_end(then_block))
    indices = then_builder.insert(ApplyIndexingOp(dims, symbols, indexing_map)).results
    for value, old in zip(indices, loop.index_args):
        value.name_hint = old.name_hint
    mapping: dict[SSAValue, SSAValue] = dict(zip(loop.symbol_args, symbols))
    mapping.update(zip(loop.index_args, indices))
    mapping.update(zip(loop.iter_args, iters))
    yielded: list[SSAValue] = []
    for op in loop.body.block.ops:
        if isinstance(op, YieldOp):
            yielded = [mapping.get(v, v) for v in op.arguments]
            break
        then_builder.insert(op.clone(mapping))
    then_builder.insert(scf.YieldOp(*yielded))
    else_block.add_op(scf.YieldOp(*iters))
    if not checks:
        # Nothing to check: the body runs unguarded.
        for op in list(then_block.ops)[:-1]:
            op.detach()
            builder.insert(op)
        return yielded
    inbounds = checks[0]
    for check in checks[1:]:
        inbounds = builder.insert(arith.AndIOp(inbounds, check)).result
    inbounds.name_hint = "inbounds"
    if_op = builder.insert(scf.IfOp(inbounds, [v.type for v in iters], Region(then_block), Region(else_block)))
    return list(if_op.results)
