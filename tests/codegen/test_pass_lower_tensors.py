"""lower-tensors: IR like the unrolled gelu of XLA's docs/emitters.md → pointer IR like its LLVM stage
(FileCheck), pred bytes, tensor chains through
scf.for/scf.if vanishing, slice merging, calls of helper functions, and the IR it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp, TensorType

from tests.codegen.filecheck import filecheck
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.errors import UnimplementedError, VerifyError


def lower(text: str) -> ModuleOp:
    module = parse_mlir(text)
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    return module


def no_tensors_left(module: ModuleOp) -> bool:
    for op in module.walk():
        values = [*op.operands, *op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        if any(isinstance(v.type, TensorType) for v in values):
            return False
        if isinstance(op, func.FuncOp) and any(
            isinstance(t, TensorType) for t in (*op.function_type.inputs, *op.function_type.outputs)
        ):
            return False
    return True


def _gelu_lane(k: int, previous: str) -> str:
    return f"""
  %x{k} = vector.extract %v[%c{k}] : bf16 from vector<4xbf16>
  %a{k} = arith.mulf %x{k}, %x{k} : bf16
  %b{k} = arith.mulf %a{k}, %x{k} : bf16
  %t{k} = math.tanh %b{k} : bf16
  %y{k} = arith.mulf %x{k}, %t{k} : bf16
  %r{k} = vector.insert %y{k}, {previous} [%c{k}] : bf16 into vector<4xbf16>"""


# The document's unrolled, vectorized gelu (apply_indexing already lowered to arith), with a shortened body per lane.
GELU_UNROLLED = f"""
func.func @main(%input: tensor<12582912xbf16>, %arg1: tensor<12582912xbf16>) -> tensor<12582912xbf16> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c512 = arith.constant 512 : index
  %cst = arith.constant 0.000000e+00 : bf16
  %cst_0 = arith.constant dense<0.000000e+00> : vector<4xbf16>
  %thread_id_x = gpu.thread_id x {{xla.range = [0 : index, 127 : index]}}
  %block_id_x = gpu.block_id x {{xla.range = [0 : index, 24575 : index]}}
  %0 = arith.muli %thread_id_x, %c4 : index
  %1 = arith.muli %block_id_x, %c512 : index
  %dim = arith.addi %0, %1 : index
  %v = vector.transfer_read %input[%dim], %cst {{in_bounds = [true]}} : tensor<12582912xbf16>, vector<4xbf16>
  {_gelu_lane(0, "%cst_0")}{_gelu_lane(1, "%r0")}{_gelu_lane(2, "%r1")}{_gelu_lane(3, "%r2")}
  %w = vector.transfer_write %r3, %arg1[%dim] {{in_bounds = [true]}} : vector<4xbf16>, tensor<12582912xbf16>
  return %w : tensor<12582912xbf16>
}}
"""

GELU_THROUGH_POINTERS_CHECKS = """
CHECK: func.func @main(%input: !llvm.ptr {llvm.noalias, llvm.dereferenceable = 25165824 : i64},
CHECK-SAME: %arg1: !llvm.ptr {llvm.noalias, llvm.dereferenceable = 25165824 : i64}) {
CHECK: %[[DIM:.*]] = arith.addi
CHECK-NEXT: %[[I:.*]] = arith.index_cast %[[DIM]] : index to i64
CHECK-NEXT: %[[P:.*]] = llvm.getelementptr inbounds %input[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
CHECK-NEXT: %[[V:.*]] = llvm.load %[[P]] {invariant, alignment = 2 : i64} : !llvm.ptr -> vector<4xbf16>
CHECK-NEXT: %[[X:.*]] = vector.extract %[[V]][%c0] : bf16 from vector<4xbf16>
CHECK-NEXT: arith.mulf %[[X]], %[[X]] : bf16
CHECK: math.tanh
CHECK: %[[R3:.*]] = vector.insert %{{.*}}, %{{.*}} [%c3] : bf16 into vector<4xbf16>
CHECK-NEXT: %[[Q:.*]] = llvm.getelementptr inbounds %arg1[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
CHECK-NEXT: llvm.store %[[R3]], %[[Q]] {alignment = 2 : i64} : vector<4xbf16>, !llvm.ptr
CHECK-NEXT: func.return{{$}}
CHECK-NEXT: }
"""


def test_unrolled_gelu_lowers_to_pointers(tmp_path: Path) -> None:
    module = lower(GELU_UNROLLED)
    filecheck(print_mlir(module), GELU_THROUGH_POINTERS_CHECKS, tmp_path)
    assert no_tensors_left(module)


LOOP_ADD = """
func.func @main(%a: tensor<64xf32>, %b: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %th = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %base = arith.muli %th, %c4 : index
  %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%iter = %out) -> (tensor<64xf32>) {
    %i = arith.addi %base, %s : index
    %x = tensor.extract %a[%i] : tensor<64xf32>
    %y = tensor.extract %b[%i] : tensor<64xf32>
    %z = arith.addf %x, %y : f32
    %ins = tensor.insert %z into %iter[%i] : tensor<64xf32>
    scf.yield %ins : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
"""

LOOP_ADD_CHECKS = """
CHECK: func.func @main(%a: !llvm.ptr {{.*}}, %b: !llvm.ptr {{.*}}, %out: !llvm.ptr {{.*}}) {
CHECK: scf.for %s = %c0 to %c4 step %c1 {
CHECK-NEXT: %[[I:.*]] = arith.addi %base, %s : index
CHECK-NEXT: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
CHECK-NEXT: %[[PA:.*]] = llvm.getelementptr inbounds %a[%[[I64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK-NEXT: %[[X:.*]] = llvm.load %[[PA]] {invariant, alignment = 4 : i64} : !llvm.ptr -> f32
CHECK-NEXT: %[[PB:.*]] = llvm.getelementptr inbounds %b[%[[I64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK-NEXT: %[[Y:.*]] = llvm.load %[[PB]] {invariant, alignment = 4 : i64} : !llvm.ptr -> f32
CHECK-NEXT: %[[Z:.*]] = arith.addf %[[X]], %[[Y]] : f32
CHECK-NEXT: %[[PO:.*]] = llvm.getelementptr inbounds %out[%[[I64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
CHECK-NEXT: llvm.store %[[Z]], %[[PO]] {alignment = 4 : i64} : f32, !llvm.ptr
CHECK-NEXT: }
CHECK-NEXT: func.return{{$}}
"""


def test_scf_for_loses_its_tensor_iter_args(tmp_path: Path) -> None:
    module = lower(LOOP_ADD)
    filecheck(print_mlir(module), LOOP_ADD_CHECKS, tmp_path)
    assert no_tensors_left(module)


PRED = """
func.func @main(%a: tensor<8xf32>, %m: tensor<8xi1>, %out: tensor<8xi1>) -> tensor<8xi1> {
  %th = gpu.thread_id x {xla.range = [0 : index, 7 : index]}
  %x = tensor.extract %a[%th] : tensor<8xf32>
  %p = tensor.extract %m[%th] : tensor<8xi1>
  %zero = arith.constant 0.0 : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %r = arith.xori %neg, %p : i1
  %w = tensor.insert %r into %out[%th] : tensor<8xi1>
  return %w : tensor<8xi1>
}
"""

PRED_CHECKS = """
CHECK: %[[PM:.*]] = llvm.getelementptr inbounds %m[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
CHECK-NEXT: %[[BYTE:.*]] = llvm.load %[[PM]] {invariant, alignment = 1 : i64} : !llvm.ptr -> i8
CHECK-NEXT: %[[P:.*]] = arith.trunci %[[BYTE]] : i8 to i1
CHECK: %[[R:.*]] = arith.xori %{{.*}}, %[[P]] : i1
CHECK-NEXT: %[[PO:.*]] = llvm.getelementptr inbounds %out[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
CHECK-NEXT: %[[RB:.*]] = arith.extui %[[R]] : i1 to i8
CHECK-NEXT: llvm.store %[[RB]], %[[PO]] {alignment = 1 : i64} : i8, !llvm.ptr
"""


def test_pred_elements_are_bytes(tmp_path: Path) -> None:
    module = lower(PRED)
    filecheck(print_mlir(module), PRED_CHECKS, tmp_path)
    pointers = [a for a in module.ops.first.body.block.args]
    assert [str(a.type) for a in pointers] == ["!llvm.ptr"] * 3
    sizes = [d.data["llvm.dereferenceable"].value.data for d in module.ops.first.arg_attrs.data]
    assert sizes == [32, 8, 8]


PRED_VECTOR = """
func.func @main(%m: tensor<8xi1>, %out: tensor<8xi1>) -> tensor<8xi1> {
  %c0 = arith.constant 0 : index
  %f = arith.constant false
  %v = vector.transfer_read %m[%c0], %f {in_bounds = [true]} : tensor<8xi1>, vector<8xi1>
  %w = vector.transfer_write %v, %out[%c0] {in_bounds = [true]} : vector<8xi1>, tensor<8xi1>
  return %w : tensor<8xi1>
}
"""


def test_pred_vectors_are_byte_vectors(tmp_path: Path) -> None:
    checks = """
CHECK: %[[B:.*]] = llvm.load %{{.*}} {invariant, alignment = 1 : i64} : !llvm.ptr -> vector<8xi8>
CHECK-NEXT: %[[V:.*]] = llvm.trunc %[[B]] : vector<8xi8> to vector<8xi1>
CHECK: %[[W:.*]] = llvm.zext %[[V]] : vector<8xi1> to vector<8xi8>
CHECK-NEXT: llvm.store %[[W]], %{{.*}} {alignment = 1 : i64} : vector<8xi8>, !llvm.ptr
"""
    filecheck(print_mlir(lower(PRED_VECTOR)), checks, tmp_path)


IF_CHAIN = """
func.func @main(%a: tensor<16xf32>, %out: tensor<16xf32>) -> tensor<16xf32> {
  %c10 = arith.constant 10 : index
  %th = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %in = arith.cmpi slt, %th, %c10 : index
  %r, %n = scf.if %in -> (tensor<16xf32>, index) {
    %x = tensor.extract %a[%th] : tensor<16xf32>
    %w = tensor.insert %x into %out[%th] : tensor<16xf32>
    scf.yield %w, %th : tensor<16xf32>, index
  } else {
    scf.yield %out, %c10 : tensor<16xf32>, index
  }
  %y = tensor.extract %r[%n] : tensor<16xf32>
  %w2 = tensor.insert %y into %r[%c10] : tensor<16xf32>
  return %w2 : tensor<16xf32>
}
"""

IF_CHAIN_CHECKS = """
CHECK: %[[N:.*]] = scf.if %in -> (index) {
CHECK: llvm.store
CHECK: scf.yield %th : index
CHECK-NEXT: } else {
CHECK-NEXT: scf.yield %c10 : index
CHECK-NEXT: }
CHECK-NEXT: %[[NI:.*]] = arith.index_cast %[[N]] : index to i64
CHECK-NEXT: %[[P:.*]] = llvm.getelementptr inbounds %out[%[[NI]]]
CHECK-NEXT: %[[Y:.*]] = llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr -> f32
CHECK: llvm.store %[[Y]], %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr
"""


def test_scf_if_results_and_reads_of_written_buffers(tmp_path: Path) -> None:
    """The tensor result of scf.if is the output buffer; reading it back is a plain (not invariant) load."""
    module = lower(IF_CHAIN)
    filecheck(print_mlir(module), IF_CHAIN_CHECKS, tmp_path)
    assert no_tensors_left(module)


SLICES = """
func.func @main(%a: tensor<8xf32> {xla.slice_index = 0 : i64}, %b: tensor<8xf32> {xla.slice_index = 1 : i64},
                %out: tensor<16xf32> {xla.slice_index = 0 : i64}) -> tensor<16xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 7 : index]}
  %x = tensor.extract %a[%th] : tensor<8xf32>
  %y = tensor.extract %b[%th] : tensor<8xf32>
  %z = arith.mulf %x, %y : f32
  %w = tensor.insert %z into %out[%th] : tensor<16xf32>
  return %w : tensor<16xf32>
}
"""


def test_arguments_of_the_same_slice_are_merged(tmp_path: Path) -> None:
    module = lower(SLICES)
    main = module.ops.first
    assert [a.name_hint for a in main.body.block.args] == ["a", "b"]
    assert [d.data["xla.slice_index"].value.data for d in main.arg_attrs.data] == [0, 1]
    # The merged pointer is as large as the largest view of its slice.
    assert [d.data["llvm.dereferenceable"].value.data for d in main.arg_attrs.data] == [64, 32]
    checks = """
CHECK: func.func @main(%a: !llvm.ptr {xla.slice_index = 0 : i64, {{.*}}},
CHECK-SAME: %b: !llvm.ptr {xla.slice_index = 1 : i64, {{.*}}}) {
CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
CHECK: llvm.load %{{.*}} {invariant, alignment = 4 : i64} : !llvm.ptr -> f32
CHECK: %[[P:.*]] = llvm.getelementptr inbounds %a[
CHECK-NEXT: llvm.store %{{.*}}, %[[P]]
"""
    # %a is written through %out (same slice): its loads are not invariant; %b's are.
    filecheck(print_mlir(module), checks, tmp_path)


CALL = """
func.func private @square(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %y = arith.mulf %x, %x : f32
  return %y : f32
}
func.func @main(%a: tensor<8xf32>, %out: tensor<8xf32>) -> tensor<8xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 7 : index]}
  %y = xla.pure_call @square(%a, %th) : (tensor<8xf32>, index) -> f32
  %w = tensor.insert %y into %out[%th] : tensor<8xf32>
  return %w : tensor<8xf32>
}
"""


def test_pure_calls_pass_pointers(tmp_path: Path) -> None:
    module = lower(CALL)
    checks = """
CHECK: func.func private @square(%t: !llvm.ptr, %i: index) -> f32 {
CHECK: llvm.load %{{.*}} {invariant, alignment = 4 : i64} : !llvm.ptr -> f32
CHECK: func.return %{{.*}} : f32
CHECK: func.func @main(
CHECK: %[[Y:.*]] = func.call @square(%a, %th) : (!llvm.ptr, index) -> f32
CHECK: llvm.store %[[Y]]
"""
    filecheck(print_mlir(module), checks, tmp_path)
    assert no_tensors_left(module)


SCALAR_TENSOR = """
func.func @main(%s: tensor<f32>, %out: tensor<4xf32>) -> tensor<4xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %x = tensor.extract %s[] : tensor<f32>
  %w = tensor.insert %x into %out[%th] : tensor<4xf32>
  return %w : tensor<4xf32>
}
"""


def test_zero_dimensional_tensors_are_loaded_from_the_pointer() -> None:
    module = lower(SCALAR_TENSOR)
    loads = [op for op in module.walk() if isinstance(op, llvm.LoadOp)]
    assert len(loads) == 1 and loads[0].ptr is module.ops.first.body.block.args[0]


def _single(body: str, out: str = "tensor<8xf32>") -> str:
    return f"""
func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>, %out: {out}) -> {out} {{
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %th = gpu.thread_id x {{xla.range = [0 : index, 7 : index]}}
  {body}
}}
"""


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (
            """%in = arith.cmpi slt, %th, %c0 : index
  %r = scf.if %in -> (tensor<8xf32>) {
    scf.yield %a : tensor<8xf32>
  } else {
    scf.yield %out : tensor<8xf32>
  }
  return %r : tensor<8xf32>""",
            VerifyError,
            "different buffers",
        ),
        (
            """%m = arith.constant dense<true> : vector<4xi1>
  %v = vector.transfer_read %a[%c0], %cst, %m {in_bounds = [true]} : tensor<8xf32>, vector<4xf32>
  %w = vector.transfer_write %v, %out[%c0] {in_bounds = [true]} : vector<4xf32>, tensor<8xf32>
  return %w : tensor<8xf32>""",
            UnimplementedError,
            "masked vector.transfer_read",
        ),
        (
            """%v = vector.transfer_read %a[%c0], %cst {in_bounds = [false]} : tensor<8xf32>, vector<4xf32>
  %w = vector.transfer_write %v, %out[%c0] {in_bounds = [true]} : vector<4xf32>, tensor<8xf32>
  return %w : tensor<8xf32>""",
            UnimplementedError,
            "out of bounds",
        ),
        (
            """%true = arith.constant true
  %r = scf.if %true -> (tensor<8xf32>) {
    %s = xla.allocate_shared : tensor<8xf32>
    %x = tensor.extract %s[%th] : tensor<8xf32>
    %w = tensor.insert %x into %out[%th] : tensor<8xf32>
    scf.yield %w : tensor<8xf32>
  } else {
    scf.yield %out : tensor<8xf32>
  }
  return %r : tensor<8xf32>""",
            UnimplementedError,
            "xla.allocate_shared outside of the top level",
        ),
    ],
)
def test_refused_ir(body: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        lower(_single(body))


def test_two_dimensional_tensors_must_be_flattened() -> None:
    text = """
func.func @main(%a: tensor<2x4xf32>, %out: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c0 = arith.constant 0 : index
  %x = tensor.extract %a[%c0, %c0] : tensor<2x4xf32>
  %w = tensor.insert %x into %out[%c0, %c0] : tensor<2x4xf32>
  return %w : tensor<2x4xf32>
}
"""
    with pytest.raises(UnimplementedError, match="rank 2"):
        lower(text)
