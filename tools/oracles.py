"""Whether a test may use the references that come through jax and jaxlib:
XLA's HLO parser and printer, XLA:CPU, MLIR's parser and Shardy.

jax and jaxlib are dev dependencies, so with the dev extra installed these
tests run, and a missing or broken jax or jaxlib makes them fail or error
(an ImportError, never a skip). ``XLAPY_NO_JAX=1`` in the environment opts
out explicitly: the tests that need jax are then skipped, with that reason.
"""

from __future__ import annotations

import os
from types import ModuleType

NO_JAX = os.environ.get("XLAPY_NO_JAX") == "1"
OPTED_OUT = "XLAPY_NO_JAX=1: the tests that compare with JAX, XLA or Shardy (through jaxlib) are left out"


def require_jax() -> ModuleType:
    """``jax``, for a test or test module that compares with it or with XLA:
    under ``XLAPY_NO_JAX=1`` the test (or, at module level, the module) is
    skipped; otherwise jax is imported, and a failure to do so propagates."""
    if NO_JAX:
        import pytest

        pytest.skip(OPTED_OUT, allow_module_level=True)
    import jax

    return jax
