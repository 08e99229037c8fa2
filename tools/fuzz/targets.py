"""The entry points under test, by name: how to generate an input and how to
run it, and the classification of what happened in-process."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from tools.fuzz import targets_cli, targets_jax, targets_run, targets_text
from tools.fuzz.outcome import Outcome, from_exception


@dataclass(frozen=True)
class EntryPoint:
    generate: Callable[[random.Random], dict]
    run: Callable[[dict], Outcome | None]


ENTRY_POINTS: dict[str, EntryPoint] = {
    "parse_shape": EntryPoint(targets_text.generate_shape, targets_text.run_shape),
    "parse_hlo": EntryPoint(targets_text.generate_hlo, targets_text.run_hlo),
    "verify": EntryPoint(targets_text.generate_verify, targets_text.run_verify),
    "IndexingMap.parse": EntryPoint(targets_text.generate_indexing_map, targets_text.run_indexing_map),
    "stablehlo.parse_module": EntryPoint(targets_text.generate_stablehlo, targets_text.run_stablehlo),
    "evaluate": EntryPoint(targets_run.generate_evaluate, targets_run.run_evaluate),
    "compile": EntryPoint(targets_run.generate_compile, targets_run.run_compile),
    "kernel_cache": EntryPoint(targets_run.generate_kernel_cache, targets_run.run_kernel_cache),
    "cli_run": EntryPoint(targets_cli.generate_cli_run, targets_cli.run_cli_run),
    "cli_indexing": EntryPoint(targets_cli.generate_cli_indexing, targets_cli.run_cli_indexing),
    "cli_layout": EntryPoint(targets_cli.generate_cli_layout, targets_cli.run_cli_layout),
    "cli_sdy": EntryPoint(targets_cli.generate_cli_sdy, targets_cli.run_cli_sdy),
    "jit": EntryPoint(targets_jax.generate_jit, targets_jax.run_jit),
}

# In-process runs are safe for these (pure Python, bounded work); the others
# may crash or hang the process and belong in a worker.
PURE_PYTHON = ("parse_shape", "parse_hlo", "verify", "IndexingMap.parse", "stablehlo.parse_module", "evaluate")


def case_for(entry: str, seed: int, index: int) -> dict:
    """The ``index``-th input of ``entry`` for ``seed``: independent of how
    many inputs ran before, so that two runs compare input by input."""
    rng = random.Random(f"{seed}:{entry}:{index}")
    return ENTRY_POINTS[entry].generate(rng)


def run_case(entry: str, case: dict) -> Outcome:
    """Runs one input in this process; XlapyError is a clean error, any other
    exception (RecursionError, MemoryError, ...) is a failure."""
    from xlapy.errors import XlapyError

    try:
        result = ENTRY_POINTS[entry].run(case)
    except XlapyError as e:
        return Outcome("clean_error", type(e).__name__, message=str(e)[:300])
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return from_exception(e)
    return result or Outcome("ok")
