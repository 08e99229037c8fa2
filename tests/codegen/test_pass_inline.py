"""inline: the gelu IR of XLA's docs/emitters.md from its MLIR conversion to its inlined stage (and on
to the scf stage with lower-xla-loops-to-scf) checked with FileCheck; functions called twice stay; unused private
functions go; func.call, nested calls and public functions."""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from tests.codegen.filecheck import filecheck
from tests.codegen.test_dialect import GELU_AFTER_EMITTER
from tests.codegen.test_pass_lower_loops_to_scf import GELU_AFTER_SCF_CHECKS
from xlapy.codegen.dialect import PureCallOp
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.inline import InlinePass
from xlapy.codegen.passes.lower_loops_to_scf import LowerLoopsToScfPass


def inline(text: str) -> ModuleOp:
    module = parse_mlir(text)
    InlinePass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    return module


def function_names(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]


GELU_AFTER_INLINE_CHECKS = """
CHECK-LABEL: func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>)
CHECK-NEXT: [[HALF:%[a-z0-9_]+]] = arith.constant 5.000000e-01 : bf16
CHECK-NEXT: [[ONE:%[a-z0-9_]+]] = arith.constant 1.000000e+00 : bf16
CHECK-NEXT: [[C1:%[a-z0-9_]+]] = arith.constant 7.968750e-01 : bf16
CHECK-NEXT: [[C2:%[a-z0-9_]+]] = arith.constant 4.467770e-02 : bf16
CHECK-NEXT: %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
CHECK-NEXT: %block_id_x = gpu.block_id x {xla.range = [0 : index, 24575 : index]}
CHECK-NEXT: %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2) in #map
CHECK-SAME: iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
CHECK-NEXT: %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
CHECK-NEXT: [[SQUARE:%[0-9]+]] = arith.mulf %extracted, %extracted : bf16
CHECK-NEXT: [[CUBE:%[0-9]+]] = arith.mulf [[SQUARE]], %extracted : bf16
CHECK-NEXT: [[M3:%[0-9]+]] = arith.mulf [[CUBE]], [[C2]] : bf16
CHECK-NEXT: [[A1:%[0-9]+]] = arith.addf %extracted, [[M3]] : bf16
CHECK-NEXT: [[M2:%[0-9]+]] = arith.mulf [[A1]], [[C1]] : bf16
CHECK-NEXT: [[TANH:%[0-9]+]] = math.tanh [[M2]] : bf16
CHECK-NEXT: [[A0:%[0-9]+]] = arith.addf [[TANH]], [[ONE]] : bf16
CHECK-NEXT: [[M1:%[0-9]+]] = arith.mulf [[A0]], [[HALF]] : bf16
CHECK-NEXT: [[M0:%[0-9]+]] = arith.mulf %extracted, [[M1]] : bf16
CHECK-NEXT: %inserted = tensor.insert [[M0]] into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
CHECK-NEXT: xla.yield %inserted : tensor<6x512x4096xbf16>
CHECK-NEXT: }
CHECK-NEXT: func.return %xla_loop : tensor<6x512x4096xbf16>
CHECK-NEXT: }
CHECK-NEXT: }
CHECK-NOT: @gelu
"""


def test_gelu_emitter_ir_is_inlined(tmp_path: Path) -> None:
    module = inline(GELU_AFTER_EMITTER)
    assert function_names(module) == ["main"]
    filecheck(print_mlir(module, map_aliases=True), GELU_AFTER_INLINE_CHECKS, tmp_path)


def test_gelu_inlined_then_lowered_to_scf(tmp_path: Path) -> None:
    module = inline(GELU_AFTER_EMITTER)
    LowerLoopsToScfPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    filecheck(print_mlir(module, map_aliases=True), GELU_AFTER_SCF_CHECKS, tmp_path)


TWICE = """
func.func @main(%t: tensor<4xf32>, %i: index, %j: index) -> (f32, f32) {
  %a = xla.pure_call @twice(%t, %i) : (tensor<4xf32>, index) -> f32
  %b = xla.pure_call @twice(%t, %j) : (tensor<4xf32>, index) -> f32
  %c = xla.pure_call @once(%t, %i) : (tensor<4xf32>, index) -> f32
  return %a, %c : f32, f32
}
func.func private @twice(%t: tensor<4xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<4xf32>
  return %x : f32
}
func.func private @once(%t: tensor<4xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<4xf32>
  %y = math.exp %x : f32
  return %y : f32
}
func.func private @unused(%x: f32) -> f32 {
  return %x : f32
}
"""


def test_called_twice_is_not_inlined(tmp_path: Path) -> None:
    module = inline(TWICE)
    assert function_names(module) == ["main", "twice"]
    filecheck(
        print_mlir(module),
        """
CHECK-LABEL: func.func @main
CHECK-NEXT: %a = xla.pure_call @twice(%t, %i) : (tensor<4xf32>, index) -> f32
CHECK-NEXT: %b = xla.pure_call @twice(%t, %j) : (tensor<4xf32>, index) -> f32
CHECK-NEXT: %x = tensor.extract %t[%i] : tensor<4xf32>
CHECK-NEXT: %y = math.exp %x : f32
CHECK-NEXT: func.return %a, %y : f32, f32
CHECK: func.func private @twice
CHECK-NOT: @once
CHECK-NOT: @unused
""",
        tmp_path,
    )


def test_nested_calls_and_func_call() -> None:
    module = inline("""
func.func @main(%x: f32) -> f32 {
  %r = func.call @outer(%x) : (f32) -> f32
  return %r : f32
}
func.func private @outer(%x: f32) -> f32 {
  %c = arith.constant 2.0 : f32
  %y = xla.pure_call @inner(%x) : (f32) -> f32
  %z = arith.mulf %y, %c : f32
  return %z : f32
}
func.func private @inner(%x: f32) -> f32 {
  %c = arith.constant 2.0 : f32
  %y = arith.addf %x, %c : f32
  return %y : f32
}
""")
    assert function_names(module) == ["main"]
    main = module.body.block.first_op
    assert isinstance(main, func.FuncOp)
    # Both constants 2.0 were hoisted to the top of @main and merged into one.
    assert [op.name for op in main.body.block.ops] == ["arith.constant", "arith.addf", "arith.mulf", "func.return"]


def test_public_functions_and_recursion_stay() -> None:
    module = inline("""
func.func @main(%x: f32) -> f32 {
  %r = xla.pure_call @helper(%x) : (f32) -> f32
  return %r : f32
}
func.func @helper(%x: f32) -> f32 {
  return %x : f32
}
func.func private @loop(%x: f32) -> f32 {
  %r = func.call @loop(%x) : (f32) -> f32
  return %r : f32
}
""")
    # @helper is public: kept and called. @loop calls only itself: not inlined, but never called from outside.
    assert function_names(module) == ["main", "helper", "loop"]
    assert [op.callee.string_value() for op in module.walk() if isinstance(op, PureCallOp)] == ["helper"]


def test_unused_chain_is_erased() -> None:
    module = inline("""
func.func @main(%x: f32) -> f32 {
  return %x : f32
}
func.func private @a(%x: f32) -> f32 {
  %r = xla.pure_call @b(%x) : (f32) -> f32
  %s = xla.pure_call @b(%r) : (f32) -> f32
  return %s : f32
}
func.func private @b(%x: f32) -> f32 {
  return %x : f32
}
""")
    assert function_names(module) == ["main"]
