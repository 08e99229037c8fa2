"""Which opcodes the differential tests check against XLA:CPU, on which element types.

``coverage_table()`` reads the cases of ``tools.op_cases`` (without running
them, or running them when asked) and returns opcode -> dtype -> status.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.op_cases import CASES, DTYPES, Case, check_case

COVERED, SLOW_ONLY, PASSED, FAILED = "covered", "slow", "pass", "FAIL"


def _status(case: Case, run: bool) -> str:
    if not run:
        return SLOW_ONLY if case.slow else COVERED
    try:
        check_case(case)
    except Exception:
        return FAILED
    return PASSED


def coverage_table(run: bool = False, include_slow: bool = True,
                   progress: Callable[[Case], None] | None = None) -> dict[str, dict[str, str]]:
    """opcode -> dtype -> status over every differential case. Without ``run``
    a cell says ``covered`` when the default test run checks it and ``slow``
    when only ``pytest -m slow`` does; with ``run`` the cases are executed and
    a cell says ``pass``, or ``FAIL`` when any of its cases fails."""
    table: dict[str, dict[str, str]] = {}
    for case in CASES:
        if case.slow and not include_slow:
            continue
        status = _status(case, run)
        if progress is not None:
            progress(case)
        row = table.setdefault(case.opcode, {})
        previous = row.get(case.dtype)
        if previous is None or (previous == SLOW_ONLY and status == COVERED) or status == FAILED:
            row[case.dtype] = status
    return dict(sorted(table.items()))


def dtypes_of(table: dict[str, dict[str, str]]) -> list[str]:
    """The element types that appear in ``table``, in the order of the test's dtype list."""
    seen = {dtype for row in table.values() for dtype in row}
    return [t for t in DTYPES if t in seen] + sorted(seen - set(DTYPES))


def summary(table: dict[str, dict[str, str]]) -> str:
    """One line: opcodes × element types, and how many (opcode, dtype) cells are tested."""
    cells = sum(len(row) for row in table.values())
    failed = sum(status == FAILED for row in table.values() for status in row.values())
    line = f"interpreter coverage: {len(table)} opcodes × {len(dtypes_of(table))} dtypes, {cells} (opcode, dtype) pairs"
    return line + (f", {failed} failing" if failed else "")
