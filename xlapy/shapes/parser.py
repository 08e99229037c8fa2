"""Parser of XLA's shape syntax: ``f32[3,5]{1,0:T(2,2)}``, ``(f32[10], s32[])``,
``s32[<=8,?]``, ``token[]``. Errors carry the line and column of the problem."""

from __future__ import annotations

import functools
import re

from xlapy.errors import XlapyError
from xlapy.shapes.element_types import ELEMENT_TYPES
from xlapy.shapes.layout import COMBINE_DIMENSION, Layout, SplitConfig
from xlapy.shapes.shape import UNBOUNDED_SIZE, LayoutError, Shape, check_shape
from xlapy.syntax import INT, Cursor

_DIM_LEVEL = re.compile(r"[DCSH]\+?~?")


class ShapeParser(Cursor):
    """Reads shapes from ``text`` starting at ``pos``; ``pos`` advances past
    what was read, so that a larger parser can continue after the shape."""

    # -- shapes -------------------------------------------------------------
    def parse_shape(self) -> Shape:
        """One shape (array, tuple or token), validated."""
        self.skip_space()
        start = self.pos
        # Fast path: a plain array shape seen before (shapes are immutable values).
        match = _PLAIN_ARRAY.match(self.text, start)
        if match and not _LAYOUT_START.match(self.text, match.end()):
            shape = _plain_array(match.group())
            if shape is not None:
                self.pos = match.end()
                return shape
        positions: dict = {}
        shape = self._shape(positions)
        try:
            check_shape(shape)
        except LayoutError as e:
            raise self.error(str(e), self._position_of(e.part, positions, start)) from None
        except XlapyError as e:
            raise self.error(str(e), start) from None
        return shape

    def _shape(self, positions: dict) -> Shape:
        if self.peek("("):
            with self.nested("tuple shapes"):
                self.pos += 1
                elements: list[Shape] = []
                if not self.peek(")"):
                    while True:
                        elements.append(self.parse_shape())
                        if not self.eat(","):
                            break
                self.expect(")", "at the end of a tuple shape")
            return Shape.make_tuple(elements)
        self.skip_space()
        type_pos = self.pos
        name = self.ident()
        if name is None:
            raise self.error(f"expected a shape (element type or '('), got {self.found()}")
        if name not in ELEMENT_TYPES:
            raise self.error(f"unknown element type '{name}'")
        if name == "tuple":
            raise self.error("a tuple shape is written '(shape, ...)', not 'tuple[...]'")
        self.pos += len(name)
        positions["type"] = type_pos
        dims, dynamic = self._dimensions(positions)
        layout = None
        # A '{' is a layout only if an integer, ':' or '}' follows (as in XLA,
        # where '{' may also open a computation body after a result shape).
        if self.peek("{") and _LAYOUT_START.match(self.text, self.pos):
            layout = self._layout(positions)
        return Shape(name, tuple(dims), layout, dynamic_dimensions=tuple(dynamic))

    def _dimensions(self, positions: dict) -> tuple[list[int], list[bool]]:
        self.expect("[", "after the element type")
        dims: list[int] = []
        dynamic: list[bool] = []
        positions["dims"] = []
        if self.eat("]"):
            return dims, dynamic
        while True:
            self.skip_space()
            positions["dims"].append(self.pos)
            if self.eat("?"):
                dims.append(UNBOUNDED_SIZE)
                dynamic.append(True)
            else:
                is_dynamic = self.eat("<=")
                dims.append(self.int("a dimension size"))
                dynamic.append(is_dynamic)
            if self.eat("]"):
                return dims, dynamic
            if not self.eat(","):
                raise self.error(f"expected ',' or ']' in the dimensions, got {self.found()}")

    def _layout(self, positions: dict) -> Layout:
        self.expect("{", "to start the layout")
        fields: dict = {}
        minor_to_major: list[int] = []
        positions["minor_to_major"] = []
        self.skip_space()
        if INT.match(self.text, self.pos):
            while True:
                self.skip_space()
                positions["minor_to_major"].append(self.pos)
                minor_to_major.append(self.int("a dimension number"))
                if not self.eat(","):
                    break
        self.skip_space()
        positions["minor_to_major"].append(self.pos)
        positions["fields"] = {}
        if self.eat(":"):
            self._layout_fields(fields, positions)
        self.expect("}", "to end the layout")
        return Layout(minor_to_major=tuple(minor_to_major), **fields)

    def _layout_fields(self, fields: dict, positions: dict) -> None:
        # XLA reads the fields in this fixed order, each at most once.
        readers = [
            ("D", self._dim_level_types, "dim_level_types"),
            ("T", lambda: self._tiles(positions.setdefault("tiles", [])), "tiles"),
            ("L", lambda: self._int_field("tail padding alignment"), "tail_padding_alignment_in_elements"),
            ("#", lambda: self._type_field("index primitive type"), "index_primitive_type"),
            ("*", lambda: self._type_field("pointer primitive type"), "pointer_primitive_type"),
            ("E", lambda: self._int_field("element size in bits"), "element_size_in_bits"),
            ("S", lambda: self._int_field("memory space"), "memory_space"),
            ("SC", self._split_configs, "split_configs"),
            ("P", self._physical_shape, "physical_shape"),
            ("M", lambda: self._int_field("dynamic shape metadata prefix bytes"),
             "dynamic_shape_metadata_prefix_bytes"),
        ]
        for key, read, name in readers:
            self.skip_space()
            token = key if key in "#*" else self.ident()
            if token == key and self.text.startswith(key, self.pos):
                positions["fields"][key] = self.pos
                self.pos += len(key)
                fields[name] = read()
        if not self.peek("}"):
            raise self.error(
                f"unexpected {self.found()} in the layout (fields are D, T, L, #, *, E, S, SC, P, M, "
                "in this order)"
            )

    def _paren_list(self, read_item, what: str) -> tuple:
        return tuple(self.delimited("(", ")", read_item, f"the {what}"))

    def _tiles(self, tile_positions: list) -> tuple[tuple[int, ...], ...]:
        tiles = []

        def tile_dim() -> int:
            self.skip_space()
            tile_positions[-1].append(self.pos)
            if self.eat("*"):
                return COMBINE_DIMENSION
            return self.int("a tile dimension (an integer or '*')")

        while True:
            tile_positions.append([])
            tiles.append(self._paren_list(tile_dim, "tile"))
            tile_positions[-1].append(self.pos - 1)  # the closing ')'
            if not self.peek("("):
                return tuple(tiles)

    def _int_field(self, what: str) -> int:
        self.expect("(", f"after the {what} key")
        value = self.int(what)
        self.expect(")", f"after the {what}")
        return value

    def _type_field(self, what: str) -> str:
        self.expect("(", f"after the {what} key")
        name = self.ident()
        if name is None or name not in ELEMENT_TYPES:
            raise self.error(f"expected an element type for the {what}, got {self.found()}")
        self.pos += len(name)
        self.expect(")", f"after the {what}")
        return name

    def _dim_level_types(self) -> tuple[str, ...]:
        def level() -> str:
            self.skip_space()
            match = _DIM_LEVEL.match(self.text, self.pos)
            if not match:
                raise self.error(f"expected a dimension level type (D, C, S or H), got {self.found()}")
            self.pos = match.end()
            return match.group()

        return self._paren_list(level, "dimension level types")

    def _split_configs(self) -> tuple[SplitConfig, ...]:
        configs = []
        while True:
            self.expect("(", "to start a split config")
            dimension = self.int("the split dimension")
            self.expect(":", "after the split dimension")
            indices = [self.int("a split index")]
            while self.eat(","):
                indices.append(self.int("a split index"))
            self.expect(")", "to end the split config")
            configs.append(SplitConfig(dimension, tuple(indices)))
            if not self.peek("("):
                return tuple(configs)

    def _physical_shape(self) -> Shape:
        self.expect("(", "to start the physical shape")
        with self.nested("physical shapes"):
            shape = self.parse_shape()
        self.expect(")", "to end the physical shape")
        return shape

    @staticmethod
    def _position_of(part: tuple, positions: dict, default: int) -> int:
        kind = part[0] if part else None
        try:
            if kind == "dimension":
                return positions["dims"][part[1]]
            if kind == "minor_to_major":
                m2m = positions["minor_to_major"]
                return m2m[min(part[1], len(m2m) - 1)]
            if kind == "tile":
                entries = positions["tiles"][part[1]]
                return entries[min(part[2], len(entries) - 1)]
            if kind == "field":
                return positions["fields"][part[1]]
        except (KeyError, IndexError):
            pass
        return positions.get("type", default)


# `f32[3,5]` or `f32[3,5]{1,0}`: static dims and an untiled layout.
_PLAIN_ARRAY = re.compile(r"[a-z][a-z0-9]*\[[0-9,]*\](?:\{[0-9,]*\})?")
_LAYOUT_START = re.compile(r"\s*\{\s*(?:-?[0-9]|:|\})")


@functools.lru_cache(maxsize=4096)
def _plain_array(text: str) -> Shape | None:
    """The shape of a plain array text, or None to let the full parser report on it."""
    try:
        parser = ShapeParser(text)
        shape = parser._shape({})
        check_shape(shape)
    except XlapyError:
        return None
    return shape if parser.pos == len(text) else None


def parse_shape(text: str) -> Shape:
    """Parse a whole string as one shape, e.g. ``bf16[8,128]{1,0:T(8,128)(2,1)}``."""
    parser = ShapeParser(text)
    shape = parser.parse_shape()
    parser.skip_space()
    if parser.pos != len(text):
        raise parser.error(f"unexpected {parser.found()} after the shape")
    return shape
