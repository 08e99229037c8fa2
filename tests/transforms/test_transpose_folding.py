"""TransposeFolding against the behaviour of XLA's
(``xla/service/transpose_folding.cc`` and ``transpose_folding_test.cc``), and
against the interpreter on hand-written, random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.transpose_folding import TransposeFolding


def run(text: str, hlo_pass: TransposeFolding | None = None) -> tuple[bool, str]:
    module = parse_module(text)
    changed = (hlo_pass or TransposeFolding()).run(module)
    verify(module)
    return changed, module.to_text()


RHS_TRANSPOSED = """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  t = f32[3,2] transpose(y), dimensions={1,0}
  ROOT dot = f32[2,2] dot(x, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="mm"}
}"""

LHS_TRANSPOSED_BATCHED = """HloModule m
ENTRY e {
  x = f32[2,3,5,4] parameter(0)
  y = f32[2,3,5,6] parameter(1)
  t = f32[2,3,4,5] transpose(x), dimensions={0,1,3,2}
  ROOT dot = f32[2,3,4,6] dot(t, y), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1},
    rhs_contracting_dims={2}
}"""

BOTH_TRANSPOSED = """HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  y = f32[4,3] parameter(1)
  tx = f32[2,3] transpose(x), dimensions={1,0}
  ty = f32[3,4] transpose(y), dimensions={1,0}
  ROOT dot = f32[2,4] dot(tx, ty), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}"""


def test_rhs_transpose_folds(tmp_path):
    changed, out = run(RHS_TRANSPOSED)
    assert changed
    filecheck(out, """
CHECK: %y = f32[2,3]{1,0} parameter(1)
CHECK-NOT: transpose
CHECK: ROOT %dot = f32[2,2]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={1}, \
metadata={op_name="mm"}
""", tmp_path)


def test_transpose_of_the_matrix_dimensions_of_a_batched_operand_folds(tmp_path):
    changed, out = run(LHS_TRANSPOSED_BATCHED)
    assert changed
    filecheck(out, """
CHECK-NOT: transpose
CHECK: ROOT %dot = f32[2,3,4,6]{3,2,1,0} dot(%x, %y), lhs_batch_dims={0,1}, lhs_contracting_dims={2}, \
rhs_batch_dims={0,1}, rhs_contracting_dims={2}
""", tmp_path)


def test_both_operands_fold(tmp_path):
    changed, out = run(BOTH_TRANSPOSED)
    assert changed
    filecheck(out, """
CHECK-NOT: transpose
CHECK: ROOT %dot = f32[2,4]{1,0} dot(%x, %y), lhs_contracting_dims={0}, rhs_contracting_dims={1}, \
sharding={replicated}
""", tmp_path)


def test_same_transpose_on_both_sides_folds(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  t = f32[2,3] transpose(x), dimensions={1,0}
  ROOT dot = f32[2,2] dot(t, t), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}""")
    assert changed
    filecheck(out, """
CHECK-NOT: transpose
CHECK: ROOT %dot = f32[2,2]{1,0} dot(%x, %x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
""", tmp_path)


def test_transpose_with_other_users_stays(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  t = f32[3,2] transpose(y), dimensions={1,0}
  dot = f32[2,2] dot(x, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[2,2], f32[3,2]) tuple(dot, t)
}""")
    assert changed
    filecheck(out, """
CHECK: %dot = f32[2,2]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={1}
CHECK-NEXT: %t = f32[3,2]{1,0} transpose(%y), dimensions={1,0}
CHECK-NEXT: ROOT %r = (f32[2,2]{1,0}, f32[3,2]{1,0}) tuple(%dot, %t)
""", tmp_path)


def test_control_dependencies_stay_on_the_dot(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  n = f32[2,3] negate(x)
  t = f32[3,2] transpose(y), dimensions={1,0}
  ROOT dot = f32[2,2] dot(x, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}, control-predecessors={n}
}""")
    assert changed
    filecheck(out, """
CHECK: ROOT %dot = f32[2,2]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={1}, \
control-predecessors={%n}
""", tmp_path)


@pytest.mark.parametrize("text", [
    # A transpose that moves a batch dimension.
    """HloModule m
ENTRY e {
  x = f32[3,2,4] parameter(0)
  y = f32[2,4,5] parameter(1)
  t = f32[2,3,4] transpose(x), dimensions={1,0,2}
  ROOT dot = f32[2,3,5] dot(t, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
    rhs_contracting_dims={1}
}""",
    # Two contracting dimensions.
    """HloModule m
ENTRY e {
  x = f32[4,3,2] parameter(0)
  y = f32[3,4] parameter(1)
  t = f32[2,3,4] transpose(x), dimensions={2,1,0}
  ROOT dot = f32[2] dot(t, y), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}""",
    # Two non-contracting dimensions and no batch dimension.
    """HloModule m
ENTRY e {
  x = f32[4,3,2] parameter(0)
  y = f32[4,5] parameter(1)
  t = f32[2,3,4] transpose(x), dimensions={2,1,0}
  ROOT dot = f32[2,3,5] dot(t, y), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}""",
    # An operand of rank 1.
    """HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  y = f32[3] parameter(1)
  t = f32[2,3] transpose(x), dimensions={1,0}
  ROOT dot = f32[2] dot(t, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
    # The identity permutation.
    """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[3,4] parameter(1)
  t = f32[2,3] transpose(x), dimensions={0,1}
  ROOT dot = f32[2,4] dot(t, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
    # A dot in a fusion.
    """HloModule m
fused {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  t = f32[3,2] transpose(y), dimensions={1,0}
  ROOT dot = f32[2,2] dot(x, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  ROOT f = f32[2,2] fusion(p0, p1), kind=kOutput, calls=fused
}""",
])
def test_stays(text):
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_a_rule_can_refuse():
    changed, _ = run(RHS_TRANSPOSED, TransposeFolding(lambda dot, index: False))
    assert not changed


def test_a_rule_can_fold_more(tmp_path):
    # With a rule allowing any transpose, one moving a batch dimension folds too.
    changed, out = run("""HloModule m
ENTRY e {
  x = f32[3,2,4] parameter(0)
  y = f32[2,4,5] parameter(1)
  t = f32[2,3,4] transpose(x), dimensions={1,0,2}
  ROOT dot = f32[2,3,5] dot(t, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
    rhs_contracting_dims={1}
}""", TransposeFolding(lambda dot, index: True))
    assert changed
    filecheck(out, """
CHECK: ROOT %dot = f32[2,3,5]{2,1,0} dot(%x, %y), lhs_batch_dims={1}, lhs_contracting_dims={2}, \
rhs_batch_dims={0}, rhs_contracting_dims={1}
""", tmp_path)


@pytest.mark.parametrize("element_type", ["f32", "bf16", "s32"])
@pytest.mark.parametrize("text", [RHS_TRANSPOSED, LHS_TRANSPOSED_BATCHED, BOTH_TRANSPOSED])
def test_folding_preserves_values(element_type, text):
    assert_pass_preserves_values(TransposeFolding(), text.replace("f32", element_type), seeds=(0, 1, 2),
                                 special_floats=element_type != "s32")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_random_programs_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(TransposeFolding(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(TransposeFolding(), text, seeds=(0,))
    else:
        TransposeFolding().run(module)
        verify(module)


@st.composite
def transposed_dots(draw: st.DrawFn) -> str:
    """A batched matrix product whose operands are random transposes of the
    parameters (some foldable, some not)."""
    size = st.integers(1, 3)
    batch = draw(st.lists(size, max_size=2))
    m, k, n = draw(size), draw(size), draw(size)
    element_type = draw(st.sampled_from(["f32", "bf16", "s32"]))
    lines = []
    for index, dims in enumerate(([*batch, m, k], [*batch, k, n])):
        permutation = draw(st.permutations(range(len(dims))))
        # The parameter holds the operand with its dimensions in another order.
        source = [0] * len(dims)
        for position, dim in enumerate(permutation):
            source[dim] = dims[position]
        shape = f"{element_type}[{','.join(map(str, source))}]"
        lines.append(f"  p{index} = {shape} parameter({index})")
        operand = f"{element_type}[{','.join(map(str, dims))}]"
        lines.append(f"  t{index} = {operand} transpose(p{index}), dimensions={{{','.join(map(str, permutation))}}}")
    batch_dims = ",".join(map(str, range(len(batch))))
    result = f"{element_type}[{','.join(map(str, [*batch, m, n]))}]"
    lines.append(f"  ROOT dot = {result} dot(t0, t1), lhs_batch_dims={{{batch_dims}}}, "
                 f"lhs_contracting_dims={{{len(batch) + 1}}}, rhs_batch_dims={{{batch_dims}}}, "
                 f"rhs_contracting_dims={{{len(batch)}}}")
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transposed_dots())
def test_random_transposed_dots_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(TransposeFolding(), text, special_floats=True)
