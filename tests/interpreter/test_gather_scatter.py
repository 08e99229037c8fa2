"""gather and scatter in the reference interpreter, against XLA:CPU running
the same HLO text."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlapy
import xlapy.interpreter  # registers the rules
from tools.compare import assert_same
from tools.xla_cpu import run_on_xla_cpu
from xlapy.interpreter.evaluator import evaluate

_DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32, "pred": np.bool_, "u8": np.uint8,
           "s64": np.int64, "u32": np.uint32, "s8": np.int8, "f16": np.float16}


def _values(rng: np.random.Generator, shape: tuple[int, ...], element_type: str) -> np.ndarray:
    dtype = _DTYPES[element_type]
    if element_type == "pred":
        return rng.random(shape) < 0.5
    if element_type in ("f32", "bf16", "f16"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)


def _indices(rng: np.random.Generator, shape: tuple[int, ...], element_type: str, high: int) -> np.ndarray:
    """Indices mostly in [0, high), some beyond either end."""
    low = 0 if element_type.startswith("u") else -3
    return rng.integers(low, high + 3, shape).astype(_DTYPES[element_type])


def _check(text: str, *args: Any, **tolerance: Any) -> None:
    expected = run_on_xla_cpu(text, *args)
    got = evaluate(xlapy.parse_hlo(text), *args)
    assert_same(got, expected, **tolerance)


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))


# -- gather ---------------------------------------------------------------------

# name: (operand shape, indices shape, output shape, dimension numbers)
_GATHERS = {
    "rows": ((5, 4), (3,), (3, 4),
             "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}"),
    "two_component_index": ((6, 7, 8), (4, 2), (4, 3, 2),
                            "offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=1, "
                            "slice_sizes={1,3,2}"),
    "index_vector_dim_first": ((6, 7, 8), (2, 4), (4, 3, 2),
                               "offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={2,0}, "
                               "index_vector_dim=0, slice_sizes={1,3,2}"),
    "offsets_around_batch": ((6, 7, 8), (4, 5, 2), (2, 4, 5, 3),
                             "offset_dims={0,3}, collapsed_slice_dims={1}, start_index_map={1,2}, "
                             "index_vector_dim=2, slice_sizes={2,1,3}"),
    "implicit_index_vector": ((9, 4), (3, 2), (3, 2, 4),
                              "offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, "
                              "slice_sizes={1,4}"),
    "windows_clamped": ((8, 8), (5, 2), (5, 3, 2),
                        "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, "
                        "slice_sizes={3,2}"),
    "empty_index_vector": ((4, 3), (2, 0), (2, 2, 3),
                           "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={}, index_vector_dim=1, "
                           "slice_sizes={2,3}"),
    "no_indices": ((6, 7, 8), (0, 2), (0, 3, 2),
                   "offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=1, "
                   "slice_sizes={1,3,2}"),
    "batching": ((3, 5, 4), (3, 2, 1), (3, 2, 4),
                 "offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
                 "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}"),
    "batching_two_dims_unsorted": ((2, 6, 3), (1, 3, 5, 2), (3, 5, 2, 2),
                                   "offset_dims={3}, collapsed_slice_dims={}, start_index_map={1}, "
                                   "operand_batching_dims={0,2}, start_indices_batching_dims={3,1}, "
                                   "index_vector_dim=0, slice_sizes={1,2,1}"),
}


def _gather_text(name: str, element_type: str, index_type: str) -> str:
    operand, indices, output, dims = _GATHERS[name]
    return (f"HloModule gather\n\nENTRY main {{\n"
            f"  operand = {element_type}[{_dims(operand)}] parameter(0)\n"
            f"  indices = {index_type}[{_dims(indices)}] parameter(1)\n"
            f"  ROOT gather = {element_type}[{_dims(output)}] gather(operand, indices), {dims}\n}}\n")


@pytest.mark.parametrize("name", sorted(_GATHERS))
def test_gather(name: str, element_type: str = "s32") -> None:
    rng = np.random.default_rng(len(name))
    operand, indices, _, _ = _GATHERS[name]
    _check(_gather_text(name, element_type, "s32"), _values(rng, operand, element_type),
           _indices(rng, indices, "s32", max(operand)), exact_bits=True)


@pytest.mark.parametrize("element_type, index_type", [("f32", "s32"), ("bf16", "s64"), ("pred", "u32"),
                                                      ("u8", "s8"), ("f16", "u8")])
def test_gather_element_and_index_types(element_type: str, index_type: str) -> None:
    rng = np.random.default_rng(1)
    operand, indices, _, _ = _GATHERS["two_component_index"]
    _check(_gather_text("two_component_index", element_type, index_type), _values(rng, operand, element_type),
           _indices(rng, indices, index_type, max(operand)), exact_bits=True)


def test_gather_from_jax_take_along_axis() -> None:
    # As jnp lowers fancy indexing: clamped starts, batch of two-component indices.
    import jax
    import jax.numpy as jnp

    from xlapy.frontends.jax import from_jax

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    idx = rng.integers(0, 6, (4, 3, 5)).astype(np.int32)

    def f(x, idx):
        return jnp.take_along_axis(x, idx, axis=1), x[:, idx[0, 0]]

    assert_same(evaluate(from_jax(f, x, idx), x, idx), jax.jit(f)(x, idx), exact_bits=True)


# -- scatter --------------------------------------------------------------------

_ADD = """
combine {
  a = {T}[] parameter(0)
  b = {T}[] parameter(1)
  ROOT r = {T}[] add(a, b)
}
"""
# Order-sensitive: 3*current - update. Duplicates must combine in update order.
_AFFINE = """
combine {
  a = {T}[] parameter(0)
  b = {T}[] parameter(1)
  three = {T}[] constant(3)
  m = {T}[] multiply(a, three)
  ROOT r = {T}[] subtract(m, b)
}
"""
_ASSIGN = """
combine {
  a = {T}[] parameter(0)
  ROOT b = {T}[] parameter(1)
}
"""
_MAX = """
combine {
  a = {T}[] parameter(0)
  b = {T}[] parameter(1)
  ROOT r = {T}[] maximum(a, b)
}
"""
_COMBINERS = {"add": _ADD, "affine": _AFFINE, "assign": _ASSIGN, "max": _MAX}

# name: (operand shape, indices shape, updates shape, dimension numbers)
_SCATTERS = {
    "rows_with_duplicates": ((6, 4), (10,), (10, 4),
                             "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                             "index_vector_dim=1"),
    "windows_partly_out_of_bounds": ((6, 5), (7, 1), (7, 2, 5),
                                     "update_window_dims={1,2}, inserted_window_dims={}, "
                                     "scatter_dims_to_operand_dims={0}, index_vector_dim=1"),
    "window_dims_around_scatter_dim": ((5, 6), (7,), (2, 7, 3),
                                       "update_window_dims={0,2}, inserted_window_dims={}, "
                                       "scatter_dims_to_operand_dims={1}, index_vector_dim=1"),
    "two_component_index": ((6, 7, 8), (4, 2), (4, 3, 2),
                            "update_window_dims={1,2}, inserted_window_dims={0}, "
                            "scatter_dims_to_operand_dims={2,0}, index_vector_dim=1"),
    "index_vector_dim_first": ((6, 7, 8), (2, 4), (4, 3, 2),
                               "update_window_dims={1,2}, inserted_window_dims={0}, "
                               "scatter_dims_to_operand_dims={0,2}, index_vector_dim=0"),
    "implicit_index_vector": ((9,), (5, 3), (5, 3),
                              "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                              "index_vector_dim=2"),
    "batching": ((3, 5, 4), (3, 2, 1), (3, 2, 4),
                 "update_window_dims={2}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, "
                 "input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2"),
    "batching_two_dims_unsorted": ((2, 6, 3), (1, 3, 5, 2), (3, 5, 2, 2),
                                   "update_window_dims={3}, inserted_window_dims={}, "
                                   "scatter_dims_to_operand_dims={1}, input_batching_dims={0,2}, "
                                   "scatter_indices_batching_dims={3,1}, index_vector_dim=0"),
    "empty_index_vector": ((4, 3), (3, 0), (3, 2, 3),
                           "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, "
                           "index_vector_dim=1"),
}


def _scatter_text(name: str, element_type: str, combiner: str, index_type: str = "s32") -> str:
    operand, indices, updates, dims = _SCATTERS[name]
    return (f"HloModule scatter\n{_COMBINERS[combiner].replace('{T}', element_type)}\nENTRY main {{\n"
            f"  operand = {element_type}[{_dims(operand)}] parameter(0)\n"
            f"  indices = {index_type}[{_dims(indices)}] parameter(1)\n"
            f"  updates = {element_type}[{_dims(updates)}] parameter(2)\n"
            f"  ROOT scatter = {element_type}[{_dims(operand)}] scatter(operand, indices, updates), {dims}, "
            f"to_apply=combine\n}}\n")


def _scatter_args(name: str, element_type: str, index_type: str = "s32", seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    operand, indices, updates, _ = _SCATTERS[name]
    # Few distinct indices, so duplicates are common.
    return (_values(rng, operand, element_type), _indices(rng, indices, index_type, max(operand, default=1)),
            _values(rng, updates, element_type))


@pytest.mark.parametrize("name", sorted(_SCATTERS))
def test_scatter_in_update_order(name: str) -> None:
    _check(_scatter_text(name, "s32", "affine"), *_scatter_args(name, "s32"))


@pytest.mark.parametrize("name", ["rows_with_duplicates", "windows_partly_out_of_bounds", "batching"])
def test_scatter_last_duplicate_wins(name: str) -> None:
    _check(_scatter_text(name, "s32", "assign"), *_scatter_args(name, "s32"))


@pytest.mark.parametrize("name, element_type, combiner", [
    ("rows_with_duplicates", "f32", "add"), ("rows_with_duplicates", "bf16", "add"),
    ("rows_with_duplicates", "u8", "add"), ("batching", "f32", "max"), ("batching", "bf16", "max"),
    ("windows_partly_out_of_bounds", "f32", "add"), ("windows_partly_out_of_bounds", "u8", "max"),
])
def test_scatter_types(name: str, element_type: str, combiner: str) -> None:
    # XLA:CPU combines duplicates in update order, as the interpreter does: exact (measured: 0 ulp over ten seeds).
    _check(_scatter_text(name, element_type, combiner), *_scatter_args(name, element_type, seed=3))


@pytest.mark.parametrize("index_type", ["s8", "u32", "s64"])
def test_scatter_index_types(index_type: str) -> None:
    name = "two_component_index"
    _check(_scatter_text(name, "s32", "affine", index_type), *_scatter_args(name, "s32", index_type))


_VARIADIC_SCATTER = """HloModule variadic_scatter

argmax {
  value_a = f32[] parameter(0)
  index_a = s32[] parameter(1)
  value_b = f32[] parameter(2)
  index_b = s32[] parameter(3)
  greater = pred[] compare(value_b, value_a), direction=GT
  equal = pred[] compare(value_b, value_a), direction=EQ
  lower = pred[] compare(index_b, index_a), direction=LT
  tie = pred[] and(equal, lower)
  take = pred[] or(greater, tie)
  value = f32[] select(take, value_b, value_a)
  index = s32[] select(take, index_b, index_a)
  ROOT result = (f32[], s32[]) tuple(value, index)
}

ENTRY main {
  values = f32[5,3] parameter(0)
  ids = s32[5,3] parameter(1)
  indices = s32[8,1] parameter(2)
  new_values = f32[8,3] parameter(3)
  new_ids = s32[8,3] parameter(4)
  ROOT scatter = (f32[5,3], s32[5,3]) scatter(values, ids, indices, new_values, new_ids), update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=argmax
}
"""


def test_variadic_scatter() -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(-3, 3, (5, 3)).astype(np.float32)  # small integers: many ties
    ids = rng.integers(0, 10, (5, 3)).astype(np.int32)
    indices = rng.integers(-1, 6, (8, 1)).astype(np.int32)
    new_values = rng.integers(-3, 3, (8, 3)).astype(np.float32)
    new_ids = rng.integers(0, 10, (8, 3)).astype(np.int32)
    _check(_VARIADIC_SCATTER, values, ids, indices, new_values, new_ids, exact_bits=True)


def test_scatter_from_jax_segment_sum() -> None:
    import jax

    from xlapy.frontends.jax import from_jax

    rng = np.random.default_rng(5)
    data = rng.integers(-100, 100, (12, 3)).astype(np.int32)
    segments = rng.integers(0, 5, 12).astype(np.int32)

    def f(data, segments):
        return jax.ops.segment_sum(data, segments, num_segments=4), jax.ops.segment_max(data, segments, 4)

    assert_same(evaluate(from_jax(f, data, segments), data, segments), jax.jit(f)(data, segments))
