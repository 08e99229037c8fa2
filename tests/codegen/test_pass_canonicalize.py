"""canonicalize: xDSL's canonicalization, then the constants of each function at the top of its entry block, equal
ones merged (as MLIR's canonicalizer materializes constants), whichever loop or branch they were created in."""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects import arith, func

import xlapy
from tests.codegen.filecheck import filecheck
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import make_context, parse_mlir, print_mlir
from xlapy.codegen.passes.canonicalize import CanonicalizePass
from xlapy.codegen.pipeline import lower_fusion

NESTED = """
func.func @main(%out: tensor<8xf32>, %n: index, %flag: i1) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %v = %c0 to %n step %c1 iter_args(%iter = %out) -> (tensor<8xf32>) {
    %c4 = arith.constant 4 : index
    %w = arith.muli %v, %c4 : index
    %x = scf.if %flag -> (tensor<8xf32>) {
      %one = arith.constant 1.5 : f32
      %c4_again = arith.constant 4 : index
      %u = arith.addi %w, %c4_again : index
      %t = tensor.insert %one into %iter[%u] : tensor<8xf32>
      scf.yield %t : tensor<8xf32>
    } else {
      scf.yield %iter : tensor<8xf32>
    }
    scf.yield %x : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
"""


def test_constants_move_to_the_top_of_the_function(tmp_path):
    module = parse_mlir(NESTED)
    CanonicalizePass().apply(make_context(), module)
    filecheck(print_mlir(module), """
CHECK:      func.func @main(
CHECK-NEXT:   %[[C0:.*]] = arith.constant 0 : index
CHECK-NEXT:   %[[C1:.*]] = arith.constant 1 : index
CHECK-NEXT:   %[[C4:.*]] = arith.constant 4 : index
CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1.500000e+00 : f32
CHECK-NEXT:   scf.for
CHECK-NOT:    arith.constant
CHECK:        arith.muli %{{.*}}, %[[C4]] : index
CHECK:        scf.if
CHECK:        arith.addi %{{.*}}, %[[C4]] : index
CHECK:        tensor.insert %[[ONE]]
""", tmp_path)


def test_corpus_fusions_keep_constants_at_the_top():
    """After the whole CPU pipeline, no constant is left inside a loop or a branch (pad and concatenate have
    branches; their bounds become constants late)."""
    corpus = Path(__file__).parent / "data" / "loop_fusions"
    for name in ("pad_edges_constant", "concatenate_three", "slice_pad_shared_operand"):
        module = xlapy.parse_hlo((corpus / f"{name}.hlo").read_text())
        fusion = next(i for i in module.entry.instructions if i.opcode == "fusion")
        lowered = lower_fusion(fusion, Device.host())
        nested = [op for op in lowered.module.walk()
                  if isinstance(op, arith.ConstantOp) and not isinstance(op.parent_op(), func.FuncOp)]
        assert not nested, (name, [str(op) for op in nested])
