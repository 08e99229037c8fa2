"""Index arithmetic on laid-out arrays: logical index <-> offset in the
physical buffer, for any ``minor_to_major`` and any number of tile levels
(with combined ``*`` dimensions, partial tiles and tail padding).

Each tile level is applied to the physical dimensions left by the previous
one (listed major-to-minor): the tile covers the minor-most ``len(tile)`` of
them, each ``*`` entry first folds its dimension into the next more-minor
one, then every tiled dimension of size ``d`` with tile size ``t`` becomes a
tile index of bound ``ceil(d/t)`` and a within-tile index of bound ``t``, all
tile indices before all within-tile indices. The buffer holds the final
dimensions in row-major order, padded at the end to a multiple of
``tail_padding_alignment_in_elements``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from xlapy.errors import XlapyError
from xlapy.shapes.layout import COMBINE_DIMENSION
from xlapy.shapes.shape import UNBOUNDED_SIZE, Shape, check_shape


@dataclass(frozen=True)
class TileLevel:
    """One tile applied to ``dims``, the physical dimensions before it."""

    dims: tuple[int, ...]
    tile: tuple[int, ...]

    @property
    def prefix(self) -> int:
        """How many major dimensions the tile leaves alone."""
        return len(self.dims) - len(self.tile)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The tile sizes, combined entries dropped."""
        return tuple(t for t in self.tile if t != COMBINE_DIMENSION)

    @property
    def runs(self) -> list[tuple[int, ...]]:
        """The tiled dimensions grouped into the runs that ``*`` folds together."""
        runs: list[tuple[int, ...]] = []
        run: list[int] = []
        for d, t in zip(self.dims[self.prefix:], self.tile):
            run.append(d)
            if t != COMBINE_DIMENSION:
                runs.append(tuple(run))
                run = []
        return runs

    @property
    def folded_dims(self) -> tuple[int, ...]:
        return tuple(math.prod(run) for run in self.runs)

    @property
    def result_dims(self) -> tuple[int, ...]:
        counts = tuple(-(-d // t) for d, t in zip(self.folded_dims, self.sizes))
        return self.dims[: self.prefix] + counts + self.sizes

    def forward(self, coords: Sequence) -> list:
        """Coordinates before the tile -> after it (ints or numpy arrays)."""
        folded = []
        it = iter(coords[self.prefix:])
        for run in self.runs:
            value = next(it)
            for d in run[1:]:
                value = value * d + next(it)
            folded.append(value)
        return (
            list(coords[: self.prefix])
            + [f // t for f, t in zip(folded, self.sizes)]
            + [f % t for f, t in zip(folded, self.sizes)]
        )

    def backward(self, coords: Sequence[int]) -> list[int] | None:
        """Coordinates after the tile -> before it; None for a padding slot."""
        n = len(self.sizes)
        counts, within = coords[self.prefix: self.prefix + n], coords[self.prefix + n:]
        result = list(coords[: self.prefix])
        for c, w, t, run in zip(counts, within, self.sizes, self.runs):
            folded = c * t + w
            if folded >= math.prod(run):
                return None
            unfolded = []
            for d in reversed(run):
                unfolded.append(folded % d)
                folded //= d
            result.extend(reversed(unfolded))
        return result


class PhysicalLayout:
    """The tiling of one array shape, ready for index arithmetic."""

    def __init__(self, shape: Shape):
        if not shape.is_array:
            raise XlapyError(f"{shape} is not an array shape; it has no physical layout")
        if any(d == UNBOUNDED_SIZE for d in shape.dimensions):
            raise XlapyError(f"{shape} has an unbounded dynamic dimension; its buffer size is unknown")
        check_shape(shape)
        self.shape = shape
        self.layout = shape.layout_or_default
        self.minor_to_major = self.layout.minor_to_major
        # Physical dimension k (major-to-minor) is logical dimension major_to_minor[k].
        self.major_to_minor = tuple(reversed(self.minor_to_major))
        dims = tuple(shape.dimensions[d] for d in self.major_to_minor)
        levels = []
        for tile in self.layout.tiles:
            level = TileLevel(dims, tuple(tile))
            levels.append(level)
            dims = level.result_dims
        self.levels: tuple[TileLevel, ...] = tuple(levels)
        self.tiled_dims: tuple[int, ...] = dims

    @cached_property
    def element_count(self) -> int:
        """Elements in the buffer, padding included."""
        count = math.prod(self.tiled_dims)
        align = self.layout.tail_padding_alignment_in_elements
        return -(-count // align) * align

    def linear_index(self, index: Sequence) -> int | np.ndarray:
        """Offset of logical ``index`` (ints, or numpy arrays of ints) in the buffer."""
        coords = [index[d] for d in self.major_to_minor]
        for level in self.levels:
            coords = level.forward(coords)
        linear = 0
        for c, d in zip(coords, self.tiled_dims):
            linear = linear * d + c
        return linear

    def logical_index(self, linear: int) -> tuple[int, ...] | None:
        """The logical index stored at buffer offset ``linear``; None for padding."""
        if not 0 <= linear < self.element_count:
            raise XlapyError(f"offset {linear} is outside the buffer of {self.shape} "
                             f"({self.element_count} elements)")
        if linear >= math.prod(self.tiled_dims):
            return None  # tail padding
        coords = [int(c) for c in np.unravel_index(linear, self.tiled_dims)] if self.tiled_dims else []
        for level in reversed(self.levels):
            coords = level.backward(coords)
            if coords is None:
                return None
        index = [0] * len(coords)
        for k, d in enumerate(self.major_to_minor):
            index[d] = coords[k]
        return tuple(index)

    def linear_indices(self) -> np.ndarray:
        """The buffer offset of every logical element, as an array of the logical shape."""
        grids = np.indices(self.shape.dimensions, dtype=np.int64, sparse=True)
        return np.broadcast_to(self.linear_index(list(grids)), self.shape.dimensions)


@lru_cache(maxsize=512)
def physical_layout(shape: Shape) -> PhysicalLayout:
    """The (cached) tiling of ``shape``."""
    return PhysicalLayout(shape)


def _checked_index(shape: Shape, index: Sequence[int]) -> tuple[int, ...]:
    index = tuple(int(i) for i in index)
    if len(index) != shape.rank or any(not 0 <= i < d for i, d in zip(index, shape.dimensions)):
        raise XlapyError(f"index {list(index)} is out of bounds for {shape}")
    return index


def linear_index(shape: Shape, index: Sequence[int]) -> int:
    """Offset in elements of logical ``index`` in the physical buffer of ``shape``."""
    return int(physical_layout(shape).linear_index(_checked_index(shape, index)))


def logical_index(shape: Shape, linear: int) -> tuple[int, ...] | None:
    """The logical index at buffer offset ``linear``, or None for a padding slot."""
    return physical_layout(shape).logical_index(int(linear))


def physical_element_count(shape: Shape) -> int:
    """Number of elements in the physical buffer of ``shape``, padding included."""
    return physical_layout(shape).element_count


def physical_byte_size(shape: Shape) -> int:
    """Bytes of the physical buffer of ``shape``: elements of ``E(n)`` bits packed
    together when the layout sets an element size, else whole bytes per element
    (sub-byte types unpacked), as XLA sizes arrays."""
    count = physical_layout(shape).element_count
    bits = shape.layout_or_default.element_size_in_bits
    if bits:
        return -(-count * bits // 8)
    return count * shape.type.byte_width


def major_to_minor_permutation(shape: Shape) -> tuple[int, ...] | None:
    """The dimensions of ``shape`` from major to minor when its buffer is exactly its elements in that order
    (no tiles, padding or packing), so that the logical array is a transposed view of the reshaped buffer;
    None otherwise."""
    layout = shape.layout
    rank = len(shape.dimensions)
    if layout is None:
        return tuple(range(rank))
    if layout.tiles or layout.tail_padding_alignment_in_elements != 1 or layout.element_size_in_bits or \
            layout.is_sparse or sorted(layout.minor_to_major) != list(range(rank)):
        return None
    return tuple(reversed(layout.minor_to_major))


def logical_view(buffer: np.ndarray, shape: Shape) -> np.ndarray | None:
    """The logical array of ``shape`` as a (strided) view of its flat physical ``buffer``, when the layout is
    a plain order of the dimensions (``major_to_minor_permutation``); None otherwise."""
    order = major_to_minor_permutation(shape)
    if order is None:
        return None
    return buffer.reshape([shape.dimensions[d] for d in order]).transpose(np.argsort(order))


def to_physical(array: np.ndarray, shape: Shape, pad_value: object = 0) -> np.ndarray:
    """Lay out the logical ``array`` as ``shape`` does: a 1-D buffer with padding."""
    array = np.asarray(array)
    if array.shape != tuple(shape.dimensions):
        raise XlapyError(f"array of shape {array.shape} does not match {shape}")
    order = major_to_minor_permutation(shape)
    if order is not None:  # a plain order of the dimensions: numpy's transposed copy
        return array.transpose(order).flatten()
    physical = physical_layout(shape)
    buffer = np.full(physical.element_count, pad_value, dtype=array.dtype)
    buffer[physical.linear_indices().ravel()] = array.ravel()
    return buffer


def from_physical(buffer: np.ndarray, shape: Shape) -> np.ndarray:
    """Read the logical array of ``shape`` back out of its 1-D physical buffer."""
    buffer = np.asarray(buffer).ravel()
    physical = physical_layout(shape)
    if buffer.size != physical.element_count:
        raise XlapyError(f"buffer of {buffer.size} elements does not match {shape} "
                         f"({physical.element_count} elements)")
    view = logical_view(buffer, shape)
    if view is not None:
        return view.copy()
    return buffer[physical.linear_indices()]
