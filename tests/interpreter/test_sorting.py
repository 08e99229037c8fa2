"""sort and topk in the reference interpreter, against XLA:CPU running the
same HLO text, and against JAX for jnp/lax sorting functions."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
import xlapy.interpreter  # registers the rules
import xlapy.interpreter.sorting as sorting
from tools.compare import assert_same
from tools.xla_cpu import run_on_xla_cpu
from xlapy.frontends.jax import from_jax, optimized_from_jax
from xlapy.interpreter.evaluator import Evaluator, evaluate

_DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32, "u8": np.uint8, "s64": np.int64,
           "pred": np.bool_, "f16": np.float16}


def _check(text: str, *args: Any) -> None:
    assert_same(evaluate(xlapy.parse_hlo(text), *args), run_on_xla_cpu(text, *args), exact_bits=True)


def _values(rng: np.random.Generator, shape: tuple[int, ...], element_type: str) -> np.ndarray:
    """Values with many ties; floats also with NaNs of both signs, infinities and zeros of both signs."""
    if element_type == "pred":
        return rng.random(shape) < 0.5
    if element_type in ("s32", "u8", "s64"):
        return rng.integers(0 if element_type == "u8" else -5, 6, shape).astype(_DTYPES[element_type])
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.5])
    values = np.where(rng.random(shape) < 0.4, rng.choice(specials, shape), rng.standard_normal(shape).round(1))
    return values.astype(_DTYPES[element_type])


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))


def _sort_text(comparator: str, types: list[str], shape: tuple[int, ...], dimension: int) -> str:
    """A sort of one parameter per element type in ``types``, with a comparator
    whose parameters are lhs0, rhs0, lhs1, rhs1, ... (``{Tn}`` is operand n's type)."""
    for n, element_type in enumerate(types):
        comparator = comparator.replace(f"{{T{n}}}", element_type)
    params = "\n".join(f"  p{n} = {t}[{_dims(shape)}] parameter({n})" for n, t in enumerate(types))
    result = ", ".join(f"{t}[{_dims(shape)}]" for t in types)
    result = f"({result})" if len(types) > 1 else result
    operands = ", ".join(f"p{n}" for n in range(len(types)))
    return (f"HloModule sort\n\ncompare {{\n{comparator}\n}}\n\nENTRY main {{\n{params}\n"
            f"  ROOT sort = {result} sort({operands}), dimensions={{{dimension}}}, is_stable=true, "
            f"to_apply=compare\n}}\n")


def _params(types: list[str]) -> str:
    return "\n".join(f"  lhs{n} = {t}[] parameter({2 * n})\n  rhs{n} = {t}[] parameter({2 * n + 1})"
                     for n, t in enumerate(types))


_LT = "  ROOT less = pred[] compare(lhs0, rhs0), direction=LT"
_GT_TOTAL = "  ROOT greater = pred[] compare(lhs0, rhs0), direction=GT, type=TOTALORDER"
_LT_TOTAL = "  ROOT less = pred[] compare(lhs0, rhs0), direction=LT, type=TOTALORDER"
_SWAPPED_GT = "  ROOT greater = pred[] compare(rhs0, lhs0), direction=GT"  # the same as lhs0 < rhs0
# JAX's float comparator: NaNs made positive, -0 made +0, then total order.
_JAX_FLOAT = """  ne.l = pred[] compare(lhs0, lhs0), direction=NE
  qnan = {T0}[] constant(nan)
  zero = {T0}[] constant(0)
  eq.l = pred[] compare(lhs0, zero), direction=EQ
  zeroed.l = {T0}[] select(eq.l, zero, lhs0)
  canonical.l = {T0}[] select(ne.l, qnan, zeroed.l)
  ne.r = pred[] compare(rhs0, rhs0), direction=NE
  eq.r = pred[] compare(rhs0, zero), direction=EQ
  zeroed.r = {T0}[] select(eq.r, zero, rhs0)
  canonical.r = {T0}[] select(ne.r, qnan, zeroed.r)
  ROOT less = pred[] compare(canonical.l, canonical.r), direction=LT, type=TOTALORDER"""
# Lexicographic on two keys, as JAX writes it for num_keys=2.
_TWO_KEYS = """  less0 = pred[] compare(lhs0, rhs0), direction=LT, type=TOTALORDER
  equal0 = pred[] compare(lhs0, rhs0), direction=EQ, type=TOTALORDER
  less1 = pred[] compare(lhs1, rhs1), direction=LT
  tie = pred[] and(equal0, less1)
  ROOT less = pred[] or(less0, tie)"""
# Descending on key 0, then ascending on key 1, written with select.
_SELECT_KEYS = """  greater0 = pred[] compare(lhs0, rhs0), direction=GT
  equal0 = pred[] compare(lhs0, rhs0), direction=EQ
  less1 = pred[] compare(lhs1, rhs1), direction=LT
  ROOT less = pred[] select(equal0, less1, greater0)"""
# Keys that are a function of the operand: |x| mod 4.
_FUNCTION_KEY = """  abs.l = {T0}[] abs(lhs0)
  abs.r = {T0}[] abs(rhs0)
  four = {T0}[] constant(4)
  mod.l = {T0}[] remainder(abs.l, four)
  mod.r = {T0}[] remainder(abs.r, four)
  ROOT less = pred[] compare(mod.l, mod.r), direction=LT"""
# Not a lexicographic order of keys: the general path. Orders by lhs0 + lhs1.
_SUM = """  sum.l = {T0}[] add(lhs0, lhs1)
  sum.r = {T0}[] add(rhs0, rhs1)
  ROOT less = pred[] compare(sum.l, sum.r), direction=LT"""
# Lexicographic on keys x mod 2 (-1, 0, 1) then x.
_PARITY = """  two = {T0}[] constant(2)
  parity.l = {T0}[] remainder(lhs0, two)
  parity.r = {T0}[] remainder(rhs0, two)
  odd.l = pred[] compare(parity.l, parity.r), direction=LT
  same = pred[] compare(parity.l, parity.r), direction=EQ
  less = pred[] compare(lhs0, rhs0), direction=LT
  both = pred[] and(same, less)
  ROOT result = pred[] or(odd.l, both)"""
# Lexicographic, but with the tie test written as "neither less nor greater": the general path.
_NEITHER = """  less0 = pred[] compare(lhs0, rhs0), direction=LT
  greater0 = pred[] compare(lhs0, rhs0), direction=GT
  unequal0 = pred[] or(less0, greater0)
  equal0 = pred[] not(unequal0)
  less1 = pred[] compare(lhs1, rhs1), direction=GT
  tie = pred[] and(equal0, less1)
  ROOT less = pred[] or(less0, tie)"""

# name: (comparator, operand types, whether the fast path must recognise it)
_SORTS = {
    "lt_s32": (_LT, ["s32"], True),
    "lt_u8": (_LT, ["u8"], True),
    "lt_s64": (_LT, ["s64"], True),
    "lt_pred": (_LT, ["pred"], True),
    "swapped_gt_s32": (_SWAPPED_GT, ["s32"], True),
    "gt_total_f32": (_GT_TOTAL, ["f32"], True),
    "lt_total_bf16": (_LT_TOTAL, ["bf16"], True),
    "lt_total_f16": (_LT_TOTAL, ["f16"], True),
    "jax_f32": (_JAX_FLOAT, ["f32"], True),
    "jax_bf16_with_payload": (_JAX_FLOAT, ["bf16", "s32"], True),
    "two_keys": (_TWO_KEYS, ["f32", "s32"], True),
    "two_keys_three_operands": (_TWO_KEYS, ["f32", "s32", "bf16"], True),
    "select_keys": (_SELECT_KEYS, ["s32", "s32"], True),
    "function_key": (_FUNCTION_KEY, ["s32"], True),
    "sum_of_operands": (_SUM, ["s32", "s32"], False),
    "parity_then_value": (_PARITY, ["s32"], True),
    "neither_less_nor_greater": (_NEITHER, ["s32", "u8"], False),
}


_LAYOUTS = [((4, 13), 1), ((37, 3), 0), ((2, 9, 3), 1)]


# Each comparator on one of the layouts, in turn; the general path on all of them.
@pytest.mark.parametrize("name, shape, dimension",
                         [(name, *_LAYOUTS[i % len(_LAYOUTS)]) for i, name in enumerate(sorted(_SORTS))]
                         + [(name, *layout) for name in ("sum_of_operands", "neither_less_nor_greater")
                            for layout in _LAYOUTS[1:]])
def test_sort(name: str, shape: tuple[int, ...], dimension: int) -> None:
    comparator, types, fast = _SORTS[name]
    text = _sort_text(_params(types) + "\n" + comparator, types, shape, dimension)
    module = xlapy.parse_hlo(text)
    keys = sorting.lexicographic_keys(module.entry.root.called_computations[0], len(types))
    assert (keys is not None) == fast
    rng = np.random.default_rng(len(name) + dimension)
    _check(text, *[_values(rng, shape, t) for t in types])


@pytest.mark.parametrize("name", ["lt_s32", "sum_of_operands"])
@pytest.mark.parametrize("shape", [(3, 0), (0, 4), (2, 1)])
def test_sort_degenerate_shapes(name: str, shape: tuple[int, ...]) -> None:
    comparator, types, _ = _SORTS[name]
    text = _sort_text(_params(types) + "\n" + comparator, types, shape, 1)
    rng = np.random.default_rng(0)
    _check(text, *[_values(rng, shape, t) for t in types])


def test_partial_order_floats_without_nan() -> None:
    # A plain LT on floats is a strict weak order once there are no NaNs (-0 ties +0).
    text = _sort_text(_params(["f32", "s32"]) + "\n" + _LT, ["f32", "s32"], (3, 20), 1)
    rng = np.random.default_rng(1)
    keys = rng.choice(np.array([0.0, -0.0, 1.0, -np.inf, np.inf, 2.5], np.float32), (3, 20))
    _check(text, keys, np.arange(60, dtype=np.int32).reshape(3, 20))


@pytest.mark.parametrize("name", ["jax_f32", "two_keys", "select_keys", "function_key", "lt_s32"])
@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
def test_merge_sort_matches_lexsort(name: str, n: int) -> None:
    # The general path on comparators the fast path also handles.
    comparator, types, _ = _SORTS[name]
    text = _sort_text(_params(types) + "\n" + comparator, types, (3, n), 1)
    module = xlapy.parse_hlo(text)
    computation = module.entry.root.called_computations[0]
    rng = np.random.default_rng(n)
    values = [_values(rng, (3, n), t) for t in types]
    ev = Evaluator(module)
    fast = sorting._lexsort_permutation(values, sorting.lexicographic_keys(computation, len(types)), ev)
    np.testing.assert_array_equal(sorting._merge_sort_permutation(values, computation, ev), fast)


def test_sorts_from_jax() -> None:
    rng = np.random.default_rng(2)
    x = _values(rng, (6, 10), "f32")
    y = rng.integers(0, 3, (6, 10)).astype(np.int32)

    def sorts(x, y):
        return (jnp.sort(x, axis=0), jnp.argsort(x, axis=1), jnp.argsort(y, axis=1, descending=True),
                jax.lax.sort((y, x), num_keys=2), jnp.sort(x.astype(jnp.bfloat16), axis=1))

    assert_same(evaluate(from_jax(sorts, x, y), x, y), jax.jit(sorts)(x, y), exact_bits=True)


# -- topk -----------------------------------------------------------------------

def _topk_text(element_type: str, shape: tuple[int, ...], k: int, largest: bool) -> str:
    out = (*shape[:-1], k)
    return (f"HloModule topk\n\nENTRY main {{\n  x = {element_type}[{_dims(shape)}] parameter(0)\n"
            f"  ROOT topk = ({element_type}[{_dims(out)}], s32[{_dims(out)}]) topk(x), k={k}, "
            f"largest={'true' if largest else 'false'}\n}}\n")


@pytest.mark.parametrize("element_type, shape, k", [
    ("f32", (12,), 5), ("f32", (3, 10), 10), ("f32", (2, 3, 7), 1), ("bf16", (3, 10), 4), ("s32", (2, 3, 7), 3),
    ("u8", (12,), 12),
])
def test_topk(element_type: str, shape: tuple[int, ...], k: int) -> None:
    rng = np.random.default_rng(k)
    _check(_topk_text(element_type, shape, k, True), _values(rng, shape, element_type))


def test_topk_smallest() -> None:
    rng = np.random.default_rng(3)
    text = _topk_text("f32", (4, 9), 4, False)
    _check(text, _values(rng, (4, 9), "f32"))


def test_top_k_from_jax() -> None:
    rng = np.random.default_rng(4)
    x = _values(rng, (5, 8), "f32")
    assert_same(evaluate(from_jax(lambda x: jax.lax.top_k(x, 3), x), x), jax.jit(lambda x: jax.lax.top_k(x, 3))(x),
                exact_bits=True)


_TOPK_CUSTOM_CALL = """HloModule topk_custom_call

greater {
  value.l = f32[] parameter(0)
  value.r = f32[] parameter(1)
  index.l = s32[] parameter(2)
  index.r = s32[] parameter(3)
  ROOT greater = pred[] compare(value.l, value.r), direction=GT
}

ENTRY main {
  x = f32[4,9] parameter(0)
  ROOT topk = (f32[4,3], s32[4,3]) custom-call(x), custom_call_target="TopK", called_computations={greater}
}
"""


def test_top_k_custom_call() -> None:
    # The form XLA:CPU gives top_k; ties keep the lower index first.
    x = np.random.default_rng(5).integers(-3, 3, (4, 9)).astype(np.float32)
    _check(_TOPK_CUSTOM_CALL, x)


def test_keys_ignore_annotations() -> None:
    # The two sides of a key often differ only in metadata.
    comparator = _FUNCTION_KEY.replace("abs(lhs0)", 'abs(lhs0), metadata={op_name="abs" source_line=1}')
    text = _sort_text(_params(["s32"]) + "\n" + comparator, ["s32"], (9,), 0)
    computation = xlapy.parse_hlo(text).entry.root.called_computations[0]
    assert sorting.lexicographic_keys(computation, 1) is not None


def test_sorts_from_optimized_jax() -> None:
    # Comparators as XLA:CPU rewrites them.
    rng = np.random.default_rng(6)
    x = rng.integers(-5, 5, (5, 8)).astype(np.int32)

    def sorts(x):
        return jnp.sort(x, axis=1), jnp.argsort(x, axis=0, descending=True), jax.lax.top_k(x, 3)

    module = optimized_from_jax(sorts, x)
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode == "sort":
                assert sorting.lexicographic_keys(instr.called_computations[0], len(instr.operands)) is not None
    assert_same(evaluate(module, x), jax.jit(sorts)(x), exact_bits=True)
