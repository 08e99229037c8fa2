"""Sharding projection: the shardings of an op's operands and results seen
per *factor* of its sharding rule instead of per dimension.

Projecting a dimension sharding onto the factors of that dimension hands its
axes, major first, to the factors, major first: a factor takes axes (splitting
an axis into sub-axes where only part of it fits) until it is fully sharded,
then the next factor continues; the minor-most factor takes whatever is left,
even if that does not divide it. When an axis and a non-minor-most factor are
relatively prime, the remaining axes become *overflow axes* of that factor and
the factors after it stay empty and closed. Projecting back concatenates the
factors' axes per dimension (merging consecutive sub-axes), stopping after a
factor that is not fully sharded, since the next one would need a strided view.

For example, with the rule ``([ij])->([i, j]) {i=2, j=4}`` on mesh ``["x"=4, "y"=2]``
the operand sharding ``[{"x", "y"}]`` projects to ``i: ["x":(1)2]``,
``j: ["x":(2)2, "y"]``; giving the result the same factor shardings projects
back to ``[{"x":(1)2}, {"x":(2)2, "y"}]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.axes import add_axis_or_merge, is_strict_prefix
from xlapy.sharding.sharding_rule import OpShardingRule, TensorMapping
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding


@dataclass
class FactorSharding:
    axes: list[AxisRef] = field(default_factory=list)
    is_closed: bool = False
    is_minor_most: bool = False
    # Axes of the dimension that did not fit this (non-minor-most) factor;
    # kept so that projecting back restores the dimension sharding.
    overflow_axes: list[AxisRef] = field(default_factory=list)


@dataclass
class TensorFactorShardings:
    factors: dict[int, FactorSharding] = field(default_factory=dict)
    replicated_axes: tuple[AxisRef, ...] = ()
    unreduced_axes: tuple[AxisRef, ...] = ()

    def expand(self, factor: int, new_axes: list[AxisRef]) -> bool:
        """Set the factor's axes to ``new_axes`` if this tensor has the factor
        and its current axes are a strict prefix of them."""
        sharding = self.factors.get(factor)
        if sharding is None or not is_strict_prefix(sharding.axes, new_axes):
            return False
        sharding.axes = list(new_axes)
        return True

    def sharding_size(self, mesh: Mesh) -> int:
        size = 1
        for sharding in self.factors.values():
            for axis in sharding.axes + sharding.overflow_axes:
                size *= axis.size(mesh)
        return size

    def to_tensor_sharding(self, mapping: TensorMapping, factor_sizes: tuple[int, ...], mesh_ref: str | Mesh,
                           mesh: Mesh) -> TensorSharding:
        """Project back to dimension shardings (priorities are not kept)."""
        dims = []
        for dim_factors in mapping:
            is_closed = False
            axes: list[AxisRef] = []
            for factor in dim_factors:
                sharding = self.factors[factor]
                is_closed |= sharding.is_closed
                sharded_size = _add_axes(axes, sharding.axes, mesh)
                if sharding.overflow_axes:
                    _add_axes(axes, sharding.overflow_axes, mesh)
                    break
                if sharded_size < factor_sizes[factor]:
                    # The next factor would need a strided view.
                    break
            dims.append(DimensionSharding(tuple(axes), is_closed))
        return TensorSharding(mesh_ref, tuple(dims), self.replicated_axes, self.unreduced_axes)


def _add_axes(dim_axes: list[AxisRef], axes: list[AxisRef], mesh: Mesh) -> int:
    """Append ``axes`` (the first one merged into the dimension's last axis if
    they are consecutive sub-axes); returns the product of their sizes."""
    size = 1
    for index, axis in enumerate(axes):
        size *= axis.size(mesh)
        if index == 0:
            add_axis_or_merge(dim_axes, axis, mesh)
        else:
            dim_axes.append(axis)
    return size


class _AxisCursor:
    """Walks the axes of a dimension sharding, possibly part-way into one
    axis: ``size``/``pre_size`` describe what is left of the current axis."""

    def __init__(self, axes: tuple[AxisRef, ...], mesh: Mesh):
        self.axes, self.mesh, self.index = axes, mesh, 0
        self._load()

    def _load(self) -> None:
        if self.index < len(self.axes):
            axis = self.axes[self.index]
            self.size = axis.size(self.mesh)
            self.pre_size: int | None = axis.sub_axis[0] if axis.sub_axis else None
        else:
            self.size = 0

    @property
    def done(self) -> bool:
        return self.index >= len(self.axes)

    @property
    def name(self) -> str:
        return self.axes[self.index].name

    def current(self) -> AxisRef:
        """What is left of the current axis, as an axis ref."""
        if self.pre_size is None:
            return AxisRef(self.name)
        return AxisRef(self.name, (self.pre_size, self.size))

    def advance(self) -> None:
        self.index += 1
        self._load()

    def split(self, part: int) -> AxisRef:
        """Take the major ``part`` of what is left of the current axis."""
        pre_size = self.pre_size or 1
        taken = AxisRef(self.name, (pre_size, part))
        self.pre_size = pre_size * part
        self.size //= part
        return taken

    def take_rest(self, into: list[AxisRef]) -> None:
        while not self.done:
            add_axis_or_merge(into, self.current(), self.mesh)
            self.advance()


def build_tensor_factor_shardings(mapping: TensorMapping, sharding: TensorSharding | None,
                                  factor_sizes: tuple[int, ...], mesh: Mesh,
                                  closed_if_missing: bool = False) -> TensorFactorShardings:
    result = TensorFactorShardings()
    for dim, dim_factors in enumerate(mapping):
        if sharding is not None:
            dim_axes = sharding.dim_shardings[dim].axes
            dim_closed = sharding.dim_shardings[dim].is_closed
        else:
            dim_axes, dim_closed = (), closed_if_missing
        cursor = _AxisCursor(dim_axes, mesh)
        overflowed = False
        for position, factor in enumerate(dim_factors):
            factor_sharding = result.factors.setdefault(factor, FactorSharding())
            factor_sharding.is_minor_most = position == len(dim_factors) - 1
            if overflowed:
                # Nothing may shard the factors after an overflowing one.
                factor_sharding.is_closed = True
                break
            factor_sharding.is_closed = dim_closed
            if factor_sharding.is_minor_most:
                # The minor-most factor may be sharded unevenly (padding).
                cursor.take_rest(factor_sharding.axes)
                break
            remaining = factor_sizes[factor]
            while not cursor.done:
                common = gcd(remaining, cursor.size)
                if cursor.size != 1 and common == 1:
                    break
                if cursor.size > common:
                    factor_sharding.axes.append(cursor.split(common))
                    remaining //= common
                else:
                    factor_sharding.axes.append(cursor.current())
                    remaining //= cursor.size
                    cursor.advance()
            if remaining > 1 and not cursor.done:
                # The factor and the next axis are relatively prime.
                overflowed = True
                cursor.take_rest(factor_sharding.overflow_axes)
    if sharding is not None:
        result.replicated_axes = sharding.replicated_axes
        result.unreduced_axes = sharding.unreduced_axes
    return result


@dataclass
class ShardingProjection:
    operands: list[TensorFactorShardings]
    results: list[TensorFactorShardings]

    @property
    def tensors(self) -> list[TensorFactorShardings]:
        return self.operands + self.results

    @staticmethod
    def build(operand_shardings: list[TensorSharding | None], result_shardings: list[TensorSharding | None],
              rule: OpShardingRule, mesh: Mesh, closed_if_missing: bool = False) -> ShardingProjection:
        sizes = rule.factor_sizes
        return ShardingProjection(
            [build_tensor_factor_shardings(m, s, sizes, mesh, closed_if_missing)
             for m, s in zip(rule.operand_mappings, operand_shardings, strict=True)],
            [build_tensor_factor_shardings(m, s, sizes, mesh, closed_if_missing)
             for m, s in zip(rule.result_mappings, result_shardings, strict=True)])

    def expand(self, factor: int, new_axes: list[AxisRef]) -> tuple[list[bool], list[bool]]:
        """Expand every tensor's sharding of ``factor`` to ``new_axes`` where it
        is a strict prefix of them; which operands and results changed."""
        return ([t.expand(factor, new_axes) for t in self.operands],
                [t.expand(factor, new_axes) for t in self.results])
