"""The ``replica_groups`` attribute of collectives, read the one way the
verifier and the interpreter share.

Two forms, as XLA prints them:

- a list of groups of device ids, ``{{0,1},{2,3}}``; ``{}`` means every device
  in one group;
- the iota form ``[G,S]<=[d0,d1,...]`` or ``[G,S]<=[d0,d1,...]T(p0,p1,...)``:
  the ids ``0..n-1`` laid out as an array of dimensions ``d``, transposed by the
  permutation ``p`` when given, then read as ``G`` groups of ``S`` ids
  (``G*S`` must be ``n``).

Anything else is an ``XlapyError`` naming the attribute.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from xlapy.errors import XlapyError

# The most device ids the iota form may be expanded to (lists of groups are as
# long as their text): a larger layout is refused instead of filling memory.
MAX_DEVICES = 1 << 16

# Ids and sizes are ASCII digits, at most 18 of them (below 2^63, so products of two stay exact and small).
_ID = r"[0-9]{1,18}"
_NUMBERS = rf"{_ID}(?:,{_ID})*"
_GROUP = rf"\{{(?:{_NUMBERS})?\}}"
_LISTED = re.compile(rf"\{{(?:{_GROUP}(?:,{_GROUP})*)?\}}")
_IOTA = re.compile(rf"\[({_NUMBERS})\]<=\[({_NUMBERS})\](?:T\(({_NUMBERS})\))?")


@dataclass(frozen=True)
class ReplicaGroups:
    """Parsed ``replica_groups``: ``listed`` groups, or the iota form's
    ``shape`` (groups, group size), ``dims`` and ``permutation``."""

    text: str
    listed: tuple[tuple[int, ...], ...] | None = None
    shape: tuple[int, int] | None = None
    dims: tuple[int, ...] = ()
    permutation: tuple[int, ...] = ()

    @property
    def group_size(self) -> int | None:
        """The number of ids in each group; None when ``{}`` (every device)
        or when listed groups differ in size or one is empty."""
        if self.shape is not None:
            return self.shape[1]
        sizes = {len(g) for g in self.listed or ()}
        return sizes.pop() if len(sizes) == 1 and 0 not in sizes else None

    def groups(self) -> list[list[int]]:
        """The groups as lists of ids ([] for ``{}``)."""
        if self.shape is None:
            return [list(g) for g in self.listed or ()]
        count = self.shape[0] * self.shape[1]
        if count > MAX_DEVICES:
            raise XlapyError(f"replica_groups={self.text} names {count} devices, more than the {MAX_DEVICES} "
                             f"supported")
        # The id at each position of the transposed array, without numpy: strides of the untransposed layout.
        strides = [math.prod(self.dims[i + 1:]) for i in range(len(self.dims))]
        dims = [self.dims[p] for p in self.permutation]
        steps = [strides[p] for p in self.permutation]
        ids = [0]
        for size, step in zip(dims, steps):
            ids = [base + j * step for base in ids for j in range(size)]
        groups, size = self.shape
        return [ids[g * size:(g + 1) * size] for g in range(groups)]


def parse_replica_groups(value: Any) -> ReplicaGroups:
    """``value`` (the attribute's text, or a list of lists of ids) as
    ``ReplicaGroups``; raises ``XlapyError`` when it is neither form."""
    if isinstance(value, (list, tuple)):
        return _listed_value(value)
    text = re.sub(r"\s+", "", str(value if value is not None else "")) or "{}"
    if _LISTED.fullmatch(text):
        return ReplicaGroups(text, listed=tuple(tuple(_ids(body)) for body in re.findall(r"\{([0-9,]*)\}",
                                                                                           text[1:-1])))
    iota = _IOTA.fullmatch(text)
    if iota:
        return _iota(text, *iota.groups())
    raise XlapyError(f"replica_groups={text[:100]} is neither a list of groups like {{{{0,1}},{{2,3}}}} nor the "
                     f"iota form [groups,size]<=[dims] or [groups,size]<=[dims]T(permutation)")


def _ids(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _listed_value(value: list | tuple) -> ReplicaGroups:
    shown = "{" + ",".join("{" + ",".join(map(str, g)) + "}" if isinstance(g, (list, tuple)) else str(g)
                           for g in value) + "}"
    return parse_replica_groups(shown)


def _iota(text: str, shape_text: str, dims_text: str, permutation_text: str | None) -> ReplicaGroups:
    shape, dims = _ids(shape_text), _ids(dims_text)
    permutation = _ids(permutation_text) if permutation_text else list(range(len(dims)))
    if len(shape) != 2 or 0 in shape:
        raise XlapyError(f"replica_groups={text}: the iota form needs [groups,size] of at least one group of one "
                         f"id, got [{shape_text}]")
    if math.prod(shape) != math.prod(dims):
        raise XlapyError(f"replica_groups={text}: {shape[0]} groups of {shape[1]} are {math.prod(shape)} ids, but "
                         f"[{dims_text}] holds {math.prod(dims)}")
    if sorted(permutation) != list(range(len(dims))):
        raise XlapyError(f"replica_groups={text}: T({permutation_text}) is not a permutation of the "
                         f"{len(dims)} dimensions of [{dims_text}]")
    return ReplicaGroups(text, shape=(shape[0], shape[1]), dims=tuple(dims), permutation=tuple(permutation))
