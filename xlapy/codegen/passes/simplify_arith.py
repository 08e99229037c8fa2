"""``simplify-arith``: folds comparisons that value ranges decide, and the
``scf.if``s they guard (XLA's simplify_arith).

Ranges come from ``xla.range`` on thread and block ids, from ``scf.for``
bounds for induction variables, from constants, and for the results of
``xla.apply_indexing`` from its map evaluated over its operands' ranges
within the map's domain (a loop over a slice of the output knows which
operand of a concatenate it reads). After
``lower-xla-loops-to-scf`` the in-domain check of the loop emitter's
``xla.loop`` compares thread and block ids against their own bounds; folding
it exposes the loop body to vectorization (the emitters document's example → the emitters document's example).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp, get_range
from xlapy.indexing import IndexingMap, Interval
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.simplifier import RangeEvaluator

_DECIDERS = {
    "eq": lambda a, b: True if a[0] == a[1] == b[0] == b[1] else False if a[1] < b[0] or b[1] < a[0] else None,
    "ne": lambda a, b: False if a[0] == a[1] == b[0] == b[1] else True if a[1] < b[0] or b[1] < a[0] else None,
    "slt": lambda a, b: True if a[1] < b[0] else False if a[0] >= b[1] else None,
    "sle": lambda a, b: True if a[1] <= b[0] else False if a[0] > b[1] else None,
    "sgt": lambda a, b: True if a[0] > b[1] else False if a[1] <= b[0] else None,
    "sge": lambda a, b: True if a[0] >= b[1] else False if a[1] < b[0] else None,
}


def value_range(value: SSAValue, depth: int = 0) -> tuple[int, int] | None:
    """Inclusive bounds of an integer or ``index`` value, when they are known (looking through at most
    ``_MAX_DEPTH`` ops of integer arithmetic: index computations are short, and shared operands would make the
    walk exponential)."""
    owner = value.owner
    if isinstance(owner, Operation):
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            v = owner.value.value.data
            return v, v
        if isinstance(owner, ApplyIndexingOp):
            return _apply_indexing_range(owner, owner.results.index(value))
        arithmetic = _ARITHMETIC_RANGES.get(type(owner))
        if arithmetic is not None:
            return arithmetic(owner, depth + 1) if depth < _MAX_DEPTH else None
        return get_range(owner)
    parent = owner.parent_op()
    if isinstance(parent, scf.ForOp) and value is parent.body.block.args[0]:
        low, high = value_range(parent.lb), value_range(parent.ub)
        if low is not None and high is not None and high[0] > low[1]:
            return low[0], high[1] - 1
    return None


def _operand_ranges(op: Operation, depth: int) -> list[tuple[int, int]] | None:
    ranges = [value_range(operand, depth) for operand in op.operands]
    return None if any(r is None for r in ranges) else ranges  # type: ignore[return-value]


def _clamp_range(op: Operation, depth: int, pick: Callable[[int, int], int]) -> tuple[int, int] | None:
    """The bounds of ``maxsi``/``minsi`` (``pick``): one operand's bound is enough for one side (a clamp's
    ``minsi(maxsi(x, 0), n)`` is in ``[0, n]`` whatever ``x`` is)."""
    a, b = value_range(op.operands[0], depth), value_range(op.operands[1], depth)
    if a is None and b is None:
        return None
    if a is None or b is None:
        known = a if a is not None else b
        assert known is not None
        # maxsi(x, [l, h]) >= l; minsi(x, [l, h]) <= h: the other side is unbounded.
        low, high = _type_bounds(op.results[0])
        return (known[0], high) if pick is max else (low, known[1])
    return pick(a[0], b[0]), pick(a[1], b[1])


def _sum_range(op: Operation, depth: int) -> tuple[int, int] | None:
    ranges = _operand_ranges(op, depth)
    if ranges is None:
        return None
    (a_low, a_high), (b_low, b_high) = ranges
    if isinstance(op, arith.SubiOp):
        b_low, b_high = -b_high, -b_low
    return _unless_wrapping(op, a_low + b_low, a_high + b_high)


def _product_range(op: Operation, depth: int) -> tuple[int, int] | None:
    ranges = _operand_ranges(op, depth)
    if ranges is None:
        return None
    corners = [x * y for x in ranges[0] for y in ranges[1]]
    return _unless_wrapping(op, min(corners), max(corners))


def _cast_range(op: Operation, depth: int) -> tuple[int, int] | None:
    """An index cast keeps the value (its operand's range, or the whole range of its operand's type) unless it
    narrows a value its result's type does not hold."""
    known = value_range(op.operands[0], depth) or _type_bounds(op.operands[0])
    low, high = _type_bounds(op.results[0])
    return known if low <= known[0] and known[1] <= high else (low, high)  # a narrowing cast may wrap


def _type_bounds(value: SSAValue) -> tuple[int, int]:
    """The signed range of an integer or ``index`` (64-bit) value's type."""
    bits = value.type.width.data if isinstance(value.type, IntegerType) else 64
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _unless_wrapping(op: Operation, low: int, high: int) -> tuple[int, int] | None:
    """``[low, high]`` when the result's type holds it (the arithmetic wraps otherwise: nothing is known)."""
    type_low, type_high = _type_bounds(op.results[0])
    return (low, high) if low >= type_low and high <= type_high else None


# The integer arithmetic whose bounds follow from its operands' (start indices are clamped with maxsi/minsi).
_MAX_DEPTH = 12
_ARITHMETIC_RANGES: dict[type[Operation], Callable[[Operation, int], tuple[int, int] | None]] = {
    arith.MaxSIOp: lambda op, depth: _clamp_range(op, depth, max),
    arith.MinSIOp: lambda op, depth: _clamp_range(op, depth, min),
    arith.AddiOp: _sum_range,
    arith.SubiOp: _sum_range,
    arith.MuliOp: _product_range,
    arith.IndexCastOp: _cast_range,
}


def _apply_indexing_range(op: ApplyIndexingOp, position: int) -> tuple[int, int] | None:
    """The bounds of result ``position`` of ``op``: its map's variables are within the map's domain (assumed by
    ``xla.apply_indexing``) and within their operands' ranges."""
    indexing_map = op.indexing_map
    if indexing_map.is_undefined() or indexing_map.is_known_empty():
        return None
    operands = [*op.dims, *op.symbols]
    variables = [*indexing_map.dim_vars, *indexing_map.symbol_vars]
    narrowed = []
    for operand, variable in zip(operands, variables):
        known = value_range(operand)
        bounds = variable.bounds if known is None else variable.bounds.intersect(Interval(*known))
        if bounds.lower > bounds.upper:
            return None
        narrowed.append(Variable(bounds, variable.name))
    dims = len(indexing_map.dim_vars)
    ranges = len(indexing_map.range_vars)
    within = IndexingMap.from_exprs(indexing_map.results, narrowed[:dims], narrowed[dims:dims + ranges],
                                    narrowed[dims + ranges:])
    interval = RangeEvaluator(within).range(indexing_map.results[position])
    return interval.lower, interval.upper


def _bool(value: bool) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(int(value), IntegerType(1)))


def _known_bool(value: SSAValue) -> bool | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr) and value.type == IntegerType(1):
        return bool(owner.value.value.data & 1)
    return None


def _fold_compare(op: arith.CmpiOp) -> bool | None:
    if op.lhs.type != IndexType():
        return None
    decide = _DECIDERS.get(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data])
    lhs, rhs = value_range(op.lhs), value_range(op.rhs)
    if decide is None or lhs is None or rhs is None:
        return None
    return decide(lhs, rhs)


def _fold_and(op: arith.AndIOp) -> SSAValue | bool | None:
    lhs, rhs = _known_bool(op.lhs), _known_bool(op.rhs)
    if lhs is False or rhs is False:
        return False
    if lhs is True:
        return op.rhs
    if rhs is True:
        return op.lhs
    return None


class SimplifyArithPass(ModulePass):
    name = "simplify-arith"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for nested in list(op.walk()):
            if nested.parent is None:
                continue  # erased with an enclosing op
            if isinstance(nested, arith.CmpiOp):
                decided = _fold_compare(nested)
                if decided is not None:
                    Rewriter.replace_op(nested, _bool(decided))
            elif isinstance(nested, arith.AndIOp) and nested.result.type == IntegerType(1):
                folded = _fold_and(nested)
                if isinstance(folded, bool):
                    Rewriter.replace_op(nested, _bool(folded))
                elif folded is not None:
                    Rewriter.replace_op(nested, [], [folded])
            elif isinstance(nested, scf.IfOp):
                _fold_if(nested)
        _erase_dead(op)


def _fold_if(op: scf.IfOp) -> None:
    """An ``scf.if`` on a known condition becomes the region it takes."""
    taken = _known_bool(op.cond)
    if taken is None:
        return
    region = op.true_region if taken else op.false_region
    if not region.blocks:
        if not op.results:
            Rewriter.erase_op(op)
        return
    block = region.block
    terminator = block.last_op
    results = list(terminator.operands) if terminator is not None else []
    if terminator is not None:
        Rewriter.erase_op(terminator)
    Rewriter.inline_block(block, InsertPoint.before(op))
    Rewriter.replace_op(op, [], results)


def _erase_dead(module: ModuleOp) -> None:
    """Drops the constants and comparisons the folds left without uses."""
    changed = True
    while changed:
        changed = False
        for nested in list(module.walk()):
            if isinstance(nested, (arith.ConstantOp, arith.CmpiOp, arith.AndIOp)) and nested.parent is not None \
                    and all(not r.uses for r in nested.results):
                Rewriter.erase_op(nested)
                changed = True
