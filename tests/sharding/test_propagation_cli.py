# ruff: noqa: E501  (MLIR lines are longer than the code's limit)
"""``xlapy sdy propagate FILE.mlir [--strategy S] [--split-input-file]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlapy.cli import main
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding import propagate

PROGRAM = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

SECOND = PROGRAM.replace('[{"a"}, {"b"}]', '[{"b"}, {}]').replace("@main", "@second")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["sdy", "propagate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_propagated_module(tmp_path: Path, capsys) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    code, out, err = run([str(path)], capsys)
    assert (code, err) == (0, "")
    assert out == print_module(propagate(parse_module(PROGRAM)))
    assert '%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}' in out


@pytest.mark.parametrize("strategy", ["basic", "aggressive", "op-priority", "user-priority"])
def test_strategy_option(strategy: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    code, out, _ = run([str(path), "--strategy", strategy], capsys)
    assert code == 0
    assert '%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>}' in out


def test_split_input_file_propagates_each_chunk_on_its_own(tmp_path: Path, capsys) -> None:
    path = tmp_path / "two.mlir"
    path.write_text(PROGRAM + "// -----\n" + SECOND)
    code, out, _ = run([str(path), "--split-input-file", "--strategy", "basic"], capsys)
    first, second = out.split("// -----\n")
    assert code == 0
    assert first == print_module(propagate(parse_module(PROGRAM), "basic"))
    assert second == print_module(propagate(parse_module(SECOND), "basic"))


def test_a_bad_chunk_is_one_error_line_and_nothing_printed(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.mlir"
    bad = SECOND.replace('{"b"}, {}', '{"z"}, {}')
    path.write_text(PROGRAM + "// -----\n" + bad)
    code, out, err = run([str(path), "--split-input-file"], capsys)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and '"z"' in err


def test_parse_errors_name_the_line_of_the_whole_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(PROGRAM + "// -----\n" + SECOND.replace("stablehlo.add", "stablehlo.add("))
    code, out, err = run([str(path), "--split-input-file"], capsys)
    # The add of the second chunk, counted in the whole file.
    broken = len(PROGRAM.splitlines()) + 1 + next(
        i for i, line in enumerate(SECOND.splitlines(), 1) if "stablehlo.add" in line)
    assert code == 1 and out == ""
    assert err.startswith(f"xlapy: error: {path}:{broken}:") and len(err.strip().splitlines()) == 1


def test_missing_file(tmp_path: Path, capsys) -> None:
    code, out, err = run([str(tmp_path / "nope.mlir")], capsys)
    assert code == 1 and out == "" and "cannot read" in err


# A shard_map as JAX prints it: manual axis "x" is left out of the in/out shardings.
SHARD_MAP = """sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<8x16xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}, {?}]>] out_shardings=[<@mesh, [{}, {?}]>] manual_axes={"x"} (%arg1: tensor<8x16xf32>) {
    %1 = stablehlo.multiply %arg1, %arg1 : tensor<8x16xf32>
    sdy.return %1 : tensor<8x16xf32>
  } : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = stablehlo.negate %0 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
"""

# Shardy's sdy-propagation-pipeline on SHARD_MAP (its mesh attribute for StableHLO left out).
SHARD_MAP_PROPAGATED = """module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"x"} (%arg1: tensor<8x16xf32>) {
      %2 = stablehlo.multiply %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>} : tensor<8x16xf32>
      sdy.return %2 : tensor<8x16xf32>
    } : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %1 = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>} : tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}
"""


def test_manual_axes_left_out_are_rejected_with_strict_manual_axes(tmp_path: Path, capsys) -> None:
    path = tmp_path / "shard_map.mlir"
    path.write_text(SHARD_MAP)
    code, out, err = run([str(path), "--strict-manual-axes"], capsys)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert ('sdy.manual_computation %0: invariant 2: manual axis "x" must shard a dimension or be replicated in '
            'in_shardings[0] <@mesh, [{}, {?}]>') in err
    assert "--strict-manual-axes" in err


def test_implicit_manual_replication_propagates_as_shardy(tmp_path: Path, capsys) -> None:
    path = tmp_path / "shard_map.mlir"
    path.write_text(SHARD_MAP)
    for flags in ([], ["--implicit-manual-replication"]):  # the default; the flag is kept for compatibility
        code, out, err = run([str(path), *flags], capsys)
        assert (code, err) == (0, "")
        assert out == SHARD_MAP_PROPAGATED
