"""flatten-tensors: the gelu IR of XLA's docs/emitters.md from its `xla_gpu` to `scf` stage to its
flattened stage, checked with FileCheck and by evaluating
the new index map against the linearized original maps; layouts (strides),
rank 0, tensor constants, transfers, and every place a tensor type occurs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, NoneAttr, TensorType

from tests.codegen.filecheck import filecheck
from xlapy.codegen.dialect import ApplyIndexingOp, IndexingMapAttr
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.flatten_tensors import FlattenTensorsPass, strides
from xlapy.errors import UnimplementedError
from xlapy.indexing import IndexingMap


def flatten(text: str) -> ModuleOp:
    module = parse_mlir(text)
    FlattenTensorsPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    return module


def apply_indexing_ops(module: ModuleOp) -> list[ApplyIndexingOp]:
    return [op for op in module.walk() if isinstance(op, ApplyIndexingOp)]


def all_tensor_types(module: ModuleOp) -> list[TensorType]:
    types = []
    for op in module.walk():
        types += [v.type for v in op.results]
        for region in op.regions:
            for block in region.blocks:
                types += [a.type for a in block.args]
        function_type = op.properties.get("function_type")
        if function_type is not None:
            types += [*function_type.inputs.data, *function_type.outputs.data]
    return [t for t in types if isinstance(t, TensorType)]


# --- the document's gelu: after the scf conversion → flattened ---

GELU_DOMAIN = "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]"
GELU_AFTER_SCF_MAPS = [
    "bl_x floordiv 4096",
    "(bl_x floordiv 8) mod 512",
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index",
]

# The document's IR after the scf conversion, made complete: the constants, ids and the elided arithmetic are
# spelled out.
GELU_AFTER_SCF = f"""
#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ({GELU_AFTER_SCF_MAPS[0]}), {GELU_DOMAIN}">
#map1 = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ({GELU_AFTER_SCF_MAPS[1]}), {GELU_DOMAIN}">
#map2 = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ({GELU_AFTER_SCF_MAPS[2]}), {GELU_DOMAIN}">
func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>) -> tensor<6x512x4096xbf16> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c127 = arith.constant 127 : index
  %c24575 = arith.constant 24575 : index
  %cst = arith.constant 5.000000e-01 : bf16
  %thread_id_x = gpu.thread_id x {{xla.range = [0 : index, 127 : index]}}
  %block_id_x = gpu.block_id x {{xla.range = [0 : index, 24575 : index]}}
  %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {{
    %2 = arith.cmpi sge, %thread_id_x, %c0 : index
    %3 = arith.cmpi sle, %thread_id_x, %c127 : index
    %4 = arith.andi %2, %3 : i1
    %5 = arith.cmpi sge, %block_id_x, %c0 : index
    %6 = arith.cmpi sle, %block_id_x, %c24575 : index
    %7 = arith.andi %5, %6 : i1
    %inbounds = arith.andi %4, %7 : i1
    %9 = scf.if %inbounds -> (tensor<6x512x4096xbf16>) {{
      %dim0 = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%vector_index]
      %dim1 = xla.apply_indexing #map1(%thread_id_x, %block_id_x)[%vector_index]
      %dim2 = xla.apply_indexing #map2(%thread_id_x, %block_id_x)[%vector_index]
      %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
      %28 = arith.mulf %extracted, %cst : bf16
      %29 = arith.mulf %extracted, %28 : bf16
      %inserted = tensor.insert %29 into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
      scf.yield %inserted : tensor<6x512x4096xbf16>
    }} else {{
      scf.yield %iter : tensor<6x512x4096xbf16>
    }}
    scf.yield %9 : tensor<6x512x4096xbf16>
  }}
  func.return %xla_loop : tensor<6x512x4096xbf16>
}}
"""

# The flattened stage's map: xlapy's simplifier orders the summands `bl_x * 512 + th_x * 4 + vector_index`.
GELU_FLATTENED_CHECKS = f"""
CHECK: #map = #xla.indexing_map<"(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index), {GELU_DOMAIN}">
CHECK-NOT: #map1
CHECK: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {{
CHECK: %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<12582912xbf16>) {{
CHECK: scf.if %inbounds -> (tensor<12582912xbf16>) {{
CHECK-NEXT: %[[DIM:.*]] = xla.apply_indexing #map(%thread_id_x, %block_id_x, %vector_index)
CHECK-NEXT: %extracted = tensor.extract %input[%[[DIM]]] : tensor<12582912xbf16>
CHECK-NEXT: arith.mulf
CHECK-NEXT: arith.mulf
CHECK-NEXT: %inserted = tensor.insert %{{{{.*}}}} into %iter[%[[DIM]]] : tensor<12582912xbf16>
CHECK-NEXT: scf.yield %inserted : tensor<12582912xbf16>
CHECK-NEXT: }} else {{
CHECK-NEXT: scf.yield %iter : tensor<12582912xbf16>
CHECK: func.return %xla_loop : tensor<12582912xbf16>
CHECK-NOT: 6x512x4096
"""


def test_gelu_after_scf_is_flattened(tmp_path: Path) -> None:
    module = flatten(GELU_AFTER_SCF)
    filecheck(print_mlir(module, map_aliases=True), GELU_FLATTENED_CHECKS, tmp_path)
    assert len(apply_indexing_ops(module)) == 1


def test_flattened_gelu_map_equals_the_documented_map() -> None:
    (op,) = apply_indexing_ops(flatten(GELU_AFTER_SCF))
    ours = op.indexing_map
    documented = IndexingMap.parse(
        f"(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index), {GELU_DOMAIN}"
    )
    assert [v.bounds for v in ours.dim_vars] == [v.bounds for v in documented.dim_vars]
    assert not ours.symbol_vars and not ours.constraints
    # The same value as the document's map and as the row-major offset of the three indices before flattening.
    rng = np.random.default_rng(0)
    th, bl, vi = (rng.integers(0, n, 20000) for n in (128, 24576, 4))
    th[:2], bl[:2], vi[:2] = (0, 127), (0, 24575), (0, 3)
    (got,) = ours.evaluate_arrays([th, bl, vi], [])
    (expected,) = documented.evaluate_arrays([th, bl, vi], [])
    np.testing.assert_array_equal(got, expected)
    originals = [IndexingMap.parse(f"(th_x, bl_x)[vector_index] -> ({m}), {GELU_DOMAIN}") for m in GELU_AFTER_SCF_MAPS]
    i, j, k = (m.evaluate_arrays([th, bl], [vi])[0] for m in originals)
    np.testing.assert_array_equal(got, i * 512 * 4096 + j * 4096 + k)


# --- layouts and strides ---


def test_strides_follow_the_layout() -> None:
    module = parse_mlir(
        """
        func.func private @f(tensor<2x3x4xf32>, tensor<2x3x4xf32, #xla.layout<[1, 0, 2]>>)
        """
    )
    (func_op,) = module.ops
    default, custom = func_op.function_type.inputs.data
    assert strides(default) == [12, 4, 1]
    assert strides(custom) == [3, 1, 6]


def _single_map(module: ModuleOp) -> IndexingMap:
    (op,) = apply_indexing_ops(module)
    return op.indexing_map


def test_column_major_layout_extract() -> None:
    module = flatten(
        """
        func.func @f(%t: tensor<2x3xf32, #xla.layout<[0, 1]>>, %i: index, %j: index) -> f32 {
          %v = tensor.extract %t[%i, %j] : tensor<2x3xf32, #xla.layout<[0, 1]>>
          func.return %v : f32
        }
        """
    )
    text = print_mlir(module)
    assert "func.func @f(%t: tensor<6xf32>, %i: index, %j: index) -> f32" in text
    indexing_map = _single_map(module)
    assert indexing_map.to_string(multiline=False) == "(d0, d1) -> (d1 * 2 + d0), domain: d0 in [0, 1], d1 in [0, 2]"
    (op,) = apply_indexing_ops(module)
    assert [v.name_hint for v in op.dims] == ["i", "j"]
    for i in range(2):
        for j in range(3):
            assert indexing_map.evaluate([i, j]) == (i + 2 * j,)


def test_three_d_layout_is_a_bijection_onto_the_buffer() -> None:
    module = flatten(
        """
        func.func @f(%t: tensor<2x3x4xf32, #xla.layout<[1, 0, 2]>>, %i: index, %j: index, %k: index) -> f32 {
          %v = tensor.extract %t[%i, %j, %k] : tensor<2x3x4xf32, #xla.layout<[1, 0, 2]>>
          func.return %v : f32
        }
        """
    )
    indexing_map = _single_map(module)
    offsets = {}
    for i in range(2):
        for j in range(3):
            for k in range(4):
                # dimension 1 is minor (stride 1), then dimension 0 (stride 3), then 2 (stride 6).
                (offset,) = indexing_map.evaluate([i, j, k])
                assert offset == j + 3 * i + 6 * k
                offsets[offset] = (i, j, k)
    assert sorted(offsets) == list(range(24))


def test_insert_with_layout_into_iter_arg_of_xla_loop() -> None:
    module = flatten(
        """
        #map = #xla.indexing_map<"(d0)[s0] -> (d0, s0), domain: d0 in [0, 3], s0 in [0, 7]">
        func.func @f(%out: tensor<4x8xf32, #xla.layout<[0, 1]>>, %x: f32) -> tensor<4x8xf32, #xla.layout<[0, 1]>> {
          %th = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
          %r = xla.loop (%th)[%s] -> (%a, %b) in #map iter_args(%iter = %out)
              -> (tensor<4x8xf32, #xla.layout<[0, 1]>>) {
            %y = tensor.insert %x into %iter[%a, %b] : tensor<4x8xf32, #xla.layout<[0, 1]>>
            xla.yield %y : tensor<4x8xf32, #xla.layout<[0, 1]>>
          }
          func.return %r : tensor<4x8xf32, #xla.layout<[0, 1]>>
        }
        """
    )
    text = print_mlir(module)
    assert "iter_args(%iter = %out) -> (tensor<32xf32>)" in text
    assert "xla.yield %y : tensor<32xf32>" in text
    indexing_map = _single_map(module)
    # Plain block arguments as indices: bounds from the tensor's shape.
    assert indexing_map.to_string(multiline=False) == "(d0, d1) -> (d1 * 4 + d0), domain: d0 in [0, 3], d1 in [0, 7]"
    assert all(t.get_num_dims() == 1 and isinstance(t.encoding, NoneAttr) for t in all_tensor_types(module))


# --- folding of index producers ---


def test_indices_from_one_multi_result_apply_indexing_are_folded() -> None:
    module = flatten(
        """
        #map = #xla.indexing_map<"(d0)[s0] -> (d0 floordiv 8, d0 mod 8 + s0 * 8), domain: d0 in [0, 31], s0 in [0, 1]">
        func.func @f(%t: tensor<4x16xi32>, %x: index, %y: index) -> i32 {
          %i, %j = xla.apply_indexing #map(%x)[%y]
          %v = tensor.extract %t[%i, %j] : tensor<4x16xi32>
          func.return %v : i32
        }
        """
    )
    (op,) = apply_indexing_ops(module)
    assert [v.name_hint for v in op.dims] == ["x", "y"] and not op.symbols
    indexing_map = op.indexing_map
    assert indexing_map.num_dims == 2 and indexing_map.num_symbols == 0
    original = IndexingMap.parse("(d0)[s0] -> (d0 floordiv 8, d0 mod 8 + s0 * 8), domain: d0 in [0, 31], s0 in [0, 1]")
    for d0 in range(32):
        for s0 in range(2):
            i, j = original.evaluate([d0], [s0])
            assert indexing_map.evaluate([d0, s0]) == (i * 16 + j,)


def test_mixed_folded_and_plain_indices_share_operands() -> None:
    module = flatten(
        """
        #map = #xla.indexing_map<"(d0) -> (d0 * 2), domain: d0 in [0, 2]">
        func.func @f(%t: tensor<6x5xf32>, %x: index) -> f32 {
          %i = xla.apply_indexing #map(%x)
          %v = tensor.extract %t[%i, %x] : tensor<6x5xf32>
          func.return %v : f32
        }
        """
    )
    (op,) = apply_indexing_ops(module)
    # %x is one operand: its bounds are the intersection of [0, 2] (the map) and [0, 4] (the shape).
    assert len(op.dims) == 1
    indexing_map = op.indexing_map
    assert indexing_map.to_string(multiline=False) == "(d0) -> (d0 * 11), domain: d0 in [0, 2]"


def test_producer_with_other_users_is_kept() -> None:
    module = flatten(
        """
        #map = #xla.indexing_map<"(d0) -> (d0 floordiv 3, d0 mod 3), domain: d0 in [0, 5]">
        func.func @f(%t: tensor<2x3xf32>, %x: index) -> (f32, index) {
          %i, %j = xla.apply_indexing #map(%x)
          %v = tensor.extract %t[%i, %j] : tensor<2x3xf32>
          func.return %v, %j : f32, index
        }
        """
    )
    # Only the original op is left, still computing %j for the return.
    (op,) = apply_indexing_ops(module)
    assert op.results[1].uses
    # The row-major offset of (x floordiv 3, x mod 3) in 2x3 is x itself: the extract uses %x directly.
    text = print_mlir(module)
    assert "tensor.extract %t[%x] : tensor<6xf32>" in text


# --- rank 0, constants, transfers, other ops ---


def test_rank_zero_tensor_becomes_one_element() -> None:
    module = flatten(
        """
        func.func @f(%t: tensor<f32>, %x: f32) -> (f32, tensor<f32>) {
          %v = tensor.extract %t[] : tensor<f32>
          %w = tensor.insert %x into %t[] : tensor<f32>
          func.return %v, %w : f32, tensor<f32>
        }
        """
    )
    text = print_mlir(module)
    assert "func.func @f(%t: tensor<1xf32>, %x: f32) -> (f32, tensor<1xf32>)" in text
    assert "%v = tensor.extract %t[%0] : tensor<1xf32>" in text
    assert "%w = tensor.insert %x into %t[%0] : tensor<1xf32>" in text
    assert "%0 = arith.constant 0 : index" in text


def test_tensor_constant_is_reordered_into_physical_order() -> None:
    module = flatten(
        """
        func.func @f(%i: index, %j: index) -> (i32, i32) {
          %k = arith.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32, #xla.layout<[0, 1]>>
          %r = arith.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
          %v = tensor.extract %k[%i, %j] : tensor<2x3xi32, #xla.layout<[0, 1]>>
          %w = tensor.extract %r[%i, %j] : tensor<2x3xi32>
          func.return %v, %w : i32, i32
        }
        """
    )
    constants = [op.value for op in module.walk() if isinstance(op, arith.ConstantOp)]
    values = [c.get_values() for c in constants if isinstance(c, DenseIntOrFPElementsAttr)]
    assert values == [(1, 4, 2, 5, 3, 6), (1, 2, 3, 4, 5, 6)]
    assert "dense<[1, 4, 2, 5, 3, 6]> : tensor<6xi32>" in print_mlir(module)


def test_transfer_read_and_write_get_one_index() -> None:
    module = flatten(
        """
        func.func @f(%t: tensor<4x8xf32>, %i: index, %j: index) -> tensor<4x8xf32> {
          %pad = arith.constant 0.0 : f32
          %v = vector.transfer_read %t[%i, %j], %pad {in_bounds = [true]} : tensor<4x8xf32>, vector<4xf32>
          %w = vector.transfer_write %v, %t[%i, %j] {in_bounds = [true]} : vector<4xf32>, tensor<4x8xf32>
          func.return %w : tensor<4x8xf32>
        }
        """
    )
    text = print_mlir(module, map_aliases=True)
    assert '#map = #xla.indexing_map<"(d0, d1) -> (d0 * 8 + d1), domain: d0 in [0, 3], d1 in [0, 7]">' in text
    assert "%v = vector.transfer_read %t[%dim], %pad {in_bounds = [true]} : tensor<32xf32>, vector<4xf32>" in text
    assert "%w = vector.transfer_write %v, %t[%dim] {in_bounds = [true]} : vector<4xf32>, tensor<32xf32>" in text


def test_transfer_along_a_non_minor_dimension_is_unimplemented() -> None:
    module = parse_mlir(
        """
        func.func @f(%t: tensor<4x8xf32, #xla.layout<[0, 1]>>, %i: index, %j: index) -> vector<4xf32> {
          %pad = arith.constant 0.0 : f32
          %v = vector.transfer_read %t[%i, %j], %pad {in_bounds = [true]}
              : tensor<4x8xf32, #xla.layout<[0, 1]>>, vector<4xf32>
          func.return %v : vector<4xf32>
        }
        """
    )
    with pytest.raises(UnimplementedError, match=r"vector\.transfer_read along a non-minor dimension"):
        FlattenTensorsPass().apply(None, module)  # type: ignore[arg-type]


def test_every_tensor_type_is_flattened() -> None:
    module = flatten(
        """
        func.func private @callee(tensor<2x2xf32>) -> tensor<2x2xf32>
        func.func @f(%t: tensor<2x2xf32>, %c: i1, %x: f32) -> tensor<2x2xf32> {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c2 = arith.constant 2 : index
          %shmem = xla.allocate_shared : tensor<2x2xf32>
          %synced = xla.sync_threads %shmem : tensor<2x2xf32>
          %called = func.call @callee(%synced) : (tensor<2x2xf32>) -> tensor<2x2xf32>
          %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %called) -> (tensor<2x2xf32>) {
            %s = scf.if %c -> (tensor<2x2xf32>) {
              %u = tensor.insert %x into %acc[%i, %i] : tensor<2x2xf32>
              scf.yield %u : tensor<2x2xf32>
            } else {
              scf.yield %acc : tensor<2x2xf32>
            }
            scf.yield %s : tensor<2x2xf32>
          }
          func.return %r : tensor<2x2xf32>
        }
        """
    )
    types = all_tensor_types(module)
    assert len(types) > 10
    assert {str(t) for t in types} == {"tensor<4xf32>"}
    assert "func.func private @callee(tensor<4xf32>) -> tensor<4xf32>" in print_mlir(module)
    # The diagonal index (%i, %i) of a 2x2 row-major tensor is 3 * %i.
    assert _single_map(module).to_string(multiline=False) == "(d0) -> (d0 * 3), domain: d0 in [0, 1]"


def test_flat_tensors_are_left_alone() -> None:
    text = """
        func.func @f(%t: tensor<8xf32>, %i: index) -> f32 {
          %v = tensor.extract %t[%i] : tensor<8xf32>
          func.return %v : f32
        }
        """
    module = flatten(text)
    assert print_mlir(module) == print_mlir(parse_mlir(text))


def test_map_attr_is_printable_and_parses_back() -> None:
    module = flatten(GELU_AFTER_SCF)
    reparsed = parse_mlir(print_mlir(module, map_aliases=True))
    (op,) = apply_indexing_ops(reparsed)
    assert isinstance(op.indexing_map_attr, IndexingMapAttr)
    assert op.indexing_map == apply_indexing_ops(module)[0].indexing_map


def test_clashing_variable_names_fall_back_to_defaults() -> None:
    module = flatten(
        """
        #a = #xla.indexing_map<"(x) -> (x * 2), domain: x in [0, 1]">
        #b = #xla.indexing_map<"(x)[d0] -> (x + d0), domain: x in [0, 1], d0 in [0, 1]">
        func.func @f(%t: tensor<4x3xf32>, %p: index, %q: index, %r: index) -> f32 {
          %i = xla.apply_indexing #a(%p)
          %j = xla.apply_indexing #b(%q)[%r]
          %v = tensor.extract %t[%i, %j] : tensor<4x3xf32>
          func.return %v : f32
        }
        """
    )
    (op,) = apply_indexing_ops(module)
    text = op.indexing_map.to_string(multiline=False)
    assert text == "(x, d1, d2) -> (x * 6 + d1 + d2), domain: x in [0, 1], d1 in [0, 1], d2 in [0, 1]"
    assert IndexingMap.parse(text) == op.indexing_map
