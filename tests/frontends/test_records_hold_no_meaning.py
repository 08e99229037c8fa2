"""The frontend's records only say how a program was written: that an
instruction only encodes MLIR structure (a result of a multi-result op, the
tuple a region returns) is a fact of the IR, so dropping every record leaves
the program's meaning (what the verifier accepts, what the interpreter
computes) as it was, and the program still prints as MLIR that reads back."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import xlapy
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.hlo import HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, region_results
from xlapy.shapes import Shape

# StableHLO's while (several loop values), case and if (branches returning
# values of the enclosing computations), as MLIR prints them.
REGIONS = (pathlib.Path(__file__).parents[1] / "interpreter" / "data" / "stablehlo_regions.mlir").read_text()

# A call of a function returning two values, a two-value optimization barrier,
# named and manual computations with two results each.
DATA = pathlib.Path(__file__).parent / "data"
STRUCTURE = (DATA / "multi_result_ops.mlir").read_text()


def _drop_instruction_records(module: HloModule) -> None:
    for instr in module.instructions:
        instr.mlir = None


def _assert_identical(got, want) -> None:
    assert isinstance(got, tuple) and isinstance(want, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


X = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
Y = np.array([0.5, -1.0, 2.0, 8.0], np.float32)


def test_the_structure_program_computes_what_it_says() -> None:
    # pair: (x + y, x); twice: ((x + y) * x, x + y); manual, per block: (a - b, -b).
    total = X + Y
    product = total * X
    _assert_identical(xlapy.evaluate(parse_module(STRUCTURE), X, Y), (product - total, -total, product, X))


@pytest.mark.parametrize(("text", "args"), [(STRUCTURE, (X, Y))] + [
    (REGIONS, (X, np.int32(index))) for index in (-1, 0, 1, 2, 7)])
def test_dropping_every_instruction_record_keeps_the_meaning(text: str, args: tuple) -> None:
    module = parse_module(text)
    want = xlapy.evaluate(module, *args)
    structural = sorted(i.name for i in module.instructions if encodes_mlir_structure(i))
    assert structural  # the programs hold such instructions: the check below is not vacuous
    _drop_instruction_records(module)
    xlapy.verify(module)
    assert sorted(i.name for i in module.instructions if encodes_mlir_structure(i)) == structural
    _assert_identical(xlapy.evaluate(module, *args, verify=False), want)
    # The frontend prints it from the IR alone, as MLIR that reads back to the same program.
    _assert_identical(xlapy.evaluate(parse_module(print_module(module)), *args), want)


def test_a_while_body_returning_several_values_without_its_record() -> None:
    module = parse_module(REGIONS)
    loop = next(i for i in module.entry.instructions if i.opcode == "stablehlo.while" and len(i.operands) == 2)
    body = loop.called_computations[1]
    body.root.mlir = None
    xlapy.verify(module)
    assert [v.shape for v in region_results(body)] == [Shape.array("f32", (4,)), Shape.array("s32", ())]


def test_clone_keeps_the_fact() -> None:
    module = parse_module(STRUCTURE)
    element = next(i for i in module.entry.instructions if i.opcode == "get-tuple-element")
    root = module.entry.root
    assert encodes_mlir_structure(element) and encodes_mlir_structure(root)
    assert encodes_mlir_structure(element.clone()) and encodes_mlir_structure(root.clone(suffix="copy"))
    assert not encodes_mlir_structure(HloInstruction("t", "tuple", Shape.make_tuple([])))
    assert not any(encodes_mlir_structure(i) for i in xlapy.parse_hlo(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT t = (f32[4], f32[4]) tuple(p, p)\n}\n").instructions)
