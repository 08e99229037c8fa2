"""The examples of XLA's docs/indexing.md beyond single ops: the
introduction's broadcast and reduce maps, the fusion maps, and the simplifier
(see docs/indexing.md). Printed maps are compared with the document's text
modulo whitespace."""

import pytest

from tests.indexing.text import squeeze
from xlapy import parse_hlo
from xlapy.indexing import IndexingMap, output_to_input_indexing


def entry_root(text: str):
    return parse_hlo(text).entry.root


def test_broadcast_in_the_introduction():
    root = entry_root("""HloModule m
ENTRY e {
  p0 = f32[20] parameter(0)
  ROOT bc0 = f32[10, 20, 30] broadcast(p0), dimensions={1}
}""")
    (maps,) = output_to_input_indexing(root)
    (m,) = maps
    # XLA's document names the variables i, j, k; its bounds are the sizes 10, 20, 30 (inclusive bounds below).
    assert m.rename(["i", "j", "k"]).to_string(multiline=False) == (
        "(i, j, k) -> (j), domain: i in [0, 9], j in [0, 19], k in [0, 29]"
    )


def test_reduce_of_two_dimensions():
    root = entry_root("""HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  p0 = f32[2,4,8,16] parameter(0)
  c0 = f32[] constant(0)
  ROOT r = f32[4,8] reduce(p0, c0), dimensions={0,3}, to_apply=add
}""")
    maps, _ = output_to_input_indexing(root)
    # The document's r0, r1 are printed as range variables s0, s1.
    assert {str(m) for m in maps} == {
        "(d0, d1)[s0, s1] -> (s0, d0, d1, s1),\ndomain:\nd0 in [0, 3],\nd1 in [0, 7],\ns0 in [0, 1],\ns1 in [0, 15]"
    }


ADD_OF_TRANSPOSE_FUSION = """HloModule m
f {
  p0 = f32[1000, 1000] parameter(0)
  transpose_p0 = f32[1000, 1000]{0, 1} transpose(p0), dimensions={1, 0}
  ROOT a0 = f32[1000, 1000] add(p0, transpose_p0)
}
ENTRY e {
  p = f32[1000, 1000] parameter(0)
  ROOT fusion = f32[1000, 1000] fusion(p), kind=kLoop, calls=f
}"""


def test_one_input_several_maps():
    (maps,) = output_to_input_indexing(entry_root(ADD_OF_TRANSPOSE_FUSION))
    assert {squeeze(str(m)) for m in maps} == {
        squeeze("(d0, d1) -> (d0, d1), domain: d0 in [0, 999], d1 in [0, 999]"),
        squeeze("(d0, d1) -> (d1, d0), domain: d0 in [0, 999], d1 in [0, 999]"),
    }


TWO_TRANSPOSE_CHAINS_FUSION = """HloModule m
f {
  p0 = f32[20, 10, 50] parameter(0)
  lhs_transpose_1 = f32[10, 20, 50] transpose(p0), dimensions={1, 0, 2}
  lhs_e = f32[10, 20, 50] exponential(lhs_transpose_1)
  lhs_transpose_2 = f32[10, 50, 20] transpose(lhs_e), dimensions={0, 2, 1}
  rhs_transpose_1 = f32[50, 10, 20] transpose(p0), dimensions={2, 1, 0}
  rhs_log = f32[50, 10, 20] exponential(rhs_transpose_1)
  rhs_transpose_2 = f32[10, 50, 20] transpose(rhs_log), dimensions={1, 0, 2}
  ROOT add = f32[10, 50, 20] add(lhs_transpose_2, rhs_transpose_2)
}
ENTRY e {
  p = f32[20, 10, 50] parameter(0)
  ROOT fusion = f32[10, 50, 20] fusion(p), kind=kLoop, calls=f
}"""


def test_deduplicated_maps():
    (maps,) = output_to_input_indexing(entry_root(TWO_TRANSPOSE_CHAINS_FUSION))
    assert [squeeze(str(m)) for m in maps] == [
        squeeze("(d0, d1, d2) -> (d2, d0, d1), domain: d0 in [0, 9], d1 in [0, 49], d2 in [0, 19]")
    ]


SOFTMAX = """HloModule softmax
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
fused_softmax {
  p0 = f32[2,65,125] parameter(0)
  c_inf = f32[] constant(-inf)
  row_max = f32[2,65] reduce(p0, c_inf), dimensions={2}, to_apply=max
  max_b = f32[2,65,125] broadcast(row_max), dimensions={0,1}
  shifted = f32[2,65,125] subtract(p0, max_b)
  exp = f32[2,65,125] exponential(shifted)
  c0 = f32[] constant(0)
  row_sum = f32[2,65] reduce(exp, c0), dimensions={2}, to_apply=add
  sum_b = f32[2,65,125] broadcast(row_sum), dimensions={0,1}
  ROOT div = f32[2,65,125] divide(exp, sum_b)
}
ENTRY e {
  p = f32[2,65,125] parameter(0)
  ROOT softmax = f32[2,65,125] fusion(p), kind=kLoop, calls=fused_softmax
}"""


def test_softmax():
    # XLA's document shows softmax only as a figure; this is the usual exp(x - max) / sum(exp(x - max)).
    (maps,) = output_to_input_indexing(entry_root(SOFTMAX))
    assert {squeeze(str(m)) for m in maps} == {
        squeeze("""(d0, d1, d2)[s0] -> (d0, d1, s0),
domain:
d0 in [0, 1],
d1 in [0, 64],
d2 in [0, 124],
s0 in [0, 124]"""),
        squeeze("""(d0, d1, d2) -> (d0, d1, d2),
domain:
d0 in [0, 1],
d1 in [0, 64],
d2 in [0, 124]"""),
    }


# XLA's document writes products as 100d0 and spells floorDiv once; the parser takes both.
SIMPLIFIER = [
    (  # the document's simplifier example 1
        "(d0, d1) -> (d0 + d1 floordiv 16, d1 mod 16), domain: d0 in [0, 6], d1 in [0, 14]",
        "(d0, d1) -> (d0, d1)",
    ),
    (  # example 2
        "(d0, d1, d2) -> ((100d0 + 10d1 + d2) floorDiv 100, ((100d0 + 10d1 + d2) mod 100) floordiv 10, d2 mod 10), "
        "domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]",
        "(d0, d1, d2) -> (d0, d1, d2)",
    ),
    (  # example 3: the document's "2d0 + (4d1 + d2) floordiv 8,(4d1 + d2) mod 8" in printed notation
        "(d0, d1, d2) -> ((16d0 + 4d1 + d2) floordiv 8, (16d0 + 4d1 + d2) mod 8), "
        "domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]",
        "(d0, d1, d2) -> (d0 * 2 + (d1 * 4 + d2) floordiv 8, (d1 * 4 + d2) mod 8)",
    ),
    (  # example 4: the document's "-(-11d0 - d1 + 109) floordiv 11 + 9" means -((...) floordiv 11) + 9
        # (on that domain the floordiv is 9 - d0); in MLIR syntax unary minus binds tighter.
        "(d0, d1) -> (-((-11d0 - d1 + 109) floordiv 11) + 9), domain: d0 in [0, 9], d1 in [0, 10]",
        "(d0, d1) -> (d0)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SIMPLIFIER)
def test_simplifier_rewrites(text, expected):
    simplified = IndexingMap.parse(text).simplify()
    assert simplified.to_string(multiline=False).split(", domain")[0] == expected


def test_chained_reshapes_cancel():
    root = entry_root("""HloModule m
f {
  p0 = f32[10, 10, 10] parameter(0)
  reshape1 = f32[50, 20] reshape(p0)
  ROOT reshape2 = f32[10, 10, 10] reshape(reshape1)
}
ENTRY e {
  p = f32[10, 10, 10] parameter(0)
  ROOT fusion = f32[10, 10, 10] fusion(p), kind=kLoop, calls=f
}""")
    (maps,) = output_to_input_indexing(root)
    assert [m.to_string(multiline=False).split(", domain")[0] for m in maps] == ["(d0, d1, d2) -> (d0, d1, d2)"]


def test_constraint_that_always_holds_is_removed():
    m = IndexingMap.parse("(d0)[s0] -> (d0 + s0), domain: d0 in [0, 5], s0 in [1, 3], d0 + s0 in [0, 20]")
    assert m.simplify().to_string(multiline=False) == "(d0)[s0] -> (d0 + s0), domain: d0 in [0, 5], s0 in [1, 3]"
