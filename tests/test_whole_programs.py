"""Whole JAX programs compiled for the CPU and run, against the reference interpreter.

Every program of the JAX corpus twice: the module jax lowers it to (unfused), through all of
``xlapy.compile`` (HLO passes, fusion, scheduling, buffer assignment, thunks); and the module XLA:CPU
optimised it to (its fusions, layouts and copies), run as it is (``run_hlo_passes=False``). Each result
is compared with the interpreter's on the same module: integers and pred bit for bit, floats within the
ulps of the element type's transcendental functions, and sums within the bound the corpus measured for
XLA:CPU's own summation order (the compiled code sums in another order than the interpreter, as XLA
does).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax

require_jax()

from tools.compare import assert_same, leaves  # noqa: E402
from tools.jax_corpus import PROGRAMS, TOLERANCES, Tolerance, flat_arguments  # noqa: E402
from tools.loop_fusion_compare import ulp_tolerance  # noqa: E402
from xlapy.frontends.jax import from_jax, optimized_from_jax  # noqa: E402
from xlapy.hlo.printer import print_module  # noqa: E402
from xlapy.interpreter.all_rules import RULES  # noqa: E402

LOWERED, OPTIMIZED = "lowered", "optimized"

# What xlapy.compile cannot compile yet: (program, LOWERED or OPTIMIZED) -> the UnimplementedError's
# message, word for word. These are strict xfails that must fail with exactly that message, so a fix
# (an XPASS) or a change in what is missing (a plain failure) is noticed; remove the entry when it passes.
NOT_COMPILED: dict[tuple[str, str], str] = {}

# The default run compiles these (a spread of fusions, dots, reductions, loops, sorts, scatters and
# narrow types) as jax lowers them, and half of them as XLA:CPU optimised them; `pytest -m slow` compiles every
# program both ways.
_DEFAULT = {LOWERED: {"mlp", "softmax", "layernorm", "attention", "scan_rnn", "cond_switch", "while_loop",
                      "dynamic_slice_loop", "gathers", "scatters", "sorting", "reductions", "integer_division",
                      "bf16_layernorm", "reshape_transpose", "argmax_argmin", "one_hot", "einsums"},
            OPTIMIZED: {"softmax", "attention", "while_loop", "gathers", "scatters", "sorting", "reductions",
                        "bf16_layernorm", "one_hot"}}


def _params(source: str) -> list[Any]:
    params = []
    for name in sorted(PROGRAMS):
        marks = [] if name in _DEFAULT[source] else [pytest.mark.slow]
        reason = NOT_COMPILED.get((name, source))
        if reason is not None:
            marks.append(pytest.mark.xfail(raises=xlapy.UnimplementedError, strict=True, reason=reason))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


@functools.cache
def _module(name: str, source: str) -> xlapy.HloModule:
    fn, args = PROGRAMS[name]
    return (from_jax if source == LOWERED else optimized_from_jax)(fn, *args)


def _compile(name: str, source: str) -> Any:
    """``xlapy.compile`` of the program's module; an UnimplementedError other than the one NOT_COMPILED
    expects is a plain failure."""
    try:
        return xlapy.compile(_module(name, source), backend="cpu", run_hlo_passes=source == LOWERED)
    except xlapy.UnimplementedError as error:
        expected = NOT_COMPILED.get((name, source))
        if expected is not None and str(error) != expected:
            raise AssertionError(f"{name} ({source}) no longer fails as NOT_COMPILED says:\n  now: {error}\n"
                                 f"  was: {expected}") from error
        raise


def _assert_matches_interpreter(name: str, source: str) -> None:
    """The compiled program's results on the corpus arguments are the interpreter's on the same module."""
    executable = _compile(name, source)
    module = _module(name, source)
    args = flat_arguments(name)
    got_leaves, expected_leaves = leaves(executable(*args)), leaves(xlapy.evaluate(module, *args))
    assert len(got_leaves) == len(expected_leaves), f"{name}: {len(got_leaves)} results, expected " \
                                                    f"{len(expected_leaves)}"
    sums = TOLERANCES.get(name, Tolerance())
    functions = ulp_tolerance(module)
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        keywords = sums.keywords(i, e)
        keywords["ulps"] = max(keywords["ulps"], functions)
        assert_same(g, e, **keywords, flush=True, context=f"{name} output {i}")


@pytest.mark.parametrize("name", _params(LOWERED))
def test_lowered_program_matches_interpreter(name: str) -> None:
    _assert_matches_interpreter(name, LOWERED)


@pytest.mark.parametrize("name", _params(OPTIMIZED))
def test_xla_optimized_program_matches_interpreter(name: str) -> None:
    _assert_matches_interpreter(name, OPTIMIZED)


def test_compile_leaves_the_module_unchanged() -> None:
    module = _module("mlp", LOWERED)
    before = print_module(module)
    _compile("mlp", LOWERED)
    assert print_module(module) == before


def test_results_are_arrays_the_caller_owns() -> None:
    executable = _compile("softmax", LOWERED)
    args = flat_arguments("softmax")
    first = [np.array(r, copy=True) for r in leaves(executable(*args))]
    results = leaves(executable(*args))
    for result in results:
        result[...] = 0
    again = leaves(executable(*args))
    for a, b in zip(first, again):
        assert_same(b, a, exact_bits=True)


# HLO opcodes the interpreter runs that no single-device JAX program lowers to (nor XLA:CPU optimises one
# into), with the reason; every other one must occur in some corpus program.
NOT_FROM_JAX = {
    "add-dependency": "token ordering, which JAX adds only around host callbacks",
    "after-all": "token ordering, which JAX adds only around host callbacks",
    "all-to-all": "JAX drops an all-to-all over a one-device mesh axis",
    "collective-broadcast": "JAX's pbroadcast has no CPU lowering",
    "domain": "made and removed inside XLA's sharding passes",
    "get-dimension-size": "dynamic shapes, which JAX does not lower to",
    "set-dimension-size": "dynamic shapes, which JAX does not lower to",
    "logistic": "JAX expands lax.logistic into exp and divide",
    "map": "JAX lowers lax.map to a while loop",
    "replica-id": "JAX's axis_index lowers to partition-id",
    "rng": "lax.rng_uniform's keys come from XLA's per-process generators (tests/runtime/test_rng.py)",
    "rng-get-and-update-state": "made by XLA's rng expander from rng (tests/runtime/test_rng.py)",
    "stochastic-convert": "no JAX primitive lowers to it",
    **{opcode: "an asynchronous form XLA:CPU does not make (compiled in tests/runtime/test_async_collectives.py)"
       for opcode in ("all-gather-start", "all-gather-done", "all-reduce-start", "all-reduce-done",
                      "collective-permute-start", "collective-permute-done", "copy-start", "copy-done",
                      "async-start", "async-update", "async-done")},
}


# Over every program of the corpus: with the slow tests, which compile them all (from the same cached modules).
@pytest.mark.slow
def test_corpus_covers_the_interpreters_hlo_opcodes() -> None:
    seen = {instr.opcode for name in PROGRAMS for source in (LOWERED, OPTIMIZED)
            for computation in _module(name, source).computations for instr in computation.instructions}
    # Names with a dot are the StableHLO frontend's own ops (sdy., stablehlo., chlo.), not HLO.
    hlo_opcodes = {opcode for opcode in RULES if "." not in opcode}
    assert sorted(hlo_opcodes - seen - NOT_FROM_JAX.keys()) == []
    assert sorted(seen & NOT_FROM_JAX.keys()) == []
    assert sorted(NOT_FROM_JAX.keys() - hlo_opcodes) == []
