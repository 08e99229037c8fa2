"""Aggressive factor propagation: resolves conflicts between factors instead
of giving up on them.

The compatible axes of every factor are found first (as in the basic
strategy). Then, per tensor, factors are given their axes in an order of
preference (the factor whose source tensor is largest first; for
elementwise ops the more sharded factor first; then the source with the
smaller index; then the smaller factor index), each factor keeping only the
axes that the factors already given to that tensor leave free. Conflicts
within a factor are handled as in the basic strategy. Results are updated
before operands, and for elementwise ops an operand is never sharded further
along a factor than the results are (no sideways propagation past a result
that cannot take the axes)."""

from __future__ import annotations

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.axes import PrefixStatus, axis_list_prefix_status, is_strict_prefix, total_size
from xlapy.sharding.propagation.basic_factor import BasicFactorPropagation, FactorDirections
from xlapy.sharding.propagation.projection import ShardingProjection, TensorFactorShardings


def _source_tensors(projection: ShardingProjection, factor_sizes: tuple[int, ...],
                    axes_per_factor: list[list[AxisRef]]) -> list[tuple[int, int]]:
    """Per factor, (size, index) of the largest tensor whose sharding of that
    factor is a prefix of (or equal to) the axes to propagate; (-1, -1) if none."""
    sources = [(-1, -1)] * len(factor_sizes)
    for index, tensor in enumerate(projection.tensors):
        size = 1
        for factor in tensor.factors:
            size *= factor_sizes[factor]
        for factor, sharding in tensor.factors.items():
            axes = axes_per_factor[factor]
            is_source = bool(axes) and axis_list_prefix_status(axes, sharding.axes) is not PrefixStatus.NOT_A_PREFIX
            if is_source and size > sources[factor][0]:
                sources[factor] = (size, index)
    return sources


class AggressiveFactorPropagation(BasicFactorPropagation):

    def _propagated_axes(self, factor: int, tensor: TensorFactorShardings, axes_per_factor: list[list[AxisRef]],
                         mesh: Mesh, factor_sizes: tuple[int, ...]) -> list[AxisRef]:
        sharding = tensor.factors.get(factor)
        if sharding is None:
            return []
        new_axes = list(axes_per_factor[factor])
        self.truncate_by_removing_conflicts(
            new_axes, lambda axis, prev: self.no_conflicts_within_factor(
                axis, tensor, sharding, prev, factor_sizes[factor], mesh), mesh)
        if not is_strict_prefix(sharding.axes, new_axes):
            return []
        # Conflicts with the other factors of this tensor, as already updated
        # for the factors preferred over this one.
        self.truncate_by_removing_conflicts(
            new_axes, lambda axis, _prev: self.no_conflicts_across_factors(axis, tensor.factors, factor), mesh)
        return new_axes

    def propagate(self, projection: ShardingProjection, directions: FactorDirections, factor_sizes: tuple[int, ...],
                  mesh: Mesh, elementwise: bool = False) -> tuple[list[bool], list[bool]]:
        updated_operands = [False] * len(projection.operands)
        updated_results = [False] * len(projection.results)
        axes_per_factor = [self.compatible_major_axes(projection, f, directions(f)) for f in range(len(factor_sizes))]
        if not any(axes_per_factor):
            return updated_operands, updated_results

        sources = _source_tensors(projection, factor_sizes, axes_per_factor)

        def preference(factor: int) -> tuple[int, int, int, int]:
            sharded = total_size(axes_per_factor[factor], mesh) if elementwise else 0
            size, index = sources[factor]
            return (-size, -sharded, index, factor)

        order = sorted(range(len(factor_sizes)), key=preference)

        for index, tensor in enumerate(projection.results):
            for factor in order:
                new_axes = self._propagated_axes(factor, tensor, axes_per_factor, mesh, factor_sizes)
                if new_axes and tensor.expand(factor, new_axes):
                    updated_results[index] = True

        for index, tensor in enumerate(projection.operands):
            for factor in order:
                new_axes = self._propagated_axes(factor, tensor, axes_per_factor, mesh, factor_sizes)
                if not new_axes:
                    continue
                if elementwise:
                    # Not further than a result that could not take the axes.
                    for result in projection.results:
                        result_sharding = result.factors.get(factor)
                        if result_sharding is not None and is_strict_prefix(result_sharding.axes, new_axes):
                            new_axes = list(result_sharding.axes)
                if tensor.expand(factor, new_axes):
                    updated_operands[index] = True
        return updated_operands, updated_results
