"""StableHLO's forms of ops HLO has too are imported under opcodes of their
own (``xlapy.hlo.stablehlo_forms``), and an HLO opcode keeps HLO's rules in
an imported module: an instruction of a StableHLO form given the HLO opcode
(as a pass unaware of the forms might) is refused by the verifier, with
HLO's reason (XLA's ``HloVerifier`` refuses each of these HLO instructions)."""

from __future__ import annotations

import pytest

from xlapy.errors import VerifyError
from xlapy.frontends.stablehlo import parse_module
from xlapy.hlo import verify
from xlapy.hlo.mlir_structure import encodes_mlir_structure

# (StableHLO program, the opcode it is imported under, the HLO opcode, why HLO's rules refuse it)
CASES = {
    "while": ("""func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<2xf32>, tensor<i32>
    cond {
    %c = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg_0, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg, %arg0 : tensor<2xf32>
    stablehlo.return %1, %iterArg_0 : tensor<2xf32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<2xf32>, tensor<i32>
}""", "stablehlo.while", "while", r"while takes 1 operand, got 2"),
    "case": ("""func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>) -> tensor<2xf32> {
  %0 = "stablehlo.case"(%arg1) ({
    %1 = stablehlo.negate %arg0 : tensor<2xf32>
    stablehlo.return %1 : tensor<2xf32>
  }, {
    stablehlo.return %arg0 : tensor<2xf32>
  }) : (tensor<i32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""", "stablehlo.case", "conditional", r"\(Arg_0\) is not in this computation but in computation main; only the "
                                        r"regions of stablehlo.case"),
    "if": ("""func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i1>) -> tensor<2xf32> {
  %0 = "stablehlo.if"(%arg1) ({
    %1 = stablehlo.negate %arg0 : tensor<2xf32>
    stablehlo.return %1 : tensor<2xf32>
  }, {
    stablehlo.return %arg0 : tensor<2xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""", "stablehlo.if", "conditional", r"\(Arg_0\) is not in this computation but in computation main; only the "
                                      r"regions of stablehlo.case"),
    "optimization_barrier": ("""func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>)
    -> (tensor<2xf32>, tensor<i32>) {
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<2xf32>, tensor<i32>
  return %0#0, %0#1 : tensor<2xf32>, tensor<i32>
}""", "stablehlo.optimization_barrier", "opt-barrier", r"opt-barrier takes 1 operand, got 2"),
    "broadcast_in_dim": ("""func.func @main(%arg0: tensor<1x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}""", "stablehlo.broadcast_in_dim", "broadcast", r"HLO's broadcast does not stretch a size-1 dimension"),
    "all_to_all": ("""func.func @main(%arg0: tensor<4x4xf32>) -> tensor<8x2xf32> {
  %0 = "stablehlo.all_to_all"(%arg0) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> :
    tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x4xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}""", "stablehlo.all_to_all", "all-to-all", r"all-to-all produces \(f32\[4,4\]\), but the instruction declares "
                                              r"f32\[8,2\]"),
    "convert": ("""func.func @main(%arg0: tensor<2xcomplex<f32>>) -> tensor<2xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""", "stablehlo.convert", "convert", r"convert cannot turn complex c64 into non-complex f32"),
    "rng": ("""func.func @main(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<2xi64>) -> tensor<3x4xf32> {
  %0 = stablehlo.rng %arg0, %arg1, %arg2, distribution =  UNIFORM
    : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}""", "stablehlo.rng", "rng", r"rng takes 2 operands, got 3"),
}


def _op(module):
    ops = [i for i in module.entry.instructions if i.opcode not in ("parameter", "constant")
           and not encodes_mlir_structure(i)]
    return ops[-1]


@pytest.mark.parametrize("name", CASES)
def test_an_imported_stablehlo_form_has_its_own_opcode_and_hlo_refuses_it(name):
    text, opcode, hlo_opcode, reason = CASES[name]
    module = parse_module(text)
    op = _op(module)
    assert op.opcode == opcode
    op.opcode = hlo_opcode
    with pytest.raises(VerifyError, match=reason):
        verify(module)


# (StableHLO op text whose HLO semantics hold, the HLO opcode it is imported under)
HLO_FORMS = [
    ("stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>", "tensor<3xf32>",
     "tensor<2x3xf32>", "broadcast"),
    ("stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<1x3xf32>", "tensor<1x3xf32>",
     "tensor<1x3xf32>", "broadcast"),
    ("stablehlo.convert %arg0 : (tensor<2xf32>) -> tensor<2xcomplex<f32>>", "tensor<2xf32>",
     "tensor<2xcomplex<f32>>", "convert"),
    ("stablehlo.convert %arg0 : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f64>>", "tensor<2xcomplex<f32>>",
     "tensor<2xcomplex<f64>>", "convert"),
    ('"stablehlo.all_to_all"(%arg0) <{concat_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : '
     "tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x4xf32>) -> tensor<4x4xf32>",
     "tensor<4x4xf32>", "tensor<4x4xf32>", "all-to-all"),
]


@pytest.mark.parametrize(("op", "arg", "result", "opcode"), HLO_FORMS)
def test_where_hlo_semantics_hold_the_hlo_opcode_is_used(op, arg, result, opcode):
    module = parse_module(f"func.func @main(%arg0: {arg}) -> {result} {{\n  %0 = {op}\n  return %0 : {result}\n}}")
    assert _op(module).opcode == opcode


def test_only_stablehlo_control_flow_regions_use_enclosing_values():
    # The while body may use main's %arg0; a reduce's body may not (HLO's
    # computations see only their parameters).
    module = parse_module(CASES["while"][0])
    verify(module)
    module = parse_module("""func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.reduce(%arg0 init: %arg1) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    reducer(%a: tensor<f32>, %b: tensor<f32>) {
      %1 = stablehlo.add %a, %arg1 : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }
  return %0 : tensor<f32>
}""", verify=False)
    with pytest.raises(VerifyError, match=r"operand 1 \(Arg_1\) is not in this computation but in computation main; "
                                          r"only the regions of stablehlo.case, stablehlo.if, stablehlo.while use "
                                          r"values of the computations they run inside"):
        verify(module)


def test_every_stablehlo_opcode_has_a_rule_in_every_registry() -> None:
    from xlapy.hlo.shape_rules.inference import has_shape_rule
    from xlapy.hlo.stablehlo_forms import STABLEHLO_OPCODES
    from xlapy.interpreter import RULES
    from xlapy.sharding.rules import NO_RULE_OPCODES, OP_SHARDING_RULES

    for opcode in STABLEHLO_OPCODES:
        assert has_shape_rule(opcode), opcode
        assert opcode in RULES, opcode
        assert (opcode in OP_SHARDING_RULES) != (opcode in NO_RULE_OPCODES), opcode


@pytest.mark.parametrize("name", ["broadcast_in_dim", "all_to_all", "optimization_barrier"])
def test_indexing_has_no_maps_for_stablehlo_forms(name):
    # XLA's "unknown indexing": no map rather than HLO's map of another op.
    from xlapy.indexing.ops import op_input_to_output, op_output_to_input

    op = _op(parse_module(CASES[name][0]))
    assert all(m.is_undefined() for maps in op_output_to_input(op) for m in maps)
    assert all(m.is_undefined() for maps in op_input_to_output(op, 0) for m in maps)
