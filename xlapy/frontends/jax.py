"""JAX programs as HLO modules: the HLO text JAX lowers a jitted function to,
parsed into xlapy's IR. JAX is an optional dependency (the ``jax`` extra)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from xlapy.errors import XlapyError
from xlapy.hlo import HloModule, parse_module


def _jax() -> Any:
    try:
        return importlib.import_module("jax")
    except ImportError:
        raise XlapyError("the JAX frontend needs jax and jaxlib: pip install 'xlapy[jax]'") from None


def lowered_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The HLO text of ``jax.jit(fn)`` lowered for ``args`` (before XLA's optimisations)."""
    return _jax().jit(fn, keep_unused=True).lower(*args, **kwargs).as_text(dialect="hlo")


def optimized_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The HLO text of ``jax.jit(fn)`` compiled for ``args`` by the default
    backend (after XLA's optimisations: fusions, layouts, copies)."""
    return _jax().jit(fn, keep_unused=True).lower(*args, **kwargs).compile().as_text()


def from_jax(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> HloModule:
    """The HLO module ``jax.jit(fn)`` lowers to for the example ``args``
    (arrays or ``jax.ShapeDtypeStruct``s; keyword arguments are passed too).

    The entry computation takes the leaves of ``(args, kwargs)`` in
    ``jax.tree.leaves`` order, unused ones included, so
    ``xlapy.evaluate(module, *jax.tree.leaves((args, kwargs)))`` runs it."""
    return parse_module(lowered_text(fn, *args, **kwargs), source=getattr(fn, "__name__", None))


def optimized_from_jax(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> HloModule:
    """The HLO module of ``jax.jit(fn)`` after XLA has compiled it for ``args``."""
    return parse_module(optimized_text(fn, *args, **kwargs), source=getattr(fn, "__name__", None))
