"""The algebraic simplifier's rule for ``get-dimension-size`` against XLA's ``HandleGetDimensionSize``
(``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``): a static dimension's size is a constant, a bounded
dynamic one's stays; and tokens, which need no thunk, compile."""

from __future__ import annotations

import numpy as np

import xlapy
from tests.transforms.algsimp_cases import root_is, simplify
from tools.compare import assert_same


def test_the_size_of_a_static_dimension_is_a_constant(tmp_path) -> None:
    changed, out = simplify("x = f32[5,3] parameter(0)", "ROOT s = s32[] get-dimension-size(x), dimensions={0}")
    assert changed
    root_is(out, "%{{.*}} = s32[] constant(5)", tmp_path)


def test_the_size_of_a_dynamic_dimension_stays() -> None:
    changed, _ = simplify("x = f32[<=5,3] parameter(0)", "ROOT s = s32[] get-dimension-size(x), dimensions={0}")
    assert not changed


def test_a_module_asking_a_static_size_and_joining_tokens_compiles() -> None:
    module = xlapy.parse_hlo("""HloModule m
ENTRY e { p = f32[5,3] parameter(0)  s = s32[] get-dimension-size(p), dimensions={1}  t = token[] after-all()
          a = f32[5,3] add-dependency(p, t)  b = s32[5,3] broadcast(s), dimensions={}
          f = f32[5,3] convert(b)  ROOT r = f32[5,3] add(a, f) }""")
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    assert_same(xlapy.compile(module)(x), xlapy.evaluate(module, x), exact_bits=True)
