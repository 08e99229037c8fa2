"""lower-apply-indexing: the arith ops it emits are run by a small evaluator
(64-bit wrap-around, so an unsigned division of a negative value gives a wrong
answer) at every point of the map's domain and compared with
IndexingMap.evaluate; the op choice (divui/remui vs floordivsi/remsi) and the
per-op cache are checked on the printed IR."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.codegen.mlir_text import print_mlir, verify_op
from xlapy.codegen.passes.lower_apply_indexing import LowerApplyIndexingPass
from xlapy.indexing import IndexingMap

# --- a tiny evaluator of the ops the loop and indexing lowerings emit ---

_MASK = (1 << 64) - 1


def _wrap(value: int) -> int:
    value &= _MASK
    return value - (1 << 64) if value >> 63 else value


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


_BINARY: dict[str, Callable[[int, int], int]] = {
    "arith.addi": lambda a, b: _wrap(a + b),
    "arith.subi": lambda a, b: _wrap(a - b),
    "arith.muli": lambda a, b: _wrap(a * b),
    "arith.divui": lambda a, b: _wrap((a & _MASK) // (b & _MASK)),
    "arith.remui": lambda a, b: _wrap((a & _MASK) % (b & _MASK)),
    "arith.divsi": _trunc_div,
    "arith.remsi": lambda a, b: a - b * _trunc_div(a, b),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.ceildivsi": lambda a, b: -((-a) // b),
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
}

_CMPI = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b,
    "sgt": lambda a, b: a > b,
    "sge": lambda a, b: a >= b,
    "ult": lambda a, b: (a & _MASK) < (b & _MASK),
    "ule": lambda a, b: (a & _MASK) <= (b & _MASK),
    "ugt": lambda a, b: (a & _MASK) > (b & _MASK),
    "uge": lambda a, b: (a & _MASK) >= (b & _MASK),
}
_CMPI_NAMES = list(_CMPI)


def run_block(block: Block, env: dict[SSAValue, object]) -> list[object]:
    """Runs the ops of ``block``; returns the operands of its terminator."""
    for op in block.ops:
        values = [env[v] for v in op.operands]
        if isinstance(op, func.ReturnOp | scf.YieldOp):
            return values
        env.update(zip(op.results, run_op(op, values, env)))
    return []


def run_op(op: Operation, values: list, env: dict[SSAValue, object]) -> Sequence[object]:
    """The results of ``op``; nested blocks see (and, SSA being what it is, may extend) ``env``."""
    if isinstance(op, arith.ConstantOp):
        assert isinstance(op.value, IntegerAttr)
        return [op.value.value.data]
    if op.name in _BINARY:
        return [_BINARY[op.name](int(values[0]), int(values[1]))]
    if isinstance(op, arith.CmpiOp):
        return [int(_CMPI[_CMPI_NAMES[op.predicate.value.data]](*values))]
    if isinstance(op, arith.SelectOp):
        return [values[1] if values[0] else values[2]]
    if isinstance(op, ApplyIndexingOp):
        dims = values[: len(op.dims)]
        return list(op.indexing_map.evaluate(dims, values[len(op.dims) :]))
    if isinstance(op, tensor.ExtractOp):
        return [int(values[0][tuple(values[1:])])]
    if isinstance(op, tensor.InsertOp):
        updated = values[1].copy()
        updated[tuple(values[2:])] = values[0]
        return [updated]
    if isinstance(op, scf.ForOp):
        lower, upper, step, *iters = values
        for i in range(lower, upper, step):
            env.update(zip(op.body.block.args, [i, *iters]))
            iters = run_block(op.body.block, env)
        return iters
    if isinstance(op, scf.IfOp):
        return run_block((op.true_region if values[0] else op.false_region).block, env)
    raise AssertionError(f"the test evaluator does not know {op.name}")


def run_function(function: func.FuncOp, *args: object) -> list[object]:
    return run_block(function.body.block, dict(zip(function.body.block.args, args)))


# --- helpers ---


def apply_function(indexing_map: IndexingMap) -> tuple[ModuleOp, func.FuncOp]:
    """``func.func @f(dims..., symbols...) -> (index...)`` returning one apply_indexing."""
    count = len(indexing_map.results)
    block = Block(arg_types=[IndexType()] * (indexing_map.num_dims + indexing_map.num_symbols))
    dims, symbols = block.args[: indexing_map.num_dims], block.args[indexing_map.num_dims :]
    apply = ApplyIndexingOp(dims, symbols, indexing_map)
    block.add_ops([apply, func.ReturnOp(*apply.indices)])
    function = func.FuncOp("f", ([IndexType()] * len(block.args), [IndexType()] * count), Region(block))
    return ModuleOp([function]), function


def lower(indexing_map: IndexingMap) -> tuple[ModuleOp, func.FuncOp]:
    module, function = apply_function(indexing_map)
    LowerApplyIndexingPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    assert not [op for op in module.walk() if isinstance(op, ApplyIndexingOp)]
    return module, function


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("arith.")]


GELU_MAP = (
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index), "
    "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]"
)

MAPS = [
    # The thread map of the gelu example in XLA's docs/emitters.md (smaller bounds): everything non-negative.
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 7], bl_x in [0, 40], vector_index in [0, 3]",
    # Negative dividends: floordiv, mod and ceildiv of values below zero.
    "(d0, d1) -> ((d0 - 5) floordiv 3, (d0 - 5) mod 3, (d1 - 7) ceildiv 4, d1 ceildiv 4), "
    "domain: d0 in [0, 11], d1 in [0, 9]",
    # Subtraction, negation and a sum with a negative constant.
    "(d0)[s0] -> (d0 - s0, -d0, d0 * 3 - 7, (s0 - d0) mod 4), domain: d0 in [0, 6], s0 in [0, 5]",
    # Negative dimension bounds.
    "(d0) -> (d0 floordiv 2, d0 mod 2, (d0 * 5 + 3) floordiv 4), domain: d0 in [-9, 9]",
    # A constraint (the lowering may assume it) and a constant result.
    "(d0, d1) -> (d0 floordiv 2 + d1, 7), domain: d0 in [0, 15], d1 in [0, 3], d0 mod 2 in [0, 0]",
    # No variables at all.
    "() -> (3, 4)",
]


@pytest.mark.parametrize("text", MAPS)
def test_lowered_values_match_the_map(text: str) -> None:
    indexing_map = IndexingMap.parse(text)
    _, function = lower(indexing_map)
    points = list(indexing_map.domain())
    assert points
    for dims, symbols in points:
        assert tuple(run_function(function, *dims, *symbols)) == indexing_map.evaluate(dims, symbols), (dims, symbols)


def test_non_negative_dividends_use_unsigned_division() -> None:
    module, _ = lower(IndexingMap.parse(GELU_MAP))
    names = op_names(module)
    assert names.count("arith.divui") == 2 and names.count("arith.remui") == 2
    assert not {"arith.floordivsi", "arith.remsi", "arith.select"} & set(names)


def test_negative_dividends_use_signed_division_with_fixup() -> None:
    # (d0 - 5) floordiv 3 over [0, 11] would be rewritten to (d0 + 1) floordiv 3 - 2 by the simplifier.
    module, _ = lower(IndexingMap.parse("(d0) -> (d0 floordiv 3, d0 mod 3), domain: d0 in [-9, 9]"))
    printed = print_mlir(module)
    names = op_names(module)
    assert names.count("arith.floordivsi") == 1 and names.count("arith.remsi") == 1
    assert "arith.divui" not in names and "arith.remui" not in names
    # The remainder is moved into [0, 3) when remsi gives a negative value.
    assert "arith.cmpi slt" in printed and "arith.select" in printed


def test_shared_subexpressions_are_emitted_once() -> None:
    module, _ = lower(
        IndexingMap.parse(
            "(d0, d1) -> ((d0 floordiv 8) * 4 + d1, (d0 floordiv 8) * 4, d0 floordiv 8), "
            "domain: d0 in [0, 63], d1 in [0, 3]"
        )
    )
    names = op_names(module)
    assert names.count("arith.divui") == 1
    assert names.count("arith.muli") == 1
    assert names.count("arith.addi") == 1


def test_identity_results_need_no_ops() -> None:
    module, function = lower(IndexingMap.parse("(d0, d1) -> (d1, d0), domain: d0 in [0, 3], d1 in [0, 3]"))
    assert op_names(module) == []
    ret = function.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    assert list(ret.arguments) == [function.body.block.args[1], function.body.block.args[0]]


def test_evaluator_wraps_unsigned_division() -> None:
    # The check above relies on this: divui of a negative index is not floordiv.
    assert _BINARY["arith.divui"](-6, 3) != -2
    assert _BINARY["arith.remsi"](-7, 3) == -1
    assert np.int64(_wrap(1 << 63)) == np.iinfo(np.int64).min
