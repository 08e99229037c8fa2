"""Index arithmetic cases beyond the figures of XLA's docs/tiled_layout.md, against numpy's own
orders or per-slice reasoning."""

import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.shapes import (
    PhysicalLayout,
    from_physical,
    linear_index,
    logical_index,
    parse_shape,
    physical_byte_size,
    physical_element_count,
    to_physical,
)


@pytest.mark.parametrize(("minor_to_major", "axes"), [
    ((2, 1, 0), (0, 1, 2)), ((0, 1, 2), (2, 1, 0)), ((1, 2, 0), (0, 2, 1)), ((0, 2, 1), (1, 2, 0)),
])
def test_untiled_orders_match_numpy_transposes(minor_to_major, axes):
    shape = parse_shape(f"s32[2,3,4]{{{','.join(map(str, minor_to_major))}}}")
    array = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    # Memory order is the array transposed to major-to-minor, read row-major.
    assert (to_physical(array, shape) == array.transpose(axes).ravel()).all()
    assert physical_element_count(shape) == 24


def test_tile_of_lower_rank_tiles_the_minor_dimensions_per_slice():
    shape = parse_shape("f32[3,4,5]{2,1,0:T(2,2)}")
    plane = parse_shape("f32[4,5]{1,0:T(2,2)}")
    per_plane = physical_element_count(plane)
    assert per_plane == 24 and physical_element_count(shape) == 3 * 24
    for index in np.ndindex(3, 4, 5):
        assert linear_index(shape, index) == index[0] * per_plane + linear_index(plane, index[1:])


def test_tiles_follow_minor_to_major_not_dimension_numbers():
    # Dimension 0 is minor: the tile (2,2) covers (dim 1, dim 0) in that order.
    transposed = parse_shape("f32[5,3]{0,1:T(2,2)}")
    plain = parse_shape("f32[3,5]{1,0:T(2,2)}")
    for i, j in np.ndindex(5, 3):
        assert linear_index(transposed, (i, j)) == linear_index(plain, (j, i))


def test_tail_padding():
    shape = parse_shape("f32[3]{0:L(8)}")
    assert physical_element_count(shape) == 8
    assert [logical_index(shape, i) for i in range(8)] == [(0,), (1,), (2,)] + [None] * 5
    assert list(to_physical(np.array([1.0, 2.0, 3.0], np.float32), shape, pad_value=-1)) == [1, 2, 3] + [-1] * 5
    tiled = parse_shape("f32[3,5]{1,0:T(2,2)L(10)}")
    assert physical_element_count(tiled) == 30


def test_tpu_bf16_tiling_counts():
    assert physical_element_count(parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}")) == 8 * 1280 * 16384
    # A small array still takes one whole (8,128) tile.
    assert physical_element_count(parse_shape("bf16[3,5]{1,0:T(8,128)(2,1)}")) == 1024
    shape = parse_shape("bf16[3,5]{1,0:T(8,128)(2,1)}")
    # Within an (8,128) tile, the (2,1) sub-tiles pair rows 2k and 2k+1 of each column.
    assert [linear_index(shape, (r, 0)) for r in range(3)] == [0, 1, 256]
    assert [linear_index(shape, (0, c)) for c in range(3)] == [0, 2, 4]


def test_zero_sized_and_scalar_shapes():
    assert physical_element_count(parse_shape("f32[0,4]{1,0:T(2,2)}")) == 0
    assert to_physical(np.zeros((0, 4), np.float32), parse_shape("f32[0,4]{1,0:T(2,2)}")).size == 0
    scalar = parse_shape("f32[]")
    assert physical_element_count(scalar) == 1 and linear_index(scalar, ()) == 0
    assert logical_index(scalar, 0) == ()
    assert from_physical(np.array([7.0]), scalar) == 7.0


def test_dynamic_dimensions_use_their_bound():
    shape = parse_shape("s32[<=4,3]{1,0}")
    assert physical_element_count(shape) == 12 and linear_index(shape, (3, 2)) == 11
    with pytest.raises(XlapyError, match="unbounded"):
        physical_element_count(parse_shape("s32[?,3]"))


def test_second_tile_can_tile_the_tile_index_dimensions():
    # After T(2,2) an f32[4,6] is (2,3,2,2); a second tile (2,1,1,1) pairs tile rows.
    shape = parse_shape("f32[4,6]{1,0:T(2,2)(2,1,1,1)}")
    physical = PhysicalLayout(shape)
    assert physical.levels[1].dims == (2, 3, 2, 2)
    assert physical.tiled_dims == (1, 3, 2, 2, 2, 1, 1, 1)
    # Tiles (0,1) and (1,1) are interleaved element by element: (0,2) then (2,2), (0,3), (2,3).
    assert [linear_index(shape, index) for index in [(0, 2), (2, 2), (0, 3), (2, 3)]] == [8, 9, 10, 11]


def test_bad_arguments_are_errors():
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    with pytest.raises(XlapyError, match="out of bounds"):
        linear_index(shape, (3, 0))
    with pytest.raises(XlapyError, match="out of bounds"):
        linear_index(shape, (1,))
    with pytest.raises(XlapyError, match="outside the buffer"):
        logical_index(shape, 24)
    with pytest.raises(XlapyError, match="not an array shape"):
        physical_element_count(parse_shape("(f32[3])"))
    with pytest.raises(XlapyError, match="does not match"):
        to_physical(np.zeros((5, 3)), shape)
    with pytest.raises(XlapyError, match="does not match"):
        from_physical(np.zeros(15), shape)


@pytest.mark.parametrize(("text", "size"), [
    ("f32[3,5]", 60),
    ("f32[3,5]{1,0:T(2,2)}", 96),  # 24 slots of 4 bytes
    ("bf16[3,5]{1,0:T(8,128)(2,1)}", 2048),
    ("s4[5]", 5),  # sub-byte elements take a byte each unless the layout packs them
    ("s4[5]{0:E(4)}", 3),
    ("pred[8,8,8]{0,2,1:T(8,128)E(32)}", 8 * 8 * 128 * 4),
    ("c128[2]", 32),
])
def test_physical_byte_size(text, size):
    assert physical_byte_size(parse_shape(text)) == size


def test_shapes_built_from_lists_are_hashable_values():
    from xlapy.shapes import Shape

    shape = Shape("f32", [3, 5])
    assert shape.dimensions == (3, 5) and hash(shape) == hash(parse_shape("f32[3,5]"))
