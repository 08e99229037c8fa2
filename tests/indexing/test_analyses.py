"""What the maps are for (XLA's docs/indexing.md): operand utilization (checked against
the reference interpreter: an element is read exactly when poisoning it
poisons the output), read coalescing, and tile propagation."""

import numpy as np
import pytest

from xlapy import evaluate, parse_hlo
from xlapy.errors import XlapyError
from xlapy.indexing import Tile, is_coalesced, operand_utilization, propagate_tile

ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }"


def module(body: str, root_shape: str) -> str:
    """A module whose entry calls ``body`` as a fusion of the parameters."""
    names = [p.split(" = ")[0].strip() for p in body.splitlines() if "parameter(" in p]
    shapes = [p.split(" = ")[1].split(" parameter")[0].strip() for p in body.splitlines() if "parameter(" in p]
    entry = "\n".join(f"  e{i} = {s} parameter({i})" for i, s in enumerate(shapes))
    operands = ", ".join(f"e{i}" for i in range(len(names)))
    return (
        f"HloModule m\n{ADD}\nfused {{\n{body}\n}}\n"
        f"ENTRY e {{\n{entry}\n  ROOT f = {root_shape} fusion({operands}), kind=kLoop, calls=fused\n}}\n"
    )


UTILIZATION = {
    "slice": (
        """  p0 = f32[10,20,50] parameter(0)
  ROOT s = f32[5,3,25] slice(p0), slice={[5:10:1], [3:20:7], [0:50:2]}""",
        "f32[5,3,25]",
    ),
    "small_slice": (
        """  p0 = f32[6,20,8] parameter(0)
  ROOT s = f32[5,3,4] slice(p0), slice={[1:6:1], [3:20:7], [0:8:2]}""",
        "f32[5,3,4]",
    ),
    "strided_windows": (
        """  p0 = f32[10] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[3] reduce-window(p0, c), window={size=2 stride=3}, to_apply=add""",
        "f32[3]",
    ),
    "pad_and_transpose": (
        """  p0 = f32[4,6] parameter(0)
  p1 = f32[] parameter(1)
  t = f32[6,4] transpose(p0), dimensions={1,0}
  ROOT pad = f32[5,8] pad(t, p1), padding=-1_0_0x1_0_1""",
        "f32[5,8]",
    ),
    "broadcast_of_a_slice": (
        """  p0 = f32[8,8] parameter(0)
  s = f32[8,1] slice(p0), slice={[0:8], [3:4]}
  r = f32[8] reshape(s)
  ROOT b = f32[8,8] broadcast(r), dimensions={0}""",
        "f32[8,8]",
    ),
    "concatenate_of_slices": (
        """  p0 = f32[12] parameter(0)
  p1 = f32[7] parameter(1)
  a = f32[3] slice(p0), slice={[0:3]}
  b = f32[2] slice(p1), slice={[1:5:2]}
  ROOT c = f32[5] concatenate(a, b), dimensions={0}""",
        "f32[5]",
    ),
}


def poisoned_reads(text: str) -> list[int]:
    """Per operand, how many of its elements reach the output (setting one
    to NaN makes some output NaN)."""
    hlo = parse_hlo(text)
    params = hlo.entry.parameters
    rng = np.random.default_rng(0)
    args = [rng.uniform(1, 2, p.shape.dimensions).astype(np.float32) for p in params]
    counts = []
    for k, arg in enumerate(args):
        count = 0
        for flat in range(arg.size):
            poisoned = [a.copy() for a in args]
            poisoned[k].reshape(-1)[flat] = np.nan
            count += bool(np.isnan(evaluate(hlo, *poisoned)).any())
        counts.append(count)
    return counts


# The oracle runs the interpreter once per operand element: the 10,000 elements of "slice" (the same slice as
# test_utilization_of_single_ops_and_runtime_offsets counts by hand) run with the slow tests.
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "slice" else name
                                  for name in UTILIZATION])
def test_utilization_is_exact(name):
    body, root_shape = UTILIZATION[name]
    text = module(body, root_shape)
    fusion = parse_hlo(text).entry.root
    utilization = operand_utilization(fusion)
    assert [u.read for u in utilization] == poisoned_reads(text)
    assert all(u.exact for u in utilization)
    assert utilization[0].fraction == utilization[0].read / utilization[0].total


def test_utilization_of_single_ops_and_runtime_offsets():
    text = """HloModule m
ENTRY e {
  p0 = f32[10,20,50] parameter(0)
  ROOT s = f32[5,3,25] slice(p0), slice={[5:10:1], [3:20:7], [0:50:2]}
}"""
    (u,) = operand_utilization(parse_hlo(text).entry.root)
    assert (u.read, u.total, u.exact) == (375, 10000, True)
    text = """HloModule m
ENTRY e {
  src = s32[20] parameter(0)
  of = s32[] parameter(1)
  ROOT ds = s32[5] dynamic-slice(src, of), dynamic_slice_sizes={5}
}"""
    src, offset = operand_utilization(parse_hlo(text).entry.root)
    # Any element may be read, depending on the offset at run time.
    assert (src.read, src.total, src.exact) == (20, 20, False)
    assert (offset.read, offset.total) == (1, 1)


COALESCING = [
    ("f32[64,64]", "ROOT r = f32[64,64] add(p0, p0)", [True]),
    ("f32[64,64]", "ROOT r = f32[64,64] transpose(p0), dimensions={1,0}", [False]),
    # Logically a transpose, physically a copy: the output's layout is column-major.
    ("f32[64,64]", "ROOT r = f32[64,64]{0,1} transpose(p0), dimensions={1,0}", [True]),
    ("f32[64]", "ROOT r = f32[32,64] broadcast(p0), dimensions={1}", [True]),
    ("f32[32]", "ROOT r = f32[32,64] broadcast(p0), dimensions={0}", [True]),
    ("f32[10,256]", "c = f32[] constant(0)\n  ROOT r = f32[10] reduce(p0, c), dimensions={1}, to_apply=add", [False]),
    ("f32[256,10]", "c = f32[] constant(0)\n  ROOT r = f32[10] reduce(p0, c), dimensions={0}, to_apply=add", [True]),
    ("f32[64,64]", "ROOT r = f32[64,32] slice(p0), slice={[0:64], [0:64:2]}", [False]),
    ("f32[64,64]", "ROOT r = f32[64,32] slice(p0), slice={[0:64], [16:48]}", [True]),
    ("f32[64,64]{0,1}", "ROOT r = f32[64,64] add(p0, p0)", [False]),
    ("f32[8,64]", "ROOT r = f32[512] reshape(p0)", [True]),
    ("f32[8,64]{0,1}", "ROOT r = f32[512] reshape(p0)", [False]),
]


@pytest.mark.parametrize(("param", "body", "expected"), COALESCING)
def test_coalescing(param, body, expected):
    root_shape = body.split("ROOT r = ")[1].split(" ")[0]
    text = module(f"  p0 = {param} parameter(0)\n  {body}", root_shape)
    assert is_coalesced(parse_hlo(text).entry.root) == expected


def test_coalescing_of_a_fusion_reading_a_parameter_twice():
    text = module(
        """  p0 = f32[64,64] parameter(0)
  t = f32[64,64] transpose(p0), dimensions={1,0}
  ROOT a = f32[64,64] add(p0, t)""",
        "f32[64,64]",
    )
    assert is_coalesced(parse_hlo(text).entry.root) == [False]


def tiles(text: str, tile: Tile):
    return [
        [(t.tile.offsets, t.tile.sizes, t.tile.strides, t.exact) for t in operand]
        for operand in propagate_tile(parse_hlo(text).entry.root, tile)
    ]


def test_tile_through_a_strided_slice():
    text = module(
        "  p0 = f32[10,20,50] parameter(0)\n  ROOT s = f32[5,3,25] slice(p0), slice={[5:10:1], [3:20:7], [0:50:2]}",
        "f32[5,3,25]",
    )
    assert tiles(text, Tile((1, 0, 4), (2, 2, 4), (1, 1, 1))) == [[((6, 3, 8), (2, 2, 4), (1, 7, 2), True)]]


def test_tile_through_a_transpose_and_an_add():
    text = module(
        """  p0 = f32[64,32] parameter(0)
  t = f32[32,64] transpose(p0), dimensions={1,0}
  p1 = f32[32,64] parameter(1)
  ROOT a = f32[32,64] add(t, p1)""",
        "f32[32,64]",
    )
    assert tiles(text, Tile((8, 16), (4, 8), (1, 2))) == [
        [((16, 8), (8, 4), (2, 1), True)],
        [((8, 16), (4, 8), (1, 2), True)],
    ]


def test_tile_through_softmax_needs_whole_rows():
    from tests.xla_doc_examples.test_indexing_fusion_and_simplifier import SOFTMAX

    assert tiles(SOFTMAX, Tile((1, 4, 0), (1, 2, 16), (1, 1, 1))) == [
        [((1, 4, 0), (1, 2, 16), (1, 1, 1), True), ((1, 4, 0), (1, 2, 125), (1, 1, 1), True)]
    ]


def test_tile_through_a_reshape_is_a_bounding_box_when_not_exact():
    text = "HloModule m\nENTRY e {\n  p0 = f32[4,8] parameter(0)\n  ROOT r = f32[32] reshape(p0)\n}"
    # Output elements 4..11 are rows 0 and 1, columns 4..7 then 0..3.
    assert tiles(text, Tile((4,), (8,), (1,))) == [[((0, 0), (2, 8), (1, 1), False)]]
    assert tiles(text, Tile((8,), (16,), (1,))) == [[((1, 0), (2, 8), (1, 1), True)]]


def test_tile_outside_the_output_is_an_error():
    text = "HloModule m\nENTRY e {\n  p0 = f32[4,8] parameter(0)\n  ROOT r = f32[32] reshape(p0)\n}"
    with pytest.raises(XlapyError, match="tile dimension 0"):
        tiles(text, Tile((30,), (4,), (1,)))
