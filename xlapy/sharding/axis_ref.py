"""References to a mesh axis or to a sub-axis of it, and their algebra.

A full axis of size ``n`` can be reshaped into ``[k_1, ..., k_m]``; the sub-axis ``"x":(p)k``
is the factor of size ``k`` whose major factors multiply to ``p`` (its *pre-size*). It covers
the "multiplicative interval" ``[p, p*k)`` of the axis, ``p*k`` being its *next pre-size*; a full
axis covers ``[1, n)``. Most relations below compare those intervals, and like Shardy's they do
not need the mesh unless the full axis size matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

from xlapy.sharding.mesh import Mesh, parse_quoted, quote
from xlapy.syntax import Cursor


@total_ordering
@dataclass(frozen=True, order=False)
class AxisRef:
    name: str
    # (pre_size, size) for a sub-axis ``"name":(pre_size)size``; None for the full axis.
    sub_axis: tuple[int, int] | None = None

    @staticmethod
    def parse(text: str) -> AxisRef:
        cursor = Cursor(text)
        ref = parse_axis_ref(cursor)
        if not cursor.at_end():
            raise cursor.error(f"unexpected {cursor.found()} after the axis ref")
        return ref

    # -- sizes ----------------------------------------------------------------
    @property
    def is_sub_axis(self) -> bool:
        return self.sub_axis is not None

    @property
    def pre_size(self) -> int:
        """The sub-axis pre-size, 1 for a full axis."""
        return self.sub_axis[0] if self.sub_axis else 1

    def size(self, mesh: Mesh) -> int:
        return self.sub_axis[1] if self.sub_axis else mesh.axis_size(self.name)

    def next_pre_size(self, mesh: Mesh) -> int:
        """``pre_size * size``; the full axis size for a full axis."""
        return self.pre_size * self.sub_axis[1] if self.sub_axis else mesh.axis_size(self.name)

    def full(self) -> AxisRef:
        return AxisRef(self.name)

    # -- text -----------------------------------------------------------------
    def __str__(self) -> str:
        if self.sub_axis is None:
            return quote(self.name)
        pre_size, size = self.sub_axis
        return f"{quote(self.name)}:({pre_size}){size}"

    def __repr__(self) -> str:
        return f"AxisRef({self})"

    # -- orderings ------------------------------------------------------------
    def __lt__(self, other: AxisRef) -> bool:
        """Order by name, then (same axis) by position inside the axis: a full axis sorts
        before the sub-axes it does not start with and after those it does."""
        if not isinstance(other, AxisRef):
            return NotImplemented
        if self.name != other.name:
            return self.name < other.name
        return _same_axis_less(self, other)

    def sort_key(self, mesh: Mesh) -> tuple[int, int, int]:
        """Key ordering axis refs the way Shardy orders them w.r.t. ``mesh``: by the axis
        position in the mesh, then by pre-size, then by size."""
        return (mesh.axis_index(self.name), self.pre_size, self.size(mesh))

    # -- relations (all False/None across different axes) ---------------------
    def contains(self, other: AxisRef) -> bool:
        """``other`` is this axis ref or one of the pieces it can be split into."""
        if self.name != other.name:
            return False
        if self.sub_axis is None:
            return True
        if other.sub_axis is None:
            return False
        return self.pre_size <= other.pre_size and _next(self) >= _next(other)

    def strictly_contains(self, other: AxisRef) -> bool:
        return self != other and self.contains(other)

    def prefix_of(self, other: AxisRef) -> bool:
        """``other`` contains this axis ref and both start at the same pre-size."""
        return other.contains(self) and self.pre_size == other.pre_size

    def strict_prefix_of(self, other: AxisRef) -> bool:
        return self != other and self.prefix_of(other)

    def suffix_of(self, other: AxisRef, mesh: Mesh) -> bool:
        """``other`` contains this axis ref and both end at the same next pre-size."""
        return other.contains(self) and self.next_pre_size(mesh) == other.next_pre_size(mesh)

    def strict_suffix_of(self, other: AxisRef, mesh: Mesh) -> bool:
        return self != other and self.suffix_of(other, mesh)

    def overlaps(self, other: AxisRef) -> bool:
        if self.name != other.name:
            return False
        if self.sub_axis is None or other.sub_axis is None:
            return True
        return self.pre_size < _next(other) and other.pre_size < _next(self)

    def can_coexist(self, other: AxisRef) -> bool:
        """Whether both can be pieces of one factorisation of the axis (their overlap and
        the rest, or the gap between them, are valid sub-axes)."""
        if self.name != other.name or self.sub_axis is None or other.sub_axis is None:
            return True
        return _can_sub_axes_coexist(*_bounds(self, other))

    def get_overlap(self, other: AxisRef) -> AxisRef | None:
        """The largest axis ref contained in both, None if they do not overlap (or cannot
        coexist)."""
        if self.name != other.name:
            return None
        if self.sub_axis is None:
            return other
        if other.sub_axis is None:
            return self
        min_pre, max_pre, min_next, max_next = _bounds(self, other)
        if min_next <= max_pre or not _can_sub_axes_coexist(min_pre, max_pre, min_next, max_next):
            return None
        return AxisRef(self.name, (max_pre, min_next // max_pre))

    def get_prefix_without_overlap(self, other: AxisRef) -> AxisRef | None:
        """This axis ref without the part that overlaps ``other`` and everything minor to
        it; None if nothing is left (or they cannot coexist)."""
        if not self.can_coexist(other):
            return None
        if not self.overlaps(other):
            return self
        if self.pre_size >= other.pre_size:
            return None
        return AxisRef(self.name, (self.pre_size, other.pre_size // self.pre_size))

    def get_suffix_without_overlap(self, other: AxisRef, mesh: Mesh) -> AxisRef | None:
        """This axis ref without the part that overlaps ``other`` and everything major to
        it; None if nothing is left (or they cannot coexist)."""
        if not self.can_coexist(other):
            return None
        if not self.overlaps(other):
            return self
        this_next, other_next = self.next_pre_size(mesh), other.next_pre_size(mesh)
        if this_next <= other_next:
            return None
        return AxisRef(self.name, (other_next, this_next // other_next))

    def get_greatest_common_prefix(self, other: AxisRef) -> AxisRef | None:
        if not self.can_coexist(other):
            return None
        if self.prefix_of(other):
            return self
        if other.prefix_of(self):
            return other
        return None

    def can_merge(self, other: AxisRef) -> bool:
        """Both are sub-axes of one axis and ``other`` starts where this one ends."""
        if self.name != other.name or self.sub_axis is None or other.sub_axis is None:
            return False
        return _next(self) == other.pre_size

    def merge(self, other: AxisRef, mesh: Mesh) -> AxisRef:
        """The sub-axis (or full axis) made of this one followed by ``other``; requires
        ``can_merge(other)``."""
        assert self.can_merge(other), f"cannot merge {self} and {other}"
        size = self.sub_axis[1] * other.sub_axis[1]
        if self.pre_size == 1 and size == mesh.axis_size(self.name):
            return AxisRef(self.name)
        return AxisRef(self.name, (self.pre_size, size))


def _next(ref: AxisRef) -> int:
    pre_size, size = ref.sub_axis
    return pre_size * size


def _bounds(a: AxisRef, b: AxisRef) -> tuple[int, int, int, int]:
    """(min pre-size, max pre-size, min next pre-size, max next pre-size) of two sub-axes."""
    pre = sorted((a.pre_size, b.pre_size))
    nxt = sorted((_next(a), _next(b)))
    return pre[0], pre[1], nxt[0], nxt[1]


def _can_sub_axes_coexist(min_pre: int, max_pre: int, min_next: int, max_next: int) -> bool:
    if min_next > max_pre:
        # Overlapping: the shared middle and both outer pieces must be whole factors.
        return min_next % max_pre == 0 and max_pre % min_pre == 0 and max_next % min_next == 0
    # Disjoint: the gap between them must be a whole factor.
    return max_pre % min_next == 0


def _same_axis_less(a: AxisRef, b: AxisRef) -> bool:
    if a.sub_axis is None:
        return b.pre_size > 1
    if b.sub_axis is None:
        return a.pre_size == 1
    return a.sub_axis < b.sub_axis


def sorted_by_mesh(refs, mesh: Mesh) -> list[AxisRef]:
    """``refs`` in Shardy's mesh order."""
    return sorted(refs, key=lambda ref: ref.sort_key(mesh))


def is_sorted_by_mesh(refs, mesh: Mesh) -> bool:
    keys = [ref.sort_key(mesh) for ref in refs]
    return all(keys[i] <= keys[i + 1] for i in range(len(keys) - 1))


def parse_axis_ref(cursor: Cursor) -> AxisRef:
    """Read ``"x"`` or ``"x":(pre_size)size``."""
    name = parse_quoted(cursor, "a quoted axis name")
    if not cursor.eat(":"):
        return AxisRef(name)
    cursor.expect("(", "to start a sub-axis pre-size")
    pre_size = cursor.int("a sub-axis pre-size")
    cursor.expect(")", "after a sub-axis pre-size")
    size = cursor.int("a sub-axis size")
    return AxisRef(name, (pre_size, size))
