"""The gather simplifier (``xla/hlo/transforms/simplifiers/gather_simplifier.cc``):
the rewrites of XLA's own tests (``gather_simplifier_test.cc``), values against
the interpreter on random gathers of every form, and JAX's gathers compiled
through XLA:CPU's pipeline."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

import xlapy
from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from tools.jax_corpus import PROGRAMS, flat_arguments
from tools.oracles import require_jax
from tools.random_gather_scatter import assert_rewrite_preserves_values, gather_texts
from xlapy.frontends.jax import from_jax
from xlapy.hlo import parse_module, verify
from xlapy.transforms.gather_simplifier import GatherSimplifier, is_simplified_gather


def _module(operand: str, indices: str, gather: str) -> str:
    return f"""HloModule gather_simplifier

ENTRY kernel_entry {{
  operand = {operand} parameter(0)
  indices = {indices} parameter(1)
  ROOT gather = {gather}
}}
"""


def _simplified(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = GatherSimplifier().run(module)
    verify(module)
    return changed, module.to_text()


def test_the_indices_become_rows_and_the_result_gets_its_batch_dimensions_back(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[33,34]", "s32[42,43]", "f32[42,43,7,8] gather(operand, indices), offset_dims={2,3}, "
        "collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=2, slice_sizes={7,8}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[VECTOR:.*]] = s32[42,43,1]{2,1,0} reshape(%indices)
CHECK: %[[ROWS:.*]] = s32[1806,1]{1,0} reshape(%[[VECTOR]])
CHECK: %[[GATHER:.*]] = f32[1806,7,8]{2,1,0} gather(%operand, %[[ROWS]]), offset_dims={1,2},
CHECK-SAME: collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={7,8}
CHECK: ROOT %{{.*}} = f32[42,43,7,8]{3,2,1,0} reshape(%[[GATHER]])
""", tmp_path)


def test_a_gather_from_a_scalar_is_a_broadcast(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[]", "s32[7,0]", "f32[7] gather(operand, indices), offset_dims={}, collapsed_slice_dims={}, "
        "start_index_map={}, index_vector_dim=1, slice_sizes={}"))
    assert changed
    filecheck(text, "CHECK: ROOT %{{.*}} = f32[7]{0} broadcast(%operand), dimensions={}\n", tmp_path)


def test_collapsed_slice_dimensions_are_dropped_by_a_reshape(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[33,34]", "s32[42,1]", "f32[42] gather(operand, indices), offset_dims={}, "
        "collapsed_slice_dims={0,1}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[GATHER:.*]] = f32[42,1,1]{2,1,0} gather(%operand, %indices), offset_dims={1,2}, collapsed_slice_dims={}
CHECK: ROOT %{{.*}} = f32[42]{0} reshape(%[[GATHER]])
""", tmp_path)


def test_a_canonical_gather_keeps_its_start_index_map() -> None:
    original = _module("f32[33,34,35]", "s32[42,3]", "f32[42,1,2,3] gather(operand, indices), offset_dims={1,2,3}, "
                       "collapsed_slice_dims={}, start_index_map={2,0,1}, index_vector_dim=1, slice_sizes={1,2,3}")
    changed, text = _simplified(original)
    assert not changed
    assert text == parse_module(original).to_text()


def test_offset_dimensions_before_the_batch_ones_come_back_by_a_transpose(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[33,34,35]", "s32[42,1]", "f32[7,42] gather(operand, indices), offset_dims={0}, "
        "collapsed_slice_dims={0,2}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,7,1}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[GATHER:.*]] = f32[42,1,7,1]{3,2,1,0} gather(
CHECK: %[[COLLAPSED:.*]] = f32[42,7]{1,0} reshape(%[[GATHER]])
CHECK: ROOT %{{.*}} = f32[7,42]{1,0} transpose(%[[COLLAPSED]]), dimensions={1,0}
""", tmp_path)


def test_indices_of_one_vector_add_no_result_dimension(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[8,16]", "s32[2]", "f32[8,16] gather(operand, indices), offset_dims={0,1}, collapsed_slice_dims={}, "
        "start_index_map={0,1}, index_vector_dim=0, slice_sizes={8,16}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[ROWS:.*]] = s32[1,2]{1,0} reshape(%indices)
CHECK: %[[GATHER:.*]] = f32[1,8,16]{2,1,0} gather(%operand, %[[ROWS]])
CHECK: ROOT %{{.*}} = f32[8,16]{1,0} reshape(%[[GATHER]])
""", tmp_path)


def test_a_slice_of_size_zero_gives_zeros(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[0,2]", "s32[3]", "f32[3,2] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={0,2}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[ZERO:.*]] = f32[] constant(0)
CHECK: ROOT %{{.*}} = f32[3,2]{1,0} broadcast(%[[ZERO]]), dimensions={}
""", tmp_path)


def test_the_index_vector_dimension_moves_last_by_a_transpose(tmp_path: Path) -> None:
    changed, text = _simplified(_module(
        "f32[5,6]", "s32[2,3,4]", "f32[3,4,5] gather(operand, indices), offset_dims={2}, "
        "collapsed_slice_dims={1}, start_index_map={1,0}, index_vector_dim=0, slice_sizes={5,1}"))
    assert changed
    filecheck(text, r"""
CHECK: %[[MINOR:.*]] = s32[3,4,2]{2,1,0} transpose(%indices), dimensions={1,2,0}
CHECK: %[[ROWS:.*]] = s32[12,2]{1,0} reshape(%[[MINOR]])
CHECK: gather(%operand, %[[ROWS]]), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={1,0},
CHECK-SAME: index_vector_dim=1, slice_sizes={5,1}
""", tmp_path)


def test_gathers_with_batching_dimensions_are_left_to_the_normalizer() -> None:
    original = _module("f32[3,4]", "s32[3,1]", "f32[3] gather(operand, indices), offset_dims={}, "
                       "collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
                       "start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}")
    assert _simplified(original) == (False, parse_module(original).to_text())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gather_texts(batching=False))
def test_random_gathers_keep_their_values_in_canonical_form(text: str) -> None:
    module = assert_rewrite_preserves_values(GatherSimplifier(), text)
    assert all(is_simplified_gather(i) for i in module.instructions if i.opcode == "gather"), module.to_text()


def test_jax_gathers_compile_through_the_cpu_pipeline() -> None:
    """JAX's indexing (rows, take_along_axis with batching dimensions, a slice of rows, clipped take) through
    XLA:CPU's passes and the loop emitter, against the interpreter on the module JAX lowers to."""
    require_jax()
    fn, args = PROGRAMS["gathers"]
    module = from_jax(fn, *args)
    executable = xlapy.compile(module)
    assert all(is_simplified_gather(i) for i in executable.module.instructions if i.opcode == "gather")
    arguments = flat_arguments("gathers")
    assert_same(executable(*arguments), xlapy.evaluate(module, *arguments))
