# ruff: noqa: E501  (the MLIR lines of Shardy's docs/compiler_api.md are longer than the code's limit)
"""Shardy's compiler API document (openxla/shardy docs/compiler_api.md): its
sharding group and manual computation examples and the behaviour of each API
component on its programs (see docs/sharding.md).

The document writes its meshes as ``@mesh_xy = <...>`` and its functions as
``func @main``; as MLIR they are ``sdy.mesh @mesh_xy = <...>`` and
``func.func @main``. Expected shardings after propagation are Shardy's own
(checked against Shardy through XLA:CPU in tests/sharding).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from xlapy.errors import VerifyError, XlapyError
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding import propagate

MESH_XY = 'sdy.mesh @mesh_xy = <["x"=2, "y"=2]>'


def _line_defining(text: str, value: str) -> str:
    """The printed line of the op that defines ``%value``."""
    for line in text.splitlines():
        if re.match(rf"\s*%{re.escape(value)}(:\d+)? = ", line):
            return line
    raise AssertionError(f"%{value} is not defined in:\n{text}")


def _result_sharding(text: str, value: str) -> str | None:
    """The sharding printed on the op defining ``%value`` (``<@mesh, [...]>``), or None."""
    match = re.search(r"sdy\.sharding_per_value<\[(<.*?\]>)\]>", _line_defining(text, value))
    return match.group(1) if match else None


def _argument_sharding(text: str, argument: str) -> str | None:
    match = re.search(rf"%{argument}: [^ ,)]+ \{{sdy\.sharding = #sdy\.sharding<(.*?\]>)\}}", text)
    return "<" + match.group(1) if match else None


# -- input/output shardings ----------------------------------------------------

IO_SHARDINGS = MESH_XY + """
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {}]>}, %arg1: tensor<8x16xf32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{}, {"y"}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
"""


def test_input_output_shardings_are_read_and_printed_back():
    module = parse_module(IO_SHARDINGS)
    main = module.entry
    arg0, arg1 = main.parameters
    assert str(arg0.sdy_sharding) == '#sdy.sharding<@mesh_xy, [{"x"}, {}]>'
    assert arg1.sdy_sharding is None
    assert [str(s) for s in main.result_shardings] == ['#sdy.sharding<@mesh_xy, [{}, {"y"}]>']
    assert str(module.meshes["mesh_xy"]) == '<["x"=2, "y"=2]>'
    assert print_module(parse_module(print_module(module))) == print_module(module)


def test_input_output_shardings_propagate_and_stay():
    text = print_module(propagate(parse_module(IO_SHARDINGS)))
    # The user's shardings are kept; the unsharded input and the dot get the rest.
    assert _argument_sharding(text, "arg0") == '<@mesh_xy, [{"x"}, {}]>'
    assert _argument_sharding(text, "arg1") == '<@mesh_xy, [{}, {"y"}]>'
    assert '-> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{}, {"y"}]>})' in text
    assert _result_sharding(text, "0") == '<@mesh_xy, [{"x"}, {"y"}]>'


# -- sharding constraint -------------------------------------------------------

CONSTRAINT = MESH_XY + """
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_xy, [{}, {"y"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.cosine %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh_xy, [{"x"}, {?}]> : tensor<8x8xf32>
  %2 = stablehlo.sine %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""


def test_sharding_constraint_syntax_round_trips():
    module = parse_module(CONSTRAINT)
    assert '%1 = sdy.sharding_constraint %0 <@mesh_xy, [{"x"}, {?}]> : tensor<8x8xf32>' in print_module(module)


def test_sharding_constraint_open_dimension_is_sharded_further():
    # Dimension 0 is fixed to "x" by the constraint; the open dimension 1
    # takes "y" from the argument.
    text = print_module(propagate(parse_module(CONSTRAINT), strategy="basic"))
    assert "sharding_constraint %0 <@mesh_xy, [{\"x\"}, {\"y\", ?}]>" in text
    assert _result_sharding(text, "2") == '<@mesh_xy, [{"x", ?}, {"y", ?}]>'


# -- sharding group ------------------------------------------------------------

ZEROS_LIKE = MESH_XY + """
module @"jit_zeros_like" {
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"},{"y"}]>}) -> (tensor<8x2xi64>) {
    %0 = sdy.sharding_group %arg0, id=0 : tensor<8x2xi64>
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    %2 = sdy.sharding_group %1, id=0 : tensor<8x2xi64>
    return %2 : tensor<8x2xi64>
  }
}
"""


def _zeros_like(with_group: bool) -> str:
    # The document's mesh is declared outside its module; MLIR wants it inside.
    text = ZEROS_LIKE.replace(MESH_XY + "\n", "").replace('module @"jit_zeros_like" {', 'module @"jit_zeros_like" {\n  ' + MESH_XY)
    if not with_group:
        text = text.replace("%2 = sdy.sharding_group %1, id=0 : tensor<8x2xi64>", "%2 = stablehlo.add %1, %1 : tensor<8x2xi64>")
        text = text.replace("%0 = sdy.sharding_group %arg0, id=0 : tensor<8x2xi64>", "%0 = stablehlo.add %arg0, %arg0 : tensor<8x2xi64>")
    return text


def test_sharding_group_spreads_the_input_sharding_to_the_output_and_constant():
    module = propagate(parse_module(_zeros_like(with_group=True)))
    main = module.entry
    constant = next(i for i in main.instructions if i.opcode == "constant")
    assert str(constant.sdy_sharding) == '#sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>'
    # %2, the second group member, is the returned value.
    assert [str(s) for s in main.result_shardings] == ['#sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>']


def test_without_the_group_the_constant_and_output_stay_replicated():
    module = propagate(parse_module(_zeros_like(with_group=False)))
    main = module.entry
    constant = next(i for i in main.instructions if i.opcode == "constant")
    assert constant.sdy_sharding is None or not any(d.axes for d in constant.sdy_sharding.dim_shardings)
    assert all(s is None or not any(d.axes for d in s.dim_shardings) for s in main.result_shardings)


# -- manual computation, its local body type and invariant 3 -------------------

MANUAL = """sdy.mesh @mesh_name = <["data"=2, "model"=2]>
func.func @main(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %0 = stablehlo.negate %arg0 : tensor<16x32xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh_name, [{"data"}, {"model", ?}]>] out_shardings=[<@mesh_name, [{"data"}, {?}]>] manual_axes={"data"} (%arg1: tensor<8x32xf32>) {
    %2 = stablehlo.abs %arg1 : tensor<8x32xf32>
    sdy.return %2 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
"""


def test_manual_computation_body_has_the_local_type():
    module = parse_module(MANUAL)
    manual = next(i for i in module.entry.instructions if i.opcode == "sdy.manual_computation")
    (body,) = manual.called_computations
    assert [str(p.shape) for p in body.parameters] == ["f32[8,32]"]
    assert str(manual.shape) == "f32[16,32]"
    assert "(%arg1: tensor<8x32xf32>) {" in print_module(module)


def test_a_global_type_in_the_body_breaks_invariant_4():
    with pytest.raises(XlapyError, match="invariant 4"):
        parse_module(MANUAL.replace("tensor<8x32xf32>", "tensor<16x32xf32>"))


def test_free_axis_major_to_a_manual_axis_is_invalid():
    bad = MANUAL.replace('[{"data"}, {"model", ?}]', '[{}, {"model", "data"}]').replace("tensor<8x32xf32>", "tensor<16x16xf32>")
    with pytest.raises(VerifyError, match=r'invariant 3.*\{"model", "data"\}'):
        parse_module(bad)


def test_free_axis_minor_to_the_manual_axis_is_valid():
    good = (MANUAL.replace('[{"data"}, {"model", ?}]', '[{}, {"data", "model"}]')
            .replace('[{"data"}, {?}]', '[{}, {"data", "model"}]').replace("tensor<8x32xf32>", "tensor<16x16xf32>"))
    module = parse_module(good)
    manual = next(i for i in module.entry.instructions if i.opcode == "sdy.manual_computation")
    assert manual.attributes["in_shardings"][0].body() == '<@mesh_name, [{}, {"data", "model"}]>'


def test_manual_computation_free_axes_propagate_through_the_body():
    # Basic propagation: the free axis "model" of the in_sharding reaches the
    # body's op; body shardings name only free axes.
    text = print_module(propagate(parse_module(MANUAL), strategy="basic"))
    assert _result_sharding(text, "2") == '<@mesh_name, [{?}, {"model", ?}]>'
    assert _result_sharding(text, "0") is None
    # The full pipeline also shards the operand and closes every sharding.
    text = print_module(propagate(parse_module(MANUAL)))
    assert _result_sharding(text, "2") == '<@mesh_name, [{}, {"model"}]>'
    assert _result_sharding(text, "0") == '<@mesh_name, [{"data"}, {"model"}]>'
    assert 'in_shardings=[<@mesh_name, [{"data"}, {"model"}]>] out_shardings=[<@mesh_name, [{"data"}, {"model"}]>]' in text


# -- command line --------------------------------------------------------------


def test_cli_propagates_and_reports_bad_input(tmp_path):
    good = tmp_path / "io.mlir"
    good.write_text(IO_SHARDINGS)
    run = subprocess.run([sys.executable, "-m", "xlapy.cli", "sdy", "propagate", str(good)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == print_module(propagate(parse_module(IO_SHARDINGS)))
    bad = tmp_path / "bad.mlir"
    bad.write_text(IO_SHARDINGS.replace('{"x"}, {}', '{"z"}, {}'))
    run = subprocess.run([sys.executable, "-m", "xlapy.cli", "sdy", "propagate", str(bad)], capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and '"z"' in run.stderr
