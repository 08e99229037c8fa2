"""XLA's ``Layout``: dimension order, tiles, memory space and the other fields
XLA prints between the braces of a shape, e.g. ``{3,2,0,1:T(8,128)(2,1)S(1)}``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xlapy.shapes.shape import Shape

# A tile entry that folds its dimension into the next more-minor one (printed `*`).
COMBINE_DIMENSION = -1


@dataclass(frozen=True)
class SplitConfig:
    """``SC(dim:i,j,...)``: the split points of one dimension across memories."""

    dimension: int
    split_indices: tuple[int, ...]

    def __str__(self) -> str:
        return f"({self.dimension}:{','.join(map(str, self.split_indices))})"


def tile_to_string(tile: tuple[int, ...]) -> str:
    """A tile as XLA prints it: ``(8,128)``, ``(2,*,128)``."""
    return "(" + ",".join("*" if d == COMBINE_DIMENSION else str(d) for d in tile) + ")"


@dataclass(frozen=True)
class Layout:
    """How an array is laid out in memory.

    ``minor_to_major`` lists the dimensions from the fastest varying to the
    slowest; ``tiles`` are applied one after the other to the physical
    dimensions (a combined ``*`` entry is stored as ``COMBINE_DIMENSION``).
    The other fields default to the values XLA omits when printing.
    """

    minor_to_major: tuple[int, ...] = ()
    tiles: tuple[tuple[int, ...], ...] = ()
    tail_padding_alignment_in_elements: int = 1
    index_primitive_type: str | None = None
    pointer_primitive_type: str | None = None
    element_size_in_bits: int = 0
    memory_space: int = 0
    split_configs: tuple[SplitConfig, ...] = ()
    physical_shape: Shape | None = None
    dynamic_shape_metadata_prefix_bytes: int = 0
    # Sparse dimension level types, as printed inside D(...): "D", "C", "S",
    # "H", each possibly followed by "+" (not unique) and "~" (not ordered).
    dim_level_types: tuple[str, ...] = field(default=())

    @property
    def is_sparse(self) -> bool:
        return any(not t.startswith("D") for t in self.dim_level_types)

    def __str__(self) -> str:
        items: list[str] = []
        if self.dim_level_types:
            items.append("D(" + ",".join(self.dim_level_types) + ")")
        if self.tiles:
            items.append("T" + "".join(tile_to_string(t) for t in self.tiles))
        if self.tail_padding_alignment_in_elements != 1:
            items.append(f"L({self.tail_padding_alignment_in_elements})")
        if self.index_primitive_type is not None:
            items.append(f"#({self.index_primitive_type})")
        if self.pointer_primitive_type is not None:
            items.append(f"*({self.pointer_primitive_type})")
        if self.element_size_in_bits != 0:
            items.append(f"E({self.element_size_in_bits})")
        if self.memory_space != 0:
            items.append(f"S({self.memory_space})")
        if self.split_configs:
            items.append("SC" + "".join(str(c) for c in self.split_configs))
        if self.physical_shape is not None:
            items.append(f"P({self.physical_shape})")
        if self.dynamic_shape_metadata_prefix_bytes > 0:
            items.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
        dims = ",".join(map(str, self.minor_to_major))
        return "{" + dims + (":" + "".join(items) if items else "") + "}"


def default_layout(rank: int) -> Layout:
    """XLA's default layout: dimensions ordered major-to-minor, no tiles."""
    return Layout(minor_to_major=tuple(range(rank - 1, -1, -1)))
