"""Buffer assignment on whole JAX programs: after the CPU passes, and as
XLA:CPU optimised them, each program computed in its assigned buffers (in the
schedule's order, control flow copying as the runtime does) gives the
interpreter's values, and no value is overwritten while still needed."""

from __future__ import annotations

import functools

import pytest

from tools.buffer_replay import assert_replay_matches_interpreter
from tools.jax_corpus import PROGRAMS, flat_arguments
from xlapy.buffers.assignment import assign_buffers
from xlapy.buffers.schedule import schedule_module
from xlapy.frontends.jax import from_jax, optimized_from_jax
from xlapy.hlo import HloModule
from xlapy.transforms.cpu_pipeline import optimize

# Loops, conditionals, in-place updates: the programs whose buffers are the most intricate.
QUICK = ("cond_switch", "dynamic_slice_loop", "fori_loop", "scan_rnn", "while_loop", "mlp")


def _marks(name: str) -> list:
    return [] if name in QUICK else [pytest.mark.slow]


PARAMETERS = [pytest.param(name, marks=_marks(name)) for name in sorted(PROGRAMS)]


@functools.cache
def _optimized(name: str) -> HloModule:
    fn, args = PROGRAMS[name]
    module = from_jax(fn, *args)
    optimize(module)
    return module


def _check(module: HloModule, name: str) -> None:
    schedule = schedule_module(module)
    assert_replay_matches_interpreter(schedule, assign_buffers(module, schedule), flat_arguments(name), context=name)


@pytest.mark.parametrize("name", PARAMETERS)
def test_after_the_cpu_passes(name: str) -> None:
    _check(_optimized(name), name)


@pytest.mark.parametrize("name", PARAMETERS)
def test_as_xla_cpu_optimised_it(name: str) -> None:
    fn, args = PROGRAMS[name]
    _check(optimized_from_jax(fn, *args), name)
