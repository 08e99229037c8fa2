"""One sharding per factor for an op whose operands and results disagree:
what Shardy's explicit-reshard insertion gives every factor before it
reshards the tensors that differ from it.

A unary op (two non-scalar tensors, no factor that needs replication, one
factor per dimension) keeps the sharding of its preferred tensor (one without
a sharded permutation factor, else the larger, else the more sharded, else
the first) and gives the other tensor's remaining factors what they have that
does not overlap it.

Otherwise a vote: each (factor, axes) pair that is a prefix of some tensor's
sharding of that factor is a candidate, weighed by (in order) the total size
of the tensors whose sharding of the factor starts with it (a sub-axis
prefix of their axis counts), the factor's type (pass-through, then reduction,
permutation, need-replication), the largest local size of the tensors with
that factor, the sharding size the axes add, and last the factor and axes
themselves. The best candidate is assigned; candidates of its factor that do
not extend it, and axes of other factors that overlap it, are dropped or cut;
repeat until none is left. A factor that follows another one in some
dimension waits until that one is fully sharded (no strided views). The axes
a need-replication factor won then move to the batching factors, major
first, as far as they divide them; it keeps none."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.axes import (
    PrefixStatus,
    add_axis_or_merge,
    axis_list_prefix_status,
    is_strict_prefix,
    prefix_without_overlap,
    total_size,
)
from xlapy.sharding.propagation.projection import ShardingProjection, TensorFactorShardings
from xlapy.sharding.sharding_rule import FactorType, OpShardingRule

Axes = tuple[AxisRef, ...]

# A candidate of a factor of this type wins over one of a type further down
# when the tensors holding them are equally large.
_PRECEDENCE = {FactorType.PASS_THROUGH: 3, FactorType.REDUCTION: 2, FactorType.PERMUTATION: 1,
               FactorType.NEED_REPLICATION: 0}


@dataclass
class _Candidate:
    factor: int
    axes: Axes
    # The sizes of the tensors whose sharding of the factor starts with the axes, summed.
    total_source_size: int
    sharding_size: int
    precedence: int
    largest_local_source_size: int = 0

    def key(self) -> tuple:
        # Shorter axis lists order first, then axis by axis.
        return (self.total_source_size, self.precedence, self.largest_local_source_size, self.sharding_size,
                self.factor, len(self.axes), self.axes)


def common_factor_axes(projection: ShardingProjection, rule: OpShardingRule, tensor_sizes: list[int],
                       mesh: Mesh) -> list[Axes]:
    """Per factor of ``rule``, the axes it gets."""
    if (len(rule.non_scalar_tensor_indices()) == 2 and not rule.need_replication_factors
            and not rule.has_dimensions_with_multiple_factors()):
        return _unary_common_axes(projection, rule, tensor_sizes, mesh)
    axes_per_factor = _vote(projection, rule, tensor_sizes, mesh)
    for factor in rule.need_replication_factors:
        won, axes_per_factor[factor] = axes_per_factor[factor], ()
        if won and rule.is_factor_in_all_non_scalar_tensors(factor):
            _distribute_to_batching_factors(won, rule, mesh, axes_per_factor)
    return axes_per_factor


# -- unary ops ----------------------------------------------------------------------

def _has_sharded_permutation_factor(tensor: TensorFactorShardings, rule: OpShardingRule) -> bool:
    return any(rule.is_permutation_factor(f) and s.axes for f, s in tensor.factors.items())


def _unary_common_axes(projection: ShardingProjection, rule: OpShardingRule, tensor_sizes: list[int],
                       mesh: Mesh) -> list[Axes]:
    tensors = projection.tensors
    first, second = rule.non_scalar_tensor_indices()

    def preference(index: int) -> tuple[bool, int, int]:
        tensor = tensors[index]
        return (not _has_sharded_permutation_factor(tensor, rule), tensor_sizes[index],
                tensor.sharding_size(mesh))

    preferred, other = (first, second) if preference(first) >= preference(second) else (second, first)
    axes_per_factor: list[Axes] = [() for _ in range(rule.num_factors)]
    taken: list[AxisRef] = []
    for factor, sharding in tensors[preferred].factors.items():
        axes_per_factor[factor] = tuple(sharding.axes)
        taken.extend(sharding.axes)
    for factor, sharding in tensors[other].factors.items():
        if factor not in tensors[preferred].factors:
            axes_per_factor[factor] = _cut_at_overlap(tuple(sharding.axes), taken)
    return axes_per_factor


def _cut_at_overlap(axes: Axes, others: list[AxisRef]) -> Axes:
    """The longest prefix of ``axes`` overlapping none of ``others`` (its last
    axis possibly a prefix sub-axis of the original one)."""
    for index, axis in enumerate(axes):
        prefix = prefix_without_overlap(axis, others)
        if prefix != axis:
            return axes[:index] if prefix is None else (*axes[:index], prefix)
    return axes


# -- the vote -----------------------------------------------------------------------

def _candidates(projection: ShardingProjection, rule: OpShardingRule, tensor_sizes: list[int],
                mesh: Mesh) -> list[_Candidate]:
    """Every (factor, axes) where the axes start some tensor's sharding of the
    factor; each tensor whose sharding of the factor starts with them (its
    last axis possibly a prefix sub-axis of the tensor's) is a source."""
    prefixes: dict[int, set[Axes]] = {}
    for tensor in projection.tensors:
        for factor, sharding in tensor.factors.items():
            axes = tuple(sharding.axes)
            while axes:
                prefixes.setdefault(factor, set()).add(axes)
                axes = axes[:-1]
    found: dict[tuple[int, Axes], _Candidate] = {}
    for size, tensor in zip(tensor_sizes, projection.tensors, strict=True):
        for factor, sharding in tensor.factors.items():
            if not sharding.axes:
                continue
            for axes in prefixes[factor]:
                if axis_list_prefix_status(axes, sharding.axes) is PrefixStatus.NOT_A_PREFIX:
                    continue
                candidate = found.get((factor, axes))
                if candidate is None:
                    found[(factor, axes)] = _Candidate(factor, axes, size, total_size(axes, mesh),
                                                       _PRECEDENCE[rule.factor_type(factor)])
                else:
                    candidate.total_source_size += size
    return list(found.values())


def _blocking_factors(rule: OpShardingRule) -> dict[int, set[int]]:
    """Per factor, the factors right before it in some dimension: it may only
    be sharded once they are fully sharded."""
    blocking: dict[int, set[int]] = {}
    for mapping in rule.tensor_mappings:
        for dim in mapping:
            for before, factor in pairwise(dim):
                blocking.setdefault(factor, set()).add(before)
    return blocking


def _vote(projection: ShardingProjection, rule: OpShardingRule, tensor_sizes: list[int],
          mesh: Mesh) -> list[Axes]:
    assigned: list[Axes] = [() for _ in range(rule.num_factors)]
    candidates = _candidates(projection, rule, tensor_sizes, mesh)
    _update_local_source_sizes(candidates, projection, tensor_sizes, assigned, mesh)
    blocking = _blocking_factors(rule)

    def best() -> _Candidate | None:
        valid = [c for c in candidates if not blocking.get(c.factor)]
        return max(valid, key=_Candidate.key, default=None)

    chosen = best()
    while chosen is not None:
        factor, axes = chosen.factor, chosen.axes
        assigned[factor] = axes
        if total_size(axes, mesh) == rule.factor_sizes[factor]:
            for waiting in blocking.values():
                waiting.discard(factor)
        kept = []
        for candidate in candidates:
            if candidate.factor == factor:
                # Only candidates that extend the assignment stay.
                if is_strict_prefix(axes, candidate.axes):
                    candidate.sharding_size = total_size(candidate.axes, mesh) // total_size(axes, mesh)
                    kept.append(candidate)
                continue
            cut = _cut_at_overlap(candidate.axes, list(axes))
            if cut != candidate.axes:
                candidate.axes = cut
                if cut == assigned[candidate.factor]:
                    continue
                current = assigned[candidate.factor]
                candidate.sharding_size = total_size(cut, mesh) // total_size(current, mesh)
            else:
                # As Shardy does: the whole size, not what it adds to the assignment.
                candidate.sharding_size = total_size(candidate.axes, mesh)
            kept.append(candidate)
        candidates = kept
        _update_local_source_sizes(candidates, projection, tensor_sizes, assigned, mesh)
        chosen = best()
    return assigned


def _update_local_source_sizes(candidates: list[_Candidate], projection: ShardingProjection,
                               tensor_sizes: list[int], assigned: list[Axes], mesh: Mesh) -> None:
    """Each candidate's largest local source size: the largest per-device size,
    under the assignment so far, of a tensor that has its factor."""
    for candidate in candidates:
        candidate.largest_local_source_size = 0
    for size, tensor in zip(tensor_sizes, projection.tensors, strict=True):
        local = size
        for factor in tensor.factors:
            local //= total_size(assigned[factor], mesh)
        for candidate in candidates:
            if candidate.factor in tensor.factors:
                candidate.largest_local_source_size = max(candidate.largest_local_source_size, local)


# -- need-replication factors --------------------------------------------------------

def _distribute_to_batching_factors(axes: Axes, rule: OpShardingRule, mesh: Mesh,
                                    axes_per_factor: list[Axes]) -> None:
    """Append ``axes``, major first, to the batching factors in order, each
    taking them while they divide what is left of it."""
    remaining = list(axes)
    for factor in rule.batching_factors():
        size = rule.factor_sizes[factor]
        if size == 0:
            continue
        current = list(axes_per_factor[factor])
        sharded = total_size(current, mesh)
        if size % sharded:
            continue
        capacity = size // sharded
        while remaining:
            axis_size = remaining[0].size(mesh)
            if capacity % axis_size:
                break
            add_axis_or_merge(current, remaining.pop(0), mesh)
            capacity //= axis_size
        axes_per_factor[factor] = tuple(current)
        if not remaining:
            break
