"""The examples of XLA's docs/indexing.md for single HLO ops (see
docs/indexing.md), compared with the maps it prints modulo whitespace.

Typos of the document, fixed here and nowhere else:
- the transpose's output-to-input map ends its domain with a stray comma
  after ``d3 in [0, 12287]``;
- the expanded-and-collapsed reshape misses the comma after ``d1 in [0, 2]``;
- the dot's rhs-to-output map is printed ``(d0, d1, d2)[s0] -> (d0, s0, d1)``,
  but d1 is the rhs contracting dimension; the map consistent with the dot's
  semantics and the printed domain is ``(d0, s0, d2)``, which is what is checked.
"""

import pytest

import xlapy
from tests.indexing.text import squeeze
from xlapy.indexing.ops import op_input_to_output, op_output_to_input

REDUCERS = """
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

max_argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  ge = pred[] compare(a, b), direction=GE
  m = f32[] select(ge, a, b)
  k = s32[] select(ge, i, j)
  ROOT t = (f32[], s32[]) tuple(m, k)
}
"""


def root(body: str):
    """The root of a module whose entry computation is ``body``."""
    module = xlapy.parse_hlo(f"HloModule m\n{REDUCERS}\nENTRY e {{\n{body}\n}}\n")
    return module.entry.root


def only(maps: set) -> str:
    assert len(maps) == 1, maps
    return str(next(iter(maps)))


def check(maps: set, expected: str) -> None:
    assert squeeze(only(maps)) == squeeze(expected)


# --- elementwise ---

ADD = root("""
  p0 = f32[10, 20] parameter(0)
  p1 = f32[10, 20] parameter(1)
  ROOT add = f32[10, 20] add(p0, p1)
""")

IDENTITY_10_20 = """
(d0, d1) -> (d0, d1),
domain:
d0 in [0, 9],
d1 in [0, 19]
"""


def test_elementwise_output_to_input():
    maps = op_output_to_input(ADD)
    assert len(maps) == 2
    for operand_maps in maps:
        check(operand_maps, IDENTITY_10_20)


@pytest.mark.parametrize("input_id", [0, 1])
def test_elementwise_input_to_output(input_id):
    (maps,) = op_input_to_output(ADD, input_id)
    check(maps, IDENTITY_10_20)


# --- broadcast ---

BROADCAST = root("""
  p0 = f32[20] parameter(0)
  ROOT bc0 = f32[10, 20, 30] broadcast(p0), dimensions={1}
""")


def test_broadcast_output_to_input():
    (maps,) = op_output_to_input(BROADCAST)
    check(
        maps,
        """
        (d0, d1, d2) -> (d1),
        domain:
        d0 in [0, 9],
        d1 in [0, 19],
        d2 in [0, 29]
        """,
    )


def test_broadcast_input_to_output():
    (maps,) = op_input_to_output(BROADCAST, 0)
    check(
        maps,
        """
        (d0)[s0, s1] -> (s0, d0, s1),
        domain:
        d0 in [0, 19],
        s0 in [0, 9],
        s1 in [0, 29]
        """,
    )


# --- constant and iota ---


def test_constant_and_iota_have_no_operand_maps():
    assert op_output_to_input(root("ROOT c = bf16[2, 2] constant({{1, 2}, {3, 4}})")) == []
    assert op_output_to_input(root("ROOT i = s32[5, 5, 111, 42] iota(), iota_dimension=0")) == []


# --- dynamic-slice ---

DYNAMIC_SLICE = root("""
  src = s32[2,2,258] parameter(0)
  of1 = s32[] parameter(1)
  of2 = s32[] parameter(2)
  of3 = s32[] parameter(3)
  ROOT ds = s32[1,2,32] dynamic-slice(s32[2,2,258] src, s32[] of1, s32[] of2, s32[] of3),
    dynamic_slice_sizes={1, 2, 32}
""")


def test_dynamic_slice_operand():
    check(
        op_output_to_input(DYNAMIC_SLICE)[0],
        """
        (d0, d1, d2){rt0, rt1, rt2} -> (d0 + rt0, d1 + rt1, d2 + rt2),
        domain:
        d0 in [0, 0],
        d1 in [0, 1],
        d2 in [0, 31],
        rt0 in [0, 1],
        rt1 in [0, 0],
        rt2 in [0, 226]
        """,
    )


def test_dynamic_slice_offsets():
    maps = op_output_to_input(DYNAMIC_SLICE)
    assert len(maps) == 4
    for offset_maps in maps[1:]:
        check(
            offset_maps,
            """
            (d0, d1, d2)  -> (),
            domain:
            d0 in [0, 0],
            d1 in [0, 1],
            d2 in [0, 31]
            """,
        )


# --- dynamic-update-slice ---

DYNAMIC_UPDATE_SLICE = root("""
  src = s32[20,30] parameter(0)
  upd = s32[5,10] parameter(1)
  of1 = s32[] parameter(2)
  of2 = s32[] parameter(3)
  ROOT dus = s32[20,30] dynamic-update-slice(
      s32[20,30] src, s32[5,10] upd, s32[] of1, s32[] of2)
""")


def test_dynamic_update_slice_operand():
    check(
        op_output_to_input(DYNAMIC_UPDATE_SLICE)[0],
        """
        (d0, d1) -> (d0, d1),
        domain:
        d0 in [0, 19],
        d1 in [0, 29]
        """,
    )


def test_dynamic_update_slice_update():
    check(
        op_output_to_input(DYNAMIC_UPDATE_SLICE)[1],
        """
        (d0, d1){rt0, rt1}  -> (d0 - rt0, d1 - rt1),
        domain:
        d0 in [0, 19],
        d1 in [0, 29],
        rt0 in [0, 15],
        rt1 in [0, 20]
        """,
    )


def test_dynamic_update_slice_offsets():
    maps = op_output_to_input(DYNAMIC_UPDATE_SLICE)
    assert len(maps) == 4
    for offset_maps in maps[2:]:
        check(
            offset_maps,
            """
            (d0, d1)  -> (),
            domain:
            d0 in [0, 19],
            d1 in [0, 29]
            """,
        )


# --- gather ---

GATHER = root("""
  operand = f32[33,76,70] parameter(0)
  indices = s32[1806,2] parameter(1)
  ROOT gather = f32[1806,7,8,4] gather(operand, indices),
    offset_dims={1,2,3},
    collapsed_slice_dims={},
    start_index_map={0,1},
    index_vector_dim=1,
    slice_sizes={7,8,4}
""")


def test_gather_operand():
    check(
        op_output_to_input(GATHER)[0],
        """
        (d0, d1, d2, d3){rt0, rt1} -> (d1 + rt0, d2 + rt1, d3),
        domain:
        d0 in [0, 1805],
        d1 in [0, 6],
        d2 in [0, 7],
        d3 in [0, 3],
        rt0 in [0, 26],
        rt1 in [0, 68]
        """,
    )


def test_gather_indices():
    check(
        op_output_to_input(GATHER)[1],
        """
        (d0, d1, d2, d3)[s0] -> (d0, s0),
        domain:
        d0 in [0, 1805],
        d1 in [0, 6],
        d2 in [0, 7],
        d3 in [0, 3],
        s0 in [0, 1]
        """,
    )


# --- transpose ---

TRANSPOSE = root("""
  p0 = f32[3, 12288, 6, 128] parameter(0)
  ROOT transpose = f32[3, 6, 128, 12288] transpose(p0), dimensions={0, 2, 3, 1}
""")


def test_transpose_output_to_input():
    # XLA's document prints a stray comma after the last bound; it is left out here.
    (maps,) = op_output_to_input(TRANSPOSE)
    check(
        maps,
        """
        (d0, d1, d2, d3) -> (d0, d3, d1, d2),
        domain:
        d0 in [0, 2],
        d1 in [0, 5],
        d2 in [0, 127],
        d3 in [0, 12287]
        """,
    )


def test_transpose_input_to_output():
    (maps,) = op_input_to_output(TRANSPOSE, 0)
    check(
        maps,
        """
        (d0, d1, d2, d3) -> (d0, d2, d3, d1),
        domain:
        d0 in [0, 2],
        d1 in [0, 12287],
        d2 in [0, 5],
        d3 in [0, 127]
        """,
    )


# --- reverse ---

REVERSE = root("""
  p0 = f32[1, 17, 9, 9] parameter(0)
  ROOT reverse = f32[1, 17, 9, 9] reverse(p0), dimensions={1, 2}
""")

REVERSE_MAP = """
(d0, d1, d2, d3) -> (d0, -d1 + 16, -d2 + 8, d3),
domain:
d0 in [0, 0],
d1 in [0, 16],
d2 in [0, 8],
d3 in [0, 8]
"""


def test_reverse_output_to_input():
    (maps,) = op_output_to_input(REVERSE)
    check(maps, REVERSE_MAP)


def test_reverse_input_to_output():
    (maps,) = op_input_to_output(REVERSE, 0)
    check(maps, REVERSE_MAP)


# --- (variadic) reduce ---

REDUCE = root("""
  p0 = f32[256,10] parameter(0)
  p0_init = f32[] constant(-inf)
  p1 = s32[256,10] parameter(1)
  p1_init = s32[] constant(0)
  ROOT reduce = (f32[10], s32[10]) reduce(p0, p1, p0_init, p1_init),
    dimensions={0}, to_apply=max_argmax
""")


def test_reduce_ranges_over_reduced_dimensions():
    reduce = root("""
      p0 = f32[2,4,8,16] parameter(0)
      init = f32[] constant(-inf)
      ROOT r = f32[4,8] reduce(p0, init), dimensions={0,3}, to_apply=max
    """)
    check(
        op_output_to_input(reduce)[0],
        """
        (d0, d1)[s0, s1] -> (s0, d0, d1, s1),
        domain:
        d0 in [0, 3],
        d1 in [0, 7],
        s0 in [0, 1],
        s1 in [0, 15]
        """,
    )


@pytest.mark.parametrize("output_id", [0, 1])
def test_reduce_output_to_inputs_and_inits(output_id):
    maps = op_output_to_input(REDUCE, output_id)
    assert len(maps) == 4
    for input_maps in maps[:2]:
        check(
            input_maps,
            """
            (d0)[s0] -> (s0, d0),
            domain:
            d0 in [0, 9],
            s0 in [0, 255]
            """,
        )
    for init_maps in maps[2:]:
        check(
            init_maps,
            """
            (d0) -> (),
            domain:
            d0 in [0, 9]
            """,
        )


@pytest.mark.parametrize("input_id", [0, 1])
def test_reduce_input_to_outputs(input_id):
    maps = op_input_to_output(REDUCE, input_id)
    assert len(maps) == 2
    for output_maps in maps:
        check(
            output_maps,
            """
            (d0, d1) -> (d1),
            domain:
            d0 in [0, 255],
            d1 in [0, 9]
            """,
        )


@pytest.mark.parametrize("input_id", [2, 3])
def test_reduce_init_to_outputs(input_id):
    maps = op_input_to_output(REDUCE, input_id)
    assert len(maps) == 2
    for output_maps in maps:
        check(
            output_maps,
            """
            ()[s0] -> (s0),
            domain:
            s0 in [0, 9]
            """,
        )


# --- slice ---

SLICE = root("""
  p0 = f32[10, 20, 50] parameter(0)
  ROOT slice = f32[5, 3, 25] slice(f32[10, 20, 50] p0),
    slice={[5:10:1], [3:20:7], [0:50:2]}
""")


def test_slice_output_to_input():
    (maps,) = op_output_to_input(SLICE)
    check(
        maps,
        """
        (d0, d1, d2) -> (d0 + 5, d1 * 7 + 3, d2 * 2),
        domain:
        d0 in [0, 4],
        d1 in [0, 2],
        d2 in [0, 24]
        """,
    )


def test_slice_input_to_output():
    (maps,) = op_input_to_output(SLICE, 0)
    check(
        maps,
        """
        (d0, d1, d2) -> (d0 - 5, (d1 - 3) floordiv 7, d2 floordiv 2),
        domain:
        d0 in [5, 9],
        d1 in [3, 17],
        d2 in [0, 48],
        (d1 - 3) mod 7 in [0, 0],
        d2 mod 2 in [0, 0]
        """,
    )


# --- reshape ---


def reshape(source: str, target: str):
    return root(f"""
      p0 = f32[{source}] parameter(0)
      ROOT reshape = f32[{target}] reshape(p0)
    """)


LINEARIZE = """
(d0, d1) -> (d0 * 8 + d1),
domain:
d0 in [0, 3],
d1 in [0, 7]
"""

DELINEARIZE = """
(d0) -> (d0 floordiv 8, d0 mod 8),
domain:
d0 in [0, 31]
"""


def test_collapse_output_to_input():
    (maps,) = op_output_to_input(reshape("4,8", "32"))
    check(maps, DELINEARIZE)


def test_collapse_input_to_output():
    (maps,) = op_input_to_output(reshape("4,8", "32"), 0)
    check(maps, LINEARIZE)


def test_expand_output_to_input():
    (maps,) = op_output_to_input(reshape("32", "4, 8"))
    check(maps, LINEARIZE)


def test_expand_input_to_output():
    (maps,) = op_input_to_output(reshape("32", "4, 8"), 0)
    check(maps, DELINEARIZE)


def test_generic_reshape_output_to_input():
    (maps,) = op_output_to_input(reshape("4,8", "2, 4, 4"))
    check(
        maps,
        """
        (d0, d1, d2) -> (d0 * 2 + d1 floordiv 2, d2 + (d1 mod 2) * 4),
        domain:
        d0 in [0, 1],
        d1 in [0, 3],
        d2 in [0, 3]
        """,
    )


def test_generic_reshape_input_to_output():
    (maps,) = op_input_to_output(reshape("4,8", "2, 4, 4"), 0)
    check(
        maps,
        """
        (d0, d1) -> (d0 floordiv 2, d1 floordiv 4 + (d0 mod 2) * 2, d1 mod 4),
        domain:
        d0 in [0, 3],
        d1 in [0, 7]
        """,
    )


def test_expanded_and_collapsed_subshapes_output_to_input():
    # XLA's document misses the comma after `d1 in [0, 2]`; it is put back here.
    (maps,) = op_output_to_input(reshape("4, 8, 12", "32, 3, 4"))
    check(
        maps,
        """
        (d0, d1, d2) -> (d0 floordiv 8, d0 mod 8, d1 * 4 + d2),
        domain:
        d0 in [0, 31],
        d1 in [0, 2],
        d2 in [0, 3]
        """,
    )


def test_expanded_and_collapsed_subshapes_input_to_output():
    (maps,) = op_input_to_output(reshape("4, 8, 12", "32, 3, 4"), 0)
    check(
        maps,
        """
        (d0, d1, d2) -> (d0 * 8 + d1, d2 floordiv 4, d2 mod 4),
        domain:
        d0 in [0, 3],
        d1 in [0, 7],
        d2 in [0, 11]
        """,
    )


# --- concatenate ---

CONCATENATE = root("""
  p0 = f32[2, 5, 7] parameter(0)
  p1 = f32[2, 11, 7] parameter(1)
  p2 = f32[2, 17, 7] parameter(2)
  ROOT concat = f32[2, 33, 7] concatenate(f32[2, 5, 7] p0, f32[2, 11, 7] p1, f32[2, 17, 7] p2), dimensions={1}
""")

CONCAT_OUTPUT_TO_INPUT = [
    (
        "p0",
        """
        (d0, d1, d2) -> (d0, d1, d2),
        domain:
        d0 in [0, 1],
        d1 in [0, 4],
        d2 in [0, 6]
        """,
    ),
    (
        "p1",
        """
        (d0, d1, d2) -> (d0, d1 - 5, d2),
        domain:
        d0 in [0, 1],
        d1 in [5, 15],
        d2 in [0, 6]
        """,
    ),
    (
        "p2",
        """
        (d0, d1, d2) -> (d0, d1 - 16, d2),
        domain:
        d0 in [0, 1],
        d1 in [16, 32],
        d2 in [0, 6]
        """,
    ),
]

CONCAT_INPUT_TO_OUTPUT = [
    (
        "p0",
        """
        (d0, d1, d2) -> (d0, d1, d2),
        domain:
        d0 in [0, 1],
        d1 in [0, 4],
        d2 in [0, 6]
        """,
    ),
    (
        "p1",
        """
        (d0, d1, d2) -> (d0, d1 + 5, d2),
        domain:
        d0 in [0, 1],
        d1 in [0, 10],
        d2 in [0, 6]
        """,
    ),
    (
        "p2",
        """
        (d0, d1, d2) -> (d0, d1 + 16, d2),
        domain:
        d0 in [0, 1],
        d1 in [0, 16],
        d2 in [0, 6]
        """,
    ),
]


@pytest.mark.parametrize("operand", range(3), ids=[name for name, _ in CONCAT_OUTPUT_TO_INPUT])
def test_concatenate_output_to_input(operand):
    check(op_output_to_input(CONCATENATE)[operand], CONCAT_OUTPUT_TO_INPUT[operand][1])


@pytest.mark.parametrize("operand", range(3), ids=[name for name, _ in CONCAT_INPUT_TO_OUTPUT])
def test_concatenate_input_to_output(operand):
    (maps,) = op_input_to_output(CONCATENATE, operand)
    check(maps, CONCAT_INPUT_TO_OUTPUT[operand][1])


# --- dot ---

DOT = root("""
  p0 = f32[4, 128, 256] parameter(0)
  p1 = f32[4, 256, 64] parameter(1)
  ROOT dot = f32[4, 128, 64] dot(p0, p1),
    lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={1}
""")


def test_dot_output_to_lhs():
    check(
        op_output_to_input(DOT)[0],
        """
        (d0, d1, d2)[s0] -> (d0, d1, s0),
        domain:
        d0 in [0, 3],
        d1 in [0, 127],
        d2 in [0, 63],
        s0 in [0, 255]
        """,
    )


def test_dot_output_to_rhs():
    check(
        op_output_to_input(DOT)[1],
        """
        (d0, d1, d2)[s0] -> (d0, s0, d2),
        domain:
        d0 in [0, 3],
        d1 in [0, 127],
        d2 in [0, 63],
        s0 in [0, 255]
        """,
    )


def test_dot_lhs_to_output():
    (maps,) = op_input_to_output(DOT, 0)
    check(
        maps,
        """
        (d0, d1, d2)[s0] -> (d0, d1, s0),
        domain:
        d0 in [0, 3],
        d1 in [0, 127],
        d2 in [0, 255],
        s0 in [0, 63]
        """,
    )


def test_dot_rhs_to_output():
    # XLA's document prints `(d0, s0, d1)` (a typo, see the module docstring): the rhs
    # contracting dimension d1 is not an output index; its free d2 is.
    (maps,) = op_input_to_output(DOT, 1)
    check(
        maps,
        """
        (d0, d1, d2)[s0] -> (d0, s0, d2),
        domain:
        d0 in [0, 3],
        d1 in [0, 255],
        d2 in [0, 63],
        s0 in [0, 127]
        """,
    )


# --- pad ---

PAD = root("""
  p0 = f32[4, 4] parameter(0)
  p1 = f32[] parameter(1)
  ROOT pad = f32[12, 16] pad(p0, p1), padding=1_4_1x4_8_0
""")


def test_pad_output_to_input():
    check(
        op_output_to_input(PAD)[0],
        """
        (d0, d1) -> ((d0 - 1) floordiv 2, d1 - 4),
        domain:
        d0 in [1, 7],
        d1 in [4, 7],
        (d0 - 1) mod 2 in [0, 0]
        """,
    )


def test_pad_output_to_padding_value():
    check(
        op_output_to_input(PAD)[1],
        """
        (d0, d1) -> (),
        domain:
        d0 in [0, 11],
        d1 in [0, 15]
        """,
    )


# --- reduce-window ---

REDUCE_WINDOW = root("""
  c_inf = f32[] constant(-inf)
  p0 = f32[1024, 514] parameter(0)
  ROOT reduce-window = f32[1024, 3] reduce-window(p0, c_inf),
    window={size=1x512 pad=0_0x0_0}, to_apply=max
""")


def test_reduce_window_output_to_input():
    check(
        op_output_to_input(REDUCE_WINDOW)[0],
        """
        (d0, d1)[s0] -> (d0, d1 + s0),
        domain:
        d0 in [0, 1023],
        d1 in [0, 2],
        s0 in [0, 511]
        """,
    )


def test_reduce_window_output_to_init():
    check(
        op_output_to_input(REDUCE_WINDOW)[1],
        """
        (d0, d1) -> (),
        domain:
        d0 in [0, 1023],
        d1 in [0, 2]
        """,
    )
