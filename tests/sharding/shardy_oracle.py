"""Shardy as the oracle of the sharding tests: what the tests that run it
(through jaxlib, with ``tools/shardy.py``) share.

jax and jaxlib are dev dependencies, so with the dev extra installed these
tests run, and a missing jax or Shardy makes them fail or error rather than
skip. ``XLAPY_NO_JAX=1`` in the environment opts out explicitly: the tests
that need Shardy are then skipped (``tools/oracles.py``).

Where Shardy itself fails on a program (refuses it, or crashes), a test may
only skip if the program is on its module's list of known failures, with the
reason Shardy gives; a listed program that Shardy now accepts, or a failure
that is not listed or has another reason, fails the test.
"""

from __future__ import annotations

import re

import pytest

from tools.oracles import NO_JAX, OPTED_OUT, require_jax
from tools.shardy import Outcome, without_mesh_forms
from xlapy.frontends.stablehlo import parse_module, print_module

needs_shardy = pytest.mark.skipif(NO_JAX, reason=OPTED_OUT)


def require_shardy() -> None:
    """For a test module that runs Shardy: skip it under ``XLAPY_NO_JAX=1``;
    otherwise load jaxlib's Shardy bindings, whose absence is then an error."""
    require_jax()
    from jaxlib.mlir.dialects import sdy  # noqa: F401


def shardy_output(outcome: Outcome, known_failure: str | None) -> str:
    """Shardy's output, to compare with. Where Shardy failed, the test skips
    if ``known_failure`` (a pattern of Shardy's reason) says it fails so, and
    fails otherwise; it also fails if a known failure no longer happens."""
    if known_failure is None:
        if outcome.failure is not None:
            pytest.fail(f"Shardy fails on a program not listed as a known failure:\n{outcome.failure}")
        assert outcome.output is not None
        return outcome.output
    if outcome.failure is None:
        pytest.fail(f"Shardy now accepts a program listed as a known failure ({known_failure!r}): "
                    "take it off the list")
    if not re.search(known_failure, outcome.failure):
        pytest.fail(f"Shardy fails on a listed program for another reason than {known_failure!r}:\n"
                    f"{outcome.failure}")
    pytest.skip(f"Shardy itself fails on this program, as listed: {known_failure}")


def canonical(text: str) -> str:
    """The module as xlapy prints it, without the StableHLO forms of meshes,
    SSA values renamed in order of appearance within each function: the
    same for two printings of one module whatever names each gave."""
    text = print_module(parse_module(without_mesh_forms(text)))
    parts = []
    for part in re.split(r"(?=func\.func )", text):
        names: dict[str, str] = {}

        def rename(match: re.Match, names: dict[str, str] = names) -> str:
            names.setdefault(match.group(1), f"%v{len(names)}")
            return names[match.group(1)] + (match.group(2) or "")

        parts.append(re.sub(r"%([A-Za-z_][\w.$]*|\d+)(#\d+)?", rename, part))
    return "".join(parts)
