"""The reference interpreter's differential coverage: which opcodes are checked
against XLA:CPU on which element types, as a table.

    python -m benchmarks.interpreter_coverage            # what the tests cover
    python -m benchmarks.interpreter_coverage --run      # run every case, mark pass/FAIL
    python -m benchmarks.interpreter_coverage --no-slow  # only the default (non-slow) test run
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from tools.interpreter_coverage import (
    COVERED,
    FAILED,
    PASSED,
    SLOW_ONLY,
    coverage_table,
    dtypes_of,
    summary,
)
from tools.op_cases import CASES, DTYPES

_CELL = {COVERED: "[green]✓[/]", PASSED: "[green]✓[/]", SLOW_ONLY: "[yellow]s[/]", FAILED: "[bold red]✗[/]"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="run every case against XLA:CPU and mark failures")
    parser.add_argument("--no-slow", action="store_true", help="leave out the cases of the slow test run")
    args = parser.parse_args(argv)
    include_slow = not args.no_slow
    console = Console(width=max(Console().width, 28 + sum(max(len(t), 3) + 3 for t in DTYPES)))
    if args.run:
        total = sum(1 for c in CASES if include_slow or not c.slow)
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("running cases", total=total)
            table = coverage_table(run=True, include_slow=include_slow,
                                   progress=lambda case: progress.advance(task))
    else:
        table = coverage_table(include_slow=include_slow)
    dtypes = dtypes_of(table)
    grid = Table(title="opcode × element type checked against XLA:CPU", show_lines=False)
    grid.add_column("opcode", style="bold", no_wrap=True)
    for dtype in dtypes:
        grid.add_column(dtype, justify="center", min_width=len(dtype), no_wrap=True)
    for opcode, row in table.items():
        grid.add_row(opcode, *(_CELL.get(row.get(dtype, ""), "") for dtype in dtypes))
    console.print(grid)
    legend = "✓ checked by the default test run, s only by `pytest -m slow`"
    if args.run:
        legend = "✓ every case passes, ✗ a case fails"
    console.print(legend)
    console.print(summary(table))
    return 1 if any(status == FAILED for row in table.values() for status in row.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
