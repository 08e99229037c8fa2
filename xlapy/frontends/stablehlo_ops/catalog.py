"""Every op the frontend knows, by MLIR name: importing the modules of the
families registers their specs (``registry.py``)."""

from __future__ import annotations

from xlapy.frontends.stablehlo_ops import (  # noqa: F401 - importing a family registers its ops
    calls,
    collectives,
    control_flow,
    data_movement,
    elementwise,
    linalg,
    sdy,
)
from xlapy.frontends.stablehlo_ops.registry import REGISTRY, OpSpec


def spec_for(name: str) -> OpSpec | None:
    return REGISTRY.get(name)


def all_specs() -> dict[str, OpSpec]:
    """Every registered op, by MLIR name."""
    return dict(REGISTRY)
