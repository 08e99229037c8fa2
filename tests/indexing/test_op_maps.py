"""Indexing maps of single HLO ops (xlapy.indexing.ops).

1. Exact printed maps of cases from XLA's ``indexing_analysis_test.cc``
   (expected text written from XLA's expectations; where XLA's current term
   order differs from XLA's docs/indexing.md, the document's order is used and noted).
2. Exact printed maps of the input-to-output maps XLA does not define (pad,
   dot, dynamic-slice, gather, reduce-window, scatter, sort, ...), as
   regressions.
3. Robustness: unknown opcodes and malformed attributes give undefined maps.
4. Meaning: on small modules run by the reference interpreter, every output
   element equals the input element its map gives (data movement), the input
   elements a map reaches are exactly those that contribute (reductions, by
   bitwise-or / one-hot reductions), and the two directions describe the same
   pairs of indices.
"""

import itertools

import numpy as np
import pytest

import xlapy
from tests.indexing.text import squeeze
from xlapy.indexing import IndexingMap
from xlapy.indexing.ops.op_indexing import op_input_to_output, op_output_to_input

COMPUTATIONS = """
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

or {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT o = s64[] or(a, b)
}

pair {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  add0 = f32[] add(a0, b0)
  add1 = s32[] add(a1, b1)
  ROOT sum2 = (f32[], s32[]) tuple(add0, add1)
}

less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""


def module(body: str):
    return xlapy.parse_hlo(f"HloModule m\n{COMPUTATIONS}\nENTRY e {{\n{body}\n}}\n")


def root(body: str):
    return module(body).entry.root


def printed(maps: set) -> str:
    assert len(maps) == 1, maps
    return str(next(iter(maps)))


def check(maps: set, expected: str) -> None:
    assert squeeze(printed(maps)) == squeeze(expected)


# ---------------------------------------------------------------------------
# 1. XLA's indexing_analysis_test.cc
# ---------------------------------------------------------------------------


def test_xla_bitcast_is_reshape():
    bitcast = root("p0 = f32[4, 32] parameter(0)\nROOT bitcast = f32[4, 8, 4] bitcast(p0)")
    check(
        op_output_to_input(bitcast)[0],
        "(d0, d1, d2) -> (d0, d1 * 4 + d2), domain: d0 in [0, 3], d1 in [0, 7], d2 in [0, 3]",
    )


def test_xla_reshape_preserves_size_1_dims():
    bitcast = root("p0 = f32[32] parameter(0)\nROOT bitcast = f32[1, 32] bitcast(p0)")
    check(op_output_to_input(bitcast)[0], "(d0, d1) -> (d0 * 32 + d1), domain: d0 in [0, 0], d1 in [0, 31]")


def test_xla_bitcast_is_transpose():
    bitcast = root(
        "p0 = f32[3, 12288, 6, 128] parameter(0)\nROOT bitcast = f32[3, 6, 128, 12288] {2, 1, 3, 0} bitcast(p0)"
    )
    check(
        op_output_to_input(bitcast)[0],
        """(d0, d1, d2, d3) -> (d0, d3, d1, d2),
        domain: d0 in [0, 2], d1 in [0, 5], d2 in [0, 127], d3 in [0, 12287]""",
    )


def test_xla_bitcast_is_transpose_reshape_transpose():
    bitcast = root("p0 = f32[16, 17, 3] parameter(0)\nROOT bitcast = f32[51, 16] {0, 1} bitcast(p0)")
    check(
        op_output_to_input(bitcast)[0],
        "(d0, d1) -> (d1, d0 floordiv 3, d0 mod 3), domain: d0 in [0, 50], d1 in [0, 15]",
    )
    check(
        op_input_to_output(bitcast, 0)[0],
        "(d0, d1, d2) -> (d1 * 3 + d2, d0), domain: d0 in [0, 15], d1 in [0, 16], d2 in [0, 2]",
    )


def test_xla_reshape_expand_subshape_only():
    reshape = root("p0 = f32[16, 8] parameter(0)\nROOT reshape = f32[4, 4, 8] reshape(p0)")
    check(
        op_output_to_input(reshape)[0],
        "(d0, d1, d2) -> (d0 * 4 + d1, d2), domain: d0 in [0, 3], d1 in [0, 3], d2 in [0, 7]",
    )


def test_xla_generic_reshape_3d_to_2d():
    # XLA's current printer orders the sum `(d0 mod 2) * 2 + d1 floordiv 4`;
    # the order of XLA's docs/indexing.md (its 4x8 -> 2x4x4 reshape) puts the quotient first.
    reshape = root("p0 = f32[2, 4, 4] parameter(0)\nROOT reshape = f32[4, 8] reshape(p0)")
    check(
        op_output_to_input(reshape)[0],
        """(d0, d1) -> (d0 floordiv 2, d1 floordiv 4 + (d0 mod 2) * 2, d1 mod 4),
        domain: d0 in [0, 3], d1 in [0, 7]""",
    )


def test_xla_reshape_of_nothing_is_known_empty():
    reshape = root("p0 = f32[1, 0, 0] parameter(0)\nROOT reshape = f32[0] reshape(p0)")
    assert printed(op_output_to_input(reshape)[0]) == "KNOWN EMPTY"
    (maps,) = op_input_to_output(reshape, 0)
    assert printed(maps) == "KNOWN EMPTY"


def test_xla_copy_of_nothing_is_known_empty():
    copy = root("p0 = f32[0, 0]{0, 1} parameter(0)\nROOT copy0 = f32[0, 0]{1, 0} copy(p0)")
    assert printed(op_output_to_input(copy)[0]) == "KNOWN EMPTY"
    assert printed(op_input_to_output(copy, 0)[0]) == "KNOWN EMPTY"


def test_xla_pad_without_interior():
    pad = root(
        "p0 = f32[2, 8] parameter(0)\np1 = f32[] parameter(1)\nROOT pad = f32[10, 8] pad(p0, p1), padding=1_7x0_0"
    )
    maps = op_output_to_input(pad)
    check(maps[0], "(d0, d1) -> (d0 - 1, d1), domain: d0 in [1, 2], d1 in [0, 7]")
    check(maps[1], "(d0, d1) -> (), domain: d0 in [0, 9], d1 in [0, 7]")


def test_xla_pad_with_negative_padding():
    # Interior padding applies first: 7 + 6 - 8 = 5 elements remain.
    pad = root("p0 = f32[7] parameter(0)\np1 = f32[] parameter(1)\nROOT pad = f32[5] pad(p0, p1), padding=-3_-5_1")
    maps = op_output_to_input(pad)
    check(maps[0], "(d0) -> ((d0 + 3) floordiv 2), domain: d0 in [0, 4], (d0 + 3) mod 2 in [0, 0]")
    check(maps[1], "(d0) -> (), domain: d0 in [0, 4]")


def test_xla_reduce():
    reduce = root("""
      p0 = f32[150, 20, 10, 50] parameter(0)
      p0_init = f32[] constant(-inf)
      ROOT reduce = f32[150, 10] reduce(p0, p0_init), dimensions={3, 1}, to_apply=max
    """)
    maps = op_output_to_input(reduce)
    check(
        maps[0],
        """(d0, d1)[s0, s1] -> (d0, s0, d1, s1),
        domain: d0 in [0, 149], d1 in [0, 9], s0 in [0, 19], s1 in [0, 49]""",
    )
    check(maps[1], "(d0, d1) -> (), domain: d0 in [0, 149], d1 in [0, 9]")
    check(
        op_input_to_output(reduce, 0)[0],
        "(d0, d1, d2, d3) -> (d0, d2), domain: d0 in [0, 149], d1 in [0, 19], d2 in [0, 9], d3 in [0, 49]",
    )
    check(op_input_to_output(reduce, 1)[0], "()[s0, s1] -> (s0, s1), domain: s0 in [0, 149], s1 in [0, 9]")


def reduce_window(window: str, source: str = "13, 17", result: str = "7, 17"):
    return root(f"""
      c_inf = f32[] constant(-inf)
      p0 = f32[{source}] parameter(0)
      ROOT reduce-window = f32[{result}] reduce-window(p0, c_inf), window={{{window}}}, to_apply=max
    """)


def test_xla_reduce_window_padding_and_stride():
    maps = op_output_to_input(reduce_window("size=3x2 stride=2x1 pad=1_1x0_1"))
    check(
        maps[0],
        """(d0, d1)[s0, s1] -> (d0 * 2 + s0 - 1, d1 + s1),
        domain: d0 in [0, 6], d1 in [0, 16], s0 in [0, 2], s1 in [0, 1],
        d0 * 2 + s0 in [1, 13], d1 + s1 in [0, 16]""",
    )
    check(maps[1], "(d0, d1) -> (), domain: d0 in [0, 6], d1 in [0, 16]")


def test_xla_reduce_window_base_dilation():
    maps = op_output_to_input(reduce_window("size=1x1 pad=0_0x0_0 lhs_dilate=2x2", "2, 3", "3, 5"))
    check(
        maps[0],
        """(d0, d1) -> (d0 floordiv 2, d1 floordiv 2),
        domain: d0 in [0, 2], d1 in [0, 4], d0 mod 2 in [0, 0], d1 mod 2 in [0, 0]""",
    )


def test_xla_reduce_window_window_dilation():
    maps = op_output_to_input(reduce_window("size=2x1 pad=0_0x0_0 rhs_dilate=3x1", "7, 3", "4, 3"))
    check(maps[0], "(d0, d1)[s0] -> (d0 + s0 * 3, d1), domain: d0 in [0, 3], d1 in [0, 2], s0 in [0, 1]")


def test_xla_reduce_window_with_trivial_dims():
    maps = op_output_to_input(reduce_window("size=1x512x1x1 pad=0_0x0_0x0_0x0_0", "1024, 514, 1, 1", "1024, 3, 1, 1"))
    check(
        maps[0],
        """(d0, d1, d2, d3)[s0] -> (d0, d1 + s0, 0, 0),
        domain: d0 in [0, 1023], d1 in [0, 2], d2 in [0, 0], d3 in [0, 0], s0 in [0, 511]""",
    )


@pytest.mark.parametrize("output_id", [0, 1])
def test_xla_variadic_reduce_window(output_id):
    instr = root("""
      c_f32 = f32[] constant(-inf)
      c_s32 = s32[] constant(10)
      p0 = f32[2, 3] parameter(0)
      p1 = s32[2, 3] parameter(1)
      ROOT reduce-window = (f32[1, 2], s32[1, 2]) reduce-window(p0, p1, c_f32, c_s32),
        window={size=2x2 pad=0_0x0_0}, to_apply=pair
    """)
    maps = op_output_to_input(instr, output_id)
    for operand in (0, 1):
        check(
            maps[operand],
            """(d0, d1)[s0, s1] -> (s0, d1 + s1),
            domain: d0 in [0, 0], d1 in [0, 1], s0 in [0, 1], s1 in [0, 1]""",
        )
    for init in (2, 3):
        check(maps[init], "(d0, d1) -> (), domain: d0 in [0, 0], d1 in [0, 1]")


def test_xla_dot_with_several_batch_and_contracting_dims():
    dot = root("""
      p0 = f32[4, 38, 17, 11, 18, 10] parameter(0)
      p1 = f32[17, 10, 16, 18, 22, 38] parameter(1)
      ROOT dot = f32[10, 38, 4, 11, 16, 22] dot(p0, p1),
        lhs_batch_dims={5,1}, rhs_batch_dims={1,5},
        lhs_contracting_dims={4,2}, rhs_contracting_dims={3,0}
    """)
    domain = """domain: d0 in [0, 9], d1 in [0, 37], d2 in [0, 3], d3 in [0, 10], d4 in [0, 15],
        d5 in [0, 21], s0 in [0, 17], s1 in [0, 16]"""
    maps = op_output_to_input(dot)
    check(maps[0], f"(d0, d1, d2, d3, d4, d5)[s0, s1] -> (d2, d1, s1, d3, s0, d0), {domain}")
    check(maps[1], f"(d0, d1, d2, d3, d4, d5)[s0, s1] -> (s1, d0, d4, s0, d5, d1), {domain}")


CONVOLUTIONS = {
    "no_padding": (
        "f32[1,12,10,4] f32[4,3,5,8] f32[1,10,6,8]",
        "size=3x5 pad=0_0x0_0",
        "",
        """(d0, d1, d2, d3)[s0, s1, s2] -> (0, d1 + s0, d2 + s1, s2),
        domain: d0 in [0, 0], d1 in [0, 9], d2 in [0, 5], d3 in [0, 7], s0 in [0, 2], s1 in [0, 4], s2 in [0, 3]""",
    ),
    "padding_and_stride": (
        "f32[1,12,10,4] f32[4,3,5,8] f32[1,6,5,8]",
        "size=3x5 stride=2x2 pad=1_1x2_2",
        "",
        """(d0, d1, d2, d3)[s0, s1, s2] -> (0, d1 * 2 + s0 - 1, d2 * 2 + s1 - 2, s2),
        domain: d0 in [0, 0], d1 in [0, 5], d2 in [0, 4], d3 in [0, 7], s0 in [0, 2], s1 in [0, 4], s2 in [0, 3],
        d1 * 2 + s0 in [1, 12], d2 * 2 + s1 in [2, 11]""",
    ),
    "lhs_dilation": (
        "f32[1,12,10,4] f32[4,3,5,8] f32[1,21,15,8]",
        "size=3x5 pad=0_0x0_0 lhs_dilate=2x2",
        "",
        """(d0, d1, d2, d3)[s0, s1, s2] -> (0, (d1 + s0) floordiv 2, (d2 + s1) floordiv 2, s2),
        domain: d0 in [0, 0], d1 in [0, 20], d2 in [0, 14], d3 in [0, 7], s0 in [0, 2], s1 in [0, 4], s2 in [0, 3],
        (d1 + s0) mod 2 in [0, 0], (d2 + s1) mod 2 in [0, 0]""",
    ),
    "feature_groups": (
        "f32[1,12,10,24] f32[4,3,5,48] f32[1,10,6,48]",
        "size=3x5 pad=0_0x0_0",
        ", feature_group_count=6",
        """(d0, d1, d2, d3)[s0, s1, s2] -> (0, d1 + s0, d2 + s1, (d3 floordiv 8) * 4 + s2),
        domain: d0 in [0, 0], d1 in [0, 9], d2 in [0, 5], d3 in [0, 47], s0 in [0, 2], s1 in [0, 4], s2 in [0, 3]""",
    ),
    "batch_groups": (
        "f32[14,12,10,4] f32[4,3,5,21] f32[2,10,6,21]",
        "size=3x5 pad=0_0x0_0",
        ", batch_group_count=7",
        """(d0, d1, d2, d3)[s0, s1, s2, s3] -> (d0 + s3 * 2, d1 + s0, d2 + s1, s2),
        domain: d0 in [0, 1], d1 in [0, 9], d2 in [0, 5], d3 in [0, 20], s0 in [0, 2], s1 in [0, 4], s2 in [0, 3],
        s3 in [0, 6]""",
    ),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_xla_convolution(name):
    # As XLA's newest expectations: the maps are simplified, so the batch
    # dimension of size 1 reads `0`.
    shapes, window, groups, expected = CONVOLUTIONS[name]
    lhs, rhs, out = shapes.split()
    conv = root(f"""
      p0 = {lhs} parameter(0)
      p1 = {rhs} parameter(1)
      ROOT conv = {out} convolution(p0, p1), window={{{window}}}, dim_labels=b01f_i01o->b01f{groups}
    """)
    maps = op_output_to_input(conv)
    check(maps[0], expected)
    sizes = conv.shape.dimensions
    kernel_domain = ", ".join(f"d{i} in [0, {n - 1}]" for i, n in enumerate(sizes))
    check(
        maps[1],
        f"(d0, d1, d2, d3)[s0, s1, s2] -> (s2, s0, s1, d3), domain: {kernel_domain}, "
        "s0 in [0, 2], s1 in [0, 4], s2 in [0, 3]",
    )


def test_xla_broadcasting_elementwise():
    select = root("""
      p0 = pred[] parameter(0)
      p1 = f32[1000, 1000] parameter(1)
      p2 = f32[1000, 1000] parameter(2)
      ROOT select = f32[1000, 1000] select(p0, p1, p2)
    """)
    maps = op_output_to_input(select)
    check(maps[0], "(d0, d1) -> (), domain: d0 in [0, 999], d1 in [0, 999]")
    for operand in (1, 2):
        check(maps[operand], "(d0, d1) -> (d0, d1), domain: d0 in [0, 999], d1 in [0, 999]")


def test_xla_map_is_elementwise():
    instr = root("""
      p0 = f32[10, 20] parameter(0)
      p1 = f32[10, 20] parameter(1)
      ROOT add0 = f32[10, 20] map(p0, p1), dimensions={0, 1}, to_apply=add
    """)
    for maps in [*op_output_to_input(instr), *op_input_to_output(instr, 1)]:
        check(maps, "(d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 19]")


def test_xla_constant_offset_is_folded():
    instr = root("""
      p0 = s32[4096] parameter(0)
      offset = s64[] constant(42)
      ROOT dynamic-slice = s32[10] dynamic-slice(p0, offset), dynamic_slice_sizes={10}
    """)
    check(op_output_to_input(instr)[0], "(d0) -> (d0 + 42), domain: d0 in [0, 9]")


def test_xla_constant_offset_out_of_range_is_kept():
    instr = root("""
      p0 = s32[100] parameter(0)
      offset = s64[] constant(99)
      ROOT dynamic-slice = s32[10] dynamic-slice(p0, offset), dynamic_slice_sizes={10}
    """)
    check(op_output_to_input(instr)[0], "(d0){rt0} -> (d0 + rt0), domain: d0 in [0, 9], rt0 in [0, 90]")


@pytest.mark.parametrize(
    ("iota_dimension", "expected"),
    [(0, "(d0, d1, d2) -> (d0, 0)"), (1, "(d0, d1, d2) -> (0, 0)")],
)
def test_xla_iota_indices_are_folded(iota_dimension, expected):
    # XLA's test composes this gather into a fusion, which simplifies the map.
    instr = root(f"""
      p0 = f32[33, 76] parameter(0)
      iota = s64[42, 1] iota(), iota_dimension={iota_dimension}
      ROOT gather = f32[42, 1, 1] gather(p0, iota), offset_dims={{1, 2}}, collapsed_slice_dims={{}},
        start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1, 1}}
    """)
    (operand_map,) = op_output_to_input(instr)[0]
    assert not operand_map.rt_vars
    assert squeeze(str(operand_map.simplify())) == squeeze(
        f"{expected}, domain: d0 in [0, 41], d1 in [0, 0], d2 in [0, 0]"
    )


def test_xla_unsupported_op_is_undefined():
    instr = root("""
      p1 = f32[4, 4] parameter(0)
      p2 = f32[4, 3] parameter(1)
      ROOT out = f32[4, 3] triangular-solve(f32[4, 4] p1, f32[4, 3] p2),
        left_side=true, lower=true, transpose_a=NO_TRANSPOSE, unit_diagonal=true
    """)
    assert op_output_to_input(instr) == [{IndexingMap.undefined()}, {IndexingMap.undefined()}]
    assert op_input_to_output(instr, 0) == [{IndexingMap.undefined()}]
    assert op_input_to_output(instr, 1) == [{IndexingMap.undefined()}]


def test_xla_tuple_input_to_output_is_the_identity_on_its_element():
    instr = root("p0 = f32[2, 3] parameter(0)\np1 = f32[5] parameter(1)\nROOT t = (f32[2, 3], f32[5]) tuple(p0, p1)")
    assert op_input_to_output(instr, 1) == [set(), {IndexingMap.identity([5])}]
    assert op_output_to_input(instr, 0) == [{IndexingMap.identity([2, 3])}, set()]


# ---------------------------------------------------------------------------
# 2. Maps XLA does not define (input-to-output of pad, dot, ...; scatter, sort)
# ---------------------------------------------------------------------------


def test_pad_input_to_output_drops_elements_cut_by_negative_padding():
    pad = root("p0 = f32[7] parameter(0)\np1 = f32[] parameter(1)\nROOT pad = f32[5] pad(p0, p1), padding=-3_-5_1")
    check(op_input_to_output(pad, 0)[0], "(d0) -> (d0 * 2 - 3), domain: d0 in [2, 3]")
    check(op_input_to_output(pad, 1)[0], "()[s0] -> (s0), domain: s0 in [0, 4]")


def test_dynamic_slice_input_to_output():
    instr = root("""
      src = s32[2, 258] parameter(0)
      of1 = s32[] parameter(1)
      of2 = s32[] parameter(2)
      ROOT ds = s32[1, 32] dynamic-slice(src, of1, of2), dynamic_slice_sizes={1, 32}
    """)
    check(
        op_input_to_output(instr, 0)[0],
        """(d0, d1){rt0, rt1} -> (d0 - rt0, d1 - rt1),
        domain: d0 in [0, 1], d1 in [0, 257], rt0 in [0, 1], rt1 in [0, 226],
        d0 - rt0 in [0, 0], d1 - rt1 in [0, 31]""",
    )
    check(op_input_to_output(instr, 2)[0], "()[s0, s1] -> (s0, s1), domain: s0 in [0, 0], s1 in [0, 31]")


def test_dynamic_update_slice_update_input_to_output():
    instr = root("""
      src = s32[20, 30] parameter(0)
      upd = s32[5, 10] parameter(1)
      of1 = s32[] parameter(2)
      of2 = s32[] constant(3)
      ROOT dus = s32[20, 30] dynamic-update-slice(src, upd, of1, of2)
    """)
    check(
        op_input_to_output(instr, 1)[0],
        "(d0, d1){rt0} -> (d0 + rt0, d1 + 3), domain: d0 in [0, 4], d1 in [0, 9], rt0 in [0, 15]",
    )
    check(
        op_output_to_input(instr)[1],
        "(d0, d1){rt0} -> (d0 - rt0, d1 - 3), domain: d0 in [0, 19], d1 in [0, 29], rt0 in [0, 15]",
    )


def test_gather_input_to_output():
    instr = root("""
      operand = f32[33, 76, 70] parameter(0)
      indices = s32[1806, 2] parameter(1)
      ROOT gather = f32[1806, 7, 8, 4] gather(operand, indices), offset_dims={1,2,3},
        collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={7,8,4}
    """)
    check(
        op_input_to_output(instr, 0)[0],
        """(d0, d1, d2)[s0]{rt0, rt1} -> (s0, d0 - rt0, d1 - rt1, d2),
        domain: d0 in [0, 32], d1 in [0, 75], d2 in [0, 3], s0 in [0, 1805], rt0 in [0, 26], rt1 in [0, 68],
        d0 - rt0 in [0, 6], d1 - rt1 in [0, 7]""",
    )
    check(
        op_input_to_output(instr, 1)[0],
        """(d0, d1)[s0, s1, s2] -> (d0, s0, s1, s2),
        domain: d0 in [0, 1805], d1 in [0, 1], s0 in [0, 6], s1 in [0, 7], s2 in [0, 3]""",
    )


def test_non_canonical_gather_is_undefined():
    instr = root("""
      operand = f32[33, 76] parameter(0)
      indices = s32[5] parameter(1)
      ROOT gather = f32[5, 76] gather(operand, indices), offset_dims={1},
        collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1, 76}
    """)
    assert op_output_to_input(instr) == [{IndexingMap.undefined()}, {IndexingMap.undefined()}]
    assert op_input_to_output(instr, 0) == [{IndexingMap.undefined()}]


def test_reduce_window_input_to_output():
    (maps,) = op_input_to_output(reduce_window("size=3x2 stride=2x1 pad=1_1x0_1"), 0)
    check(
        maps,
        """(d0, d1)[s0, s1] -> ((d0 - s0 + 1) floordiv 2, d1 - s1),
        domain: d0 in [0, 12], d1 in [0, 16], s0 in [0, 2], s1 in [0, 1],
        (d0 - s0 + 1) mod 2 in [0, 0], d0 - s0 in [-1, 12], d1 - s1 in [0, 16]""",
    )


def test_dot_input_to_output_ranges_over_the_other_free_dims():
    dot = root("""
      p0 = f32[4, 38, 17, 11, 18, 10] parameter(0)
      p1 = f32[17, 10, 16, 18, 22, 38] parameter(1)
      ROOT dot = f32[10, 38, 4, 11, 16, 22] dot(p0, p1),
        lhs_batch_dims={5,1}, rhs_batch_dims={1,5},
        lhs_contracting_dims={4,2}, rhs_contracting_dims={3,0}
    """)
    check(
        op_input_to_output(dot, 0)[0],
        """(d0, d1, d2, d3, d4, d5)[s0, s1] -> (d5, d1, d0, d3, s0, s1),
        domain: d0 in [0, 3], d1 in [0, 37], d2 in [0, 16], d3 in [0, 10], d4 in [0, 17], d5 in [0, 9],
        s0 in [0, 15], s1 in [0, 21]""",
    )
    check(
        op_input_to_output(dot, 1)[0],
        """(d0, d1, d2, d3, d4, d5)[s0, s1] -> (d1, d5, s0, s1, d2, d4),
        domain: d0 in [0, 16], d1 in [0, 9], d2 in [0, 15], d3 in [0, 17], d4 in [0, 21], d5 in [0, 37],
        s0 in [0, 3], s1 in [0, 10]""",
    )


SORT = """
  keys = f32[3, 5] parameter(0)
  values = s32[3, 5] parameter(1)
  ROOT sort = (f32[3, 5], s32[3, 5]) sort(keys, values), dimensions={1}, to_apply=less_pair
"""


def test_sort_reads_the_whole_sorted_row():
    text = SORT.replace("less_pair", "lt2")
    lt2 = """
    lt2 {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      i = s32[] parameter(2)
      j = s32[] parameter(3)
      ROOT lt = pred[] compare(a, b), direction=LT
    }
    """
    instr = xlapy.parse_hlo(f"HloModule m\n{lt2}\nENTRY e {{\n{text}\n}}\n").entry.root
    expected = "(d0, d1)[s0] -> (d0, s0), domain: d0 in [0, 2], d1 in [0, 4], s0 in [0, 4]"
    for output_id in (0, 1):
        for maps in op_output_to_input(instr, output_id):
            check(maps, expected)
    for maps in op_input_to_output(instr, 1):
        check(maps, expected)


SCATTER = """
  operand = f32[6, 5] parameter(0)
  indices = s32[3, 1] parameter(1)
  updates = f32[3, 2, 5] parameter(2)
  ROOT scatter = f32[6, 5] scatter(operand, indices, updates), update_window_dims={1, 2},
    inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
"""


def test_canonical_scatter_maps():
    instr = root(SCATTER)
    operand, indices, updates = op_output_to_input(instr)
    check(operand, "(d0, d1) -> (d0, d1), domain: d0 in [0, 5], d1 in [0, 4]")
    check(indices, "(d0, d1)[s0, s1] -> (s0, s1), domain: d0 in [0, 5], d1 in [0, 4], s0 in [0, 2], s1 in [0, 0]")
    check(
        updates,
        """(d0, d1)[s0]{rt0} -> (s0, d0 - rt0, d1),
        domain: d0 in [0, 5], d1 in [0, 4], s0 in [0, 2], rt0 in [0, 4], d0 - rt0 in [0, 1]""",
    )
    check(
        op_input_to_output(instr, 2)[0],
        "(d0, d1, d2){rt0} -> (d1 + rt0, d2), domain: d0 in [0, 2], d1 in [0, 1], d2 in [0, 4], rt0 in [0, 4]",
    )
    check(
        op_input_to_output(instr, 1)[0],
        "(d0, d1)[s0, s1] -> (s0, s1), domain: d0 in [0, 2], d1 in [0, 0], s0 in [0, 5], s1 in [0, 4]",
    )


def test_bitcast_convert_to_a_narrower_type_adds_a_minor_dimension():
    instr = root("p0 = f32[3] parameter(0)\nROOT b = s8[3, 4] bitcast-convert(p0)")
    check(op_output_to_input(instr)[0], "(d0, d1) -> (d0), domain: d0 in [0, 2], d1 in [0, 3]")
    check(op_input_to_output(instr, 0)[0], "(d0)[s0] -> (d0, s0), domain: d0 in [0, 2], s0 in [0, 3]")


# ---------------------------------------------------------------------------
# 3. Robustness
# ---------------------------------------------------------------------------


def test_malformed_attributes_give_undefined_maps():
    transpose = root("p0 = f32[2, 3] parameter(0)\nROOT t = f32[3, 2] transpose(p0), dimensions={1, 0}")
    transpose.attributes["dimensions"] = (1, 1)
    assert op_output_to_input(transpose) == [{IndexingMap.undefined()}]
    assert op_input_to_output(transpose, 0) == [{IndexingMap.undefined()}]
    reduce = root("""
      p0 = f32[4, 8] parameter(0)
      c = f32[] constant(0)
      ROOT r = f32[4] reduce(p0, c), dimensions={1}, to_apply=add
    """)
    del reduce.attributes["dimensions"]
    assert op_output_to_input(reduce) == [{IndexingMap.undefined()}] * 2


def test_out_of_range_ids_are_reported():
    add = root("p0 = f32[2] parameter(0)\nROOT a = f32[2] add(p0, p0)")
    with pytest.raises(ValueError, match="no operand 2"):
        op_input_to_output(add, 2)
    with pytest.raises(ValueError, match="no output 1"):
        op_output_to_input(add, 1)


# ---------------------------------------------------------------------------
# 4. Meaning, checked with the reference interpreter
# ---------------------------------------------------------------------------


def unique_values(shape: tuple[int, ...], first: int = 1) -> np.ndarray:
    return np.arange(first, first + int(np.prod(shape)), dtype=np.float32).reshape(shape)


def symbol_points(indexing_map: IndexingMap, runtime: tuple[int, ...] = ()):
    """Every assignment of the range variables, followed by the runtime values."""
    boxes = [range(v.bounds.lower, v.bounds.upper + 1) for v in indexing_map.range_vars]
    for point in itertools.product(*boxes):
        yield (*point, *runtime)


def reached(indexing_map: IndexingMap, index: tuple[int, ...], runtime: tuple[int, ...] = ()) -> set:
    """The indices a map gives for ``index`` over its range variables, in its domain."""
    if indexing_map.is_known_empty():
        return set()
    return {
        indexing_map.evaluate(index, symbols)
        for symbols in symbol_points(indexing_map, runtime)
        if indexing_map.contains(index, symbols)
    }


def in_bounds(index: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return all(0 <= i < n for i, n in zip(index, shape))


def output_to_input_pairs(instr, operand: int, runtime: tuple[int, ...] = ()) -> set:
    """``(input index, output index)`` pairs of the output-to-input maps
    (input indices outside the operand, which over-approximating maps such as
    dynamic-update-slice's may give, are left out)."""
    shape = instr.operand(operand).shape.dimensions
    pairs = set()
    for maps in [op_output_to_input(instr)[operand]]:
        for indexing_map in maps:
            for index in np.ndindex(*instr.shape.dimensions):
                pairs |= {(p, index) for p in reached(indexing_map, index, runtime) if in_bounds(p, shape)}
    return pairs


def input_to_output_pairs(instr, operand: int, runtime: tuple[int, ...] = ()) -> set:
    (maps,) = op_input_to_output(instr, operand)
    pairs = set()
    for indexing_map in maps:
        for index in np.ndindex(*instr.operand(operand).shape.dimensions):
            pairs |= {(index, q) for q in reached(indexing_map, index, runtime)}
    return pairs


def check_data_movement(body: str, data_operands=(0,), padding=None, runtime=()):
    """Every output element is the operand element its (one) map gives, or the
    padding value where no map applies; and the two directions agree."""
    hlo = module(body)
    instr = hlo.entry.root
    args = [unique_values(p.shape.dimensions, 1000 * (k + 1)) for k, p in enumerate(hlo.entry.parameters)]
    args = [np.ones(a.shape, bool) if p.shape.element_type == "pred" else a for a, p in zip(args, hlo.entry.parameters)]
    if padding is not None:
        args[-1] = np.float32(padding)
    output = np.asarray(xlapy.evaluate(hlo, *args))
    o2i = op_output_to_input(instr)
    for index in np.ndindex(*output.shape):
        hits = [
            (k, p)
            for k in data_operands
            for indexing_map in o2i[k]
            for p in reached(indexing_map, index, runtime)
            if in_bounds(p, instr.operand(k).shape.dimensions)
        ]
        if not hits:
            assert padding is not None, f"output {index} is not covered"
            assert output[index] == padding
            continue
        assert len(hits) == 1, (index, hits)
        (k, p) = hits[0]
        assert output[index] == args[k][p], (index, p)
    for k in data_operands:
        assert output_to_input_pairs(instr, k, runtime) == input_to_output_pairs(instr, k, runtime)


MOVEMENT = {
    "transpose": "p0 = f32[2,3,4] parameter(0)\nROOT r = f32[4,2,3] transpose(p0), dimensions={2,0,1}",
    "broadcast": "p0 = f32[3] parameter(0)\nROOT r = f32[2,3,4] broadcast(p0), dimensions={1}",
    "broadcast_transposing": "p0 = f32[3,2] parameter(0)\nROOT r = f32[2,4,3] broadcast(p0), dimensions={2,0}",
    "reverse": "p0 = f32[3,4,2] parameter(0)\nROOT r = f32[3,4,2] reverse(p0), dimensions={0,1}",
    "slice": "p0 = f32[7,9] parameter(0)\nROOT r = f32[3,3] slice(p0), slice={[1:7:2], [0:9:4]}",
    "copy": "p0 = f32[3,4]{0,1} parameter(0)\nROOT r = f32[3,4]{1,0} copy(p0)",
    "concatenate": """p0 = f32[2,1,3] parameter(0)
        p1 = f32[2,3,3] parameter(1)
        p2 = f32[2,2,3] parameter(2)
        ROOT r = f32[2,6,3] concatenate(p0, p1, p2), dimensions={1}""",
    "concatenate_minor": """p0 = f32[2,3] parameter(0)
        p1 = f32[2,1] parameter(1)
        ROOT r = f32[2,4] concatenate(p0, p1), dimensions={1}""",
}

RESHAPES = [
    ("4,6", "2,12"),
    ("4,6", "3,8"),
    ("2,3,4", "4,6"),
    ("6,4", "2,3,4"),
    ("2,6", "3,4"),
    ("1,6,1", "2,3"),
    ("12", "2,1,6"),
    ("2,3,4,5", "6,20"),
    ("3,1,4", "12,1"),
    ("4,6", "8,3"),
    ("2,2,3", "3,4"),
    ("", "1,1"),
    ("1,1", ""),
]

BITCASTS = [
    ("3,4]{0,1", "4,3]{1,0"),
    ("2,3,4]{1,2,0", "6,4]{1,0"),
    ("2,3,4]{0,1,2", "4,6]{0,1"),
    ("16,17,3]{2,1,0", "51,16]{0,1"),
    ("4,6]{0,1", "2,3,4]{2,0,1"),
    ("6,4]{1,0", "2,2,6]{0,2,1"),
    ("2,3,4]{2,1,0", "4,3,2]{0,1,2"),
    ("5,1,4]{1,0,2", "20]{0"),
    ("12]{0", "3,1,4]{0,2,1"),
]


@pytest.mark.parametrize("name", MOVEMENT)
def test_data_movement_maps_read_the_right_elements(name):
    body = MOVEMENT[name]
    operands = (0, 1, 2) if name == "concatenate" else (0, 1) if name == "concatenate_minor" else (0,)
    check_data_movement(body, operands)


@pytest.mark.parametrize(("source", "target"), RESHAPES)
def test_reshape_maps_read_the_right_elements(source, target):
    check_data_movement(f"p0 = f32[{source}] parameter(0)\nROOT r = f32[{target}] reshape(p0)")


@pytest.mark.parametrize(("source", "target"), BITCASTS)
def test_bitcast_maps_follow_the_physical_layouts(source, target):
    check_data_movement(f"p0 = f32[{source}}} parameter(0)\nROOT r = f32[{target}}} bitcast(p0)")


@pytest.mark.parametrize(
    ("source", "result", "padding"),
    [
        ("4,3", "10,5", "1_2_1x-1_-1_2"),
        ("7", "5", "-3_-5_1"),
        ("3,2", "6,5", "2_1x0_3"),
        ("5", "2", "-2_-1"),
        ("2,3", "3,7", "-1_0_2x1_-1_2"),
    ],
)
def test_pad_maps_read_the_right_elements(source, result, padding):
    check_data_movement(
        f"p0 = f32[{source}] parameter(0)\np1 = f32[] parameter(1)\n"
        f"ROOT r = f32[{result}] pad(p0, p1), padding={padding}",
        padding=-7.0,
    )


def clamp_offsets(offsets, operand, sizes) -> tuple[int, ...]:
    return tuple(int(min(max(o, 0), n - s)) for o, n, s in zip(offsets, operand, sizes))


@pytest.mark.parametrize("offsets", [(0, 0), (1, 3), (5, -2), (2, 9)])
def test_dynamic_slice_maps_with_clamped_offsets(offsets):
    body = """p0 = f32[4,7] parameter(0)
      o0 = s32[] constant({})
      o1 = s32[] parameter(1)
      ROOT r = f32[2,3] dynamic-slice(p0, o0, o1), dynamic_slice_sizes={{2,3}}"""
    # o0 is a constant: folded into the map when in range, a runtime variable otherwise.
    hlo_body = body.format(offsets[0])
    hlo = module(hlo_body)
    instr = hlo.entry.root
    clamped = clamp_offsets(offsets, (4, 7), (2, 3))
    (operand_map,) = op_output_to_input(instr)[0]
    runtime = clamped if len(operand_map.rt_vars) == 2 else clamped[1:]
    args = [unique_values((4, 7)), np.int32(offsets[1])]
    output = np.asarray(xlapy.evaluate(hlo, *args))
    for index in np.ndindex(*output.shape):
        (p,) = reached(operand_map, index, runtime)
        assert output[index] == args[0][p]
    assert output_to_input_pairs(instr, 0, runtime) == input_to_output_pairs(instr, 0, runtime)


@pytest.mark.parametrize("offsets", [(0, 0), (3, 1), (-1, 8)])
def test_dynamic_update_slice_maps_with_clamped_offsets(offsets):
    hlo = module("""p0 = f32[5,6] parameter(0)
      p1 = f32[2,3] parameter(1)
      o0 = s32[] parameter(2)
      o1 = s32[] parameter(3)
      ROOT r = f32[5,6] dynamic-update-slice(p0, p1, o0, o1)""")
    instr = hlo.entry.root
    runtime = clamp_offsets(offsets, (5, 6), (2, 3))
    args = [unique_values((5, 6), 1000), unique_values((2, 3), 2000), np.int32(offsets[0]), np.int32(offsets[1])]
    output = np.asarray(xlapy.evaluate(hlo, *args))
    operand_maps, update_maps = op_output_to_input(instr)[:2]
    for index in np.ndindex(*output.shape):
        (update_index,) = reached(next(iter(update_maps)), index, runtime)
        if in_bounds(update_index, (2, 3)):
            assert output[index] == args[1][update_index]
        else:
            assert output[index] == args[0][index]
        assert reached(next(iter(operand_maps)), index) == {index}
    assert output_to_input_pairs(instr, 1, runtime) == input_to_output_pairs(instr, 1, runtime)
    assert output_to_input_pairs(instr, 0) == input_to_output_pairs(instr, 0)


def test_gather_maps_with_clamped_indices():
    hlo = module("""operand = f32[5,6,3] parameter(0)
      indices = s32[4,2] parameter(1)
      ROOT r = f32[4,2,3,3] gather(operand, indices), offset_dims={1,2,3}, collapsed_slice_dims={},
        start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,3,3}""")
    instr = hlo.entry.root
    indices = np.array([[0, 0], [3, 3], [-2, 9], [4, 1]], np.int32)
    args = [unique_values((5, 6, 3)), indices]
    output = np.asarray(xlapy.evaluate(hlo, *args))
    starts = [clamp_offsets(row, (5, 6), (2, 3)) for row in indices]
    (operand_map,) = op_output_to_input(instr)[0]
    (indices_map,) = op_output_to_input(instr)[1]
    forward = set()
    for index in np.ndindex(*output.shape):
        (p,) = reached(operand_map, index, starts[index[0]])
        assert output[index] == args[0][p]
        forward.add((p, index))
        assert reached(indices_map, index) == {(index[0], 0), (index[0], 1)}
    (operand_i2o,) = op_input_to_output(instr, 0)[0]
    backward = set()
    for p in np.ndindex(5, 6, 3):
        for row in range(4):
            symbols = (row, *starts[row])
            if operand_i2o.contains(p, symbols):
                backward.add((p, operand_i2o.evaluate(p, symbols)))
    assert forward == backward


def test_scatter_updates_land_where_the_maps_say():
    hlo = module(SCATTER)
    instr = hlo.entry.root
    indices = np.array([[4], [0], [1]], np.int32)
    args = [unique_values((6, 5)), indices, unique_values((3, 2, 5), 100) * 1000]
    output = np.asarray(xlapy.evaluate(hlo, *args))
    (updates_map,) = op_output_to_input(instr)[2]
    for index in np.ndindex(*output.shape):
        expected = args[0][index]
        for row in range(3):
            symbols = (row, int(indices[row, 0]))
            if updates_map.contains(index, symbols):
                expected += args[2][updates_map.evaluate(index, symbols)]
        assert output[index] == expected
    (updates_i2o,) = op_input_to_output(instr, 2)[0]
    for u in np.ndindex(3, 2, 5):
        q = updates_i2o.evaluate(u, (int(indices[u[0], 0]),))
        symbols = (u[0], int(indices[u[0], 0]))
        assert updates_map.contains(q, symbols) and updates_map.evaluate(q, symbols) == u


def test_sort_output_comes_from_its_row():
    hlo = module("""p0 = f32[3,5] parameter(0)
      ROOT r = f32[3,5] sort(p0), dimensions={1}, to_apply=less""")
    instr = hlo.entry.root
    data = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [5, 8, 9, 7, 9]], np.float32)
    output = np.asarray(xlapy.evaluate(hlo, data))
    (sort_map,) = op_output_to_input(instr)[0]
    for index in np.ndindex(*output.shape):
        assert output[index] in {data[p] for p in reached(sort_map, index)}
    assert output_to_input_pairs(instr, 0) == input_to_output_pairs(instr, 0)


def test_select_with_a_scalar_predicate():
    check_data_movement(
        "p0 = pred[] parameter(0)\np1 = f32[2,3] parameter(1)\np2 = f32[2,3] parameter(2)\n"
        "ROOT r = f32[2,3] select(p0, p1, p2)",
        data_operands=(1,),
    )
    instr = root("p0 = pred[] parameter(0)\np1 = f32[2,3] parameter(1)\nROOT r = f32[2,3] select(p0, p1, p1)")
    assert output_to_input_pairs(instr, 0) == input_to_output_pairs(instr, 0)


# --- reductions: the reached input elements are exactly the contributing ones ---


def bit_inputs(shape: tuple[int, ...]) -> np.ndarray:
    """Element ``i`` (row-major) is ``1 << i``: a sum or bitwise-or of
    distinct elements tells which ones took part."""
    assert int(np.prod(shape)) < 63
    return (np.int64(1) << np.arange(int(np.prod(shape)), dtype=np.int64)).reshape(shape)


def contributors(mask: int, shape: tuple[int, ...]) -> set:
    return {index for bit, index in enumerate(np.ndindex(*shape)) if mask >> bit & 1}


def check_reduction(hlo, operand: int, args) -> None:
    """Output element ``q``'s bits name the elements of ``operand`` that
    contribute to it; the output-to-input maps must reach exactly those, and
    the input-to-output maps must give the same pairs."""
    instr = hlo.entry.root
    output = np.asarray(xlapy.evaluate(hlo, *args))
    shape = instr.operand(operand).shape.dimensions
    o2i = op_output_to_input(instr)[operand]
    for index in np.ndindex(*output.shape):
        from_maps = set().union(*(reached(m, index) for m in o2i))
        assert from_maps == contributors(int(output[index]), shape), index
    assert output_to_input_pairs(instr, operand) == input_to_output_pairs(instr, operand)


@pytest.mark.parametrize(
    ("source", "result", "dimensions"), [("3,4,5", "3,5", "1"), ("2,3,4", "4", "0,1"), ("2,3", "", "0,1")]
)
def test_reduce_maps_reach_the_reduced_elements(source, result, dimensions):
    hlo = module(f"""p0 = s64[{source}] parameter(0)
      c = s64[] constant(0)
      ROOT r = s64[{result}] reduce(p0, c), dimensions={{{dimensions}}}, to_apply=or""")
    check_reduction(hlo, 0, [bit_inputs(hlo.entry.parameters[0].shape.dimensions)])


WINDOWS = [
    ("7", "3", "size=3 stride=2"),
    ("7", "4", "size=3 stride=2 pad=1_1"),
    ("5", "9", "size=1 lhs_dilate=2"),
    ("5", "5", "size=3 pad=1_1 lhs_dilate=2 stride=2"),
    ("7", "2", "size=2 rhs_dilate=3 stride=2"),
    ("6", "5", "size=2 pad=2_-1 rhs_dilate=2"),
    ("4,5", "3,2", "size=2x3 stride=1x2 pad=0_0x1_0"),
    ("3,4", "4,3", "size=2x2 stride=1x2 pad=1_1x0_0 lhs_dilate=1x2 rhs_dilate=1x2"),
]


@pytest.mark.parametrize(("source", "result", "window"), WINDOWS)
def test_reduce_window_maps_reach_the_window(source, result, window):
    hlo = module(f"""p0 = s64[{source}] parameter(0)
      c = s64[] constant(0)
      ROOT r = s64[{result}] reduce-window(p0, c), window={{{window}}}, to_apply=or""")
    check_reduction(hlo, 0, [bit_inputs(hlo.entry.parameters[0].shape.dimensions)])


DOTS = [
    ("2,3", "3,4", "2,4", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    (
        "2,3,4",
        "2,4,3",
        "2,3,3",
        "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}",
    ),
    (
        "3,2,2",
        "2,3,2",
        "2",
        "lhs_batch_dims={2}, rhs_batch_dims={2}, lhs_contracting_dims={0,1}, rhs_contracting_dims={1,0}",
    ),
    ("3,2", "4", "3,2,4", ""),
]


@pytest.mark.parametrize(("lhs", "rhs", "result", "numbers"), DOTS)
@pytest.mark.parametrize("operand", [0, 1])
def test_dot_maps_reach_the_contracted_elements(lhs, rhs, result, numbers, operand):
    separator = ", " if numbers else ""
    hlo = module(f"""p0 = s64[{lhs}] parameter(0)
      p1 = s64[{rhs}] parameter(1)
      ROOT r = s64[{result}] dot(p0, p1){separator}{numbers}""")
    shapes = [p.shape.dimensions for p in hlo.entry.parameters]
    args = [np.ones(s, np.int64) for s in shapes]
    args[operand] = bit_inputs(shapes[operand])
    check_reduction(hlo, operand, args)


CONVOLUTION_SEMANTICS = [
    ("s64[1,5,2]", "s64[3,2,2]", "s64[1,3,2]", "size=3", "b0f_0io->b0f", ""),
    ("s64[2,6,1]", "s64[2,1,3]", "s64[2,3,3]", "size=2 stride=2 pad=1_0", "b0f_0io->b0f", ""),
    ("s64[1,4,2]", "s64[2,2,2]", "s64[1,7,2]", "size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2", "b0f_0io->b0f", ""),
    ("s64[3,1,4]", "s64[2,1,2]", "s64[2,2,4]", "size=2 rhs_reversal=1", "0fb_0io->f0b", ""),
    ("s64[1,3,4]", "s64[2,2,4]", "s64[1,2,4]", "size=2", "b0f_0io->b0f", ", feature_group_count=2"),
]


@pytest.mark.parametrize(("lhs", "rhs", "out", "window", "labels", "groups"), CONVOLUTION_SEMANTICS)
@pytest.mark.parametrize("operand", [0, 1])
def test_convolution_maps_reach_the_contributing_elements(lhs, rhs, out, window, labels, groups, operand):
    """The input elements reached are exactly those that contribute; the
    kernel map (XLA's) also reaches the kernel elements that meet padding or
    the holes of base dilation, which contribute nothing."""
    hlo = module(f"""p0 = {lhs} parameter(0)
      p1 = {rhs} parameter(1)
      ROOT r = {out} convolution(p0, p1), window={{{window}}}, dim_labels={labels}{groups}""")
    instr = hlo.entry.root
    shapes = [p.shape.dimensions for p in hlo.entry.parameters]
    args = [np.ones(s, np.int64) for s in shapes]
    args[operand] = bit_inputs(shapes[operand])
    output = np.asarray(xlapy.evaluate(hlo, *args))
    (conv_map,) = op_output_to_input(instr)[operand]
    exact = operand == 0 or not ("pad" in window or "lhs_dilate" in window)
    for index in np.ndindex(*output.shape):
        from_map = reached(conv_map, index)
        contributing = contributors(int(output[index]), shapes[operand])
        assert from_map == contributing if exact else contributing <= from_map, index


def test_reduce_and_window_inits_reach_every_output():
    hlo = module("""p0 = f32[4,5] parameter(0)
      c = f32[] constant(0)
      ROOT r = f32[2,2] reduce-window(p0, c), window={size=2x3 stride=2x2}, to_apply=add""")
    instr = hlo.entry.root
    assert output_to_input_pairs(instr, 1) == input_to_output_pairs(instr, 1)
    assert len(output_to_input_pairs(instr, 1)) == 4


# --- random sweeps: reshapes, bitcasts, pads and windows of random shapes ---


def random_shape(rng: np.random.Generator, count: int) -> list[int]:
    """A random factorisation of ``count`` into up to four sizes (with 1s)."""
    sizes = []
    while count > 1 and len(sizes) < 3:
        divisors = [d for d in range(1, count + 1) if count % d == 0]
        size = int(rng.choice(divisors))
        sizes.append(size)
        count //= size
    sizes.append(count)
    rng.shuffle(sizes)
    return sizes


def shape_text(sizes: list[int], layout: list[int] | None = None) -> str:
    text = f"f32[{','.join(map(str, sizes))}]"
    return text if layout is None else text + "{" + ",".join(map(str, layout)) + "}"


def random_bitcasts(seed: int, count: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        elements = int(rng.choice([6, 8, 12, 16, 24, 30, 36]))
        source, target = random_shape(rng, elements), random_shape(rng, elements)
        cases.append(
            (
                shape_text(source, [int(d) for d in rng.permutation(len(source))]),
                shape_text(target, [int(d) for d in rng.permutation(len(target))]),
            )
        )
    return cases


@pytest.mark.parametrize(("source", "target"), random_bitcasts(seed=1, count=150))
def test_random_bitcasts(source, target):
    check_data_movement(f"p0 = {source} parameter(0)\nROOT r = {target} bitcast(p0)")


def random_pads(seed: int, count: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        source = [int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3)))]
        config = [(int(rng.integers(-3, 3)), int(rng.integers(-3, 3)), int(rng.integers(0, 3))) for _ in source]
        result = [n + lo + hi + (n - 1) * interior for n, (lo, hi, interior) in zip(source, config)]
        if min(result) < 1:
            continue
        padding = "x".join(f"{lo}_{hi}_{interior}" for lo, hi, interior in config)
        cases.append((",".join(map(str, source)), ",".join(map(str, result)), padding))
    return cases


@pytest.mark.parametrize(("source", "result", "padding"), random_pads(seed=3, count=60))
def test_random_pads(source, result, padding):
    check_data_movement(
        f"p0 = f32[{source}] parameter(0)\np1 = f32[] parameter(1)\n"
        f"ROOT r = f32[{result}] pad(p0, p1), padding={padding}",
        padding=-7.0,
    )


def random_windows(seed: int, count: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        source = [int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 3)))]
        if int(np.prod(source)) >= 63:
            continue
        dims = []
        for n in source:
            size, stride = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            low, high = int(rng.integers(-1, 3)), int(rng.integers(-1, 3))
            base, dilation = int(rng.integers(1, 3)), int(rng.integers(1, 3))
            padded = n + low + high + (n - 1) * (base - 1)
            extent = (size - 1) * dilation + 1
            dims.append((size, stride, low, high, base, dilation, (padded - extent) // stride + 1))
        if min(d[-1] for d in dims) < 1:
            continue

        fields = ["x".join(str(d[k]) for d in dims) for k in range(6)]
        window = (
            f"size={fields[0]} stride={fields[1]} pad={'x'.join(f'{d[2]}_{d[3]}' for d in dims)} "
            f"lhs_dilate={fields[4]} rhs_dilate={fields[5]}"
        )
        cases.append((",".join(map(str, source)), ",".join(str(d[-1]) for d in dims), window))
    return cases


@pytest.mark.parametrize(("source", "result", "window"), random_windows(seed=4, count=120))
def test_random_reduce_windows(source, result, window):
    hlo = module(f"""p0 = s64[{source}] parameter(0)
      c = s64[] constant(0)
      ROOT r = s64[{result}] reduce-window(p0, c), window={{{window}}}, to_apply=or""")
    check_reduction(hlo, 0, [bit_inputs(hlo.entry.parameters[0].shape.dimensions)])
