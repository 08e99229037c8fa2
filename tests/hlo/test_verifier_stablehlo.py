"""The HLO verifier on modules imported from StableHLO: it accepts every valid
program with StableHLO's forms (variadic while, regions using enclosing
values, Shardy's ops, ops kept under their MLIR names) and still refuses
what breaks them; an HLO opcode keeps HLO's rules in an imported module too.
The import runs it (``verify=True`` by default)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.errors import VerifyError
from xlapy.frontends.stablehlo import parse_module, split_input_file
from xlapy.hlo import verify
from xlapy.shapes import parse_shape

ROOT = Path(__file__).parent.parent.parent
_FILES = sorted((ROOT / "tests").rglob("*.mlir")) + sorted((ROOT / "examples").glob("*.mlir"))
_CHUNKS = [pytest.param(path, text, line, id=f"{path.relative_to(ROOT)}:{line}")
           for path in _FILES for text, line in split_input_file(path.read_text())]


@pytest.mark.parametrize("path, text, line", _CHUNKS)
def test_every_program_of_the_suite_imports_verified(path, text, line):
    module = parse_module(text, str(path), line)
    verify(module)


_PROGRAM = """func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {
  %0 = "stablehlo.case"(%arg1) ({
    %1 = stablehlo.negate %arg0 : tensor<2xf32>
    stablehlo.return %1 : tensor<2xf32>
  }, {
    stablehlo.return %arg0 : tensor<2xf32>
  }) : (tensor<i32>) -> tensor<2xf32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %2:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %c) : tensor<2xf32>, tensor<i32>
    cond {
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %3 = stablehlo.compare  LT, %iterArg_0, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>
  } do {
    %3 = stablehlo.add %iterArg, %arg0 : tensor<2xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %4 = stablehlo.add %iterArg_0, %c_1 : tensor<i32>
    stablehlo.return %3, %4 : tensor<2xf32>, tensor<i32>
  }
  %5 = sdy.sharding_constraint %2#0 <@mesh, [{"x"}]> : tensor<2xf32>
  return %5, %2#1 : tensor<2xf32>, tensor<i32>
}
"""
_MESH = 'sdy.mesh @mesh = <["x"=2]>\n'


def _program():
    return parse_module(_MESH + _PROGRAM)


def test_regions_using_enclosing_values_and_a_variadic_while_verify_and_run():
    module = _program()
    x = np.array([1.5, -2], np.float32)
    # Branch 1 passes x through; the loop adds x three times.
    result, count = xlapy.evaluate(module, x, np.int32(1))
    np.testing.assert_array_equal(result, 4 * x)
    assert count == 3
    result, _ = xlapy.evaluate(module, x, np.int32(0))
    np.testing.assert_array_equal(result, 2 * x)


def _instr(module, name):
    return next(i for c in module.computations for i in c.instructions if i.name == name)


def test_a_value_of_a_region_that_does_not_enclose_the_user_is_refused():
    # The loop body may use main's Arg_0, but main may not use the branch's negate.
    module = _program()
    negate, add = _instr(module, "negate"), _instr(module, "add")
    add.replace_operand(1, negate)
    with pytest.raises(VerifyError, match=r"computation region_3, instruction add: operand 1 \(negate\) is not in "
                                          r"this computation but in computation region_0"):
        verify(module)


def test_shardy_ops_pass_their_operand_through():
    module = _program()
    _instr(module, "sdy.sharding_constraint").shape = parse_shape("f32[4]")
    with pytest.raises(VerifyError, match=r"instruction sdy.sharding_constraint: sdy.sharding_constraint produces "
                                          r"f32\[2\], but the instruction declares f32\[4\]"):
        verify(module)


def test_the_while_form_is_still_checked():
    module = _program()
    while_ = _instr(module, "stablehlo.while")
    while_.replace_operand(1, _instr(module, "stablehlo.case"))
    with pytest.raises(VerifyError, match=r"parameter 1 of body region_3 must be f32\[2\] to match stablehlo.while, "
                                          r"got s32\[\]"):
        verify(module)


def test_ops_kept_under_their_mlir_name_verify_but_do_not_run():
    module = parse_module("""func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "foo.bar"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""")
    with pytest.raises(xlapy.UnimplementedError, match=r"the interpreter has no rule for foo\.bar"):
        xlapy.evaluate(module, np.zeros(2, np.float32))


def test_an_opcode_means_the_same_in_hlo_text_and_in_imported_modules():
    # A dialect-prefixed opcode names an op without HLO rules in either; an
    # unknown opcode without a prefix is refused in either.
    hlo = xlapy.parse_hlo("HloModule m\nENTRY e { p = f32[2] parameter(0)  ROOT n = f32[2] negate(p) }")
    imported = parse_module("""func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %arg0 : tensor<2xf32>
  return %0 : tensor<2xf32>
}""")
    for module in (hlo, imported):
        root = module.entry.root
        root.opcode = "foo.bar"
        verify(module)
        root.opcode = "frobnicate"
        with pytest.raises(VerifyError, match=f"computation {module.entry.name}, instruction {root.name}: unknown "
                                              "opcode frobnicate"):
            verify(module)


def test_the_rng_form_takes_the_result_dimensions():
    text = """func.func @main(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<SIZExi64>) -> tensor<3x4xf32> {
  %0 = stablehlo.rng %arg0, %arg1, %arg2, distribution =  UNIFORM
    : (tensor<f32>, tensor<f32>, tensor<SIZExi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}"""
    verify(parse_module(text.replace("SIZE", "2")))
    with pytest.raises(VerifyError, match=r"the shape operand of stablehlo.rng must hold one integer per result "
                                          r"dimension, got s64\[3\] for f32\[3,4\]"):
        parse_module(text.replace("SIZE", "3"))


def test_a_manual_computation_body_takes_one_shard_per_operand():
    module = parse_module((ROOT / "tests" / "frontends" / "data" / "jax_shard_map.mlir").read_text())
    manual = next(i for i in module.instructions if i.opcode == "sdy.manual_computation")
    body = manual.called_computations[0]
    body.parameters[0].shape = parse_shape("s32" + str(body.parameters[0].shape)[3:])
    with pytest.raises(VerifyError, match=f"parameter 0 of body {body.name} must be a shard of"):
        verify(module)


@pytest.mark.parametrize("axes, message", [
    (("y", "x"), 'its shardings: invariant 1: manual_axes {"y", "x"} must be sorted w.r.t. the mesh '
                 '<["x"=2, "y"=4]> and unique'),
    ("xy", "its shardings: manual_axes must be a list of axis names, got 'xy'"),
])
def test_the_shardings_of_a_manual_computation_are_verified_too(axes, message):
    # What the interpreter relies on to simulate the devices of a manual computation.
    module = parse_module((ROOT / "tests" / "frontends" / "data" / "jax_shard_map.mlir").read_text())
    manual = next(i for i in module.instructions if i.opcode == "sdy.manual_computation")
    manual.attributes["manual_axes"] = axes
    with pytest.raises(VerifyError) as error:
        verify(module)
    assert str(error.value) == f"computation main, instruction {manual.name}: {message}"
