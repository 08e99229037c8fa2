"""Shardy: meshes, tensor shardings, sharding rules and propagation."""

from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh, MeshAxis
from xlapy.sharding.op_sharding_rule import OpShardingRule
from xlapy.sharding.propagate import STRATEGIES, propagate
from xlapy.sharding.rules import op_sharding_rule
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding

__all__ = [
    "STRATEGIES", "AxisRef", "DimensionSharding", "Mesh", "MeshAxis", "OpShardingRule", "TensorSharding",
    "op_sharding_rule", "propagate",
]
