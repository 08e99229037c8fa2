"""vectorize-loads-stores: the gelu IR of XLA's docs/emitters.md from its flattened stage to its
vectorized stage, checked with FileCheck, and the
accesses it must leave alone (misaligned, strided, loop-dependent tensors,
unsuitable loops or element types, stores whose result is used elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import vector
from xdsl.dialects.builtin import ModuleOp

from tests.codegen.filecheck import filecheck
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.vectorize_loads_stores import VectorizeLoadsStoresPass


def vectorize(text: str) -> ModuleOp:
    module = parse_mlir(text)
    VectorizeLoadsStoresPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    return module


def vector_ops(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.dialect_name() == "vector"]


GELU_MAP = (
    '#map = #xla.indexing_map<"(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index),'
    ' domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">'
)

# The document's flattened gelu made complete (constants and thread ids spelled out).
GELU_FLATTENED = f"""
{GELU_MAP}
func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 5.000000e-01 : bf16
  %cst_0 = arith.constant 1.000000e+00 : bf16
  %cst_1 = arith.constant 7.968750e-01 : bf16
  %cst_2 = arith.constant 4.467770e-02 : bf16
  %thread_id_x = gpu.thread_id x {{xla.range = [0 : index, 127 : index]}}
  %block_id_x = gpu.block_id x {{xla.range = [0 : index, 24575 : index]}}
  %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<12582912xbf16>) {{
    %dim = xla.apply_indexing #map(%thread_id_x, %block_id_x, %vector_index)
    %extracted = tensor.extract %input[%dim] : tensor<12582912xbf16>
    %2 = arith.mulf %extracted, %extracted : bf16
    %3 = arith.mulf %2, %extracted : bf16
    %4 = arith.mulf %3, %cst_2 : bf16
    %5 = arith.addf %extracted, %4 : bf16
    %6 = arith.mulf %5, %cst_1 : bf16
    %7 = math.tanh %6 : bf16
    %8 = arith.addf %7, %cst_0 : bf16
    %9 = arith.mulf %8, %cst : bf16
    %10 = arith.mulf %extracted, %9 : bf16
    %inserted = tensor.insert %10 into %iter[%dim] : tensor<12582912xbf16>
    scf.yield %inserted : tensor<12582912xbf16>
  }}
  func.return %xla_loop : tensor<12582912xbf16>
}}
"""

GELU_VECTORIZED_CHECKS = """
CHECK: #map = #xla.indexing_map<"(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index)
CHECK: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
CHECK: %[[VECTOR0:.*]] = arith.constant dense<0.000000e+00> : vector<4xbf16>
CHECK-NEXT: %[[BASE:.*]] = xla.apply_indexing #map(%thread_id_x, %block_id_x, %c0)
CHECK-NEXT: %[[PAD:.*]] = arith.constant 0.000000e+00 : bf16
CHECK-NEXT: %[[READ:.*]] = vector.transfer_read %input[%[[BASE]]], %[[PAD]] {in_bounds = [true]}
CHECK-SAME: : tensor<12582912xbf16>, vector<4xbf16>
CHECK-NEXT: %xla_loop, %[[VEC:.*]] = scf.for %vector_index = %c0 to %c4 step %c1
CHECK-SAME: iter_args(%iter = %output, %iter_vector = %[[VECTOR0]]) -> (tensor<12582912xbf16>, vector<4xbf16>) {
CHECK-NEXT: %[[X:.*]] = vector.extract %[[READ]][%vector_index] : bf16 from vector<4xbf16>
CHECK-NEXT: arith.mulf %[[X]], %[[X]] : bf16
CHECK: math.tanh
CHECK: %[[Y:.*]] = arith.mulf %[[X]], %{{.*}} : bf16
CHECK-NEXT: %[[INS:.*]] = vector.insert %[[Y]], %iter_vector [%vector_index] : bf16 into vector<4xbf16>
CHECK-NEXT: scf.yield %iter, %[[INS]] : tensor<12582912xbf16>, vector<4xbf16>
CHECK-NEXT: }
CHECK-NEXT: %[[W:.*]] = vector.transfer_write %[[VEC]], %output[%[[BASE]]] {in_bounds = [true]}
CHECK-SAME: : vector<4xbf16>, tensor<12582912xbf16>
CHECK-NEXT: func.return %[[W]] : tensor<12582912xbf16>
"""


def test_flattened_gelu_is_vectorized(tmp_path: Path) -> None:
    module = vectorize(GELU_FLATTENED)
    text = print_mlir(module, map_aliases=True)
    filecheck(text, GELU_VECTORIZED_CHECKS, tmp_path)
    # Nothing of the scalar accesses is left: no per-iteration index, extract or insert.
    assert "tensor.extract" not in text and "tensor.insert" not in text
    assert text.count("xla.apply_indexing") == 1


def _loop(map_text: str, body: str, size: int = 4, tensor: str = "tensor<64xf32>", iters: str = "") -> str:
    return f"""
    #map = #xla.indexing_map<"{map_text}">
    func.func @f(%t: {tensor}, %out: {tensor}, %d: index) -> {tensor} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cn = arith.constant {size} : index
      %r = scf.for %s = %c0 to %cn step %c1 iter_args(%iter = %out) -> ({tensor}) {{
        %i = xla.apply_indexing #map(%d)[%s]
        {body}
      }}
      func.return %r : {tensor}
    }}
    """


COPY = """
        %x = tensor.extract %t[%i] : tensor<64xf32>
        %y = tensor.insert %x into %iter[%i] : tensor<64xf32>
        scf.yield %y : tensor<64xf32>
"""


def test_copy_loop_is_vectorized() -> None:
    module = vectorize(_loop("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]", COPY))
    assert sorted(vector_ops(module)) == [
        "vector.extract",
        "vector.insert",
        "vector.transfer_read",
        "vector.transfer_write",
    ]


@pytest.mark.parametrize(
    "map_text",
    [
        # misaligned: d0 * 3 is not a multiple of 4
        "(d0)[s0] -> (d0 * 3 + s0), domain: d0 in [0, 15], s0 in [0, 3]",
        # stride 2 in the loop variable
        "(d0)[s0] -> (d0 * 8 + s0 * 2), domain: d0 in [0, 7], s0 in [0, 3]",
        # the loop variable under a mod: not contiguous
        "(d0)[s0] -> (d0 * 4 + s0 mod 2), domain: d0 in [0, 15], s0 in [0, 3]",
        # misaligned by a constant offset
        "(d0)[s0] -> (d0 * 4 + s0 + 1), domain: d0 in [0, 14], s0 in [0, 3]",
        # reversed
        "(d0)[s0] -> (d0 * 4 - s0 + 3), domain: d0 in [0, 15], s0 in [0, 3]",
    ],
)
def test_non_contiguous_or_misaligned_accesses_stay_scalar(map_text: str) -> None:
    text = _loop(map_text, COPY)
    module = vectorize(text)
    assert vector_ops(module) == []
    assert print_mlir(module) == print_mlir(parse_mlir(text))


def test_alignment_proved_by_the_ranges() -> None:
    # d0 * 3 is a multiple of 4 only because d0 is 0: the simplifier uses the range.
    module = vectorize(_loop("(d0)[s0] -> (d0 * 3 + s0), domain: d0 in [0, 0], s0 in [0, 3]", COPY))
    assert "vector.transfer_read" in vector_ops(module)


@pytest.mark.parametrize(
    ("size", "tensor", "last"),
    [
        (3, "tensor<63xf32>", 0),  # not a power of two
        (128, "tensor<128xf32>", 0),  # too long for one vector
        (4, "tensor<66xf32>", 16),  # the last vector would run past the end
    ],
)
def test_unsuitable_loops_stay_scalar(size: int, tensor: str, last: int) -> None:
    body = COPY.replace("tensor<64xf32>", tensor)
    text = _loop(f"(d0)[s0] -> (d0 * {size} + s0), domain: d0 in [0, {last}], s0 in [0, {size - 1}]", body, size,
                 tensor)
    assert vector_ops(vectorize(text)) == []


def test_reads_in_bounds_of_a_longer_tensor_become_vectors() -> None:
    """A tensor of 66 elements read by vectors of 4 up to element 63: the index's range keeps every lane in bounds
    (the write to the 66-element tensor stays scalar)."""
    body = COPY.replace("tensor<64xf32>", "tensor<66xf32>")
    text = _loop("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]", body, 4, "tensor<66xf32>")
    assert "vector.transfer_read" in vector_ops(vectorize(text))


def test_induction_variable_as_index() -> None:
    module = vectorize(
        """
        func.func @f(%t: tensor<8xi32>, %out: tensor<8xi32>) -> tensor<8xi32> {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c8 = arith.constant 8 : index
          %r = scf.for %s = %c0 to %c8 step %c1 iter_args(%iter = %out) -> (tensor<8xi32>) {
            %x = tensor.extract %t[%s] : tensor<8xi32>
            %y = tensor.insert %x into %iter[%s] : tensor<8xi32>
            scf.yield %y : tensor<8xi32>
          }
          func.return %r : tensor<8xi32>
        }
        """
    )
    text = print_mlir(module)
    # The base index is the loop's lower bound itself.
    assert "%vector = arith.constant dense<0> : vector<8xi32>" in text
    assert "%0 = vector.transfer_read %t[%c0], %cst {in_bounds = [true]} : tensor<8xi32>, vector<8xi32>" in text
    assert "%x = vector.extract %0[%s] : i32 from vector<8xi32>" in text
    assert "%r, %1 = scf.for %s = %c0 to %c8 step %c1 iter_args(%iter = %out, %iter_vector = %vector)" in text
    assert "%r_1 = vector.transfer_write %1, %out[%c0] {in_bounds = [true]} : vector<8xi32>, tensor<8xi32>" in text


def test_read_of_a_tensor_written_in_the_loop_stays_scalar() -> None:
    # %iter changes from one iteration to the next: the extract cannot be hoisted, and the
    # iter_arg has two uses, so the insert cannot be deferred either.
    body = """
        %x = tensor.extract %iter[%i] : tensor<64xf32>
        %y = tensor.insert %x into %iter[%i] : tensor<64xf32>
        scf.yield %y : tensor<64xf32>
    """
    text = _loop("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]", body)
    assert vector_ops(vectorize(text)) == []


def test_insert_whose_result_is_used_in_the_loop_stays_scalar() -> None:
    body = """
        %x = tensor.extract %t[%i] : tensor<64xf32>
        %y = tensor.insert %x into %iter[%i] : tensor<64xf32>
        %z = tensor.extract %y[%i] : tensor<64xf32>
        %w = tensor.insert %z into %y[%i] : tensor<64xf32>
        scf.yield %w : tensor<64xf32>
    """
    module = vectorize(_loop("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]", body))
    # Only the load from %t, which is defined outside the loop, is vectorized.
    assert sorted(vector_ops(module)) == ["vector.extract", "vector.transfer_read"]


def test_index_through_index_arithmetic_of_invariants_is_folded() -> None:
    # %d + 1 is an operand of the map, so within [0, 15]: the read starts at a multiple of 4, (%d + 1) * 4.
    text = """
    #map = #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]">
    func.func @f(%t: tensor<64xf32>, %d: index) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %e = arith.addi %d, %c1 : index
        %i = xla.apply_indexing #map(%e)[%s]
        %x = tensor.extract %t[%i] : tensor<64xf32>
        %y = arith.addf %acc, %x : f32
        scf.yield %y : f32
      }
      func.return %r : f32
    }
    """
    result = vectorize(text)
    assert vector_ops(result) == ["vector.transfer_read", "vector.extract"]
    assert ('"(d0, vector_index) -> (d0 * 4 + vector_index + 4), domain: d0 in [-1, 14], vector_index in [0, 3]">'
            '(%d, %c0)') in print_mlir(result)


def test_index_depending_on_a_value_computed_in_the_loop_stays_scalar() -> None:
    # A remainder is not affine in the lane: lanes 0 and 2 read the same element.
    text = """
    #map = #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]">
    func.func @f(%t: tensor<64xf32>, %d: index) -> f32 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %e = arith.remsi %s, %c2 : index
        %i = xla.apply_indexing #map(%d)[%e]
        %x = tensor.extract %t[%i] : tensor<64xf32>
        %y = arith.addf %acc, %x : f32
        scf.yield %y : f32
      }
      func.return %r : f32
    }
    """
    assert vector_ops(vectorize(text)) == []


def test_accesses_inside_an_if_are_left_alone() -> None:
    text = """
    #map = #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]">
    func.func @f(%t: tensor<64xf32>, %out: tensor<64xf32>, %d: index, %c: i1) -> tensor<64xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%iter = %out) -> (tensor<64xf32>) {
        %u = scf.if %c -> (tensor<64xf32>) {
          %i = xla.apply_indexing #map(%d)[%s]
          %x = tensor.extract %t[%i] : tensor<64xf32>
          %y = tensor.insert %x into %iter[%i] : tensor<64xf32>
          scf.yield %y : tensor<64xf32>
        } else {
          scf.yield %iter : tensor<64xf32>
        }
        scf.yield %u : tensor<64xf32>
      }
      func.return %r : tensor<64xf32>
    }
    """
    assert vector_ops(vectorize(text)) == []


def test_two_stores_get_two_vector_iter_args() -> None:
    module = vectorize(
        """
        #map = #xla.indexing_map<"(d0)[s0] -> (d0 * 2 + s0), domain: d0 in [0, 3], s0 in [0, 1]">
        func.func @f(%t: tensor<8xf64>, %a: tensor<8xf64>, %b: tensor<8xf64>, %d: index)
            -> (tensor<8xf64>, tensor<8xf64>) {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c2 = arith.constant 2 : index
          %r:2 = scf.for %s = %c0 to %c2 step %c1 iter_args(%p = %a, %q = %b) -> (tensor<8xf64>, tensor<8xf64>) {
            %i = xla.apply_indexing #map(%d)[%s]
            %x = tensor.extract %t[%i] : tensor<8xf64>
            %n = arith.negf %x : f64
            %y = tensor.insert %x into %p[%i] : tensor<8xf64>
            %z = tensor.insert %n into %q[%i] : tensor<8xf64>
            scf.yield %y, %z : tensor<8xf64>, tensor<8xf64>
          }
          func.return %r#0, %r#1 : tensor<8xf64>, tensor<8xf64>
        }
        """
    )
    (loop,) = [op for op in module.walk() if op.name == "scf.for"]
    assert [str(t) for t in loop.result_types] == ["tensor<8xf64>", "tensor<8xf64>", "vector<2xf64>", "vector<2xf64>"]
    # Each tensor result of the function is the write of its own vector into its own init.
    (ret,) = [op for op in module.walk() if op.name == "func.return"]
    for value, init in zip(ret.operands, ["a", "b"]):
        assert isinstance(value.owner, vector.TransferWriteOp)
        assert value.owner.source.name_hint == init
        assert value.owner.vector is loop.results[2 if init == "a" else 3]
