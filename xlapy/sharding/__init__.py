"""Shardy: meshes, tensor shardings, sharding rules and propagation.

The names below are loaded on first use, so that importing one submodule
(``xlapy.sharding.mesh``, as the interpreter and the frontends do) does not
load propagation and the sharding rules of every op.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xlapy.sharding.axis_ref import AxisRef
    from xlapy.sharding.mesh import Mesh, MeshAxis
    from xlapy.sharding.op_sharding_rule import OpShardingRule
    from xlapy.sharding.propagate import STRATEGIES, propagate
    from xlapy.sharding.rules.lookup import op_sharding_rule
    from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding

_HOMES = {
    "AxisRef": "axis_ref", "Mesh": "mesh", "MeshAxis": "mesh", "OpShardingRule": "op_sharding_rule",
    "STRATEGIES": "propagate", "propagate": "propagate", "op_sharding_rule": "rules",
    "DimensionSharding": "tensor_sharding", "TensorSharding": "tensor_sharding",
}

__all__ = [
    "STRATEGIES", "AxisRef", "DimensionSharding", "Mesh", "MeshAxis", "OpShardingRule", "TensorSharding",
    "op_sharding_rule", "propagate",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# ``propagate`` and ``op_sharding_rule`` name both a submodule and a function
# exported here: importing the submodule must not replace the function.
_SHADOWED = frozenset({"propagate", "op_sharding_rule"})


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
