"""The worked examples of XLA's docs/shapes.md and docs/tiled_layout.md
(see docs/layouts.md), plus further shape and layout cases. Expected values
are written out by hand."""

import numpy as np
import pytest

from tests.shapes.reference_tiling import reference_buffer
from xlapy.cli import main
from xlapy.shapes import (
    PhysicalLayout,
    Shape,
    from_physical,
    linear_index,
    logical_index,
    parse_shape,
    physical_element_count,
    to_physical,
)


def test_add_936_shape_decomposes():
    shape = parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}")
    assert shape.element_type == "bf16"
    assert shape.dimensions == (8, 1, 1280, 16384)
    assert shape.layout.minor_to_major == (3, 2, 0, 1)
    assert shape.layout.tiles == ((8, 128), (2, 1))
    assert shape.layout.memory_space == 0
    assert str(shape) == "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"


def test_fusion_3_shapes_decompose():
    result = parse_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")
    operand = parse_shape("bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}")
    assert result.element_type == "bf16"
    assert result.dimensions == (32, 32, 4096)
    assert result.layout.minor_to_major == (2, 1, 0)
    assert result.layout.tiles == ((8, 128), (2, 1))
    assert result.layout.memory_space == 1
    assert str(result) == "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}"
    assert operand.dimensions == (32, 32, 8192)
    assert str(operand) == "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}"


def test_negative_dimension_numbers():
    a, b, c = 2, 3, 4
    shape = Shape.array("f32", [a, b, c])
    assert [shape.dimension(i) for i in (0, 1, 2)] == [a, b, c]
    assert shape.dimension(-1) == c
    assert shape.dimension(-2) == b
    assert shape.dimension(-3) == a


def test_make_shape_lists_dimensions_in_order():
    shape = Shape.array("f32", [5, 6, 7, 8])
    assert shape.dimensions == (5, 6, 7, 8)
    assert str(shape) == "f32[5,6,7,8]"


@pytest.mark.parametrize(("minor_to_major", "memory"), [((0, 1), "adbecf"), ((1, 0), "abcdef")])
def test_minor_to_major_orders_memory(minor_to_major, memory):
    array = np.array([list("abc"), list("def")])
    shape = Shape.array("u8", [2, 3], minor_to_major)
    buffer = to_physical(array, shape, pad_value="")
    assert "".join(buffer) == memory
    assert (from_physical(buffer, shape) == array).all()


def test_default_layout_is_major_to_minor():
    assert parse_shape("f32[2,3]").layout_or_default.minor_to_major == (1, 0)
    assert parse_shape("f32[2,3,4,5,6]").layout_or_default.minor_to_major == (4, 3, 2, 1, 0)
    # Where a layout is needed, the default one is used: row-major order.
    assert [linear_index(parse_shape("f32[2,3]"), (1, c)) for c in range(3)] == [3, 4, 5]


@pytest.mark.parametrize(
    ("text", "space", "printed"),
    [
        ("f32[4]{0}", 0, "f32[4]{0}"),
        ("f32[4]{0:S(0)}", 0, "f32[4]{0}"),  # S(0), the default, is omitted as XLA does
        ("f32[4]{0:S(1)}", 1, "f32[4]{0:S(1)}"),
        ("f32[4]{0:S(2)}", 2, "f32[4]{0:S(2)}"),
        ("f32[4]{0:S(5)}", 5, "f32[4]{0:S(5)}"),
    ],
)
def test_memory_space(text, space, printed):
    shape = parse_shape(text)
    assert shape.layout.memory_space == space
    assert str(shape) == printed


def test_tiled_linear_index_is_17():
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    assert shape.element_type == "f32" and shape.dimensions == (3, 5)
    assert shape.layout.minor_to_major == (1, 0) and shape.layout.tiles == ((2, 2),)
    (level,) = PhysicalLayout(shape).levels
    assert level.forward([2, 3]) == [1, 1, 0, 1]  # tile index (1,1), within-tile index (0,1)
    assert level.result_dims == (2, 3, 2, 2)  # tile-index bounds (2,3), tile (2,2)
    assert linear_index(shape, (2, 3)) == 17
    assert physical_element_count(shape) == 24


def test_every_element_of_the_2x2_tiled_3x5_array():
    # Figure 1 of XLA's docs/tiled_layout.md.
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    expected = [
        [0, 1, 4, 5, 8],
        [2, 3, 6, 7, 10],
        [12, 13, 16, 17, 20],
    ]
    assert [[linear_index(shape, (r, c)) for c in range(5)] for r in range(3)] == expected
    padding = [i for i in range(24) if logical_index(shape, i) is None]
    assert padding == [9, 11, 14, 15, 18, 19, 21, 22, 23]


def test_tiling_is_pad_reshape_transpose():
    # (3,5) padded to (4,6), reshaped to (2,2,3,2), transposed to (2,3,2,2).
    padded = np.pad(np.arange(15).reshape(3, 5), [(0, 1), (0, 1)], constant_values=-1)
    assert padded.shape == (4, 6)
    tiled = padded.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3)
    assert tiled.shape == (2, 3, 2, 2)
    assert tiled[1, 1, 0, 1] == 2 * 5 + 3  # element (2,3) sits at (1,1,0,1)
    assert np.ravel_multi_index((1, 1, 0, 1), (2, 3, 2, 2)) == 17
    assert list(tiled.reshape(-1)) == list(reference_buffer((3, 5), (1, 0), [(2, 2)]))
    assert list(np.flatnonzero(tiled.reshape(-1) == 13)) == [17]


def test_repeated_tiling_of_a_4x8_array():
    # Figure 2 of XLA's docs/tiled_layout.md: 2x4 tiles, each tiled again by 2x1.
    shape = parse_shape("f32[4,8]{1,0:T(2,4)(2,1)}")
    expected = [
        [0, 2, 4, 6, 8, 10, 12, 14],
        [1, 3, 5, 7, 9, 11, 13, 15],
        [16, 18, 20, 22, 24, 26, 28, 30],
        [17, 19, 21, 23, 25, 27, 29, 31],
    ]
    assert [[linear_index(shape, (r, c)) for c in range(8)] for r in range(4)] == expected
    assert PhysicalLayout(shape).tiled_dims == (2, 2, 1, 4, 2, 1)
    assert physical_element_count(shape) == 32


def test_combined_dimensions_index_like_the_collapsed_shape():
    combined = parse_shape("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    collapsed = parse_shape("f32[112,110]{1,0:T(2,3)}")
    assert combined.layout.tiles == ((-1, -1, 2, -1, 3),)
    assert str(combined) == "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}"
    assert physical_element_count(combined) == physical_element_count(collapsed) == 56 * 37 * 6
    a = PhysicalLayout(combined).linear_indices().reshape(112, 110)
    b = PhysicalLayout(collapsed).linear_indices()
    assert (a == b).all()
    assert linear_index(combined, (1, 6, 7, 10, 9)) == linear_index(collapsed, (111, 109))


def test_cli_layout_prints_17_at_2_3(capsys):
    assert main(["layout", "f32[3,5]{1,0:T(2,2)}"]) == 0
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines():
        label, _, rest = line.partition(" ")
        if label.isdigit() and "┃" in rest:
            rows[int(label)] = rest.replace("┃", " ").replace("│", " ").split()
    assert rows[2][3] == "17"
    assert rows[0] == ["0", "1", "4", "5", "8", "·"]
    assert rows[3] == ["·"] * 6
