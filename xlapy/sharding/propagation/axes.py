"""Operations on lists of axis refs that propagation needs beyond ``AxisRef``
itself: prefix relations between lists, merging consecutive sub-axes, and the
manual/free split of a manual computation's shardings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding


class PrefixStatus(Enum):
    EQUAL = "equal"
    STRICT_PREFIX = "strict_prefix"
    NOT_A_PREFIX = "not_a_prefix"


def axis_list_prefix_status(first: Sequence[AxisRef], second: Sequence[AxisRef]) -> PrefixStatus:
    """Whether ``first`` is ``second``, a strict prefix of it (its last axis
    may be a prefix sub-axis of the matching one), or neither."""
    if not first:
        return PrefixStatus.EQUAL if not second else PrefixStatus.STRICT_PREFIX
    if len(first) > len(second):
        return PrefixStatus.NOT_A_PREFIX
    last = len(first) - 1
    for i in range(last):
        if first[i] != second[i]:
            return PrefixStatus.NOT_A_PREFIX
    if len(first) == len(second) and first[last] == second[last]:
        return PrefixStatus.EQUAL
    if first[last].prefix_of(second[last]):
        return PrefixStatus.STRICT_PREFIX
    return PrefixStatus.NOT_A_PREFIX


def is_strict_prefix(first: Sequence[AxisRef], second: Sequence[AxisRef]) -> bool:
    return axis_list_prefix_status(first, second) is PrefixStatus.STRICT_PREFIX


def prefix_without_overlap(axis: AxisRef, others: Iterable[AxisRef]) -> AxisRef | None:
    """The largest prefix of ``axis`` overlapping none of ``others`` (None if empty)."""
    result: AxisRef | None = axis
    for other in others:
        result = result.get_prefix_without_overlap(other)
        if result is None:
            return None
    return result


def add_axis_or_merge(axes: list[AxisRef], axis: AxisRef, mesh: Mesh) -> None:
    """Append ``axis``, merging it into the last axis when they are consecutive sub-axes."""
    if axes and axes[-1].can_merge(axis):
        axes[-1] = axes[-1].merge(axis, mesh)
    else:
        axes.append(axis)


def greatest_common_prefix(first: Sequence[AxisRef], second: Sequence[AxisRef]) -> list[AxisRef]:
    result: list[AxisRef] = []
    for a, b in zip(first, second):
        if a == b:
            result.append(a)
            continue
        common = a.get_greatest_common_prefix(b)
        if common is not None:
            result.append(common)
        break
    return result


def total_size(axes: Iterable[AxisRef], mesh: Mesh) -> int:
    size = 1
    for axis in axes:
        size *= axis.size(mesh)
    return size


# -- manual computations ------------------------------------------------------

def _first_free_axis(axes: Sequence[AxisRef], manual_axes: Sequence[str]) -> int:
    """Manual axes come first in a manual computation's dimension sharding."""
    count = 0
    for axis in axes:
        if axis.name not in manual_axes:
            break
        count += 1
    return count


def _keep_free(axes: Iterable[AxisRef], manual_axes: Sequence[str]) -> tuple[AxisRef, ...]:
    return tuple(axis for axis in axes if axis.name not in manual_axes)


def erase_manual_axes(sharding: TensorSharding, manual_axes: Sequence[str]) -> TensorSharding:
    """The local (in-body) view: each dimension without its leading manual
    axes, replicated/unreduced without manual axes."""
    if not manual_axes:
        return sharding
    dims = tuple(dim.drop_front(_first_free_axis(dim.axes, manual_axes)) for dim in sharding.dim_shardings)
    return TensorSharding(sharding.mesh, dims, _keep_free(sharding.replicated_axes, manual_axes),
                          _keep_free(sharding.unreduced_axes, manual_axes))


def add_free_axes(outer: TensorSharding, local: TensorSharding, manual_axes: Sequence[str]) -> TensorSharding:
    """``outer``'s manual axes followed by ``local``'s (free) axes in each
    dimension; open/closed and priority from ``local``, replicated and
    unreduced axes from ``outer``."""
    dims = []
    for outer_dim, local_dim in zip(outer.dim_shardings, local.dim_shardings):
        manual = outer_dim.axes[:_first_free_axis(outer_dim.axes, manual_axes)]
        dims.append(DimensionSharding(manual + local_dim.axes, local_dim.is_closed, local_dim.priority))
    return TensorSharding(local.mesh, tuple(dims), outer.replicated_axes, outer.unreduced_axes)
