"""Whole JAX programs compiled by ``xlapy.compile`` (the CPU pass pipeline, buffer assignment, thunks) against
the reference interpreter on the module JAX lowers to: integers and pred bit for bit, floats within the
corpus's documented tolerances (the compiled code sums and approximates functions as XLA:CPU does, the
interpreter in its own order)."""

from __future__ import annotations

import functools

import pytest

import xlapy
from tools.compare import assert_same, leaves
from tools.jax_corpus import PROGRAMS, TOLERANCES, Tolerance, flat_arguments
from xlapy.frontends.jax import from_jax

# A few quick programs covering loops, conditionals, library calls and kernels run by default; the whole
# corpus is slow.
QUICK = ("cond_switch", "mlp", "scan_rnn", "integer_division", "while_loop")
COMPILED = sorted(PROGRAMS)


@functools.cache
def _module(name: str) -> xlapy.HloModule:
    fn, args = PROGRAMS[name]
    return from_jax(fn, *args)


def _check(name: str) -> xlapy.Executable:
    module = _module(name)
    text = module.to_text()
    args = flat_arguments(name)
    executable = xlapy.compile(module)
    assert module.to_text() == text, "compile changed the caller's module"
    got, expected = executable(*args), xlapy.evaluate(module, *args)
    got_leaves, expected_leaves = leaves(got), leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    tolerance = TOLERANCES.get(name, Tolerance())
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        assert_same(g, e, **tolerance.keywords(i, e), flush=True, context=f"{name} output {i}")
    return executable


@pytest.mark.parametrize("name", QUICK)
def test_quick_programs_match_the_interpreter(name: str) -> None:
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in COMPILED if n not in QUICK])
def test_corpus_program_matches_the_interpreter(name: str) -> None:
    _check(name)


def test_summary_counts_kernels_library_calls_and_bytes() -> None:
    executable = _check("mlp")
    summary = executable.summary
    assert summary.kernels == len(executable.kernels) > 0
    assert summary.library_calls == 2  # the two matrix products
    assert summary.buffer_bytes == executable.assignment.total_bytes > 0
    text = str(summary)
    assert text.startswith("compiled jit_mlp: ") and ", 2 library calls, " in text and text.endswith(" s")


def test_progress_reports_each_stage_and_kernel(tmp_path) -> None:
    stages: list[str] = []
    module = _module("while_loop")
    xlapy.compile(module, progress=stages.append, dump_to=str(tmp_path))
    assert stages[:4] == ["verifying", "HLO passes", "scheduling and buffer assignment", "thunks"]
    kernels = [s for s in stages[4:] if s.startswith("kernel ")]
    assert kernels and kernels[-1].startswith(f"kernel {len(kernels)}/{len(kernels)}: ")
    assert (tmp_path / f"{module.name}.after_optimizations.hlo").is_file()
    assert "allocation 0:" in (tmp_path / f"{module.name}.buffer_assignment.txt").read_text()


def test_without_hlo_passes_the_module_runs_as_given() -> None:
    module = _module("cond_switch")
    args = flat_arguments("cond_switch")
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert executable.module.to_text() == module.to_text()
    assert_same(executable(*args), xlapy.evaluate(module, *args))
