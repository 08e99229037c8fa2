"""``unroll-loops`` (one step of the example in XLA's docs/emitters.md; the unrolling half of XLA's
``optimize_loops.cc``).

An ``scf.for`` with constant bounds and step is replaced by one copy of its
body per iteration, the induction variable replaced by an ``arith.constant``
and the iter_args threaded from one copy to the next, when the loop is small:

- at most ``MAX_TRIP_COUNT`` = 64 iterations, and
- trip count × body cost ≤ ``MAX_UNROLLED_COST`` = 2048.

The body cost counts every op of the body (nested regions included) as 1,
except float ``math`` ops that expand into many instructions (``tanh``,
``exp``, ``log``, ...: 20, XLA's estimate) and calls or loops still left in
the body (the whole budget: the loop is not unrolled). XLA budgets 400 per
loop and then unrolls only partially by a factor dividing the trip count; here
loops are only unrolled fully, so the budget is larger: 64 iterations of a
body of ~32 cheap ops, which still compiles quickly with LLVM's O3 on the CPU
while removing every loop over vector lanes (``vector_index`` has at most 64
values). Inner loops are unrolled first, so the cost of an outer loop is that
of its unrolled body.

In a CPU kernel (an entry function with ``xla.backend_kind = "cpu"``, set by
the loop emitter) a loop over vector lanes whose lanes ``vectorize-lanes``
turns into SIMD vector ops as a loop (``vectorizes_as_loop``) is not
unrolled: copying its body once per lane would only multiply the work of the
passes in between (64 lanes of gelu: ~10x the pipeline's time).

``max_unrolled_cost`` (the pass's option) is the budget of loops over the
lanes of a vector (``lane_loop``: the induction variable picks a lane of a
``vector.extract`` or ``vector.insert``); the CPU pipeline makes it large, as
such a loop left rolled would extract lanes at a dynamic position. Every other
loop keeps ``MAX_UNROLLED_COST`` at most: unrolling a reduction's loop over
rows around its unrolled lanes (f32[64,64] summed: 4096 copies of the body)
only multiplies the time of the passes and of LLVM (seconds instead of
milliseconds) for a serial chain of adds that runs no faster.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, math, scf, vector
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsolatedFromAbove

from xlapy.codegen.dialect import PureCallOp
from xlapy.codegen.launch import BACKEND_KIND
from xlapy.codegen.passes.vectorize_lanes import vectorizes_as_loop

MAX_TRIP_COUNT = 64
MAX_UNROLLED_COST = 2048
EXPENSIVE_MATH_COST = 20

# Float math ops that lower to one or a few instructions (XLA's list of cheap ones).
_CHEAP_MATH = (
    math.AbsFOp,
    math.CeilOp,
    math.CopySignOp,
    math.FloorOp,
    math.FmaOp,
    math.RoundEvenOp,
    math.RoundOp,
    math.RsqrtOp,
    math.SqrtOp,
    math.TruncOp,
)
# Ops that make a body too big to copy: a call may be large, a loop that could not be unrolled stays a loop.
_NEVER_COPIED = (scf.ForOp, func.CallOp, PureCallOp)


def _constant_int(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def trip_count(loop: scf.ForOp) -> int | None:
    """The number of iterations when the bounds and a positive step are constants."""
    lb, ub, step = (_constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


def _op_cost(op: Operation) -> int:
    if isinstance(op, _NEVER_COPIED):
        return MAX_UNROLLED_COST + 1
    is_float = any(isinstance(getattr(t, "element_type", t), AnyFloat) for t in op.result_types)
    if op.dialect_name() == "math" and not isinstance(op, _CHEAP_MATH) and is_float:
        return EXPENSIVE_MATH_COST
    return 1


def body_cost(loop: scf.ForOp) -> int:
    """A rough size of one copy of the body (its terminator excluded)."""
    return sum(_op_cost(op) for op in loop.body.walk() if not isinstance(op, scf.YieldOp) or op.parent_op() is not loop)


def keeps_vector_lanes(loop: scf.ForOp) -> bool:
    """Whether ``loop`` is a loop over vector lanes of a CPU kernel that ``vectorize-lanes`` turns into SIMD vector
    ops as it is."""
    function = loop.parent_op()
    while function is not None and not isinstance(function, func.FuncOp):
        function = function.parent_op()
    if function is None or function.attributes.get(BACKEND_KIND) != StringAttr("cpu"):
        return False
    return vectorizes_as_loop(loop)


def lane_loop(loop: scf.ForOp) -> bool:
    """Whether ``loop`` reads or writes the lanes of a vector: its induction variable is the position of a
    ``vector.extract`` or ``vector.insert``."""
    iv = loop.body.block.args[0]
    return any(isinstance(use.operation, (vector.ExtractOp, vector.InsertOp)) and iv in use.operation.dynamic_position
               for use in iv.uses)


def should_unroll(loop: scf.ForOp, max_unrolled_cost: int = MAX_UNROLLED_COST) -> bool:
    """``max_unrolled_cost`` budgets the loops over vector lanes; other loops get ``MAX_UNROLLED_COST`` at most."""
    count = trip_count(loop)
    if count is None or count > MAX_TRIP_COUNT:
        return False
    budget = max_unrolled_cost if lane_loop(loop) else min(max_unrolled_cost, MAX_UNROLLED_COST)
    return count * body_cost(loop) <= budget and not keeps_vector_lanes(loop)


def _constants_before(loop: scf.ForOp) -> dict[tuple[int, Attribute], SSAValue]:
    """Integer constants defined before the loop in its block or an enclosing
    one up to the function (they dominate the unrolled copies)."""
    constants: dict[tuple[int, Attribute], SSAValue] = {}
    anchor: Operation | None = loop
    while anchor is not None and (block := anchor.parent_block()) is not None:
        for op in block.ops:
            if op is anchor:
                break
            value = _constant_int(op.results[0]) if isinstance(op, arith.ConstantOp) else None
            if value is not None:
                constants.setdefault((value, op.results[0].type), op.results[0])
        anchor = block.parent_op()
        if anchor is not None and anchor.has_trait(IsolatedFromAbove):
            break
    return constants


def unroll(loop: scf.ForOp) -> None:
    """Replaces the loop by its iterations (constant bounds and step required)."""
    count = trip_count(loop)
    assert count is not None, "unroll needs constant bounds"
    lb, step = _constant_int(loop.lb), _constant_int(loop.step)
    assert lb is not None and step is not None
    block = loop.body.block
    iv, *iter_args = block.args
    values: list[SSAValue] = list(loop.iter_args)
    here = InsertPoint.before(loop)
    constants = _constants_before(loop)
    for i in range(count):
        value = lb + i * step
        if (value, iv.type) not in constants:
            constant = arith.ConstantOp(IntegerAttr(value, iv.type))
            constant.result.name_hint = f"c{value}"
            Rewriter.insert_op(constant, here)
            constants[value, iv.type] = constant.result
        mapping: dict[SSAValue, SSAValue] = {iv: constants[value, iv.type], **dict(zip(iter_args, values))}
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                values = [mapping.get(v, v) for v in op.arguments]
            else:
                # clone() adds the copy's results to the mapping for the ops after it.
                Rewriter.insert_op(op.clone(mapping), here)
    for result, value in zip(loop.results, values):
        result.replace_all_uses_with(value)
    Rewriter.erase_op(loop)


def _loops_innermost_first(op: Operation) -> list[scf.ForOp]:
    loops: list[scf.ForOp] = []
    for region in op.regions:
        for block in region.blocks:
            for nested in block.ops:
                loops += _loops_innermost_first(nested)
    if isinstance(op, scf.ForOp):
        loops.append(op)
    return loops


def unroll_loops(module: ModuleOp, max_unrolled_cost: int = MAX_UNROLLED_COST) -> None:
    for loop in _loops_innermost_first(module):
        if should_unroll(loop, max_unrolled_cost):
            unroll(loop)


@dataclass(frozen=True)
class UnrollLoopsPass(ModulePass):
    """Fully unrolls small constant-bound ``scf.for`` loops (see the module docstring).
    ``max_unrolled_cost`` replaces ``MAX_UNROLLED_COST`` for loops over vector lanes (the CPU pipeline's is
    large; lane loops that ``vectorize-lanes`` turns into vector ops stay loops whatever it is)."""

    name = "unroll-loops"

    max_unrolled_cost: int = MAX_UNROLLED_COST

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        unroll_loops(op, self.max_unrolled_cost)
