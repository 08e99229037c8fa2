# ruff: noqa: E501  (MLIR lines are longer than the code's limit)
"""The strategies as a whole: each reaches a fixed point (propagating its own
result again changes nothing, except where Shardy's own single sweep leaves
work undone), they form Shardy's hierarchy on a program where the levels
differ, and a program of about 10,000 ops propagates in reasonable time."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlapy.errors import XlapyError
from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file
from xlapy.sharding import STRATEGIES, propagate

DATA = Path(__file__).parent / "data" / "propagation"
CHUNKS = [(f"{path.stem}-{index}", chunk)
          for path in sorted(DATA.glob("*.mlir")) if not path.name.endswith(".expected.mlir")
          for index, (chunk, _) in enumerate(split_input_file(path.read_text()))]
# Where propagating the result again still changes something, as in Shardy:
# the basic and aggressive strategies sweep the program once, so a while
# loop's body is not revisited when the loop's result gets a sharding from a
# later op; the pipeline's output has reshards in front of calls whose
# operands are sharded differently from the callee's arguments.
NOT_FIXED = {("while_basic-1", "basic"), ("while_basic-1", "aggressive"),
             ("data_flow-3", "basic"), ("data_flow-3", "aggressive"),
             ("control_flow_pipeline-3", "basic"), ("control_flow_pipeline-3", "aggressive"),
             ("calls_pipeline-3", "pipeline")}


def propagated(text: str, strategy: str) -> str:
    return print_module(propagate(parse_module(text), strategy))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_reaches_a_fixed_point(strategy: str) -> None:
    for name, chunk in CHUNKS:
        once = propagated(chunk, strategy)
        again = propagated(once, strategy)
        assert (again == once) != ((name, strategy) in NOT_FIXED), name


def test_the_pipeline_ends_with_closed_shardings() -> None:
    # Its propagation reached a fixed point; its export closed every sharding.
    for _, chunk in CHUNKS:
        assert "?}" not in propagated(chunk, "pipeline")


# The dot's operands disagree on which dimension of its result gets "a": the
# basic strategy gives up, the aggressive one (and op-priority, which ends
# with it) follows the larger source (the rhs), user priorities override that.
HIERARCHY = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}PA, {?}]>},
                %arg1: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}PB]>},
                %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
"""


def _dot_and_add(text: str) -> tuple[str, str]:
    lines = [line for line in text.splitlines() if "stablehlo.dot_general" in line or "stablehlo.add" in line]
    shardings = []
    prefix = "sharding_per_value<["
    for line in lines:
        start = line.find(prefix)
        shardings.append(None if start < 0 else line[start + len(prefix):line.find("]>]>}", start) + 2])
    return tuple(shardings)


@pytest.mark.parametrize("strategy, priorities, expected", [
    ("basic", ("", ""), (None, None)),
    ("aggressive", ("", ""), ('<@mesh, [{?}, {"a", ?}]>', '<@mesh, [{?}, {"a", ?}]>')),
    ("op-priority", ("", ""), ('<@mesh, [{?}, {"a", ?}]>', '<@mesh, [{?}, {"a", ?}]>')),
    ("user-priority", ("p1", "p0"), ('<@mesh, [{?}, {"a", ?}]>', '<@mesh, [{?}, {"a", ?}]>')),
    ("user-priority", ("p0", "p1"), ('<@mesh, [{"a", ?}, {?}]>', '<@mesh, [{"a", ?}, {?}]>')),
])
def test_the_strategies_resolve_a_conflict_differently(strategy, priorities, expected) -> None:
    text = HIERARCHY.replace("PA", priorities[0]).replace("PB", priorities[1])
    assert _dot_and_add(propagated(text, strategy)) == expected


def test_unknown_strategy_is_an_error() -> None:
    with pytest.raises(XlapyError, match="unknown propagation strategy 'greedy'"):
        propagate(parse_module(HIERARCHY.replace("PA", "").replace("PB", "")), "greedy")


def _long_program(layers: int) -> str:
    """About 4 ops per layer: dot, tanh, add, multiply (plus their constants)."""
    lines = ['sdy.mesh @mesh = <["x"=2, "y"=4]>',
             'func.func @main(%arg0: tensor<128x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, '
             '%arg1: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<128x64xf32> {']
    previous = "%arg0"
    for i in range(layers):
        lines += [
            f"  %d{i} = stablehlo.dot_general {previous}, %arg1, contracting_dims = [1] x [0] : "
            "(tensor<128x64xf32>, tensor<64x64xf32>) -> tensor<128x64xf32>",
            f"  %t{i} = stablehlo.tanh %d{i} : tensor<128x64xf32>",
            f"  %a{i} = stablehlo.add %t{i}, {previous} : tensor<128x64xf32>",
            f"  %m{i} = stablehlo.multiply %a{i}, %a{i} : tensor<128x64xf32>",
        ]
        previous = f"%m{i}"
    lines += [f"  return {previous} : tensor<128x64xf32>", "}"]
    return "\n".join(lines)


# The whole pipeline (whose propagation is the user-priority one, built on the
# op-priority and basic ones) by default, the other strategies under -m slow.
@pytest.mark.parametrize("strategy", [s if s == "pipeline" else pytest.param(s, marks=pytest.mark.slow)
                                      for s in STRATEGIES])
def test_ten_thousand_ops_carry_the_sharding_to_the_end(strategy: str) -> None:
    # How long this takes is measured by benchmarks/sharding_propagation.py.
    module = parse_module(_long_program(2500))
    propagate(module, strategy)
    last = module.entry.root
    assert str(last.sdy_sharding.body()).startswith('<@mesh, [{"x"')
