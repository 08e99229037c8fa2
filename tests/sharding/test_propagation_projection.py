"""Sharding projection and factor propagation on their own, on the examples
Shardy documents (docs/propagation.md, the sharding projection's and the
basic factor propagation's descriptions)."""

from __future__ import annotations

import pytest

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.aggressive_factor import AggressiveFactorPropagation
from xlapy.sharding.propagation.axes import PrefixStatus, axis_list_prefix_status
from xlapy.sharding.propagation.basic_factor import BasicFactorPropagation, _compatible_major_axes
from xlapy.sharding.propagation.directions import Direction, intersection, union
from xlapy.sharding.propagation.projection import (
    FactorSharding,
    ShardingProjection,
    TensorFactorShardings,
    build_tensor_factor_shardings,
)
from xlapy.sharding.sharding_rule import OpShardingRule
from xlapy.sharding.tensor_sharding import TensorSharding


def axes(*names: str) -> list[AxisRef]:
    return [AxisRef.parse(n if n.startswith('"') else f'"{n}"') for n in names]


def test_projection_splits_an_axis_across_factors_and_merges_it_back():
    # ([ij])->([i, j]) {i=2, j=4} on <["x"=4, "y"=2]>: the operand [{"x", "y"}]
    # projects to i: ["x":(1)2], j: ["x":(2)2, "y"].
    mesh = Mesh.parse('<["x"=4, "y"=2]>')
    rule = OpShardingRule.parse("#sdy.op_sharding_rule<([ij])->([i, j]) {i=2, j=4}>")
    operand = TensorSharding.parse('<@m, [{"x", "y"}]>')
    projection = ShardingProjection.build([operand], [None], rule, mesh)
    factors = projection.operands[0].factors
    assert factors[0].axes == axes('"x":(1)2') and factors[1].axes == axes('"x":(2)2', "y")
    # Giving the (so far unsharded, hence open) result the same factor
    # shardings projects back to split dimensions.
    for factor in (0, 1):
        projection.results[0].factors[factor].axes = list(factors[factor].axes)
    back = projection.results[0].to_tensor_sharding(rule.result_mappings[0], rule.factor_sizes, "m", mesh)
    assert back.body() == '<@m, [{"x":(1)2, ?}, {"x":(2)2, "y", ?}]>'
    merged = projection.operands[0].to_tensor_sharding(rule.operand_mappings[0], rule.factor_sizes, "m", mesh)
    assert merged.body() == '<@m, [{"x", "y"}]>'


def test_projection_overflow_axes_close_the_following_factors():
    # A 3-axis cannot shard a non-minor-most factor of size 2: it overflows,
    # and the factor after it stays empty and closed.
    mesh = Mesh.parse('<["a"=3]>')
    rule = OpShardingRule.parse("#sdy.op_sharding_rule<([ij])->([i, j]) {i=2, j=4}>")
    tensor = build_tensor_factor_shardings(rule.operand_mappings[0], TensorSharding.parse('<@m, [{"a"}]>'),
                                           rule.factor_sizes, mesh)
    assert tensor.factors[0] == FactorSharding([], True, False, axes("a"))
    assert tensor.factors[1] == FactorSharding([], True, True, [])
    back = tensor.to_tensor_sharding(rule.operand_mappings[0], rule.factor_sizes, "m", mesh)
    assert back.body() == '<@m, [{"a"}]>'


@pytest.mark.parametrize("old, new, can_expand, expected, expandable", [
    (["a"], ["a", "b"], True, ["a", "b"], True),
    (["a", "b"], ["a", "c"], True, ["a"], False),
    (['"a":(1)2'], ['"a":(1)4'], True, ['"a":(1)4'], True),
    (['"a":(1)2', "b"], ['"a":(1)4', "b"], True, ['"a":(1)2'], False),
    (["a"], ["a"], False, ["a"], False),
    (["a"], ["a", "b"], False, ["a"], False),
    (["a", "b"], ["a"], False, ["a", "b"], False),
    (['"a":(1)2'], ['"a":(1)4'], False, ['"a":(1)2'], False),
])
def test_compatible_major_axes_of_two_lists(old, new, can_expand, expected, expandable):
    # The examples of Shardy's basic factor propagation.
    assert _compatible_major_axes(axes(*old), axes(*new), can_expand) == (axes(*expected), expandable)


def _tensor(*factor_axes: list[str]) -> TensorFactorShardings:
    return TensorFactorShardings({f: FactorSharding(axes(*names)) for f, names in enumerate(factor_axes)
                                  if names is not None})


def test_propagation_doc_example_collects_and_expands_compatible_axes():
    # docs/propagation.md, "Collect and propagate sharding axes":
    #     | F0       | F1       | F2
    # T0  | "a"      |          | "f"
    # T1  | "a", "b" | "c", "d" | "g"
    # T2  |          | "c", "e" |
    # propagates ["a", "b"] along F0, ["c"] along F1 and nothing along F2.
    projection = ShardingProjection([_tensor(["a"], [], ["f"]), _tensor(["a", "b"], ["c", "d"], ["g"])],
                                    [_tensor([], ["c", "e"], [])])
    mesh = Mesh.parse('<["a"=2, "b"=2, "c"=2, "d"=2, "e"=2, "f"=2, "g"=2]>')
    basic = BasicFactorPropagation()
    found = [basic.compatible_major_sharding_axes(projection, f, Direction.BOTH, 8, mesh) for f in range(3)]
    assert found == [axes("a", "b"), axes("c"), []]
    operands, results = basic.propagate(projection, lambda f: Direction.BOTH, (8, 8, 8), mesh)
    assert operands == [True, False] and results == [True]
    assert [projection.operands[0].factors[f].axes for f in range(3)] == [axes("a", "b"), axes("c"), axes("f")]
    assert [projection.results[0].factors[f].axes for f in range(3)] == [axes("a", "b"), axes("c", "e"), []]


def test_aggressive_resolves_a_conflict_between_factors_by_source_size():
    # An axis that two factors want for the same tensor goes to the factor
    # whose source tensor is larger.
    mesh = Mesh.parse('<["a"=2]>')
    small = TensorFactorShardings({0: FactorSharding(axes("a"))})
    large = TensorFactorShardings({1: FactorSharding(axes("a")), 2: FactorSharding([])})
    result = TensorFactorShardings({0: FactorSharding([]), 1: FactorSharding([])})
    projection = ShardingProjection([small, large], [result])
    sizes = (4, 4, 8)
    AggressiveFactorPropagation().propagate(projection, lambda f: Direction.BOTH, sizes, mesh)
    assert projection.results[0].factors[0].axes == [] and projection.results[0].factors[1].axes == axes("a")
    # The basic strategy gives up on both.
    projection = ShardingProjection([TensorFactorShardings({0: FactorSharding(axes("a"))}),
                                     TensorFactorShardings({1: FactorSharding(axes("a")), 2: FactorSharding([])})],
                                    [TensorFactorShardings({0: FactorSharding([]), 1: FactorSharding([])})])
    BasicFactorPropagation().propagate(projection, lambda f: Direction.BOTH, sizes, mesh)
    assert projection.results[0].factors[0].axes == [] and projection.results[0].factors[1].axes == []


def test_axis_list_prefixes():
    assert axis_list_prefix_status([], []) is PrefixStatus.EQUAL
    assert axis_list_prefix_status([], axes("a")) is PrefixStatus.STRICT_PREFIX
    assert axis_list_prefix_status(axes("a", '"b":(1)2'), axes("a", "b")) is PrefixStatus.STRICT_PREFIX
    assert axis_list_prefix_status(axes("a", "b"), axes("a", "b")) is PrefixStatus.EQUAL
    assert axis_list_prefix_status(axes("b"), axes("a", "b")) is PrefixStatus.NOT_A_PREFIX


def test_direction_union_and_intersection():
    assert union(Direction.FORWARD, Direction.BACKWARD) is Direction.BOTH
    assert union(Direction.NONE, Direction.FORWARD) is Direction.FORWARD
    assert intersection(Direction.FORWARD, Direction.BACKWARD) is Direction.NONE
    assert intersection(Direction.BOTH, Direction.BACKWARD) is Direction.BACKWARD
