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


CLAMPED = """
func.func @main(%starts: tensor<1xi32>) -> (i1, i1, i1) {
  %c0 = arith.constant 0 : index
  %c60 = arith.constant 60 : index
  %c64 = arith.constant 64 : index
  %big = arith.constant 100000 : i32
  %raw = tensor.extract %starts[%c0] : tensor<1xi32>
  %start = arith.index_cast %raw : i32 to index
  %low = arith.maxsi %start, %c0 : index
  %clamped = arith.minsi %low, %c60 : index
  %end = arith.addi %clamped, %c0 : index
  %inside = arith.cmpi slt, %end, %c64 : index
  %unknown = arith.cmpi slt, %start, %c64 : index
  %wraps = arith.muli %raw, %big : i32
  %wrapped = arith.cmpi slt, %wraps, %big : i32
  func.return %inside, %unknown, %wrapped : i1, i1, i1
}
"""


def test_clamped_starts_have_the_clamps_range(tmp_path):
    # minsi(maxsi(x, 0), 60) is in [0, 60] whatever x is; x itself is only an i32; an i32 product may wrap.
    module = parse_mlir(CLAMPED)
    SimplifyArithPass().apply(make_context(), module)
    filecheck(print_mlir(module), """
CHECK: %inside = arith.constant true
CHECK-NEXT: %unknown = arith.cmpi slt, %start, %c64
CHECK: %wrapped = arith.cmpi slt, %wraps, %big
CHECK-NEXT: func.return %inside, %unknown, %wrapped
""", tmp_path)
