"""Shardy in the StableHLO frontend: the compiler API document's examples
(openxla/shardy docs/compiler_api.md), Shardy's ops, and shardings living on the IR's values so that the
printer shows whatever they are now."""

from __future__ import annotations

import pytest

from xlapy.errors import VerifyError
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.hlo import HloInstruction
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results, region_results
from xlapy.shapes import Shape
from xlapy.sharding.tensor_sharding import TensorSharding


def _ops(computation) -> list[HloInstruction]:
    return [i for i in computation.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]


# -- input/output shardings -------------------------------------------------------------

IO_SHARDINGS = """@mesh_xy = <["x"=2, "y"=2]>

// The 1st input has a sharding specified, but the 2nd input doesn't.
// The output has a sharding specified.
func @main(%arg0: tensor<8x8xf32>
            {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {}]>},
            %arg1: tensor<8x16xf32>)
    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{}, {"y"}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :
      (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
"""


def test_input_output_shardings_example() -> None:
    module = parse_module(IO_SHARDINGS)
    assert str(module.meshes["mesh_xy"]) == '<["x"=2, "y"=2]>'
    arg0, arg1 = module.entry.parameters
    assert arg0.sdy_sharding == TensorSharding.parse('#sdy.sharding<@mesh_xy, [{"x"}, {}]>')
    assert arg1.sdy_sharding is None
    assert module.entry.result_shardings == [TensorSharding.parse('<@mesh_xy, [{}, {"y"}]>')]
    assert print_module(module) == """module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {}]>}, \
%arg1: tensor<8x16xf32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{}, {"y"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) \
-> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}
"""


# -- sharding constraint -------------------------------------------------------------------

def test_sharding_constraint_example() -> None:
    module = parse_module("""
sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh_xy, [{"x"}, {?}]> : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}""")
    constraint = _ops(module.entry)[1]
    assert constraint.opcode == "sdy.sharding_constraint" and constraint.operands == [_ops(module.entry)[0]]
    dim0, dim1 = constraint.sdy_sharding.dim_shardings
    assert [a.name for a in dim0.axes] == ["x"] and dim0.is_closed
    assert dim1.axes == () and not dim1.is_closed
    assert module.entry.root is constraint
    assert '%1 = sdy.sharding_constraint %0 <@mesh_xy, [{"x"}, {?}]> : tensor<8x8xf32>' in print_module(module)


# -- sharding group (the document's text with its typos fixed) -------------------------------

ZEROS_LIKE = """@mesh_xy = <["x"=2, "y"=2]>

module @"jit_zeros_like" {
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"},{"y"}]>}) -> (tensor<8x2xi64>) {
    %0 = sdy.sharding_group %arg0, id=0 : tensor<8x2xi64>
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    %2 = sdy.sharding_group %1, id=0 : tensor<8x2xi64>
    return %2 : tensor<8x2xi64>
  }
}
"""


def test_zeros_like_sharding_group_example() -> None:
    module = parse_module(ZEROS_LIKE)
    assert module.name == "jit_zeros_like"
    group0, constant, group2 = _ops(module.entry)
    assert [group0.opcode, constant.opcode, group2.opcode] == ["sdy.sharding_group", "constant", "sdy.sharding_group"]
    assert group0.attributes == {"group_id": 0, "has_result": True} == group2.attributes
    assert group0.shape == Shape.array("s64", (8, 2)) and group2.operands == [constant]
    assert constant.literal.tolist() == [[0, 0]] * 8
    assert module.entry.root is group2
    assert print_module(module) == """module @jit_zeros_like {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) \
-> tensor<8x2xi64> {
    %0 = sdy.sharding_group %arg0, id=0 : tensor<8x2xi64>
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    %2 = sdy.sharding_group %1, id=0 : tensor<8x2xi64>
    return %2 : tensor<8x2xi64>
  }
}
"""


def test_sharding_group_without_result() -> None:
    module = parse_module("""
func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  sdy.sharding_group %arg0 group_id=3 : tensor<8xf32>
  return %arg0 : tensor<8xf32>
}""")
    group = _ops(module.entry)[0]
    assert group.attributes == {"group_id": 3, "has_result": False}
    assert group.shape == Shape.make_tuple([]) and op_results(group) == []
    assert "    sdy.sharding_group %arg0 group_id=3 : tensor<8xf32>\n" in print_module(module)


# -- manual computation ---------------------------------------------------------------------

MANUAL = """sdy.mesh @mesh_name = <["data"=2, "model"=2]>
func.func @main(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %0 = stablehlo.negate %arg0 : tensor<16x32xf32>
  %1 = sdy.manual_computation(%0)
      in_shardings=[<@mesh_name, [{"data"}, {"model",?}]>]
      out_shardings=[<@mesh_name, [{"data"}, {?}]>]
      manual_axes={"data"}
      (%arg1: tensor<8x32xf32>) {
    %42 = stablehlo.add %arg1, %arg1 : tensor<8x32xf32>
    sdy.return %42 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
"""


def test_manual_computation_example() -> None:
    module = parse_module(MANUAL)
    manual = _ops(module.entry)[1]
    assert manual.opcode == "sdy.manual_computation"
    assert manual.attributes["manual_axes"] == ("data",)
    assert manual.attributes["in_shardings"] == (TensorSharding.parse('<@mesh_name, [{"data"}, {"model", ?}]>'),)
    assert manual.sdy_sharding == TensorSharding.parse('<@mesh_name, [{"data"}, {?}]>')
    body = manual.called_computations[0]
    # The body works on the local type, 16 / 2 = 8 along the manual axis "data".
    assert [p.shape for p in body.parameters] == [Shape.array("f32", (8, 32))]
    assert manual.shape == Shape.array("f32", (16, 32))
    assert region_results(body) == [_ops(body)[0]]
    assert print_module(module) == """module {
  sdy.mesh @mesh_name = <["data"=2, "model"=2]>
  func.func @main(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
    %0 = stablehlo.negate %arg0 : tensor<16x32xf32>
    %1 = sdy.manual_computation(%0) in_shardings=[<@mesh_name, [{"data"}, {"model", ?}]>] \
out_shardings=[<@mesh_name, [{"data"}, {?}]>] manual_axes={"data"} (%arg1: tensor<8x32xf32>) {
      %42 = stablehlo.add %arg1, %arg1 : tensor<8x32xf32>
      sdy.return %42 : tensor<8x32xf32>
    } : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %1 : tensor<16x32xf32>
  }
}
"""


def test_free_axis_major_to_a_manual_axis_is_invalid() -> None:
    # {"model", "data"} with manual axis "data" breaks invariant 3.
    with pytest.raises(VerifyError):
        parse_module(MANUAL.replace('{"data"}, {"model",?}', '{"model", "data"}, {?}'))


# -- shardings are regenerated from the IR -----------------------------------------------------------

TWO_RESULTS = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @f(%arg0: tensor<8x4xf32>, %arg1: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = stablehlo.reduce(%arg0 init: %arg1), (%arg0 init: %arg1) across dimensions = [0] :
    (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
    reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<f32>, %d: tensor<f32>) {
      %1 = stablehlo.add %a, %c : tensor<f32>
      %2 = stablehlo.add %b, %d : tensor<f32>
      stablehlo.return %1, %2 : tensor<f32>, tensor<f32>
    }
  %3 = stablehlo.add %0#0, %0#1 : tensor<4xf32>
  return %3, %0#1 : tensor<4xf32>, tensor<4xf32>
}
"""


def test_changed_shardings_are_printed() -> None:
    module = parse_module(TWO_RESULTS)
    entry = module.entry
    reduce, add = _ops(entry)
    sharded = TensorSharding.parse('<@mesh, [{"a", ?}]>')
    add.sdy_sharding = sharded
    op_results(reduce)[1].sdy_sharding = TensorSharding.parse('<@mesh, [{"b"}]>')
    entry.parameters[0].sdy_sharding = TensorSharding.parse('<@mesh, [{?}, {"a"}]>')
    entry.result_shardings = [None, TensorSharding.parse('<@mesh, [{"b"}]>')]
    text = print_module(module)
    assert '%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a"}]>}' in text
    assert '-> (tensor<4xf32>, tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}]>}) {' in text
    # The result without a sharding of a partly sharded op prints fully open.
    assert ('across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}]>, <@mesh, [{"b"}]>]>} '
            ': (tensor<8x4xf32>') in text
    assert '%3 = stablehlo.add %0#0, %0#1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}]>]>} ' \
           ': tensor<4xf32>' in text
    add.sdy_sharding = None
    assert "%3 = stablehlo.add %0#0, %0#1 : tensor<4xf32>" in print_module(module)
    assert print_module(parse_module(text)) == text


def test_constraint_and_manual_shardings_are_printed_inline() -> None:
    module = parse_module(MANUAL)
    manual = _ops(module.entry)[1]
    manual.sdy_sharding = TensorSharding.parse('<@mesh_name, [{"data", "model"}, {}]>')
    manual.attributes["in_shardings"] = (TensorSharding.parse('<@mesh_name, [{"data"}, {"model"}]>'),)
    text = print_module(module)
    assert ('in_shardings=[<@mesh_name, [{"data"}, {"model"}]>] out_shardings=[<@mesh_name, [{"data", "model"}, {}]>]'
            in text)
    assert "sdy.sharding =" not in text


def test_instructions_added_by_a_pass_get_fresh_names() -> None:
    module = parse_module(TWO_RESULTS)
    entry = module.entry
    add = _ops(entry)[1]
    negate = entry.add_instruction(HloInstruction("negate", "negate", add.shape, [add]))
    root = entry.root
    root.replace_operand(0, negate)
    negate.sdy_sharding = TensorSharding.parse('<@mesh, [{"a"}]>')
    text = print_module(module)
    assert ('    %4 = stablehlo.negate %3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}]>]>} '
            ': tensor<4xf32>\n    return %4, %0#1 : tensor<4xf32>, tensor<4xf32>\n') in text
    assert "%5 = stablehlo.negate %4" not in text


def test_sdy_ops_round_trip() -> None:
    text = """module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  sdy.mesh @maximal = <[], device_ids=[3]>
  func.func @f(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x", ?}p1, {?}]> : tensor<8x8xf32>
    %1 = sdy.reshard %0 <@mesh, [{}, {"y":(1)2}], replicated={"x"}> : tensor<8x8xf32>
    %2 = sdy.data_flow_edge %1 sharding=<@mesh, [{"x"}, {}]> : tensor<8x8xf32>
    %3 = sdy.data_flow_edge %2 : tensor<8x8xf32>
    %4 = sdy.propagation_barrier %3 allowed_direction=NONE : tensor<8x8xf32>
    %5 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@maximal, []>]>} dense<1.000000e+00> : tensor<f32>
    %c = stablehlo.broadcast_in_dim %5, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
    %6 = stablehlo.add %4, %c {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>} \
: tensor<8x8xf32>
    %7 = sdy.named_computation<"body">(%6) out_shardings=[<@mesh, [{"x"}, {}]>] (%arg1: tensor<8x8xf32>) {
      sdy.return %arg1 : tensor<8x8xf32>
    } : (tensor<8x8xf32>) -> tensor<8x8xf32>
    return %7 : tensor<8x8xf32>
  }
}
"""
    module = parse_module(text)
    assert print_module(module) == text
    ops = {i.opcode: i for i in _ops(module.entry)}
    assert ops["sdy.propagation_barrier"].attributes == {"allowed_direction": "NONE"}
    assert ops["constant"].mlir.name == "sdy.constant" and str(ops["constant"].sdy_sharding) == \
        "#sdy.sharding<@maximal, []>"
    rule = ops["add"].attributes["sdy.sharding_rule"]
    assert rule.factor_sizes == (8, 8)
    assert ops["sdy.named_computation"].attributes == {"name": "body"}
    assert ops["sdy.reshard"].sdy_sharding.replicated_axes[0].name == "x"
