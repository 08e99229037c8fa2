"""The reference interpreter on JAX programs: the HLO text JAX lowers each
corpus program to, evaluated by xlapy, against the jitted program's results."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, leaves
from tools.jax_corpus import PROGRAMS, TOLERANCES, Tolerance, flat_arguments, jax_result
from xlapy.frontends.jax import from_jax, optimized_from_jax
from xlapy.interpreter.evaluator import evaluate


def _compare(name: str, got: Any, expected: Any) -> None:
    got_leaves, expected_leaves = leaves(got), leaves(expected)
    assert len(got_leaves) == len(expected_leaves), f"{name}: {len(got_leaves)} outputs, jax has {len(expected_leaves)}"
    tolerance = TOLERANCES.get(name, Tolerance())
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        assert_same(g, e, **tolerance.keywords(i, e), flush=True, context=f"{name} output {i}")


@functools.cache
def _module(name: str) -> xlapy.HloModule:
    fn, args = PROGRAMS[name]
    return from_jax(fn, *args)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_lowered_program_matches_jax(name: str) -> None:
    module = _module(name)
    got = evaluate(module, *flat_arguments(name))
    _compare(name, got, jax_result(name))


def test_module_takes_every_flattened_argument() -> None:
    # Unused arguments stay parameters, so evaluate() takes the flattened example arguments as they are.
    module = from_jax(lambda x, unused, y: x * y, np.float32(2), np.zeros(3, np.int8), np.float32(3))
    assert [(p.shape.element_type, tuple(p.shape.dimensions)) for p in module.entry.parameters] == [
        ("f32", ()), ("s8", (3,)), ("f32", ())]
    assert float(evaluate(module, np.float32(2), np.zeros(3, np.int8), np.float32(3))) == 6.0


def test_from_jax_without_jax_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import xlapy.frontends.jax as frontend

    def missing(name: str) -> None:
        raise ImportError(f"No module named '{name}'")

    monkeypatch.setattr(frontend.importlib, "import_module", missing)
    with pytest.raises(xlapy.XlapyError, match="needs jax"):
        from_jax(lambda x: x, np.float32(1))


# Optimised modules contain fusions (evaluated by calling the fused computation), bitcasts, copies
# and layout changes. These programs exercise loop, reduction, transpose, dot, scatter, sort and
# control-flow fusions in the default run; the slow run takes every program's optimised module.
_OPTIMIZED = ["mlp", "layernorm", "softmax", "attention", "conv2d_nchw", "reshape_transpose", "hashing", "scan_rnn",
              "gathers", "scatters", "sorting", "pooling", "random_threefry", "cond_switch", "while_loop",
              "integer_division", "bf16_layernorm", "one_hot"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in _OPTIMIZED else [pytest.mark.slow])
                                  for n in sorted(PROGRAMS)])
def test_optimized_program_matches_jax(name: str) -> None:
    fn, args = PROGRAMS[name]
    module = optimized_from_jax(fn, *args)
    if name in _OPTIMIZED:
        assert any(i.opcode == "fusion" for c in module.computations for i in c.instructions)
    got = evaluate(module, *flat_arguments(name))
    _compare(name, got, jax_result(name))
