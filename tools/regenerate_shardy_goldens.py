"""Regenerate the checked-in outputs of Shardy (openxla/shardy) that the
sharding tests compare xlapy with, from their inputs, with Shardy's passes as
jaxlib ships them (``tools/shardy.py``):

* ``tests/sharding/data/propagation/NAME.expected.mlir``: every program of
  ``NAME.mlir`` (split at ``// -----`` lines, as ``--split-input-file``)
  after the propagation pass of the strategy its first line names
  (``// RUN: xlapy sdy propagate --strategy S``; the pipeline by default), as
  Shardy prints the module, less the ``stablehlo.mesh`` attribute its
  printer adds to each mesh; the programs separated by ``// -----``.
* ``tests/sharding/data/op_sharding_rules.txt`` and
  ``op_sharding_rules_conservative.txt``: the rule line of every case (after
  ``=== name``), the rule that ``sdy-populate-op-sharding-rules`` (with
  ``conservative-propagation=true`` for the second file) attaches to the op
  marked ``xlapy.op`` in the case's ``--- stablehlo`` section, or ``none``.

Usage: ``python -m tools.regenerate_shardy_goldens [--check] [FILE ...]``.
By default every file (or each FILE) that differs from what Shardy gives is
rewritten; with ``--check`` nothing is written, and the files that differ
are listed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import re
import sys
from collections.abc import Sequence

from tools.shardy import ROOT, populated_rule, run_shardy, without_mesh_forms

DATA = ROOT / "tests" / "sharding" / "data"
PROPAGATION = DATA / "propagation"
RULE_FILES = {DATA / "op_sharding_rules.txt": False, DATA / "op_sharding_rules_conservative.txt": True}

_RUN = re.compile(r"//\s*RUN:\s*xlapy sdy propagate(?:\s+--strategy[= ](\S+))?")
_SEPARATOR = re.compile(r"// -----\s*")


def golden_files() -> list[pathlib.Path]:
    """Every checked-in Shardy output."""
    return sorted(PROPAGATION.glob("*.expected.mlir")) + list(RULE_FILES)


def run_strategy(text: str) -> str:
    """The strategy of a propagation test file: its first line must be its RUN line."""
    match = _RUN.search(text.splitlines()[0] if text else "")
    if match is None:
        raise ValueError("the first line must be '// RUN: xlapy sdy propagate [--strategy S]'")
    return match.group(1) or "pipeline"


def split_programs(text: str) -> list[str]:
    """The programs of a file, split at its ``// -----`` lines."""
    chunks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if _SEPARATOR.fullmatch(line.rstrip("\n")):
            chunks.append([])
        else:
            chunks[-1].append(line)
    return ["".join(chunk) for chunk in chunks]


def propagation_golden(source: str) -> str:
    """What ``NAME.expected.mlir`` holds for a test file ``NAME.mlir`` with text ``source``."""
    strategy = run_strategy(source)
    outputs = [without_mesh_forms(run_shardy(program, strategy)).rstrip("\n") + "\n"
               for program in split_programs(source)]
    return "\n// -----\n\n".join(outputs)


def rules_golden(text: str, conservative: bool) -> str:
    """``text`` (a rule data file) with each case's rule line as Shardy builds it."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("=== ")] + [len(lines)]
    for start, end in itertools.pairwise(starts):
        case = [line.rstrip("\n") for line in lines[start:end]]
        if "--- stablehlo" not in case:
            raise ValueError(f"case {case[0][4:]!r} has no '--- stablehlo' section")
        stablehlo = "\n".join(case[case.index("--- stablehlo") + 1:]).strip() + "\n"
        lines[start + 1] = populated_rule(stablehlo, conservative) + "\n"
    return "".join(lines)


def regenerate(path: pathlib.Path) -> str:
    """What the golden file ``path`` should hold."""
    path = path.resolve()
    if path in RULE_FILES:
        return rules_golden(path.read_text(), RULE_FILES[path])
    if path.parent == PROPAGATION and path.name.endswith(".expected.mlir"):
        return propagation_golden(path.with_name(path.name.replace(".expected.mlir", ".mlir")).read_text())
    raise ValueError(f"{path} is not one of the Shardy outputs")


def differing(paths: Sequence[pathlib.Path]) -> dict[pathlib.Path, str]:
    """The files of ``paths`` that differ from what Shardy gives -> Shardy's text."""
    found = {}
    for path in paths:
        text = regenerate(path)
        if path.read_text() != text:
            found[path] = text
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.regenerate_shardy_goldens",
                                     description="Regenerate the checked-in Shardy outputs of the sharding tests.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 listing the files that differ")
    parser.add_argument("files", nargs="*", type=pathlib.Path, help="golden files (default: all)")
    options = parser.parse_args(argv)
    paths = [p.resolve() for p in options.files] or golden_files()
    try:
        changed = differing(paths)
    except (OSError, ValueError) as error:
        print(f"regenerate_shardy_goldens: {error}", file=sys.stderr)
        return 2
    for path, text in changed.items():
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if options.check:
            print(f"differs from Shardy's output: {shown}")
        else:
            path.write_text(text)
            print(f"rewrote {shown}")
    return 1 if options.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
