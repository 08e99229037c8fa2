"""Element types, shapes, layouts with tiles, and index arithmetic on them."""

from xlapy.shapes.element_types import ELEMENT_TYPES, ElementType, TypeKind, element_type, element_type_of_dtype
from xlapy.shapes.layout import COMBINE_DIMENSION, Layout, SplitConfig, default_layout
from xlapy.shapes.parser import ShapeParser, parse_shape
from xlapy.shapes.shape import UNBOUNDED_SIZE, LayoutError, Shape, check_layout, check_shape

__all__ = [
    "COMBINE_DIMENSION", "ELEMENT_TYPES", "UNBOUNDED_SIZE", "ElementType", "Layout", "LayoutError",
    "Shape", "ShapeParser", "SplitConfig", "TypeKind", "check_layout", "check_shape", "default_layout",
    "element_type", "element_type_of_dtype", "parse_shape",
]
