"""XLA's ``Shape``: an array (element type, dimensions, optional layout), a
tuple of shapes, or a token."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from xlapy.errors import VerifyError, XlapyError
from xlapy.shapes.element_types import ElementType, TypeKind, element_type
from xlapy.shapes.layout import COMBINE_DIMENSION, Layout, default_layout

# The size XLA stores for an unbounded dynamic dimension (printed `?`).
UNBOUNDED_SIZE = -(2**63)
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Shape:
    """An XLA shape. Arrays have ``element_type``, ``dimensions`` and maybe a
    ``layout``; tuples have element type ``"tuple"`` and ``tuple_shapes``.

    ``dynamic_dimensions`` marks dimensions printed ``<=N`` (bounded dynamic,
    size N is the bound) or ``?`` (unbounded, size ``UNBOUNDED_SIZE``).
    """

    element_type: str
    dimensions: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    dynamic_dimensions: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        element_type(self.element_type)  # rejects unknown names
        # Accept any sequences, store tuples: shapes are hashable values.
        object.__setattr__(self, "dimensions", tuple(int(d) for d in self.dimensions))
        object.__setattr__(self, "dynamic_dimensions", tuple(bool(d) for d in self.dynamic_dimensions))
        object.__setattr__(self, "tuple_shapes", tuple(self.tuple_shapes))
        if self.dynamic_dimensions and len(self.dynamic_dimensions) != len(self.dimensions):
            raise XlapyError("dynamic_dimensions must have one entry per dimension")
        if not self.dynamic_dimensions and self.dimensions:
            object.__setattr__(self, "dynamic_dimensions", (False,) * len(self.dimensions))
        if not self.dimensions and self.layout == Layout():
            # A scalar's only layout is `{}`, which XLA never prints: keep one form.
            object.__setattr__(self, "layout", None)

    # -- constructors -----------------------------------------------------
    @staticmethod
    def array(element_type: str, dimensions: tuple[int, ...] | list[int],
              minor_to_major: tuple[int, ...] | list[int] | None = None) -> Shape:
        """An array shape; with ``minor_to_major`` it gets that (untiled) layout."""
        layout = None if minor_to_major is None else Layout(tuple(minor_to_major))
        return Shape(element_type, tuple(dimensions), layout)

    @staticmethod
    def make_tuple(shapes: tuple[Shape, ...] | list[Shape]) -> Shape:
        return Shape("tuple", tuple_shapes=tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape("token")

    # -- kinds ------------------------------------------------------------
    @property
    def type(self) -> ElementType:
        return element_type(self.element_type)

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def is_array(self) -> bool:
        return self.type.is_array_type

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dimensions

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic_dimensions)

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def dtype(self) -> np.dtype | None:
        return self.type.dtype

    # -- dimensions -------------------------------------------------------
    def canonical_dimension(self, dim: int) -> int:
        """Dimension number ``dim`` with Python-style negatives resolved (-1 is the last)."""
        rank = self.rank
        if not -rank <= dim < rank:
            raise XlapyError(f"dimension {dim} out of range for {self} (rank {rank})")
        return dim + rank if dim < 0 else dim

    def dimension(self, dim: int) -> int:
        """The size of dimension ``dim``; negative numbers count from the end."""
        return self.dimensions[self.canonical_dimension(dim)]

    @property
    def element_count(self) -> int:
        """Number of logical elements (dynamic dimensions at their bound)."""
        if any(d == UNBOUNDED_SIZE for d in self.dimensions):
            raise XlapyError(f"{self} has an unbounded dynamic dimension")
        return math.prod(self.dimensions)

    # -- layout -----------------------------------------------------------
    def with_layout(self, layout: Layout | None) -> Shape:
        return replace(self, layout=layout)

    def with_default_layout(self) -> Shape:
        """This shape with every array that lacks a layout given the default one."""
        if self.is_tuple:
            return replace(self, tuple_shapes=tuple(s.with_default_layout() for s in self.tuple_shapes))
        if self.is_array and self.layout is None:
            return replace(self, layout=default_layout(self.rank))
        return self

    @property
    def layout_or_default(self) -> Layout:
        """The layout, or the default major-to-minor one when there is none."""
        return self.layout if self.layout is not None else default_layout(self.rank)

    # -- printing ---------------------------------------------------------
    def to_string(self, print_layout: bool = True) -> str:
        """XLA's human string, as ``ShapeUtil::HumanString[WithLayout]`` prints it."""
        if self.is_tuple:
            # XLA marks every fifth element of a tuple with its index.
            parts = [
                (f", /*index={i}*/" if i % 5 == 0 else ", ") * (i > 0) + s.to_string(print_layout)
                for i, s in enumerate(self.tuple_shapes)
            ]
            return "(" + "".join(parts) + ")"
        dims = ",".join(
            ("?" if d == UNBOUNDED_SIZE else f"<={d}") if dyn else str(d)
            for d, dyn in zip(self.dimensions, self.dynamic_dimensions)
        )
        text = f"{self.element_type}[{dims}]"
        if print_layout and self.is_array and self.layout is not None:
            layout = str(self.layout)
            if not (self.is_scalar and layout == "{}"):  # XLA omits `{}` on scalars
                text += layout
        return text

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"Shape({str(self)!r})"


class LayoutError(VerifyError):
    """A layout that does not fit its shape. ``part`` names the offending piece
    (``("minor_to_major", i)``, ``("tile", level, entry)``, ``("field", name)``)
    so that a parser can point at its column."""

    def __init__(self, message: str, part: tuple = ()):
        super().__init__(message)
        self.part = part


def check_shape(shape: Shape) -> None:
    """Raise ``LayoutError``/``VerifyError`` unless ``shape`` is valid as XLA defines it."""
    if shape.is_tuple:
        for sub in shape.tuple_shapes:
            check_shape(sub)
        return
    if shape.tuple_shapes:
        raise VerifyError(f"non-tuple shape {shape.element_type} has tuple elements")
    if not shape.is_array:
        if shape.dimensions:
            raise VerifyError(f"{shape.element_type} shape cannot have dimensions")
        return
    for i, (d, dyn) in enumerate(zip(shape.dimensions, shape.dynamic_dimensions)):
        if d < 0 and not (dyn and d == UNBOUNDED_SIZE):
            raise LayoutError(f"negative size {d} for dimension {i}", ("dimension", i))
        if d > INT64_MAX:
            raise LayoutError(f"size {d} of dimension {i} does not fit in 64 bits", ("dimension", i))
    # As XLA, the size in bytes (every dimension at its bound) must fit in 64 bits.
    count = math.prod(d for d in shape.dimensions if d != UNBOUNDED_SIZE)
    if count * shape.type.byte_width > INT64_MAX:
        raise VerifyError(f"shape {shape} has {count} elements: its size in bytes does not fit in 64 bits")
    if shape.layout is not None:
        check_layout(shape.layout, shape.rank)


def check_layout(layout: Layout, rank: int) -> None:
    """Raise ``LayoutError`` unless ``layout`` is valid for an array of ``rank``."""
    m2m = layout.minor_to_major
    if len(m2m) != rank:
        raise LayoutError(
            f"minor_to_major has {len(m2m)} elements, but the shape has rank {rank}",
            ("minor_to_major", min(len(m2m), rank)),
        )
    seen: set[int] = set()
    for i, d in enumerate(m2m):
        if not 0 <= d < rank or d in seen:
            raise LayoutError(
                f"minor_to_major {{{','.join(map(str, m2m))}}} is not a permutation of 0..{rank - 1}"
                + (f": {d} is out of range" if not 0 <= d < rank else f": {d} appears twice"),
                ("minor_to_major", i),
            )
        seen.add(d)
    if layout.dim_level_types and len(layout.dim_level_types) != rank:
        raise LayoutError(
            f"D(...) has {len(layout.dim_level_types)} dimension level types, but the shape has rank {rank}",
            ("field", "D"),
        )
    if layout.is_sparse and layout.tiles:
        raise LayoutError(f"layout {layout} has tiles, but is for a sparse array", ("field", "T"))
    if layout.physical_shape is not None and not layout.is_sparse:
        raise LayoutError(f"layout {layout} has a physical shape, but is not for a sparse array",
                          ("field", "P"))
    tiled_rank = rank
    for level, tile in enumerate(layout.tiles):
        if len(tile) > tiled_rank:
            what = "the shape" if level == 0 else f"the result of tile level {level - 1}"
            raise LayoutError(
                f"tile (level {level}) has {len(tile)} dimensions, more than the {tiled_rank} of {what}",
                ("tile", level, tiled_rank),
            )
        for j, t in enumerate(tile):
            if t == COMBINE_DIMENSION:
                if j == len(tile) - 1:
                    raise LayoutError(
                        "'*' cannot be the most-minor tile dimension: there is no "
                        "more-minor dimension to combine it with",
                        ("tile", level, j),
                    )
            elif t <= 0:
                raise LayoutError(f"tile dimension {t} must be positive or '*'", ("tile", level, j))
        combined = sum(1 for t in tile if t == COMBINE_DIMENSION)
        tiled_rank = tiled_rank + len(tile) - 2 * combined
    if layout.tail_padding_alignment_in_elements < 1:
        raise LayoutError("tail padding alignment L(n) must be at least 1", ("field", "L"))
    if layout.element_size_in_bits < 0:
        raise LayoutError("element size in bits E(n) must not be negative", ("field", "E"))
    if layout.memory_space < 0:
        raise LayoutError(f"memory space S({layout.memory_space}) must not be negative", ("field", "S"))
    if layout.dynamic_shape_metadata_prefix_bytes < 0:
        raise LayoutError(f"dynamic shape metadata prefix bytes M({layout.dynamic_shape_metadata_prefix_bytes}) "
                          "must not be negative", ("field", "M"))
    for config in layout.split_configs:
        if not 0 <= config.dimension < rank:
            raise LayoutError(f"split config dimension {config.dimension} is out of range for rank {rank}",
                              ("field", "SC"))
    for name, type_name in (("#", layout.index_primitive_type), ("*", layout.pointer_primitive_type)):
        if type_name is not None and element_type(type_name).kind is not TypeKind.UNSIGNED:
            raise LayoutError(f"{name}({type_name}) must name an unsigned integer type", ("field", name))
