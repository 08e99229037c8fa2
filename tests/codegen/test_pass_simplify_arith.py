"""simplify-arith: comparisons decided by the ranges of ids, loop variables and constants fold, and the
scf.if they guard becomes the branch it takes."""

from __future__ import annotations

from tests.codegen.filecheck import filecheck
from xlapy.codegen.mlir_text import make_context, parse_mlir, print_mlir
from xlapy.codegen.passes.simplify_arith import SimplifyArithPass

TEMPLATE = """
func.func @main(%out: tensor<8xf32>) -> tensor<8xf32> {
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
  %c0 = arith.constant 0 : index
  %bound = arith.constant BOUND : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %v = %c0 to %c4 step %c1 iter_args(%iter = %out) -> (tensor<8xf32>) {
    %lo = arith.cmpi sge, %thread_id_x, %c0 : index
    %hi = arith.cmpi sle, %thread_id_x, %bound : index
    %v_ok = arith.cmpi slt, %v, %c4 : index
    %both = arith.andi %lo, %hi : i1
    %inbounds = arith.andi %both, %v_ok : i1
    %x = scf.if %inbounds -> (tensor<8xf32>) {
      %one = arith.constant 1.0 : f32
      %t = tensor.insert %one into %iter[%v] : tensor<8xf32>
      scf.yield %t : tensor<8xf32>
    } else {
      scf.yield %iter : tensor<8xf32>
    }
    scf.yield %x : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
"""


def _simplified(bound: int) -> str:
    module = parse_mlir(TEMPLATE.replace("BOUND", str(bound)))
    SimplifyArithPass().apply(make_context(), module)
    return print_mlir(module)


def test_checks_implied_by_the_ranges_fold_away(tmp_path):
    filecheck(_simplified(127), """
CHECK: scf.for
CHECK-NOT: arith.cmpi
CHECK-NOT: scf.if
CHECK: tensor.insert
CHECK-NEXT: scf.yield
""", tmp_path)


def test_checks_the_ranges_do_not_decide_stay(tmp_path):
    filecheck(_simplified(63), """
CHECK: arith.cmpi sle, %thread_id_x
CHECK-NOT: arith.cmpi sge
CHECK-NOT: arith.cmpi slt
CHECK: scf.if
CHECK: } else {
""", tmp_path)


def test_a_check_that_always_fails_takes_the_else_branch(tmp_path):
    filecheck(_simplified(-1), """
CHECK: scf.for
CHECK-NOT: scf.if
CHECK-NOT: tensor.insert
CHECK: scf.yield %iter
""", tmp_path)
