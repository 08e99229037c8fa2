"""Basic factor propagation: along each factor, find the longest list of
major-most axes that every tensor of the op is compatible with, and shard the
tensors that are not yet sharded that far. No conflict resolution: an axis
that conflicts anywhere (a different axis on the same factor, an axis already
used by another factor of some tensor, a replicated axis, a closed or
overflowing factor, a non-divisible size) stops the list there.

The same checks serve the aggressive strategy, which resolves conflicts
across factors differently (see ``aggressive_factor.py``)."""

from __future__ import annotations

from collections.abc import Callable
from math import gcd

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.axes import prefix_without_overlap
from xlapy.sharding.propagation.directions import Direction
from xlapy.sharding.propagation.projection import FactorSharding, ShardingProjection, TensorFactorShardings

# factor index -> direction for this op
FactorDirections = Callable[[int], Direction]
# (axis, product of the sizes of the axes before it) -> what is left of it
RemoveConflicts = Callable[[AxisRef, int], AxisRef | None]


def _compatible_major_axes(old: list[AxisRef], new: list[AxisRef], can_expand: bool) -> tuple[list[AxisRef], bool]:
    """Merge the axes ``new`` of one more tensor into the axes ``old`` found so
    far: the common major axes, plus the rest of the longer list if nothing
    conflicts (the rest of ``new`` only if ``can_expand``); and whether the
    result may still be expanded."""
    result: list[AxisRef] = []
    i = 0
    while i < len(old) and i < len(new):
        old_axis, new_axis = old[i], new[i]
        i += 1
        if new_axis.name != old_axis.name:
            return result, False
        if new_axis.sub_axis == old_axis.sub_axis:
            result.append(new_axis)
            continue
        if new_axis.prefix_of(old_axis):
            if i < len(new):
                # A further new axis could only be the next sub-axis, which
                # would have been merged; treat it as a conflict.
                result.append(new_axis)
                return result, False
            result.append(old_axis)
        elif old_axis.prefix_of(new_axis):
            if not can_expand or i < len(old):
                result.append(old_axis)
                return result, False
            result.append(new_axis)
        else:
            return result, False
    result.extend(old[i:])
    if can_expand:
        result.extend(new[i:])
    return result, can_expand


class BasicFactorPropagation:
    """Propagates each factor on its own, the projection updated in between."""

    # -- conflicts -------------------------------------------------------------
    def no_conflicts_across_factors(self, axis: AxisRef, factors: dict[int, FactorSharding], factor: int,
                                    new_axes_per_factor: list[list[AxisRef]] | None = None) -> AxisRef | None:
        """The prefix of ``axis`` that no other factor of the tensor uses."""
        result: AxisRef | None = axis
        for other_factor, sharding in factors.items():
            if other_factor == factor:
                continue
            result = prefix_without_overlap(result, sharding.overflow_axes)
            if result is None:
                return None
            result = prefix_without_overlap(result, sharding.axes)
            if result is None:
                return None
            if new_axes_per_factor is not None:
                result = prefix_without_overlap(result, new_axes_per_factor[other_factor])
                if result is None:
                    return None
        return result

    def no_conflicts_within_factor(self, axis: AxisRef, tensor: TensorFactorShardings, sharding: FactorSharding,
                                   prev_sharded_size: int, factor_size: int, mesh: Mesh | None) -> AxisRef | None:
        """The prefix of ``axis`` that the factor of this tensor can take (or
        already has)."""
        result = prefix_without_overlap(axis, tensor.replicated_axes)
        if result is None:
            return None
        result = prefix_without_overlap(result, tensor.unreduced_axes)
        if result is None:
            return None
        if any(existing.contains(result) for existing in sharding.axes):
            return result
        if not sharding.is_closed and not sharding.overflow_axes:
            if sharding.is_minor_most or mesh is None:
                return result
            if factor_size % prev_sharded_size == 0:
                axis_size = result.size(mesh)
                common = gcd(factor_size // prev_sharded_size, axis_size)
                if common == axis_size:
                    return result
                if common != 1:
                    return AxisRef(result.name, (result.pre_size, common))
        if sharding.axes and sharding.axes[-1].prefix_of(result):
            return sharding.axes[-1]
        return None

    def truncate_by_removing_conflicts(self, axes: list[AxisRef], remove_conflicts: RemoveConflicts,
                                       mesh: Mesh | None) -> None:
        """Keep ``axes`` up to the first one that ``remove_conflicts`` shortens
        (keeping what is left of it) or rejects."""
        prev_sharded_size = 1
        for index, axis in enumerate(axes):
            new_axis = remove_conflicts(axis, prev_sharded_size)
            if new_axis is None:
                del axes[index:]
                return
            if new_axis != axis:
                axes[index] = new_axis
                del axes[index + 1:]
                return
            if mesh is not None:
                prev_sharded_size *= new_axis.size(mesh)

    # -- compatible axes ---------------------------------------------------------
    def compatible_major_axes(self, projection: ShardingProjection, factor: int,
                              direction: Direction) -> list[AxisRef]:
        """The axes every tensor having ``factor`` agrees on, ignoring conflicts.
        In one direction only the source side (operands forward, results
        backward) may add axes; the other side can only cut them short."""
        if direction is Direction.NONE:
            return []
        if direction is Direction.BACKWARD:
            first, second = projection.results, projection.operands
        else:
            first, second = projection.operands, projection.results
        axes: list[AxisRef] = []
        can_expand = True
        for tensor in first:
            sharding = tensor.factors.get(factor)
            if sharding is not None:
                axes, can_expand = _compatible_major_axes(axes, sharding.axes, can_expand)
        if direction is not Direction.BOTH:
            can_expand = False
        for tensor in second:
            sharding = tensor.factors.get(factor)
            if sharding is not None:
                axes, can_expand = _compatible_major_axes(axes, sharding.axes, can_expand)
        return axes

    def _compatible_prefix(self, axis: AxisRef, projection: ShardingProjection, factor: int, prev_sharded_size: int,
                           factor_size: int, mesh: Mesh | None) -> AxisRef | None:
        result: AxisRef | None = axis
        for tensor in projection.tensors:
            result = self.no_conflicts_across_factors(result, tensor.factors, factor)
            if result is None:
                return None
            sharding = tensor.factors.get(factor)
            if sharding is None:
                # The factor is not in this tensor: only other factors conflict.
                continue
            result = self.no_conflicts_within_factor(result, tensor, sharding, prev_sharded_size, factor_size, mesh)
            if result is None:
                return None
        return result

    def compatible_major_sharding_axes(self, projection: ShardingProjection, factor: int, direction: Direction,
                                       factor_size: int, mesh: Mesh | None) -> list[AxisRef]:
        axes = self.compatible_major_axes(projection, factor, direction)
        self.truncate_by_removing_conflicts(
            axes, lambda axis, prev: self._compatible_prefix(axis, projection, factor, prev, factor_size, mesh), mesh)
        return axes

    # -- propagation -------------------------------------------------------------
    def propagate(self, projection: ShardingProjection, directions: FactorDirections, factor_sizes: tuple[int, ...],
                  mesh: Mesh, elementwise: bool = False) -> tuple[list[bool], list[bool]]:
        """Update the projection in place; which operands and results changed."""
        updated_operands = [False] * len(projection.operands)
        updated_results = [False] * len(projection.results)
        for factor, factor_size in enumerate(factor_sizes):
            axes = self.compatible_major_sharding_axes(projection, factor, directions(factor), factor_size, mesh)
            operands, results = projection.expand(factor, axes)
            updated_operands = [a or b for a, b in zip(updated_operands, operands)]
            updated_results = [a or b for a, b in zip(updated_results, results)]
        return updated_operands, updated_results
