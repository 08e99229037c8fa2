"""Generated bad input, bounded: every entry point either accepts an input or
rejects it with an XlapyError (the command line: exit 1 and one stderr line
``xlapy: error: ...``), never another exception, a hang, a crash or a wrong
answer. The generators and the classification are the fuzzing harness's
(``tools/fuzz``); ``tools/fuzz_entry_points.py`` runs the same for longer.

Pure-Python entry points run in this process; compiling, the kernel cache
and the command line run in a worker process, so that a crash or a hang
fails the test instead of killing the run."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.fuzz.outcome import Outcome  # noqa: E402
from tools.fuzz.pool import Worker  # noqa: E402
from tools.fuzz.targets import ENTRY_POINTS, run_case  # noqa: E402
from tools.fuzz.targets_text import generate_hlo  # noqa: E402

ACCEPTABLE = ("ok", "clean_error")
# Inputs that would allocate gigabytes stay out of this process (the worker caps its memory).
_LARGE_NUMBER = re.compile(r"\d{7,}")

quick = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
in_worker = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


def _explain(entry: str, case: dict, outcome: Outcome) -> str:
    return (f"{entry}: {outcome.outcome} {outcome.type} at {outcome.where} ({outcome.deepest}): {outcome.message}\n"
            f"input: {case!r:.3000}")


def _check_in_process(entry: str, rng: random.Random) -> None:
    # The verifier's timing input (tens of thousands of instructions) is for the long runs only.
    case = generate_hlo(rng) if entry == "verify" else ENTRY_POINTS[entry].generate(rng)
    if entry == "evaluate" and _LARGE_NUMBER.search(case["text"]):
        return
    outcome = run_case(entry, case)
    assert outcome.outcome in ACCEPTABLE, _explain(entry, case, outcome)


@pytest.mark.parametrize("entry", ["parse_shape", "parse_hlo", "verify", "IndexingMap.parse",
                                   "stablehlo.parse_module"])
@quick
@given(rng=st.randoms(use_true_random=False))
def test_parsers_raise_only_xlapy_errors(entry: str, rng: random.Random) -> None:
    _check_in_process(entry, rng)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False))
def test_evaluate_raises_only_xlapy_errors(rng: random.Random) -> None:
    _check_in_process("evaluate", rng)


@pytest.fixture(scope="module")
def worker():
    # A short timeout: every generated input is small and runs in well under a second.
    pool = Worker(timeout=8.0, memory_bytes=4 << 30)
    yield pool
    pool.close()


@pytest.mark.parametrize("entry", ["compile", "kernel_cache", "cli_run", "cli_indexing", "cli_layout", "cli_sdy"])
@in_worker
@given(rng=st.randoms(use_true_random=False))
def test_native_and_command_line_entry_points_fail_cleanly(worker: Worker, entry: str, rng: random.Random) -> None:
    case = ENTRY_POINTS[entry].generate(rng)
    outcome, _ = worker.run(entry, case)
    assert outcome.outcome in ACCEPTABLE, _explain(entry, case, outcome)


def test_worker_runs_the_xlapy_under_test(worker: Worker) -> None:
    """The harness measures the checkout it is pointed at, not another copy."""
    import xlapy

    worker.run("parse_shape", {"text": "f32[2]"})
    assert Path(worker.xlapy_file).resolve() == Path(xlapy.__file__).resolve()


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False), command=st.sampled_from(["run", "indexing", "sdy"]))
def test_command_line_process_prints_one_error_line(tmp_path_factory, rng: random.Random, command: str) -> None:
    """The real ``xlapy`` process on a generated file: exit 0, or exit 1 with
    exactly one stderr line; never a traceback or a signal."""
    directory = tmp_path_factory.mktemp("cli")
    entry = {"run": "cli_run", "indexing": "cli_indexing", "sdy": "cli_sdy"}[command]
    case = ENTRY_POINTS[entry].generate(rng)
    path = directory / ("m.mlir" if command == "sdy" else "m.hlo")
    path.write_bytes(case["file"])
    flags = [f for f in case["flags"] if f not in ("--bench", "--compare", "--dump-to", "dumps")]
    argv = ["sdy", "propagate", str(path)] if command == "sdy" else [command, str(path)]
    if command == "run":
        flags = ["--backend", "interpreter"]
    result = subprocess.run([sys.executable, "-m", "xlapy.cli", *argv, *flags], capture_output=True, text=True,
                            timeout=60, cwd=directory, errors="replace")
    lines = result.stderr.splitlines()
    assert result.returncode in (0, 1), result.stderr[-2000:]
    if result.returncode == 1:
        assert len(lines) == 1 and lines[0].startswith("xlapy: error: "), result.stderr[-2000:]


@pytest.mark.parametrize("entry, kind", [("cli_sdy", "mlir_modules"), ("cli_indexing", "hlo_modules")])
def test_every_seed_module_runs_or_fails_cleanly(entry: str, kind: str) -> None:
    """The unedited seeds (the test data the generators start from) are real
    programs: the command either handles each one or reports a clean error."""
    from tools.fuzz import seeds

    failures = []
    for text in getattr(seeds, kind)():
        outcome = run_case(entry, {"file": text.encode(), "flags": []})
        if outcome.outcome not in ACCEPTABLE:
            failures.append(_explain(entry, {"file": text[:400]}, outcome))
    assert not failures, f"{len(failures)} seeds fail, the first:\n{failures[0]}"
