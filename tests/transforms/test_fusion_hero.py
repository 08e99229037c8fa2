"""The hero of a fusion (XLA's ``FindNonTrivialHero``; cases after XLA's
``ir_emission_utils_test.cc``) and the emitter kind XLA would pick."""

from __future__ import annotations

import pytest

from xlapy.hlo import parse_module
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import parse_shape
from xlapy.transforms.fusion_hero import find_non_trivial_hero, fusion_kind_of, normalized_transpose


def entry_root(body: str):
    module = parse_module("HloModule m\n" + body)
    return module, module.entry.root


def by_name(module, name):
    return next(i for i in module.instructions if i.name == name)


def test_transpose_through_a_unary_op() -> None:
    module, root = entry_root("""ENTRY e {
  p = f32[32,48,64] parameter(0)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  ROOT n = f32[64,48,32] negate(t)
}""")
    assert find_non_trivial_hero(root) is by_name(module, "t")


def test_transpose_through_two_binary_ops() -> None:
    module, root = entry_root("""ENTRY e {
  p = f32[32,48,64] parameter(0)
  p3 = f32[64,48,32] parameter(1)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  mul = f32[64,48,32] multiply(t, p3)
  ROOT add = f32[64,48,32] add(mul, p3)
}""")
    assert find_non_trivial_hero(root) is by_name(module, "t")


def test_two_transposes_leave_the_root_its_own_hero() -> None:
    _, root = entry_root("""ENTRY e {
  p = f32[32,48,64] parameter(0)
  p2 = f32[48,32,64] parameter(1)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  t2 = f32[64,48,32] transpose(p2), dimensions={2,0,1}
  ROOT add = f32[64,48,32] add(t, t2)
}""")
    assert find_non_trivial_hero(root) is root


def test_transpose_with_a_non_elementwise_user_is_no_hero() -> None:
    _, root = entry_root("""ENTRY e {
  p = f32[32,48,64] parameter(0)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  r = f32[64,48,32] reverse(t), dimensions={0}
  ROOT a = f32[64,48,32] add(t, r)
}""")
    assert find_non_trivial_hero(root) is root


def test_reduce_behind_a_unary_op_is_the_hero() -> None:
    module, root = entry_root("""add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[32,64] parameter(0)
  z = f32[] constant(0)
  r = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  ROOT n = f32[32] negate(r)
}""")
    assert find_non_trivial_hero(root) is by_name(module, "r")


@pytest.mark.parametrize(("dims", "operand", "expected"), [
    ("{2,0,1}", "f32[32,48,64]", ([64, 1536], [1, 0])),
    ("{2,1,0}", "f32[32,48,64]", ([64, 48, 32], [2, 1, 0])),
    ("{3,2,0,1}", "f32[100,11,12,8]", ([8, 12, 1100], [2, 1, 0])),
])
def test_normalized_transpose(dims: str, operand: str, expected) -> None:
    source = HloInstruction("p", "parameter", parse_shape(operand))
    permutation = [int(d) for d in dims.strip("{}").split(",")]
    shape = parse_shape(operand)
    result = parse_shape(f"f32[{','.join(str(shape.dimensions[d]) for d in permutation)}]")
    transpose = HloInstruction("t", "transpose", result, [source], {"dimensions": permutation})
    assert normalized_transpose(transpose) == expected


FUSIONS = {
    "reduction": """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
f {
  p = f32[32,64] parameter(0)
  e = f32[32,64] exponential(p)
  z = f32[] constant(0)
  ROOT r = f32[32] reduce(e, z), dimensions={1}, to_apply=add
}""",
    "transpose": """f {
  p = f32[32,48,64] parameter(0)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  ROOT n = f32[64,48,32] negate(t)
}""",
    "concatenate": """f {
  p = f32[32,48] parameter(0)
  q = f32[32,16] parameter(1)
  c = f32[32,64] concatenate(p, q), dimensions={1}
  ROOT n = f32[32,64] negate(c)
}""",
    "dynamic-update-slice": """f {
  p = f32[32,48] parameter(0)
  u = f32[4,48] parameter(1)
  i = s32[] parameter(2)
  n = f32[4,48] negate(u)
  ROOT d = f32[32,48] dynamic-update-slice(p, n, i, i)
}""",
    "loop": """f {
  p = f32[32,48,64] parameter(0)
  q = f32[48,32,64] parameter(1)
  t = f32[64,48,32] transpose(p), dimensions={2,1,0}
  u = f32[64,48,32] transpose(q), dimensions={2,0,1}
  ROOT a = f32[64,48,32] add(t, u)
}""",
}


@pytest.mark.parametrize("kind", sorted(FUSIONS))
def test_fusion_kind(kind: str) -> None:
    module = parse_module("HloModule m\n" + FUSIONS[kind] + """
ENTRY e {
  p = f32[1] parameter(0)
  ROOT r = f32[1] negate(p)
}""")
    fused = module.computation("f")
    fusion = HloInstruction("fusion", "fusion", fused.root.shape, [], {"kind": "kLoop", "calls": "f"}, [fused])
    fused.fusion_instruction = fusion
    assert fusion_kind_of(fusion) == kind
