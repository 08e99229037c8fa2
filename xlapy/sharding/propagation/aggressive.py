"""Aggressive propagation: basic propagation run with the aggressive factor
strategy (or the basic one, or the basic one first and then the aggressive
one), which resolves conflicts instead of stopping at them."""

from __future__ import annotations

from xlapy.sharding.propagation.aggressive_factor import AggressiveFactorPropagation
from xlapy.sharding.propagation.basic_factor import BasicFactorPropagation
from xlapy.sharding.propagation.directions import DirectionFn, propagate_any
from xlapy.sharding.propagation.driver import BasicPropagation
from xlapy.sharding.propagation.graph import ProgramGraph
from xlapy.sharding.propagation.groups import ShardingGroups

FACTOR_STRATEGIES = {
    "basic": (BasicFactorPropagation,),
    "aggressive": (AggressiveFactorPropagation,),
    "basic-then-aggressive": (BasicFactorPropagation, AggressiveFactorPropagation),
}


def aggressive_propagate(graph: ProgramGraph, groups: ShardingGroups, directions: DirectionFn = propagate_any,
                         factor_strategy: str = "aggressive") -> None:
    for factor_propagation in FACTOR_STRATEGIES[factor_strategy]:
        BasicPropagation(graph, groups, factor_propagation(), directions).run()
