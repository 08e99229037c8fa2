"""loop-invariant-code-motion: what a loop body computes from values defined outside the loop moves before the
loop, only out of loops that run at least once; the rest stays (expected texts written by hand)."""

from __future__ import annotations

import pytest

from tests.codegen.filecheck import filecheck
from xlapy.codegen.mlir_text import make_context, parse_mlir, print_mlir
from xlapy.codegen.passes.loop_invariant_code_motion import LoopInvariantCodeMotionPass

# A dynamic-slice's start read from a tensor and clamped, added to the lane's index: the start's computation is
# invariant, the sum is not.
LOOP = """
func.func @f(%t: tensor<64xf32>, %starts: tensor<1xi32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c60 = arith.constant 60 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %s = %c0 to UPPER step %c1 iter_args(%acc = %zero) -> (f32) {
    %raw = tensor.extract %starts[%c0] : tensor<1xi32>
    %start = arith.index_cast %raw : i32 to index
    %low = arith.maxsi %start, %c0 : index
    %clamped = arith.minsi %low, %c60 : index
    %i = arith.addi %s, %clamped : index
    %x = tensor.extract %t[%i] : tensor<64xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  }
  func.return %r : f32
}
"""


def _moved(text: str) -> str:
    module = parse_mlir(text)
    LoopInvariantCodeMotionPass().apply(make_context(), module)
    return print_mlir(module)


def test_the_invariant_chain_moves_before_the_loop(tmp_path) -> None:
    filecheck(_moved(LOOP.replace("UPPER", "%c4")), """
CHECK: %raw = tensor.extract %starts[%c0]
CHECK-NEXT: %start = arith.index_cast %raw
CHECK-NEXT: %low = arith.maxsi %start, %c0
CHECK-NEXT: %clamped = arith.minsi %low, %c60
CHECK-NEXT: scf.for %s
CHECK-NEXT: %i = arith.addi %s, %clamped
CHECK-NEXT: %x = tensor.extract %t[%i]
""", tmp_path)


@pytest.mark.parametrize("upper", ["%n", "%c0"])
def test_nothing_moves_out_of_a_loop_that_may_not_run(upper: str) -> None:
    # Out of an empty loop, the read of %starts would run where it did not.
    text = LOOP.replace("UPPER", upper)
    assert _moved(text) == print_mlir(parse_mlir(text))


def test_invariants_of_nested_loops_move_out_of_both(tmp_path) -> None:
    text = """
    func.func @f(%t: tensor<16xf32>, %k: index) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %r = scf.for %a = %c0 to %c4 step %c1 iter_args(%outer = %zero) -> (f32) {
        %s = scf.for %b = %c0 to %c4 step %c1 iter_args(%inner = %outer) -> (f32) {
          %kk = arith.muli %k, %c4 : index
          %row = arith.muli %a, %c4 : index
          %i = arith.addi %row, %b : index
          %x = tensor.extract %t[%i] : tensor<16xf32>
          %xs = arith.addf %inner, %x : f32
          scf.yield %xs : f32
        }
        scf.yield %s : f32
      }
      func.return %r : f32
    }
    """
    filecheck(_moved(text), """
CHECK: %kk = arith.muli %k, %c4
CHECK-NEXT: scf.for %a
CHECK-NEXT: %row = arith.muli %a, %c4
CHECK-NEXT: scf.for %b
CHECK-NEXT: %i = arith.addi %row, %b
""", tmp_path)


def test_ops_in_a_nested_region_stay(tmp_path) -> None:
    text = """
    func.func @f(%t: tensor<8xf32>, %c: i1) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %y = scf.if %c -> (f32) {
          %x = tensor.extract %t[%c0] : tensor<8xf32>
          scf.yield %x : f32
        } else {
          scf.yield %acc : f32
        }
        scf.yield %y : f32
      }
      func.return %r : f32
    }
    """
    filecheck(_moved(text), """
CHECK: scf.for
CHECK-NEXT: scf.if
CHECK-NEXT: tensor.extract
""", tmp_path)
