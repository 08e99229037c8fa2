"""The tiled index arithmetic equals the pad -> reshape -> transpose model
(tests/shapes/reference_tiling.py) on random shapes, orders and tiles."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.shapes.reference_tiling import PAD, reference_buffer
from xlapy.shapes import (
    Layout,
    PhysicalLayout,
    Shape,
    from_physical,
    linear_index,
    logical_index,
    physical_element_count,
    to_physical,
)


@st.composite
def tile_for(draw, rank: int) -> tuple[int, ...]:
    """A tile over the minor-most dims of a rank-`rank` shape; '*' never last."""
    length = draw(st.integers(1, rank))
    sizes = [draw(st.integers(1, 4)) for _ in range(length)]
    for i in range(length - 1):
        if draw(st.integers(0, 3)) == 0:
            sizes[i] = -1
    return tuple(sizes)


@st.composite
def tiled_shapes(draw) -> Shape:
    rank = draw(st.integers(1, 5))
    dims = tuple(draw(st.integers(0 if draw(st.booleans()) else 1, 5)) for _ in range(rank))
    minor_to_major = tuple(draw(st.permutations(range(rank))))
    tiles = []
    tiled_rank = rank
    for _ in range(draw(st.integers(1, 2))):
        tile = draw(tile_for(tiled_rank))
        tiles.append(tile)
        tiled_rank += len(tile) - 2 * tile.count(-1)
    align = draw(st.sampled_from([1, 1, 1, 2, 3, 8]))
    layout = Layout(minor_to_major, tuple(tiles), tail_padding_alignment_in_elements=align)
    return Shape("f32", dims, layout)


def _check_tiling_is_pad_reshape_transpose(shape: Shape) -> None:
    layout = shape.layout
    expected = reference_buffer(shape.dimensions, layout.minor_to_major, layout.tiles,
                                layout.tail_padding_alignment_in_elements)
    assert physical_element_count(shape) == expected.size
    logical = np.arange(shape.element_count, dtype=np.int64).reshape(shape.dimensions)
    buffer = to_physical(logical, shape, pad_value=PAD)
    assert (buffer == expected).all()
    assert (from_physical(buffer, shape) == logical).all()
    for offset in range(expected.size):
        index = logical_index(shape, offset)
        if expected[offset] == PAD:
            assert index is None
        else:
            assert index == tuple(int(i) for i in np.unravel_index(expected[offset], shape.dimensions))
            assert linear_index(shape, index) == offset


@settings(max_examples=75, deadline=None)
@given(tiled_shapes())
def test_tiling_equals_pad_reshape_transpose(shape):
    _check_tiling_is_pad_reshape_transpose(shape)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(tiled_shapes())
def test_tiling_equals_pad_reshape_transpose_many(shape):
    _check_tiling_is_pad_reshape_transpose(shape)


@settings(max_examples=100, deadline=None)
@given(tiled_shapes())
def test_scalar_and_vectorised_indexing_agree(shape):
    physical = PhysicalLayout(shape)
    offsets = physical.linear_indices()
    for index in np.ndindex(*shape.dimensions):
        assert offsets[index] == linear_index(shape, index)
