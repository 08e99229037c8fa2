"""The scatter expander (XLA's ``ScatterExpander``, ``xla/service/scatter_expander.cc``):
the loop it builds, and the values it computes against the interpreter's scatter
on random scatters (indices in and out of bounds, repeated ones, variadic
scatters) and on JAX's scatters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter.evaluator import evaluate
from xlapy.transforms.scatter_expander import ScatterExpander

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

ROWS = f"""
HloModule m
{ADD}
ENTRY main {{
  operand = f32[5,3] parameter(0)
  indices = s32[4] parameter(1)
  updates = f32[4,3] parameter(2)
  ROOT s = f32[5,3] scatter(operand, indices, updates), to_apply=add, update_window_dims={{1}},
    inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1
}}
"""


def _expanded(text: str, hlo_pass: Any = None) -> Any:
    module = parse_module(text)
    (hlo_pass or ScatterExpander()).run(module)
    verify(module)
    return module


def test_a_scatter_becomes_a_counted_loop_of_dynamic_slices(tmp_path):
    # As XLA's expansion: state (i, operand, indices, updates), i < trip count,
    # the window read, combined with the update and written back when in bounds.
    filecheck(_expanded(ROWS).to_text(), """
        CHECK:      %while_body
        CHECK:      %[[I:.*]] = s32[] get-tuple-element(%[[P:.*]]), index=0
        CHECK:      %[[ONE:.*]] = s32[] constant(1)
        CHECK:      add(%[[I]], %[[ONE]])
        CHECK:      dynamic-slice({{.*}}, %[[I]]), dynamic_slice_sizes={1}
        CHECK:      compare({{.*}}), direction=LE
        CHECK:      constant(4)
        CHECK:      compare({{.*}}), direction=LE
        CHECK:      dynamic-slice({{.*}}), dynamic_slice_sizes={1,3}
        CHECK:      f32[1,3]{1,0} add(
        CHECK:      f32[1,3]{1,0} select(
        CHECK:      f32[5,3]{1,0} dynamic-update-slice(
        CHECK:      ROOT {{.*}} tuple(
        CHECK:      %while_cond
        CHECK:      %[[C:.*]] = s32[] constant(4)
        CHECK:      ROOT {{.*}} compare({{.*}}, %[[C]]), direction=LT
        CHECK:      ENTRY
        CHECK-NOT:  scatter
        CHECK:      while({{.*}}), condition=%while_cond, body=%while_body
        CHECK:      ROOT {{.*}} get-tuple-element(%while), index=1
    """, tmp_path)


def test_only_single_index_scatters_go_in_the_simple_mode():
    module = _expanded(ROWS, ScatterExpander(ScatterExpander.ELIMINATE_SIMPLE_SCATTERS))
    assert any(i.opcode == "scatter" for i in module.instructions)
    one = ROWS.replace("s32[4]", "s32[1]").replace("f32[4,3]", "f32[1,3]")
    module = _expanded(one, ScatterExpander(ScatterExpander.ELIMINATE_SIMPLE_SCATTERS))
    assert not any(i.opcode == "scatter" for i in module.instructions)


def test_empty_updates_leave_the_operand():
    empty = ROWS.replace("s32[4]", "s32[0]").replace("f32[4,3]", "f32[0,3]")
    module = _expanded(empty)
    assert module.entry.root.opcode == "parameter" and module.entry.root.name == "operand"


def test_scatters_with_batching_dimensions_are_left_alone():
    text = f"""
HloModule m
{ADD}
ENTRY main {{
  operand = f32[2,5] parameter(0)
  indices = s32[2,1] parameter(1)
  updates = f32[2] parameter(2)
  ROOT s = f32[2,5] scatter(operand, indices, updates), to_apply=add, update_window_dims={{}},
    inserted_window_dims={{1}}, input_batching_dims={{0}}, scatter_indices_batching_dims={{0}},
    scatter_dims_to_operand_dims={{1}}, index_vector_dim=1
}}
"""
    assert not ScatterExpander().run(parse_module(text))


def _assert_same_values(text: str, arguments: list[Any]) -> None:
    original = parse_module(text)
    verify(original)
    expected = evaluate(original, *arguments)
    expanded = _expanded(text)
    assert not any(i.opcode == "scatter" for i in expanded.instructions)
    assert_same(evaluate(expanded, *arguments), expected, context=expanded.to_text())


_COMBINERS = {
    "add": "ROOT r = {t}[] add(a, b)",
    "maximum": "ROOT r = {t}[] maximum(a, b)",
    "overwrite": "z = {t}[] constant(0)\n  ROOT r = {t}[] add(b, z)",
    "affine": "c = {t}[] constant(3)\n  m = {t}[] multiply(a, c)\n  ROOT r = {t}[] subtract(m, b)",
}


def _combiner(kind: str, element_type: str) -> str:
    body = _COMBINERS[kind].format(t=element_type)
    return f"combine {{\n  a = {element_type}[] parameter(0)\n  b = {element_type}[] parameter(1)\n  {body}\n}}\n"


def _shape(element_type: str, dims: list[int]) -> str:
    return f"{element_type}[{','.join(map(str, dims))}]"


def _braces(values: list[int] | tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


@st.composite
def scatters(draw: Any) -> tuple[str, list[Any]]:
    """A random scatter (one or two operands) and arguments for it, indices
    partly out of bounds."""
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 4)) for _ in range(rank)]
    inserted = sorted(draw(st.sets(st.integers(0, rank - 1))))
    window = {d: draw(st.integers(1, dims[d])) for d in range(rank) if d not in inserted}
    to_operand = draw(st.permutations(range(rank)).map(list))[:draw(st.integers(1, rank))]
    components = len(to_operand)
    batch = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2)))]
    if components == 1 and draw(st.booleans()):
        index_vector_dim, index_dims = len(batch), list(batch)
    else:
        index_vector_dim = draw(st.integers(0, len(batch)))
        index_dims = [*batch[:index_vector_dim], components, *batch[index_vector_dim:]]
    update_rank = len(batch) + len(window)
    window_positions = sorted(draw(st.permutations(range(update_rank)).map(list))[:len(window)])
    update_dims, scatter_sizes, window_sizes = [], iter(batch), iter(window.values())
    for position in range(update_rank):
        update_dims.append(next(window_sizes) if position in window_positions else next(scatter_sizes))
    element_type = draw(st.sampled_from(["f32", "s32"]))
    combiner = draw(st.sampled_from(sorted(_COMBINERS)))
    variadic = combiner == "add" and draw(st.booleans())
    operand, updates = _shape(element_type, dims), _shape(element_type, update_dims)
    attributes = (f"update_window_dims={_braces(window_positions)}, inserted_window_dims={_braces(inserted)}, "
                  f"scatter_dims_to_operand_dims={_braces(to_operand)}, index_vector_dim={index_vector_dim}")
    count = 2 if variadic else 1
    combine = _combiner(combiner, element_type)
    if variadic:
        t = element_type
        combine = (f"combine {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  c = {t}[] parameter(2)\n"
                   f"  d = {t}[] parameter(3)\n  x = {t}[] add(a, c)\n  y = {t}[] maximum(b, d)\n"
                   f"  ROOT r = ({t}[], {t}[]) tuple(x, y)\n}}\n")
    operands = ", ".join(f"o{k}" for k in range(count))
    updates_names = ", ".join(f"u{k}" for k in range(count))
    result = operand if count == 1 else "(" + ", ".join([operand] * count) + ")"
    parameters = "\n".join(f"  o{k} = {operand} parameter({k})" for k in range(count))
    parameters += f"\n  i = {_shape('s32', index_dims)} parameter({count})\n"
    parameters += "\n".join(f"  u{k} = {updates} parameter({count + 1 + k})" for k in range(count))
    text = (f"HloModule m\n{combine}\nENTRY main {{\n{parameters}\n  ROOT s = {result} scatter({operands}, i, "
            f"{updates_names}), to_apply=combine, {attributes}\n}}\n")
    random = np.random.default_rng(draw(st.integers(0, 2**31)))
    dtype = np.float32 if element_type == "f32" else np.int32

    def values(shape: list[int]) -> np.ndarray:
        if dtype is np.int32:
            return random.integers(-9, 10, shape).astype(dtype)
        return random.standard_normal(shape).astype(dtype)

    high = max(dims) + 1
    indices = random.integers(-1, high, index_dims).astype(np.int32)
    arguments = [values(dims) for _ in range(count)] + [indices] + [values(update_dims) for _ in range(count)]
    return text, arguments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatters())
def test_expanded_scatters_compute_what_scatter_computes(case: tuple[str, list[Any]]) -> None:
    _assert_same_values(*case)


def test_the_rows_scatter_with_repeated_and_out_of_bounds_indices():
    random = np.random.default_rng(0)
    operand = random.standard_normal((5, 3)).astype(np.float32)
    updates = random.standard_normal((4, 3)).astype(np.float32)
    _assert_same_values(ROWS, [operand, np.array([1, 1, -1, 5], np.int32), updates])
    _assert_same_values(ROWS, [operand, np.array([4, 0, 4, 2], np.int32), updates])


def test_a_non_elementwise_combiner_keeps_xla_s_map():
    # A combiner that calls another computation is not a set of elementwise ops.
    text = ROWS.replace("ROOT s = f32[] add(a, b)", "ROOT s = f32[] call(a, b), to_apply=sum").replace(
        "add {", "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\nadd {")
    module = _expanded(text)
    assert [i.opcode for i in module.instructions if i.opcode == "map"] == ["map"]
    assert_pass_preserves_values(ScatterExpander(), text, seeds=(0, 1))


def _jax_programs() -> dict[str, tuple[Any, list[np.ndarray]]]:
    jnp = pytest.importorskip("jax.numpy")
    random = np.random.default_rng(1)
    x = random.standard_normal((6, 4)).astype(np.float32)
    rows = np.array([0, 5, 2, 5, 9], np.int32)
    return {
        "add_rows": (lambda x, i, u: x.at[i].add(u), [x, rows, random.standard_normal((5, 4)).astype(np.float32)]),
        "set_elements": (lambda x, i, j: x.at[i, j].set(7.0), [x, rows, np.array([3, 1, 0, 2, 3], np.int32)]),
        "segment_max": (lambda d, s: jnp.zeros(4, np.float32).at[s].max(d),
                        [random.standard_normal(7).astype(np.float32), np.array([0, 3, 3, 1, 0, 2, 3], np.int32)]),
        "multiply_columns": (lambda x, j, u: x.at[:, j].multiply(u),
                             [x, np.array([1, 1, 3], np.int32), random.standard_normal((6, 3)).astype(np.float32)]),
    }


@pytest.mark.parametrize("name", ["add_rows", "set_elements", "segment_max", "multiply_columns"])
def test_jax_scatters(name: str) -> None:
    from xlapy.frontends.jax import from_jax

    function, arguments = _jax_programs()[name]
    module = from_jax(function, *arguments)
    assert any(i.opcode == "scatter" for i in module.instructions)
    _assert_same_values(module.to_text(), arguments)
