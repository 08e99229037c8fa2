"""The algebraic simplifier's ``dot`` rules against XLA's behaviour
(``HandleDot`` in ``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``
and its tests ``algebraic_simplifier_test.cc``), and against the
interpreter on random programs."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings

from tests.codegen.filecheck import filecheck
from tests.transforms.algsimp_cases import assert_simplifier_preserves_values, simplify
from tools.random_hlo import hlo_texts, reduce_relies_on_its_initial_value
from xlapy.hlo import parse_module


def test_dot_of_an_operand_without_elements_is_zero(tmp_path):
    # XLA's ZeroSizedDot: the contraction is over no elements.
    changed, out = simplify("a = f32[3,0] parameter(0)\n  b = f32[0,2] parameter(1)",
                            "ROOT d = f32[3,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert changed
    filecheck(out, """
CHECK: %[[Z:.*]] = f32[] constant(0)
CHECK: ROOT %{{.*}} = f32[3,2]{1,0} broadcast(%[[Z]]), dimensions={}
""", tmp_path)


def test_outer_product_is_a_multiply_of_broadcasts(tmp_path):
    changed, out = simplify("a = f32[3] parameter(0)\n  b = f32[4] parameter(1)",
                            "ROOT d = f32[3,4] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[L:.*]] = f32[3,4]{1,0} broadcast(%a), dimensions={0}
CHECK-DAG: %[[R:.*]] = f32[3,4]{1,0} broadcast(%b), dimensions={1}
CHECK: ROOT %{{.*}} = f32[3,4]{1,0} multiply(%[[L]], %[[R]])
""", tmp_path)


def test_batch_dot_without_contraction_moves_batch_dimensions_first_and_converts(tmp_path):
    # XLA's RewriteAsMultiplyDotWithZeroLhsContractingDim: operands
    # transposed batch-major, converted to the result type, broadcast.
    changed, out = simplify("a = f32[4,2] parameter(0)\n  b = bf16[3,4] parameter(1)",
                            "ROOT d = f32[4,2,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={1}, "
                            "lhs_contracting_dims={}, rhs_contracting_dims={}")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[L:.*]] = f32[4,2,3]{2,1,0} broadcast(%a), dimensions={0,1}
CHECK-DAG: %[[T:.*]] = bf16[4,3]{1,0} transpose(%b), dimensions={1,0}
CHECK-DAG: %[[C:.*]] = f32[4,3]{1,0} convert(%[[T]])
CHECK-DAG: %[[R:.*]] = f32[4,2,3]{2,1,0} broadcast(%[[C]]), dimensions={0,2}
CHECK: ROOT %{{.*}} = f32[4,2,3]{2,1,0} multiply(%[[L]], %[[R]])
""", tmp_path)


def test_contraction_over_size_one_dimensions_is_a_multiply(tmp_path):
    # RemoveDegenerateDimensionFromDot drops the size-1 dimensions, leaving a
    # dot without contraction, which becomes a multiply.
    changed, out = simplify("a = f32[2,1] parameter(0)\n  b = f32[1,3] parameter(1)",
                            "ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[A:.*]] = f32[2]{0} reshape(%a)
CHECK-DAG: %[[B:.*]] = f32[3]{0} reshape(%b)
CHECK-DAG: %[[L:.*]] = f32[2,3]{1,0} broadcast(%[[A]]), dimensions={0}
CHECK-DAG: %[[R:.*]] = f32[2,3]{1,0} broadcast(%[[B]]), dimensions={1}
CHECK: ROOT %{{.*}} = f32[2,3]{1,0} multiply(%[[L]], %[[R]])
""", tmp_path)


def test_size_one_batch_dimension_is_dropped_and_the_result_reshaped(tmp_path):
    changed, out = simplify("a = f32[1,2,3] parameter(0)\n  b = f32[1,3,4] parameter(1)",
                            "ROOT d = f32[1,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                            "lhs_contracting_dims={2}, rhs_contracting_dims={1}")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[A:.*]] = f32[2,3]{1,0} reshape(%a)
CHECK-DAG: %[[B:.*]] = f32[3,4]{1,0} reshape(%b)
CHECK: %[[D:.*]] = f32[2,4]{1,0} dot(%[[A]], %[[B]]), lhs_contracting_dims={1}, rhs_contracting_dims={0}
CHECK: ROOT %{{.*}} = f32[1,2,4]{2,1,0} reshape(%[[D]])
""", tmp_path)


def test_dot_of_transposes_is_a_transpose_of_the_swapped_dot(tmp_path):
    # XLA's RemoveTransposesFromDotOperands: dot(A^T, B^T) = (B A)^T.
    changed, out = simplify("x = s32[5,2,4] parameter(0)\n  y = s32[5,3,2] parameter(1)",
                            "tx = s32[5,4,2] transpose(x), dimensions={0,2,1}\n"
                            "  ty = s32[5,2,3] transpose(y), dimensions={0,2,1}\n"
                            "  ROOT d = s32[5,4,3] dot(tx, ty), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                            "lhs_contracting_dims={2}, rhs_contracting_dims={1}, operand_precision={high,default}")
    assert changed
    filecheck(out, """
CHECK: %[[D:.*]] = s32[5,3,4]{2,1,0} dot(%y, %x), lhs_batch_dims={0}, lhs_contracting_dims={2},
CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={default,high}
CHECK: ROOT %{{.*}} = s32[5,4,3]{2,1,0} transpose(%[[D]]), dimensions={0,2,1}
""", tmp_path)


def test_dot_of_transposes_keeping_the_matrix_dimensions_transposes_the_batch(tmp_path):
    changed, out = simplify("x = s32[2,3,4,5] parameter(0)\n  y = s32[2,3,5,6] parameter(1)",
                            "tx = s32[3,2,4,5] transpose(x), dimensions={1,0,2,3}\n"
                            "  ty = s32[3,2,5,6] transpose(y), dimensions={1,0,2,3}\n"
                            "  ROOT d = s32[3,2,4,6] dot(tx, ty), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, "
                            "lhs_contracting_dims={3}, rhs_contracting_dims={2}")
    assert changed
    filecheck(out, """
CHECK: %[[D:.*]] = s32[2,3,4,6]{3,2,1,0} dot(%x, %y)
CHECK: ROOT %{{.*}} = s32[3,2,4,6]{3,2,1,0} transpose(%[[D]]), dimensions={1,0,2,3}
""", tmp_path)


def test_dots_that_stay():
    # Float dots of transposes stay: the swapped operands may sum in another order.
    assert not simplify("x = f32[2,4] parameter(0)\n  y = f32[3,2] parameter(1)",
                        "tx = f32[4,2] transpose(x), dimensions={1,0}\n  ty = f32[2,3] transpose(y), dimensions={1,0}\n"
                        "  ROOT d = f32[4,3] dot(tx, ty), lhs_contracting_dims={1}, rhs_contracting_dims={0}")[0]
    # Transposes that differ, and a plain matrix product.
    assert not simplify("x = s32[2,4] parameter(0)\n  y = s32[2,3] parameter(1)",
                        "tx = s32[4,2] transpose(x), dimensions={1,0}\n"
                        "  ROOT d = s32[4,3] dot(tx, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}")[0]
    # A dot with another precision algorithm is not a multiply.
    assert not simplify("a = f32[3] parameter(0)\n  b = f32[4] parameter(1)",
                        "ROOT d = f32[3,4] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}, "
                        "algorithm=dot_bf16_bf16_f32")[0]


_TRANSPOSED_INTEGER_DOTS = """HloModule m
ENTRY e {
  x = s32[2,3,4] parameter(0)
  y = s32[2,5,3] parameter(1)
  tx = s32[2,4,3] transpose(x), dimensions={0,2,1}
  ty = s32[2,3,5] transpose(y), dimensions={0,2,1}
  d = s32[2,4,5] dot(tx, ty), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  a = s32[4,1,2] parameter(2)
  b = s32[2,1] parameter(3)
  o = s32[4,1,1] dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  ROOT t = (s32[2,4,5], s32[4,1,1]) tuple(d, o)
}
"""


def test_integer_dot_rewrites_keep_values():
    assert_simplifier_preserves_values(_TRANSPOSED_INTEGER_DOTS, seeds=(0, 1, 2))


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hlo_texts(max_instructions=8, zero_sized=True))
def test_preserves_values_of_random_programs(text: str) -> None:
    # The random programs are rich in dots: general ones with no or size-1
    # contractions, batch dimensions anywhere and transposed operands.
    module = parse_module(text)
    assume(any(i.opcode == "dot" for i in module.instructions))
    assume(not reduce_relies_on_its_initial_value(module))
    assert_simplifier_preserves_values(text)
