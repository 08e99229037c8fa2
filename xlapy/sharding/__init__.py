"""Shardy: meshes, tensor shardings, sharding rules and propagation.

Meshes, axis refs and shardings are imported here: the interpreter and the
frontends use them, so ``import xlapy`` loads them anyway. ``propagate``,
``STRATEGIES``, ``op_sharding_rule`` and ``OpShardingRule`` are imported on
first use, so that ``import xlapy`` does not load propagation and the
sharding rules of every op.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh, MeshAxis
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding

if TYPE_CHECKING:
    from xlapy.sharding.propagation.strategies import STRATEGIES, propagate
    from xlapy.sharding.rules.lookup import op_sharding_rule
    from xlapy.sharding.sharding_rule import OpShardingRule

__all__ = [
    "STRATEGIES", "AxisRef", "DimensionSharding", "Mesh", "MeshAxis", "OpShardingRule", "TensorSharding",
    "op_sharding_rule", "propagate",
]


def __getattr__(name: str) -> Any:
    # Called only for names not yet in the module (PEP 562); each is then kept.
    if name in ("propagate", "STRATEGIES"):
        from xlapy.sharding.propagation import strategies

        value = getattr(strategies, name)
    elif name == "op_sharding_rule":
        from xlapy.sharding.rules.lookup import op_sharding_rule as value
    elif name == "OpShardingRule":
        from xlapy.sharding.sharding_rule import OpShardingRule as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
