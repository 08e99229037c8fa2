"""Shardy's sharding propagation: give every tensor of a module a sharding,
from the shardings the user gave some of them.

Strategies, each built on the one before (Shardy's hierarchy); the first
four are Shardy's propagation passes run on their own (``sdy-basic-propagate``
and so on), the last one its whole pipeline:

- ``basic``: propagate what all tensors of an op agree on, no conflict resolution;
- ``aggressive``: resolve conflicts between factors (prefer the larger source);
- ``op-priority``: aggressive propagation through pass-through ops first, then
  along pass-through factors, then everywhere;
- ``user-priority``: op-priority propagation in rounds of the user's priorities
  ``p0``, ``p1``, ...;
- ``pipeline`` (default): Shardy's propagation pipeline: its import steps
  (e.g. applying sharding constraints, splitting constants, data-flow edges
  for control flow and manual computations, a copy of a function per call),
  user-priority propagation, and its export steps (e.g. sharding constraints
  become reshards, function copies are merged back, every sharding ends
  closed), and last ``sdy.reshard`` ops where a concatenate's operands or a
  dot's result disagree with the op's one sharding per factor.

Without the pipeline, only explicit ``sdy.data_flow_edge`` ops connect the
values of control flow, calls are not crossed, and only ``@main`` exchanges
shardings with its results (as when Shardy's passes run on their own).
"""

from __future__ import annotations

from xlapy.errors import XlapyError
from xlapy.hlo import HloModule
from xlapy.sharding.propagation.aggressive import aggressive_propagate
from xlapy.sharding.propagation.driver import BasicPropagation
from xlapy.sharding.propagation.op_priority import op_priority_propagate
from xlapy.sharding.propagation.pipeline import prepare, run_pipeline
from xlapy.sharding.propagation.user_priority import user_priority_propagate

STRATEGIES = ("basic", "aggressive", "op-priority", "user-priority", "pipeline")


def propagate(module: HloModule, strategy: str = "pipeline") -> HloModule:
    """Propagate shardings through ``module`` in place; returns it."""
    if strategy not in STRATEGIES:
        raise XlapyError(f"unknown propagation strategy '{strategy}'; expected one of {', '.join(STRATEGIES)}")
    if strategy == "pipeline":
        run_pipeline(module)
        return module
    graph, groups = prepare(module, data_flow_edges=False)
    if strategy == "basic":
        BasicPropagation(graph, groups).run()
    elif strategy == "aggressive":
        aggressive_propagate(graph, groups)
    elif strategy == "op-priority":
        op_priority_propagate(graph, groups)
    else:
        user_priority_propagate(graph, groups)
    graph.finish_edges()
    return module
