"""The batched gather/scatter normalizer (``xla/service/batched_gather_scatter_normalizer.cc``):
the rewrites of XLA's own tests (``batched_gather_scatter_normalizer_test.cc``, on smaller shapes), and values
against the interpreter on random gathers and scatters with batching dimensions."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_gather_scatter import assert_rewrite_preserves_values, gather_texts, scatter_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.batched_gather_scatter_normalizer import BatchedGatherScatterNormalizer

_ADD = """add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}
"""


def _normalized(text: str) -> str:
    module = parse_module(text)
    assert BatchedGatherScatterNormalizer().run(module)
    verify(module)
    return module.to_text()


def test_a_batching_dimension_becomes_an_iota_start_index(tmp_path: Path) -> None:
    text = _normalized("""HloModule m
ENTRY main {
  input = f32[5,4,3,6] parameter(0)
  indices = s64[2,3,2,6] parameter(1)
  ROOT gather = f32[2,3,3,2,2,6] gather(input, indices), offset_dims={2,3,4}, collapsed_slice_dims={},
    start_index_map={0,1}, operand_batching_dims={3}, start_indices_batching_dims={3}, index_vector_dim=2,
    slice_sizes={3,2,2,1}
}
""")
    filecheck(text, r"""
CHECK: %[[IOTA:.*]] = s64[2,3,1,6]{3,2,1,0} iota(), iota_dimension=3
CHECK: %[[INDICES:.*]] = s64[2,3,3,6]{3,2,1,0} concatenate(%[[IOTA]], %indices), dimensions={2}
CHECK: ROOT %{{.*}} = f32[2,3,3,2,2,6]{5,4,3,2,1,0} gather(%input, %[[INDICES]]), offset_dims={2,3,4},
CHECK-SAME: collapsed_slice_dims={3}, start_index_map={3,0,1}, index_vector_dim=2, slice_sizes={3,2,2,1}
""", tmp_path)


def test_batching_dimensions_join_the_collapsed_ones_in_order(tmp_path: Path) -> None:
    text = _normalized("""HloModule m
ENTRY main {
  input = f32[5,4,3,6,7,2] parameter(0)
  indices = s64[2,3,2,6,7] parameter(1)
  ROOT gather = f32[2,3,3,2,2,6,7] gather(input, indices), offset_dims={2,3,4}, collapsed_slice_dims={5},
    start_index_map={0,5}, operand_batching_dims={3,4}, start_indices_batching_dims={3,4}, index_vector_dim=2,
    slice_sizes={3,2,2,1,1,1}
}
""")
    filecheck(text, r"""
CHECK: %[[IOTA1:.*]] = s64[2,3,1,6,7]{4,3,2,1,0} iota(), iota_dimension=3
CHECK: %[[IOTA2:.*]] = s64[2,3,1,6,7]{4,3,2,1,0} iota(), iota_dimension=4
CHECK: %[[INDICES:.*]] = s64[2,3,4,6,7]{4,3,2,1,0} concatenate(%[[IOTA1]], %[[IOTA2]], %indices), dimensions={2}
CHECK: ROOT %{{.*}} gather(%input, %[[INDICES]]), offset_dims={2,3,4}, collapsed_slice_dims={3,4,5},
CHECK-SAME: start_index_map={3,4,0,5}, index_vector_dim=2
""", tmp_path)


def test_a_scatter_gets_its_batching_dimensions_as_inserted_window_dimensions(tmp_path: Path) -> None:
    text = _normalized(f"""HloModule m
{_ADD}
ENTRY main {{
  input = f32[5,4,3,6] parameter(0)
  indices = s64[2,3,2,6] parameter(1)
  updates = f32[2,3,3,2,2,6] parameter(2)
  ROOT scatter = f32[5,4,3,6] scatter(input, indices, updates), update_window_dims={{2,3,4}},
    inserted_window_dims={{}}, scatter_dims_to_operand_dims={{0,1}}, input_batching_dims={{3}},
    scatter_indices_batching_dims={{3}}, index_vector_dim=2, to_apply=add
}}
""")
    filecheck(text, r"""
CHECK: %[[IOTA:.*]] = s64[2,3,1,6]{3,2,1,0} iota(), iota_dimension=3
CHECK: %[[INDICES:.*]] = s64[2,3,3,6]{3,2,1,0} concatenate(%[[IOTA]], %indices), dimensions={2}
CHECK: ROOT %{{.*}} = f32[5,4,3,6]{3,2,1,0} scatter(%input, %[[INDICES]], %updates), update_window_dims={2,3,4},
CHECK-SAME: inserted_window_dims={3}, scatter_dims_to_operand_dims={3,0,1}, index_vector_dim=2, to_apply=%add
""", tmp_path)


def test_an_implicit_index_vector_becomes_a_trailing_dimension(tmp_path: Path) -> None:
    text = _normalized("""HloModule m
ENTRY main {
  input = f32[5,6,7] parameter(0)
  indices = s64[2,3,6,7] parameter(1)
  ROOT gather = f32[2,3,6,7] gather(input, indices), offset_dims={}, collapsed_slice_dims={0},
    start_index_map={0}, operand_batching_dims={1,2}, start_indices_batching_dims={2,3}, index_vector_dim=4,
    slice_sizes={1,1,1}
}
""")
    filecheck(text, r"""
CHECK-DAG: %[[VECTOR:.*]] = s64[2,3,6,7,1]{4,3,2,1,0} reshape(%indices)
CHECK-DAG: %[[IOTA1:.*]] = s64[2,3,6,7,1]{4,3,2,1,0} iota(), iota_dimension=2
CHECK-DAG: %[[IOTA2:.*]] = s64[2,3,6,7,1]{4,3,2,1,0} iota(), iota_dimension=3
CHECK: %[[INDICES:.*]] = s64[2,3,6,7,3]{4,3,2,1,0} concatenate(%[[IOTA1]], %[[IOTA2]], %[[VECTOR]]), dimensions={4}
CHECK: ROOT %{{.*}} gather(%input, %[[INDICES]]), offset_dims={}, collapsed_slice_dims={0,1,2},
CHECK-SAME: start_index_map={1,2,0}, index_vector_dim=4, slice_sizes={1,1,1}
""", tmp_path)


def test_indices_too_narrow_for_a_batching_dimension_are_widened(tmp_path: Path) -> None:
    text = _normalized("""HloModule m
ENTRY main {
  input = f32[300,4] parameter(0)
  indices = s8[300,1] parameter(1)
  ROOT gather = f32[300] gather(input, indices), offset_dims={}, collapsed_slice_dims={1},
    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1,
    slice_sizes={1,1}
}
""")
    filecheck(text, r"""
CHECK-DAG: %[[WIDE:.*]] = s32[300,1]{1,0} convert(%indices)
CHECK-DAG: %[[IOTA:.*]] = s32[300,1]{1,0} iota(), iota_dimension=0
CHECK: concatenate(%[[IOTA]], %[[WIDE]]), dimensions={1}
""", tmp_path)


def test_sorted_indices_stay_sorted_only_with_a_sorted_start_index_map() -> None:
    template = """HloModule m
ENTRY main {{
  input = f32[3,4] parameter(0)
  indices = s32[3,1] parameter(1)
  ROOT gather = f32[3] gather(input, indices), offset_dims={{}}, collapsed_slice_dims={{{collapsed}}},
    start_index_map={{{mapped}}}, operand_batching_dims={{{batching}}}, start_indices_batching_dims={{0}},
    index_vector_dim=1, slice_sizes={{1,1}}, indices_are_sorted=true
}}
"""
    module = parse_module(_normalized(template.format(collapsed=1, mapped=1, batching=0)))
    assert module.entry.root.attr("indices_are_sorted") is True
    module = parse_module(_normalized(template.format(collapsed=0, mapped=0, batching=1)))
    assert str(module.entry.root.attr("indices_are_sorted", "false")).lower() == "false"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gather_texts())
def test_random_gathers_keep_their_values_without_batching_dimensions(text: str) -> None:
    module = assert_rewrite_preserves_values(BatchedGatherScatterNormalizer(), text)
    assert "batching_dims" not in module.to_text()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatter_texts())
def test_random_scatters_keep_their_values_without_batching_dimensions(text: str) -> None:
    module = assert_rewrite_preserves_values(BatchedGatherScatterNormalizer(), text)
    assert "batching_dims" not in module.to_text()
