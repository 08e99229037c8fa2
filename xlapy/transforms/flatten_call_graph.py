"""Give every computation called in control-flow context one call site.

As XLA's ``FlattenCallGraph`` (``xla/hlo/transforms/simplifiers/flatten_call_graph.cc``,
with the call contexts of ``xla/service/call_graph.cc``): a computation that
``call``, ``while`` (body or condition) or ``conditional`` instructions name at
more than one place is cloned for every such place but the first, and the
computations a clone calls in control-flow context are cloned too (the clone is
a new caller of theirs). Computations called in embedded context (reducers,
comparators, ``map``'s and ``scatter``'s computations, ...) stay shared; a
computation called in both contexts keeps its original for the embedded
callers and gets a clone at every control-flow call site. Fused computations
are owned by their fusion and are cloned with it. Computations that async ops
wrap are left alone, as XLA leaves them.

Unlike XLA's pass, which always reports a change, ``run`` says whether it
cloned anything.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloModule
from xlapy.transforms.call_graph import (
    BOTH,
    CallGraph,
    CallSite,
    async_computations,
    clone_computation,
    is_control_flow_call,
    replace_called_computation,
)
from xlapy.transforms.hlo_pass import HloPass


class FlattenCallGraph(HloPass):
    """Clones computations so that each has at most one control-flow call site."""

    name = "flatten-call-graph"

    def run(self, module: HloModule) -> bool:
        graph = CallGraph(module)
        wrapped = async_computations(module)
        changed = False
        for computation in list(graph.post_order()):
            if id(computation) in wrapped:
                continue
            both = graph.context.get(id(computation)) == BOTH
            control_flow_sites = [site for site in graph.callers[id(computation)] if site.is_control_flow]
            for site in control_flow_sites if both else control_flow_sites[1:]:
                self._give_own_copy(module, site)
                changed = True
        return changed

    @staticmethod
    def _give_own_copy(module: HloModule, site: CallSite) -> None:
        clone = clone_computation(site.instruction.called_computations[site.position], module)
        replace_called_computation(site.instruction, site.position, clone)
        # The clone is one more caller of its own control-flow callees: they get copies too.
        worklist = [clone]
        while worklist:
            current = worklist.pop()
            for instruction in current.instructions:
                if not is_control_flow_call(instruction):
                    continue
                for position, callee in enumerate(instruction.called_computations):
                    callee_clone = clone_computation(callee, module)
                    replace_called_computation(instruction, position, callee_clone)
                    worklist.append(callee_clone)
