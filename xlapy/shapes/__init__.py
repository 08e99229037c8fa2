"""Element types, shapes, layouts with tiles, and index arithmetic on them."""

from xlapy.shapes.element_types import (
    ELEMENT_TYPES,
    ElementType,
    TypeKind,
    element_type,
    element_type_of_dtype,
)
from xlapy.shapes.indexing import (
    PhysicalLayout,
    from_physical,
    linear_index,
    logical_index,
    physical_byte_size,
    physical_element_count,
    physical_layout,
    to_physical,
)
from xlapy.shapes.layout import COMBINE_DIMENSION, Layout, SplitConfig, default_layout
from xlapy.shapes.parser import ShapeParser, parse_shape
from xlapy.shapes.shape import UNBOUNDED_SIZE, LayoutError, Shape, check_layout, check_shape

__all__ = [
    "COMBINE_DIMENSION", "ELEMENT_TYPES", "UNBOUNDED_SIZE", "ElementType", "Layout", "LayoutError",
    "PhysicalLayout", "Shape", "ShapeParser", "SplitConfig", "TypeKind", "check_layout", "check_shape",
    "default_layout", "element_type", "element_type_of_dtype", "from_physical", "linear_index",
    "logical_index", "parse_shape", "physical_byte_size", "physical_element_count", "physical_layout", "to_physical",
]
