"""lower-xla-loops-to-scf: the gelu IR of XLA's docs/emitters.md from its inlined stage to its
`xla_gpu` to `scf` stage, checked with FileCheck, the
variants (no symbols, constraints, implied constraints, no iter_args), and
the visiting order and domain run by a small evaluator against
IndexingMap.domain."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from tests.codegen.filecheck import filecheck
from tests.codegen.test_pass_lower_apply_indexing import run_function
from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.lower_loops_to_scf import LowerLoopsToScfPass
from xlapy.indexing import IndexingMap


def lower(text: str) -> ModuleOp:
    module = parse_mlir(text)
    LowerLoopsToScfPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    assert not [op for op in module.walk() if isinstance(op, LoopOp)]
    return module


# The document's gelu after inlining, with the prefix xla.
GELU_AFTER_INLINE = """
#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
  "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>) -> tensor<6x512x4096xbf16> {
  %cst = arith.constant 5.000000e-01 : bf16
  %cst_0 = arith.constant 1.000000e+00 : bf16
  %cst_1 = arith.constant 7.968750e-01 : bf16
  %cst_2 = arith.constant 4.467770e-02 : bf16
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
  %block_id_x = gpu.block_id x {xla.range = [0 : index, 24575 : index]}
  %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2)
      in #map iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
    %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
    %0 = arith.mulf %extracted, %extracted : bf16
    %1 = arith.mulf %0, %extracted : bf16
    %2 = arith.mulf %1, %cst : bf16
    %3 = arith.addf %extracted, %2 : bf16
    %4 = arith.mulf %3, %cst_0 : bf16
    %5 = math.tanh %4 : bf16
    %6 = arith.addf %5, %cst_1 : bf16
    %7 = arith.mulf %6, %cst_2 : bf16
    %8 = arith.mulf %extracted, %7 : bf16
    %inserted = tensor.insert %8 into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
    xla.yield %inserted : tensor<6x512x4096xbf16>
  }
  return %xla_loop : tensor<6x512x4096xbf16>
}
"""

GELU_AFTER_SCF_CHECKS = r"""
CHECK: #map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096,
CHECK-LABEL: func.func @main
CHECK-DAG: %c0 = arith.constant 0 : index
CHECK-DAG: %c1 = arith.constant 1 : index
CHECK-DAG: %c4 = arith.constant 4 : index
CHECK-DAG: %c127 = arith.constant 127 : index
CHECK-DAG: %c24575 = arith.constant 24575 : index
CHECK: %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
CHECK-NEXT: [[GE_TH:%[0-9]+]] = arith.cmpi sge, %thread_id_x, %c0 : index
CHECK-NEXT: [[LE_TH:%[0-9]+]] = arith.cmpi sle, %thread_id_x, %c127 : index
CHECK-NEXT: [[TH:%[0-9]+]] = arith.andi [[GE_TH]], [[LE_TH]] : i1
CHECK-NEXT: [[GE_BL:%[0-9]+]] = arith.cmpi sge, %block_id_x, %c0 : index
CHECK-NEXT: [[LE_BL:%[0-9]+]] = arith.cmpi sle, %block_id_x, %c24575 : index
CHECK-NEXT: [[BL:%[0-9]+]] = arith.andi [[GE_BL]], [[LE_BL]] : i1
CHECK-NEXT: %inbounds = arith.andi [[TH]], [[BL]] : i1
CHECK-NEXT: [[IF:%[0-9]+]] = scf.if %inbounds -> (tensor<6x512x4096xbf16>) {
CHECK-NEXT: %dim0, %dim1, %dim2 = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%vector_index]
CHECK-NEXT: %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
CHECK-NEXT: arith.mulf %extracted, %extracted : bf16
CHECK-COUNT-8: {{(arith|math)\.}}
CHECK-NEXT: %inserted = tensor.insert [[RESULT:%[0-9]+]] into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
CHECK-NEXT: scf.yield %inserted : tensor<6x512x4096xbf16>
CHECK-NEXT: } else {
CHECK-NEXT: scf.yield %iter : tensor<6x512x4096xbf16>
CHECK-NEXT: }
CHECK-NEXT: scf.yield [[IF]] : tensor<6x512x4096xbf16>
CHECK-NEXT: }
CHECK-NEXT: func.return %xla_loop : tensor<6x512x4096xbf16>
CHECK-NOT: xla.loop
"""


def test_inlined_gelu_lowers_to_scf(tmp_path: Path) -> None:
    filecheck(print_mlir(lower(GELU_AFTER_INLINE), map_aliases=True), GELU_AFTER_SCF_CHECKS, tmp_path)


def test_no_symbols_no_for_loop(tmp_path: Path) -> None:
    module = lower("""
func.func @f(%a: index, %b: index, %t: tensor<4x6xf32>, %x: f32) -> tensor<4x6xf32> {
  %r = xla.loop (%a, %b) -> (%i, %j) in #xla.indexing_map<"(d0, d1) -> (d1, d0), domain: d0 in [0, 5], d1 in [0, 3]">
      iter_args(%it = %t) -> (tensor<4x6xf32>) {
    %u = tensor.insert %x into %it[%i, %j] : tensor<4x6xf32>
    xla.yield %u : tensor<4x6xf32>
  }
  return %r : tensor<4x6xf32>
}""")
    filecheck(
        print_mlir(module),
        """
CHECK-NOT: scf.for
CHECK: arith.cmpi sge, %a, %c0
CHECK: arith.cmpi sle, %a, %c5
CHECK: arith.cmpi sge, %b, %c0
CHECK: arith.cmpi sle, %b, %c3
CHECK: %inbounds = arith.andi
CHECK-NEXT: %r = scf.if %inbounds -> (tensor<4x6xf32>) {
CHECK-NEXT: %i, %j = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d1, d0),
CHECK-SAME: domain: d0 in [0, 5], d1 in [0, 3]">(%a, %b)
CHECK-NEXT: %u = tensor.insert %x into %t[%i, %j] : tensor<4x6xf32>
CHECK-NEXT: scf.yield %u
CHECK-NEXT: } else {
CHECK-NEXT: scf.yield %t
CHECK-NOT: scf.for
""",
        tmp_path,
    )


def test_constraint_is_checked_with_apply_indexing(tmp_path: Path) -> None:
    module = lower("""
func.func @f(%a: index, %t: tensor<16xf32>, %x: f32) -> tensor<16xf32> {
  %r = xla.loop (%a)[%s] -> (%i) in #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 3], s0 in [0, 3],"
    " (d0 + s0) mod 2 in [0, 0]"> iter_args(%it = %t) -> (tensor<16xf32>) {
    %u = tensor.insert %x into %it[%i] : tensor<16xf32>
    xla.yield %u : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}""")
    filecheck(
        print_mlir(module),
        """
CHECK: scf.for %s = %c0 to %c4 step %c1
CHECK: [[DIM:%[0-9]+]] = arith.andi
CHECK-NEXT: [[E:%[0-9]+]] = xla.apply_indexing #xla.indexing_map<"(d0)[s0] -> ((d0 + s0) mod 2),
CHECK-SAME: domain: d0 in [0, 3], s0 in [0, 3]">(%a)[%s]
CHECK-NEXT: [[GE:%[0-9]+]] = arith.cmpi sge, [[E]], %c0 : index
CHECK-NEXT: [[LE:%[0-9]+]] = arith.cmpi sle, [[E]], %c0 : index
CHECK-NEXT: [[C:%[0-9]+]] = arith.andi [[GE]], [[LE]] : i1
CHECK-NEXT: %inbounds = arith.andi [[DIM]], [[C]] : i1
""",
        tmp_path,
    )


def test_implied_constraint_is_not_checked() -> None:
    module = lower("""
func.func @f(%a: index, %t: tensor<8xf32>, %x: f32) -> tensor<8xf32> {
  %r = xla.loop (%a)[%s] -> (%i) in #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 3],"
    " d0 + s0 in [0, 6]"> iter_args(%it = %t) -> (tensor<8xf32>) {
    %u = tensor.insert %x into %it[%i] : tensor<8xf32>
    xla.yield %u : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}""")
    applies = [op for op in module.walk() if isinstance(op, ApplyIndexingOp)]
    assert len(applies) == 1  # only the indices, inside the scf.if
    assert applies[0].parent_op().name == "scf.if"


def test_loop_without_iter_args() -> None:
    module = lower("""
func.func @f(%a: index, %t: tensor<4xf32>, %x: f32) {
  xla.loop (%a)[%s] -> (%i) in #xla.indexing_map<"(d0)[s0] -> (s0), domain: d0 in [0, 0], s0 in [0, 3]"> {
    %u = tensor.insert %x into %t[%i] : tensor<4xf32>
    xla.yield
  }
  return
}""")
    printed = print_mlir(module)
    assert "scf.for %s = %c0 to %c4 step %c1 {" in printed
    assert "scf.if %inbounds {" in printed and "else" not in printed


# The visiting order (first symbol outermost) and the domain, run by the evaluator.
ORDER_MAP = (
    "(d0)[s0, s1] -> (d0 * 2 + s0, s1), "
    "domain: d0 in [0, 3], s0 in [0, 1], s1 in [1, 3], (d0 + s0 + s1) mod 2 in [0, 0]"
)
ORDER = f"""
func.func @f(%d: index, %t: tensor<8x4xindex>) -> (tensor<8x4xindex>, index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = xla.loop (%d)[%s0, %s1] -> (%i, %j) in #xla.indexing_map<"{ORDER_MAP}">
      iter_args(%it = %t, %n = %c0) -> (tensor<8x4xindex>, index) {{
    %next = arith.addi %n, %c1 : index
    %u = tensor.insert %next into %it[%i, %j] : tensor<8x4xindex>
    xla.yield %u, %next : tensor<8x4xindex>, index
  }}
  return %r#0, %r#1 : tensor<8x4xindex>, index
}}
"""


@pytest.mark.parametrize("d0", [-1, 0, 1, 2, 3, 4])
def test_visits_the_domain_in_order(d0: int) -> None:
    module = lower(ORDER)
    function = module.body.block.first_op
    assert isinstance(function, func.FuncOp)
    indexing_map = IndexingMap.parse(ORDER_MAP)
    expected = np.zeros((8, 4), np.int64)
    count = 0
    ranges = [range(v.bounds.lower, v.bounds.upper + 1) for v in indexing_map.range_vars]
    for symbols in itertools.product(*ranges):
        if indexing_map.contains([d0], symbols):
            count += 1
            expected[indexing_map.evaluate([d0], symbols)] = count
    result, visits = run_function(function, d0, np.zeros((8, 4), np.int64))
    assert visits == count
    np.testing.assert_array_equal(result, expected)
    assert count == (0 if d0 in (-1, 4) else 3)
