"""Propagation on the test files of tests/sharding/data/propagation: each
``NAME.mlir`` starts with ``// RUN: xlapy sdy propagate --strategy S`` and
holds programs separated by ``// -----`` (as ``--split-input-file``); each is
propagated with strategy S and must print as the matching program of
``NAME.expected.mlir`` up to SSA names. Every expected program is what
Shardy itself (the passes jaxlib ships, run on the same program) prints:
``tools/regenerate_shardy_goldens.py`` makes them, and
``test_shardy_goldens.py`` checks that they are Shardy's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sharding.shardy_oracle import canonical
from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file
from xlapy.sharding import STRATEGIES, propagate

DATA = Path(__file__).parent / "data" / "propagation"
FILES = sorted(p for p in DATA.glob("*.mlir") if not p.name.endswith(".expected.mlir"))
_RUN = re.compile(r"//\s*RUN:\s*xlapy sdy propagate(?:\s+--strategy[= ](\S+))?")


def _strategy(text: str) -> str:
    match = _RUN.search(text.splitlines()[0])
    assert match, "the first line must be a RUN line"
    return match.group(1) or "pipeline"


def _cases() -> list[tuple[str, int, str, str, str]]:
    cases = []
    for path in FILES:
        text = path.read_text()
        strategy = _strategy(text)
        inputs = [chunk for chunk, _ in split_input_file(text)]
        expected = [chunk for chunk, _ in split_input_file(path.with_suffix(".expected.mlir").read_text())]
        assert len(inputs) == len(expected), path.name
        for index, (program, want) in enumerate(zip(inputs, expected)):
            cases.append((path.stem, index, strategy, program, want))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "index", "strategy", "program", "expected"), CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_propagation_matches_shardy(name: str, index: int, strategy: str, program: str, expected: str) -> None:
    got = print_module(propagate(parse_module(program), strategy))
    assert canonical(got) == canonical(expected)


def test_every_strategy_is_covered() -> None:
    assert {case[2] for case in CASES} == set(STRATEGIES)
