"""Reshapes and transposes sunk below elementwise ops (XLA's ``ReshapeMover``,
``xla/service/reshape_mover.cc``): cases after XLA's ``reshape_mover_test.cc``,
and values kept against the interpreter on random programs, alone and with
the algebraic simplifier to a fixed point as in the CPU pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_hlo import assert_pass_preserves_values, hlo_texts, reduce_relies_on_its_initial_value
from tools.random_rearranges import rearranged_elementwise_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.algebraic_simplifier import AlgebraicSimplifier
from xlapy.transforms.dce import HloDCE
from xlapy.transforms.hlo_constant_folding import HloConstantFolding
from xlapy.transforms.hlo_pass import HloPassFix, HloPassPipeline
from xlapy.transforms.reshape_mover import ReshapeMover


def _move(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = ReshapeMover().run(module)
    verify(module)
    HloDCE().run(module)
    return changed, module.to_text()


def _entry(body: str) -> str:
    return f"HloModule m\n\nENTRY main {{\n{body}\n}}\n"


EQUIVALENT_RESHAPES = _entry("""  a = f32[1,8,1,7] parameter(0)
  b = f32[1,8,1,7] parameter(1)
  ra = f32[8,7] reshape(a)
  rb = f32[8,7] reshape(b)
  ROOT s = f32[8,7] add(ra, rb)""")


def test_equivalent_reshapes_move_below_the_op(tmp_path: Path) -> None:
    changed, out = _move(EQUIVALENT_RESHAPES)
    assert changed
    filecheck(out, """
CHECK: %[[RA:.*]] = f32[1,8,1,7]{3,2,1,0} reshape(%ra)
CHECK: %[[RB:.*]] = f32[1,8,1,7]{3,2,1,0} reshape(%rb)
CHECK: %[[S:s.*]] = f32[1,8,1,7]{3,2,1,0} add(%[[RA]], %[[RB]])
CHECK: ROOT {{.*}} = f32[8,7]{1,0} reshape(%[[S]])
""", tmp_path)
    assert_pass_preserves_values(ReshapeMover(), EQUIVALENT_RESHAPES)


def test_transposes_move_and_a_constant_and_a_scalar_broadcast_take_the_inverse(tmp_path: Path) -> None:
    text = _entry("""  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  tb = f32[3,2] transpose(b), dimensions={1,0}
  k = f32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})
  two = f32[] constant(2)
  t2 = f32[3,2] broadcast(two), dimensions={}
  s = f32[3,2] add(ta, tb)
  m = f32[3,2] multiply(ta, k)
  ROOT r = (f32[3,2], f32[3,2], f32[3,2]) tuple(s, m, t2)""")
    changed, out = _move(text)
    assert changed
    filecheck(out, """
CHECK-DAG: %[[S:s.*]] = f32[2,3]{1,0} add(%{{.*}}, %{{.*}})
CHECK-DAG: %[[KT:.*]] = f32[2,3]{1,0} transpose(%k), dimensions={1,0}
CHECK-DAG: %[[M:m.*]] = f32[2,3]{1,0} multiply(%{{.*}}, %[[KT]])
CHECK-DAG: %[[ST:.*]] = f32[3,2]{1,0} transpose(%[[S]]), dimensions={1,0}
CHECK-DAG: %[[MT:.*]] = f32[3,2]{1,0} transpose(%[[M]]), dimensions={1,0}
CHECK: ROOT %r = {{.*}} tuple(%[[ST]], %[[MT]], %t2)
""", tmp_path)
    assert_pass_preserves_values(ReshapeMover(), text)


@pytest.mark.parametrize("body", [
    # Different source shapes: not equivalent.
    """  a = f32[1,8,1,7] parameter(0)
  b = f32[8,1,7,1] parameter(1)
  ra = f32[8,7] reshape(a)
  rb = f32[8,7] reshape(b)
  ROOT s = f32[8,7] add(ra, rb)""",
    # A parameter cannot take the inverse for free.
    """  a = f32[1,8,1,7] parameter(0)
  b = f32[8,7] parameter(1)
  ra = f32[8,7] reshape(a)
  ROOT s = f32[8,7] add(ra, b)""",
    # The reshape has a user that is not a candidate: moving would compute it twice.
    """  a = f32[1,8,1,7] parameter(0)
  b = f32[1,8,1,7] parameter(1)
  ra = f32[8,7] reshape(a)
  rb = f32[8,7] reshape(b)
  s = f32[8,7] add(ra, rb)
  ROOT t = (f32[8,7], f32[8,7]) tuple(s, ra)""",
    # A broadcast of a non-scalar under a reshape.
    """  a = f32[2,3] parameter(0)
  v = f32[6] parameter(1)
  ra = f32[6] reshape(a)
  bv = f32[6] broadcast(v), dimensions={0}
  ROOT s = f32[6] add(ra, bv)""",
])
def test_rearranges_that_cannot_all_move_stay(body: str) -> None:
    assert not _move(_entry(body))[0]


def test_a_broadcast_whose_dimensions_keep_their_order_under_the_transpose_moves() -> None:
    keeps = _entry("""  a = f32[2,3,4] parameter(0)
  v = f32[3] parameter(1)
  ta = f32[3,4,2] transpose(a), dimensions={1,2,0}
  bv = f32[3,4,2] broadcast(v), dimensions={0}
  ROOT s = f32[3,4,2] add(ta, bv)""")
    assert _move(keeps)[0]
    assert_pass_preserves_values(ReshapeMover(), keeps)
    unsorted = keeps.replace("bv = f32[3,4,2] broadcast(v), dimensions={0}",
                             "w = f32[4,2] parameter(2)\n  bv = f32[3,4,2] broadcast(w), dimensions={1,2}")
    # Under the inverse transpose dimensions 1 and 2 land at 2 and 0: their order flips, which no broadcast does.
    assert not _move(unsorted)[0]


def _simplification() -> HloPassFix:
    return HloPassFix(HloPassPipeline("simplification", [AlgebraicSimplifier(), HloDCE(), ReshapeMover(),
                                                         HloConstantFolding()]))


def test_with_the_simplifier_a_chain_sinks_to_the_end(tmp_path: Path) -> None:
    text = _entry("""  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  tb = f32[3,2] transpose(b), dimensions={1,0}
  s = f32[3,2] add(ta, tb)
  two = f32[] constant(2)
  t2 = f32[3,2] broadcast(two), dimensions={}
  m = f32[3,2] multiply(s, t2)
  ROOT e = f32[3,2] exponential(m)""")
    module = assert_pass_preserves_values(_simplification(), text)
    filecheck(module.to_text(), """
CHECK: %[[S:.*]] = f32[2,3]{1,0} add(%a, %b)
CHECK: %[[M:.*]] = f32[2,3]{1,0} multiply(%[[S]], %{{.*}})
CHECK: %[[E:.*]] = f32[2,3]{1,0} exponential(%[[M]])
CHECK: ROOT {{.*}} = f32[3,2]{1,0} transpose(%[[E]]), dimensions={1,0}
""", tmp_path)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(rearranged_elementwise_texts())
def test_random_rearranged_programs_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(ReshapeMover(), text)
    assert_pass_preserves_values(_simplification(), text)


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts(zero_sized=False))
def test_random_programs_keep_their_values_with_the_simplifier(text: str) -> None:
    if not reduce_relies_on_its_initial_value(parse_module(text)):
        assert_pass_preserves_values(_simplification(), text)
