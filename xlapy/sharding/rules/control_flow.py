"""Control flow and the Shardy ops: no rules. Propagation crosses StableHLO's
while, case, if and optimization barriers, and calls, along data-flow edges
(each result with its operands and region values); HLO's while, conditional
and opt-barrier (a tuple state) are not followed. The sdy ops carry
shardings themselves; a sharding constraint is pointwise (elementwise.py)."""

from __future__ import annotations

from xlapy.sharding.rules.registry import no_rule

no_rule("while", "conditional", "call", "opt-barrier", "sdy.manual_computation", "sdy.data_flow_edge",
        "sdy.propagation_barrier", "sdy.sharding_group", "sdy.reshard", "stablehlo.while", "stablehlo.case",
        "stablehlo.if", "stablehlo.optimization_barrier")
