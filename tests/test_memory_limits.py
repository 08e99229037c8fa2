"""Allocations that cannot succeed: foreseen by the size checks where possible
(the system's available memory and this process's address-space limit), and
an XlapyError, not a MemoryError, where they fail anyway."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import xlapy
from xlapy import memory
from xlapy.hlo import fake_arguments
from xlapy.hlo.fake_arguments import make_fake_arguments
from xlapy.interpreter.registry import RULES


def test_the_byte_limit_is_within_the_address_space_limit():
    script = """
import resource
from xlapy.memory import byte_limit
limit = 3 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
print(byte_limit() <= limit)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == "True", result.stderr


def test_a_failed_allocation_while_evaluating_is_an_xlapy_error(monkeypatch):
    module = xlapy.parse_hlo("HloModule m\nENTRY e { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }")

    def no_memory(*args):
        raise MemoryError

    monkeypatch.setitem(RULES, "negate", no_memory)
    with pytest.raises(xlapy.XlapyError, match=r"^out of memory evaluating m$"):
        xlapy.evaluate(module, np.zeros(4, np.float32))


def test_a_failed_allocation_of_random_arguments_is_an_xlapy_error(monkeypatch):
    module = xlapy.parse_hlo("HloModule m\nENTRY e { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }")

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(fake_arguments, "fake_argument", no_memory)
    with pytest.raises(xlapy.XlapyError, match=r"^out of memory making random arguments for m$"):
        make_fake_arguments(module)


@pytest.mark.parametrize("entry", ["evaluate", "compile"])
def test_a_failed_allocation_converting_an_argument_is_an_xlapy_error(monkeypatch, entry: str):
    # Converting floats for an integral parameter checks them in float64 first: twice the argument's bytes.
    from xlapy.hlo import arguments

    module = xlapy.parse_hlo("HloModule m\nENTRY e { p = s64[4] parameter(0)  ROOT n = s64[4] negate(p) }")
    run = xlapy.evaluate if entry == "evaluate" else lambda m, *args: xlapy.compile(m)(*args)

    def no_memory(*args):
        raise MemoryError

    monkeypatch.setattr(arguments, "_check_integral", no_memory)
    with pytest.raises(xlapy.XlapyError, match=r"^out of memory converting the argument for parameter p to s64\[4\]"):
        run(module, np.zeros(4, np.float32))


def test_results_made_afresh_are_checked_against_the_memory_available_then(monkeypatch):
    # The result (4 MiB) is handed to the caller: while the caller holds it, a later call makes the next one
    # afresh, and is refused before anything is allocated once the system reports less memory available. Once
    # the caller has dropped it, its memory is used again: a call needs nothing more.
    module = xlapy.parse_hlo("""HloModule m
ENTRY e { p = f32[] parameter(0)  ROOT b = f32[1048576] broadcast(p), dimensions={} }
""")
    run = xlapy.compile(module)
    held = run(np.float32(2))
    np.testing.assert_array_equal(held, np.full(1048576, 2, np.float32))
    monkeypatch.setattr(memory, "_available_memory", lambda: 1 << 20)
    with pytest.raises(xlapy.XlapyError, match=r"^the output of broadcast b needs 4 MiB .*more than the 1 MiB"):
        run(np.float32(2))
    del held
    np.testing.assert_array_equal(run(np.float32(3)), np.full(1048576, 3, np.float32))
