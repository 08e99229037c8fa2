"""Each StableHLO op becomes the HLO instruction XLA has for it: the opcode,
shape and attributes (keys and typed values) ``xlapy.hlo.parse_module`` gives
the equivalent HLO text. The ops whose semantics differ from HLO's keep
opcodes of their own (``xlapy.hlo.stablehlo_forms``)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.frontends.stablehlo import parse_module
from xlapy.hlo import parse_module as parse_hlo
from xlapy.hlo.mlir_structure import encodes_mlir_structure

# (op text, argument types, result type(s) as returned, the HLO instruction on p0, p1, ...)
CASES = [
    ("stablehlo.add %arg0, %arg1 : tensor<4xf32>", ["tensor<4xf32>", "tensor<4xf32>"], "tensor<4xf32>",
     "f32[4] add(p0, p1)"),
    ("stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>",
     ["tensor<4xf32>", "tensor<4xf32>"], "tensor<4xi1>", "pred[4] compare(p0, p1), direction=GT"),
    ("stablehlo.compare LT, %arg0, %arg1, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>",
     ["tensor<4xf32>", "tensor<4xf32>"], "tensor<4xi1>", "pred[4] compare(p0, p1), direction=LT, type=TOTALORDER"),
    ("stablehlo.compare NE, %arg0, %arg1, UNSIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>",
     ["tensor<4xi32>", "tensor<4xi32>"], "tensor<4xi1>", "pred[4] compare(p0, p1), direction=NE, type=UNSIGNED"),
    ("stablehlo.compare EQ, %arg0, %arg1, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>",
     ["tensor<4xi32>", "tensor<4xi32>"], "tensor<4xi1>", "pred[4] compare(p0, p1), direction=EQ"),
    ("stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xbf16>", ["tensor<4xi32>"], "tensor<4xbf16>",
     "bf16[4] convert(p0)"),
    ("stablehlo.bitcast_convert %arg0 : (tensor<4xf32>) -> tensor<4xui32>", ["tensor<4xf32>"], "tensor<4xui32>",
     "u32[4] bitcast-convert(p0)"),
    ("stablehlo.clamp %arg0, %arg1, %arg0 : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>",
     ["tensor<f32>", "tensor<4xf32>"], "tensor<4xf32>", "f32[4] clamp(p0, p1, p0)"),
    ("stablehlo.select %arg0, %arg1, %arg1 : tensor<4xi1>, tensor<4xf32>", ["tensor<4xi1>", "tensor<4xf32>"],
     "tensor<4xf32>", "f32[4] select(p0, p1, p1)"),
    ("stablehlo.round_nearest_afz %arg0 : tensor<4xf32>", ["tensor<4xf32>"], "tensor<4xf32>",
     "f32[4] round-nearest-afz(p0)"),
    ("stablehlo.shift_right_logical %arg0, %arg0 : tensor<4xui8>", ["tensor<4xui8>"], "tensor<4xui8>",
     "u8[4] shift-right-logical(p0, p0)"),
    ("stablehlo.complex %arg0, %arg0 : tensor<4xcomplex<f32>>", ["tensor<4xf32>"], "tensor<4xcomplex<f32>>",
     "c64[4] complex(p0, p0)"),
    ("stablehlo.reduce_precision %arg0, format = e5m10 : tensor<4xf32>", ["tensor<4xf32>"], "tensor<4xf32>",
     "f32[4] reduce-precision(p0), exponent_bits=5, mantissa_bits=10"),
    ("stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>", ["tensor<3xf32>"],
     "tensor<2x3xf32>", "f32[2,3] broadcast(p0), dimensions={1}"),
    ("stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>", ["tensor<2x3xf32>"],
     "tensor<3x2xf32>", "f32[3,2] transpose(p0), dimensions={1,0}"),
    ("stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>", ["tensor<2x3xf32>"], "tensor<6xf32>",
     "f32[6] reshape(p0)"),
    ("stablehlo.iota dim = 1 : tensor<2x3xi32>", [], "tensor<2x3xi32>", "s32[2,3] iota(), iota_dimension=1"),
    ("stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>",
     ["tensor<2x3xf32>", "tensor<1x3xf32>"], "tensor<3x3xf32>", "f32[3,3] concatenate(p0, p1), dimensions={0}"),
    ("stablehlo.slice %arg0 [1:5:2, 0:3] : (tensor<6x3xf32>) -> tensor<2x3xf32>", ["tensor<6x3xf32>"],
     "tensor<2x3xf32>", "f32[2,3] slice(p0), slice={[1:5:2], [0:3:1]}"),
    ("stablehlo.slice %arg0 [1:5, 0:3] : (tensor<6x3xf32>) -> tensor<4x3xf32>", ["tensor<6x3xf32>"],
     "tensor<4x3xf32>", "f32[4,3] slice(p0), slice={[1:5], [0:3]}"),
    ("stablehlo.pad %arg0, %arg1, low = [1, -1], high = [0, 2], interior = [1, 0] : "
     "(tensor<2x3xf32>, tensor<f32>) -> tensor<4x4xf32>", ["tensor<2x3xf32>", "tensor<f32>"], "tensor<4x4xf32>",
     "f32[4,4] pad(p0, p1), padding=1_0_1x-1_2_0"),
    ("stablehlo.reverse %arg0, dims = [0, 1] : tensor<2x3xf32>", ["tensor<2x3xf32>"], "tensor<2x3xf32>",
     "f32[2,3] reverse(p0), dimensions={0,1}"),
    ("stablehlo.dynamic_slice %arg0, %arg1, %arg1, sizes = [1, 2] : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) "
     "-> tensor<1x2xf32>", ["tensor<2x3xf32>", "tensor<i32>"], "tensor<1x2xf32>",
     "f32[1,2] dynamic-slice(p0, p1, p1), dynamic_slice_sizes={1,2}"),
    ("stablehlo.dynamic_update_slice %arg0, %arg1, %arg2, %arg2 : (tensor<2x3xf32>, tensor<1x2xf32>, tensor<i32>, "
     "tensor<i32>) -> tensor<2x3xf32>", ["tensor<2x3xf32>", "tensor<1x2xf32>", "tensor<i32>"], "tensor<2x3xf32>",
     "f32[2,3] dynamic-update-slice(p0, p1, p2, p2)"),
    ("stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1], "
     "precision = [DEFAULT, HIGHEST] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>",
     ["tensor<2x3x4xf32>", "tensor<2x4x5xf32>"], "tensor<2x3x5xf32>",
     "f32[2,3,5] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={1}, operand_precision={default,highest}"),
    ("stablehlo.dot_general %arg0, %arg1, contracting_dims = [] x [] : (tensor<2xf32>, tensor<3xf32>) "
     "-> tensor<2x3xf32>", ["tensor<2xf32>", "tensor<3xf32>"], "tensor<2x3xf32>",
     "f32[2,3] dot(p0, p1), lhs_contracting_dims={}, rhs_contracting_dims={}"),
    ("stablehlo.dot %arg0, %arg1 : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>",
     ["tensor<2x4xf32>", "tensor<4x5xf32>"], "tensor<2x5xf32>",
     "f32[2,5] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ('"stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], '
     'collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = true, '
     'slice_sizes = array<i64: 1, 5>}> : (tensor<6x5xf32>, tensor<4x1xi32>) -> tensor<4x5xf32>',
     ["tensor<6x5xf32>", "tensor<4x1xi32>"], "tensor<4x5xf32>",
     "f32[4,5] gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
     "slice_sizes={1,5}, indices_are_sorted=true"),
    ('"stablehlo.gather"(%arg0, %arg1) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], '
     'operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, '
     'indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<6x5xf32>, tensor<6x3x1xi32>) '
     '-> tensor<6x3xf32>', ["tensor<6x5xf32>", "tensor<6x3x1xi32>"], "tensor<6x3xf32>",
     "f32[6,3] gather(p0, p1), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, "
     "operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}"),
    ("stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = "
     "{stride = [2, 1], pad = [[1, 0], [0, 2]], lhs_dilate = [1, 1], rhs_dilate = [1, 2], reverse = [false, false]} "
     "{batch_group_count = 1 : i64, feature_group_count = 2 : i64, precision_config = [#stablehlo<precision DEFAULT>,"
     " #stablehlo<precision DEFAULT>]} : (tensor<1x9x7x4xf32>, tensor<3x2x2x6xf32>) -> tensor<1x4x7x6xf32>",
     ["tensor<1x9x7x4xf32>", "tensor<3x2x2x6xf32>"], "tensor<1x4x7x6xf32>",
     "f32[1,4,7,6] convolution(p0, p1), window={size=3x2 stride=2x1 pad=1_0x0_2 rhs_dilate=1x2}, "
     "dim_labels=b01f_01io->b01f, feature_group_count=2"),
    ("stablehlo.fft %arg0, type = FFT, length = [8] : (tensor<2x8xcomplex<f32>>) -> tensor<2x8xcomplex<f32>>",
     ["tensor<2x8xcomplex<f32>>"], "tensor<2x8xcomplex<f32>>", "c64[2,8] fft(p0), fft_type=FFT, fft_length={8}"),
    ('stablehlo.custom_call @foo(%arg0) {api_version = 2 : i32, backend_config = "cfg", has_side_effect = true} : '
     "(tensor<4xf32>) -> tensor<4xf32>", ["tensor<4xf32>"], "tensor<4xf32>",
     'f32[4] custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true, '
     'api_version=API_VERSION_STATUS_RETURNING, backend_config="cfg"'),
    ("stablehlo.get_tuple_element %arg0[1] : (tuple<tensor<f32>, tensor<2xi32>>) -> tensor<2xi32>",
     ["tuple<tensor<f32>, tensor<2xi32>>"], "tensor<2xi32>", "s32[2] get-tuple-element(p0), index=1"),
    ("stablehlo.tuple %arg0, %arg1 : tuple<tensor<f32>, tensor<2xi32>>", ["tensor<f32>", "tensor<2xi32>"],
     "tuple<tensor<f32>, tensor<2xi32>>", "(f32[], s32[2]) tuple(p0, p1)"),
    ('"stablehlo.all_gather"(%arg0) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 3,'
     ' type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : '
     "(tensor<4x4xf32>) -> tensor<4x8xf32>", ["tensor<4x4xf32>"], "tensor<4x8xf32>",
     "f32[4,8] all-gather(p0), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={1}, "
     "use_global_device_ids=true"),
    ('"stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, '
     "source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>",
     ["tensor<4xf32>"], "tensor<4xf32>",
     "f32[4] collective-permute(p0), channel_id=1, source_target_pairs={{0,1},{1,0}}"),
    ('"stablehlo.all_to_all"(%arg0) <{concat_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : '
     "tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x4xf32>) -> tensor<4x4xf32>",
     ["tensor<4x4xf32>"], "tensor<4x4xf32>", "f32[4,4] all-to-all(p0), replica_groups={{0,1}}, dimensions={1}"),
    ("stablehlo.cholesky %arg0, lower = true : tensor<3x3xf32>", ["tensor<3x3xf32>"], "tensor<3x3xf32>",
     "f32[3,3] cholesky(p0), lower=true"),
    ('"stablehlo.triangular_solve"(%arg0, %arg1) <{left_side = true, lower = true, transpose_a = '
     "#stablehlo<transpose TRANSPOSE>, unit_diagonal = false}> : (tensor<3x3xf32>, tensor<3x2xf32>) -> "
     "tensor<3x2xf32>", ["tensor<3x3xf32>", "tensor<3x2xf32>"], "tensor<3x2xf32>",
     "f32[3,2] triangular-solve(p0, p1), left_side=true, lower=true, transpose_a=TRANSPOSE"),
    ("stablehlo.partition_id : tensor<ui32>", [], "tensor<ui32>", "u32[] partition-id()"),
    ("stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, "
     "tensor<3xui32>)", ["tensor<2xui64>"], "tuple<tensor<2xui64>, tensor<3xui32>>",
     "(u64[2], u32[3]) rng-bit-generator(p0), algorithm=rng_three_fry"),
    ("chlo.top_k(%arg0, k = 3) : tensor<4x8xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)", ["tensor<4x8xf32>"],
     "tuple<tensor<4x3xf32>, tensor<4x3xi32>>", "(f32[4,3], s32[4,3]) topk(p0), k=3, largest=true"),
    ("mhlo.topk(%arg0, k = 3, largest = false) : tensor<4x8xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)",
     ["tensor<4x8xf32>"], "tuple<tensor<4x3xf32>, tensor<4x3xi32>>",
     "(f32[4,3], s32[4,3]) topk(p0), k=3, largest=false"),
    ('stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.sharding = "{devices=[2,1]<=[2]}"} : '
     "(tensor<4x8xf32>) -> tensor<4x8xf32>", ["tensor<4x8xf32>"], "tensor<4x8xf32>",
     'f32[4,8] custom-call(p0), custom_call_target="Sharding", sharding={devices=[2,1]<=[2]}'),
]


def _mlir_function(op: str, args: list[str], result: str) -> str:
    signature = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    if result.startswith("tuple<") and not op.startswith("stablehlo.tuple "):
        types = result[len("tuple<"):-1].split(", ")
        return (f"func.func @main({signature}) -> ({', '.join(types)}) {{\n  %0:2 = {op}\n"
                f"  return %0#0, %0#1 : {', '.join(types)}\n}}\n")
    return f"func.func @main({signature}) -> {result} {{\n  %0 = {op}\n  return %0 : {result}\n}}\n"


def _hlo_shape(mlir_type: str) -> str:
    from xlapy.frontends.mlir_syntax import parse_type, shape_of
    from xlapy.syntax import Cursor

    return str(shape_of(parse_type(Cursor(mlir_type))))


def _op(module):
    ops = [i for i in module.entry.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]
    assert len(ops) == 1, ops
    return ops[0]


def _case_id(index: int, hlo: str) -> str:
    return f"{index}-" + hlo.split("(")[0].split(" ")[-1]


@pytest.mark.parametrize(("op", "args", "result", "hlo"), CASES, ids=[_case_id(i, c[3]) for i, c in enumerate(CASES)])
def test_op_maps_to_the_hlo_instruction(op: str, args: list[str], result: str, hlo: str) -> None:
    module = parse_module(_mlir_function(op, args, result))
    instr = _op(module)
    params = "\n".join(f"  p{i} = {_hlo_shape(t)} parameter({i})" for i, t in enumerate(args))
    expected = _op(parse_hlo(f"HloModule m\n\nENTRY e {{\n{params}\n  ROOT r = {hlo}\n}}\n"))
    assert instr.opcode == expected.opcode
    assert instr.shape.to_string(print_layout=False) == expected.shape.to_string(print_layout=False)
    assert instr.attributes == expected.attributes
    assert [o.parameter_number for o in instr.operands] == [o.parameter_number for o in expected.operands]


def _region_op(text: str):
    module = parse_module(text)
    ops = [i for i in module.entry.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]
    return module, ops[-1]


def test_reduce_keeps_inputs_then_inits_and_its_body() -> None:
    _, reduce = _region_op("""
func.func @main(%arg0: tensor<4x6xf32>, %arg1: tensor<4x6xi32>, %arg2: tensor<f32>, %arg3: tensor<i32>)
    -> (tensor<6xf32>, tensor<6xi32>) {
  %0:2 = stablehlo.reduce(%arg0 init: %arg2), (%arg1 init: %arg3) across dimensions = [0] :
    (tensor<4x6xf32>, tensor<4x6xi32>, tensor<f32>, tensor<i32>) -> (tensor<6xf32>, tensor<6xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
      %1 = stablehlo.maximum %a, %b : tensor<f32>
      %2 = stablehlo.minimum %c, %d : tensor<i32>
      stablehlo.return %1, %2 : tensor<f32>, tensor<i32>
    }
  return %0#0, %0#1 : tensor<6xf32>, tensor<6xi32>
}""")
    body = reduce.called_computations[0]
    assert reduce.attributes == {"dimensions": (0,), "to_apply": body.name}
    assert [o.parameter_number for o in reduce.operands] == [0, 1, 2, 3]
    assert str(reduce.shape) == "(f32[6], s32[6])"
    # Block arguments in order: the accumulators, then the values (a, c, b, d).
    assert [str(p.shape) for p in body.parameters] == ["f32[]", "s32[]", "f32[]", "s32[]"]
    assert [p.mlir.name for p in body.parameters] == ["a", "c", "b", "d"]
    assert [i.opcode for i in body.root.operands] == ["maximum", "minimum"]


def test_compact_reduce_builds_its_body() -> None:
    module, reduce = _region_op("""
func.func @main(%arg0: tensor<4x6xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] :
    (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    body = reduce.called_computations[0]
    assert body.root.opcode == "add" and body.root.operands == body.parameters
    assert np.asarray(__import__("xlapy").evaluate(module, np.ones((4, 6), np.float32), np.float32(1))).tolist() == \
        [7.0] * 4


def test_sort_reduce_window_scatter_while_case_if_call() -> None:
    module = parse_module("""
func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<i32>, %arg2: tensor<i1>, %arg3: tensor<2x1xi32>,
                %arg4: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %p = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "stablehlo.reduce_window"(%0, %z) <{padding = dense<[[0, 0], [1, 0]]> : tensor<2x2xi64>,
      window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = "stablehlo.scatter"(%1, %arg3, %arg4) <{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<4x8xf32>, tensor<2x1xi32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  %3:2 = stablehlo.while(%i = %arg1, %v = %2) : tensor<i32>, tensor<4x8xf32>
  cond {
    %c = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    stablehlo.return %i, %v : tensor<i32>, tensor<4x8xf32>
  }
  %4 = "stablehlo.case"(%arg1) ({
    stablehlo.return %3#1 : tensor<4x8xf32>
  }, {
    %n = stablehlo.negate %3#1 : tensor<4x8xf32>
    stablehlo.return %n : tensor<4x8xf32>
  }) : (tensor<i32>) -> tensor<4x8xf32>
  %5 = "stablehlo.if"(%arg2) ({
    stablehlo.return %4 : tensor<4x8xf32>
  }, {
    stablehlo.return %arg0 : tensor<4x8xf32>
  }) : (tensor<i1>) -> tensor<4x8xf32>
  %6 = call @id(%5) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}
func.func private @id(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %arg0 : tensor<4x8xf32>
}""")
    by_opcode = {}
    for i in module.entry.instructions:
        by_opcode.setdefault(i.opcode, []).append(i)
    sort = by_opcode["sort"][0]
    assert sort.attributes == {"dimensions": (1,), "is_stable": True, "to_apply": sort.called_computations[0].name}
    window = by_opcode["reduce-window"][0]
    expected = parse_hlo("HloModule m\n\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] "
                         "add(a, b) }\n\nENTRY e { p = f32[4,8] parameter(0)\n z = f32[] constant(0)\n "
                         "ROOT r = f32[4,8] reduce-window(p, z), window={size=1x2 pad=0_0x1_0}, to_apply=add }")
    assert window.attributes["window"] == expected.entry.root.attributes["window"]
    scatter = by_opcode["scatter"][0]
    assert scatter.attributes == {"update_window_dims": (1,), "inserted_window_dims": (0,),
                                  "scatter_dims_to_operand_dims": (0,), "index_vector_dim": 1,
                                  "unique_indices": True, "to_apply": scatter.called_computations[0].name}
    loop = by_opcode["stablehlo.while"][0]
    condition, body = loop.called_computations
    assert loop.attributes == {"condition": condition.name, "body": body.name}
    assert [len(condition.parameters), len(body.parameters), len(loop.operands)] == [2, 2, 2]
    (case,), (if_,) = by_opcode["stablehlo.case"], by_opcode["stablehlo.if"]
    assert case.attributes == {"branch_computations": tuple(c.name for c in case.called_computations)}
    assert len(case.called_computations) == 2 and case.operands == [module.entry.parameter(1)]
    assert if_.attributes == {"true_computation": if_.called_computations[0].name,
                              "false_computation": if_.called_computations[1].name}
    call = by_opcode["call"][0]
    assert call.attributes == {"to_apply": "id"} and call.called_computations == [module.computation("id")]


def test_constants_carry_literals() -> None:
    module = parse_module("""
func.func @main() -> (tensor<2x2xf32>, tensor<3xi1>, tensor<2xcomplex<f32>>, tensor<101xi32>, tensor<bf16>) {
  %0 = stablehlo.constant dense<[[1.5, -2.0], [0x7FC00000, 0xFF800000]]> : tensor<2x2xf32>
  %1 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
  %2 = stablehlo.constant dense<[(1.0, 2.0), (0.0, -3.5)]> : tensor<2xcomplex<f32>>
  %3 = stablehlo.constant dense<"0x""" + "".join(f"{i:02X}000000" for i in range(101)) + """"> : tensor<101xi32>
  %4 = stablehlo.constant dense<2.5> : tensor<bf16>
  return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<3xi1>, tensor<2xcomplex<f32>>, tensor<101xi32>, tensor<bf16>
}""")
    values = __import__("xlapy").evaluate(module)
    np.testing.assert_array_equal(values[0], np.array([[1.5, -2.0], [np.nan, -np.inf]], np.float32))
    assert values[1].tolist() == [True, False, True]
    assert values[2].tolist() == [1 + 2j, -3.5j]
    assert values[3].tolist() == list(range(101))
    assert float(values[4]) == 2.5 and str(values[4].dtype) == "bfloat16"
    constants = [i for i in module.entry.instructions if i.opcode == "constant"]
    assert [str(c.shape) for c in constants] == ["f32[2,2]", "pred[3]", "c64[2]", "s32[101]", "bf16[]"]


# (op text, argument types, result type, the opcode and attributes of StableHLO's form)
STABLEHLO_FORMS = [
    ('"stablehlo.all_to_all"(%arg0) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : '
     "tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x4xf32>) -> tensor<8x2xf32>",
     ["tensor<4x4xf32>"], "tensor<8x2xf32>", "stablehlo.all_to_all",
     {"replica_groups": "{{0,1}}", "split_dimension": 1, "concat_dimension": 0, "split_count": 2}),
    ("stablehlo.broadcast_in_dim %arg0, dims = [0, 2] : (tensor<1x3xf32>) -> tensor<4x2x3xf32>", ["tensor<1x3xf32>"],
     "tensor<4x2x3xf32>", "stablehlo.broadcast_in_dim", {"dimensions": (0, 2)}),
    ("stablehlo.convert %arg0 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>", ["tensor<4xcomplex<f32>>"],
     "tensor<4xf32>", "stablehlo.convert", {}),
    ("stablehlo.rng %arg0, %arg0, %arg1, distribution = NORMAL : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> "
     "tensor<3x4xf32>", ["tensor<f32>", "tensor<2xi64>"], "tensor<3x4xf32>", "stablehlo.rng",
     {"distribution": "rng_normal"}),
]


@pytest.mark.parametrize(("op", "args", "result", "opcode", "attributes"), STABLEHLO_FORMS,
                         ids=[c[3] for c in STABLEHLO_FORMS])
def test_op_keeps_its_stablehlo_form(op: str, args: list[str], result: str, opcode: str, attributes: dict) -> None:
    instr = _op(parse_module(_mlir_function(op, args, result)))
    assert instr.opcode == opcode
    assert {k: str(v) if k == "replica_groups" else v for k, v in instr.attributes.items()} == attributes
    assert instr.shape.to_string(print_layout=False) == _hlo_shape(result)


def test_a_barrier_of_several_values_keeps_its_stablehlo_form() -> None:
    _, barrier = _region_op("""
func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<2xf32>, tensor<i32>
  return %0#0, %0#1 : tensor<2xf32>, tensor<i32>
}""")
    assert barrier.opcode == "stablehlo.optimization_barrier"
    assert [o.parameter_number for o in barrier.operands] == [0, 1] and str(barrier.shape) == "(f32[2], s32[])"
