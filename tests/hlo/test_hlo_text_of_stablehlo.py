"""HLO text of modules read from StableHLO: a module of HLO's opcodes prints
as HLO text that reads back to the same program; one holding an op HLO has
no opcode for (StableHLO's forms of while, case, if...; Shardy's ops) is
refused with one clear error rather than printed as text that does not parse."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import xlapy
from xlapy.cli import main
from xlapy.frontends.stablehlo import parse_module
from xlapy.hlo.printer import NotHloError

DATA = pathlib.Path(__file__).parent / "data"
TESTS = pathlib.Path(__file__).parents[1]
# Several loop values, branches returning values of the enclosing computations.
REGIONS = TESTS / "interpreter" / "data" / "stablehlo_regions.mlir"
# A two-value optimization barrier, named and manual computations.
SHARDY = TESTS / "frontends" / "data" / "multi_result_ops.mlir"
# A sort of two operands and a call of a function returning two values.
HLO_OPS_ONLY = DATA / "stablehlo_hlo_ops_only.mlir"


def test_a_module_of_hlo_opcodes_prints_as_hlo_that_reads_back() -> None:
    text = parse_module(HLO_OPS_ONLY.read_text()).to_text()
    module = xlapy.parse_hlo(text)
    xlapy.verify(module)
    x = np.array([3.0, -1.0, 2.5, 0.0], np.float32)
    ids = np.arange(4, dtype=np.int32)
    order = np.argsort(x)
    got = xlapy.evaluate(module, x, ids)
    for value, want in zip(got, (x[order], ids[order], x[order] + x), strict=True):
        np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize(("path", "opcode", "written"), [
    (REGIONS, "stablehlo.while", "stablehlo.while %1"),
    (SHARDY, "stablehlo.optimization_barrier", "stablehlo.optimization_barrier %1"),
])
def test_a_module_with_stablehlo_forms_is_refused(path: pathlib.Path, opcode: str, written: str) -> None:
    module = parse_module(path.read_text())
    with pytest.raises(NotHloError) as refused:
        module.to_text()
    message = str(refused.value)
    assert f"cannot print {written} (instruction " in message and f"HLO has no opcode {opcode}" in message
    assert "the module is StableHLO, print it with the StableHLO printer" in message
    assert isinstance(refused.value, xlapy.XlapyError)


def test_the_cpu_backend_refuses_stablehlo_forms_in_one_line(tmp_path, capsys) -> None:
    assert main(["run", str(REGIONS), "--backend", "cpu", "--dump-to", str(tmp_path / "dump")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("xlapy: error: the CPU backend cannot run regions: ") and "stablehlo.while" in err
