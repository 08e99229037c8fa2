"""The gather expander in XLA:CPU's mode, ``kEliminateSimpleGathers``
(``xla/service/gather_expander.cc``): broadcast-like gathers and gathers of one
index vector go, the others stay for the loop emitter; values against the
interpreter's gather on random simple gathers and JAX's indexing."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.compare import assert_same
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter.evaluator import evaluate
from xlapy.transforms.gather_expander import GatherExpander


def _expanded(text: str) -> Any:
    module = parse_module(text)
    GatherExpander().run(module)
    verify(module)
    return module


def _module(gather: str, operand: str = "f32[3,4]", indices: str = "s32[1,1]") -> str:
    return f"""
HloModule m
ENTRY main {{
  operand = {operand} parameter(0)
  indices = {indices} parameter(1)
  ROOT g = {gather}
}}
"""


ONE_ROW = _module("f32[1,4] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0}, "
                  "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}")


def test_a_gather_of_one_index_becomes_a_dynamic_slice():
    assert _expanded(ONE_ROW).to_text().split(" -> f32[1,4] {\n")[1] == """  %operand = f32[3,4]{1,0} parameter(0)
  %indices = s32[1,1]{1,0} parameter(1)
  %reshape = s32[1]{0} reshape(%indices)
  %slice = s32[1]{0} slice(%reshape), slice={[0:1]}
  %reshape.1 = s32[] reshape(%slice)
  %constant = s32[] constant(0)
  ROOT %dynamic-slice = f32[1,4]{1,0} dynamic-slice(%operand, %reshape.1, %constant), dynamic_slice_sizes={1,4}
}

"""


def test_a_gather_of_the_whole_operand_becomes_a_broadcast():
    text = _module("f32[5,3,4] gather(operand, indices), offset_dims={1,2}, collapsed_slice_dims={}, "
                   "start_index_map={0}, index_vector_dim=1, slice_sizes={3,4}", indices="s32[5,1]")
    entry = _expanded(text).entry
    root = entry.root
    assert (root.opcode, str(root.shape), root.attr("dimensions")) == ("broadcast", "f32[5,3,4]{2,1,0}", (1, 2))
    assert root.operands[0].name == "operand"


def test_gathers_of_several_indices_and_empty_gathers_stay():
    several = ONE_ROW.replace("s32[1,1]", "s32[2,1]").replace("f32[1,4] gather", "f32[2,4] gather")
    assert not GatherExpander().run(parse_module(several))
    empty = _module("f32[0,4] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0}, "
                    "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}", indices="s32[0,1]")
    assert not GatherExpander().run(parse_module(empty))


def _braces(values: list[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


@st.composite
def simple_gathers(draw: Any) -> tuple[str, list[Any]]:
    """A random gather of one index vector, or of whole-operand slices, with
    arguments (starts partly out of bounds: gather clamps them)."""
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 4)) for _ in range(rank)]
    broadcast = draw(st.booleans())
    sizes = list(dims) if broadcast else [draw(st.integers(0, d)) for d in dims]
    collapsible = [d for d in range(rank) if sizes[d] == 1]
    collapsed = sorted(draw(st.sets(st.sampled_from(collapsible))) if collapsible else [])
    start_index_map = draw(st.permutations(range(rank)).map(list))[:draw(st.integers(1, rank))]
    batch = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))] if broadcast else [1] * draw(
        st.integers(0, 2))
    index_vector_dim = draw(st.integers(0, len(batch)))
    index_dims = [*batch[:index_vector_dim], len(start_index_map), *batch[index_vector_dim:]]
    offsets = [sizes[d] for d in range(rank) if d not in collapsed]
    output_rank = len(batch) + len(offsets)
    offset_dims = sorted(draw(st.permutations(range(output_rank)).map(list))[:len(offsets)])
    output, offset_iter, batch_iter = [], iter(offsets), iter(batch)
    for position in range(output_rank):
        output.append(next(offset_iter) if position in offset_dims else next(batch_iter))
    gather = (f"f32[{','.join(map(str, output))}] gather(operand, indices), offset_dims={_braces(offset_dims)}, "
              f"collapsed_slice_dims={_braces(collapsed)}, start_index_map={_braces(start_index_map)}, "
              f"index_vector_dim={index_vector_dim}, slice_sizes={_braces(sizes)}")
    text = _module(gather, f"f32[{','.join(map(str, dims))}]", f"s32[{','.join(map(str, index_dims))}]")
    random = np.random.default_rng(draw(st.integers(0, 2**31)))
    arguments = [random.standard_normal(dims).astype(np.float32),
                 random.integers(-2, max(dims) + 2, index_dims).astype(np.int32)]
    return text, arguments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(simple_gathers())
def test_expanded_gathers_compute_what_gather_computes(case: tuple[str, list[Any]]) -> None:
    text, arguments = case
    original = parse_module(text)
    verify(original)
    expected = evaluate(original, *arguments)
    expanded = _expanded(text)
    if original.entry.root.shape.element_count:
        assert not any(i.opcode == "gather" for i in expanded.instructions), text
    assert_same(evaluate(expanded, *arguments), expected, context=expanded.to_text())


def test_jax_indexing_with_one_index():
    from xlapy.frontends.jax import from_jax

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    module = from_jax(lambda x, i: (x[i], x[:, i], x[i, 1]), x, np.int32(2))
    text = module.to_text()
    for index in (np.int32(2), np.int32(-1), np.int32(7)):
        expected = evaluate(parse_module(text), x, index)
        assert_same(evaluate(_expanded(text), x, index), expected)
