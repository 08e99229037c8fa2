"""Hand-written inputs come back in MLIR's canonical form: the expected texts
are what MLIR's own printer writes for them (``data/hand_written.expected.mlir``;
checked again against jaxlib's MLIR when it is installed)."""

from __future__ import annotations

import pathlib

import pytest

from tools.oracles import require_jax
from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file

DATA = pathlib.Path(__file__).parent / "data"


def _chunks() -> list[tuple[str, int]]:
    chunks = split_input_file((DATA / "hand_written.mlir").read_text())
    return [(text, line) for text, line in chunks
            if any(s.strip() and not s.lstrip().startswith("//") for s in text.splitlines())]


def _expected() -> list[str]:
    return [text for text, _ in split_input_file((DATA / "hand_written.expected.mlir").read_text())]


CHUNKS = _chunks()


def test_every_chunk_has_an_expected_text() -> None:
    assert len(CHUNKS) == len(_expected()) >= 12


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_prints_what_mlir_prints(index: int) -> None:
    text, line = CHUNKS[index]
    module = parse_module(text, first_line=line)
    assert print_module(module, rename=True, locations=False).rstrip() == _expected()[index].rstrip()


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_printing_is_a_fixed_point(index: int) -> None:
    text, line = CHUNKS[index]
    once = print_module(parse_module(text, first_line=line))
    assert print_module(parse_module(once)) == once


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_agrees_with_jaxlib_mlir(index: int) -> None:
    require_jax()
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    text, line = CHUNKS[index]
    with mlir.make_ir_context():
        reference = str(ir.Module.parse(text))
    assert print_module(parse_module(text, first_line=line), rename=True, locations=False).rstrip() == \
        reference.rstrip()


def test_names_are_kept_by_default() -> None:
    text = """func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sum = stablehlo.add %x, %y : tensor<4xf32>
  %two:2 = stablehlo.optimization_barrier %sum, %x : tensor<4xf32>, tensor<4xf32>
  %r = stablehlo.multiply %two#0, %two#1 : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    expected = """module {
  func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
    %sum = stablehlo.add %x, %y : tensor<4xf32>
    %two:2 = stablehlo.optimization_barrier %sum, %x : tensor<4xf32>, tensor<4xf32>
    %r = stablehlo.multiply %two#0, %two#1 : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
"""
    module = parse_module(text)
    assert print_module(module) == expected
    assert print_module(module, rename=True) == expected.replace("%x", "%arg0").replace("%y", "%arg1").replace(
        "%sum", "%0").replace("%two", "%1").replace("%r", "%2")


def test_locations_are_kept() -> None:
    text = """#loc1 = loc("x")
module @m {
  func.func public @main(%arg0: tensor<f32> loc("x")) -> tensor<f32> {
    %0 = stablehlo.negate %arg0 : tensor<f32> loc(#loc2)
    return %0 : tensor<f32> loc(#loc1)
  } loc(#loc1)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("f.py":3:4)
"""
    module = parse_module(text)
    assert print_module(module) == text
    assert "loc" not in print_module(module, locations=False)


def test_unknown_ops_round_trip_in_the_generic_form() -> None:
    text = """module {
  func.func @f(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<i32>) {
    %0:2 = "mydialect.fancy"(%arg0) <{level = 3 : i64}> ({
    ^bb0(%arg1: tensor<f32>):
      %1 = "mydialect.inner"(%arg1) : (tensor<f32>) -> tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) {note = "kept", sdy.sharding = #sdy.sharding_per_value<[<@m, [{"a"}]>, <@m, []>]>} : (tensor<4xf32>) \
-> (tensor<4xf32>, tensor<i32>)
    return %0#0, %0#1 : tensor<4xf32>, tensor<i32>
  }
}
"""
    module = parse_module(text.replace("module {\n", 'module {\n  sdy.mesh @m = <["a"=2]>\n'))
    fancy = next(i for i in module.entry.instructions if i.opcode == "mydialect.fancy")
    assert fancy.called_computations[0].root.opcode == "mydialect.inner"
    assert print_module(module) == text.replace("module {\n", 'module {\n  sdy.mesh @m = <["a"=2]>\n')


def _generic_chunks() -> list[tuple[str, int]]:
    return split_input_file((DATA / "hand_written.generic.mlir").read_text())


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_the_generic_form_reads_the_same(index: int) -> None:
    text, line = _generic_chunks()[index]
    assert '"func.func"()' in text
    module = parse_module(text, first_line=line)
    assert print_module(module, rename=True, locations=False).rstrip() == _expected()[index].rstrip()
