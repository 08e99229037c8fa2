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

from collections.abc import Iterator
from dataclasses import dataclass

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import copy_source
from xlapy.transforms.hlo_pass import HloPass

# Opcodes whose called computations run as control flow on whole values
# (XLA's ``CallContext::kControlFlow``); any other caller embeds its callee.
CONTROL_FLOW_OPCODES = frozenset({"call", "while", "conditional", "async-start", "async-update", "async-done"})
ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})

# The attributes naming a multi-callee instruction's computations, in the order
# of ``called_computations``.
_CALLEE_ATTRIBUTES = {"while": ("body", "condition"), "select-and-scatter": ("select", "scatter"),
                      "conditional": ("true_computation", "false_computation")}

_CONTROL_FLOW, _EMBEDDED, _BOTH = "control-flow", "embedded", "both"


def is_control_flow_call(instruction: HloInstruction) -> bool:
    return instruction.opcode in CONTROL_FLOW_OPCODES


def async_computations(module: HloModule) -> set[int]:
    """ids of the computations async ops wrap, and of those they call in turn."""
    found: set[int] = set()
    pending = [c for i in module.instructions if i.opcode in ASYNC_OPCODES for c in i.called_computations]
    while pending:
        computation = pending.pop()
        if id(computation) not in found:
            found.add(id(computation))
            pending.extend(computation.called_computations())
    return found


def replace_called_computation(instruction: HloInstruction, position: int, new: HloComputation) -> None:
    """Make ``instruction`` call ``new`` in place of its ``position``-th called
    computation, in the attribute that names it too."""
    old = instruction.called_computations[position]
    occurrence = sum(c is old for c in instruction.called_computations[:position])
    instruction.called_computations[position] = new
    names = _CALLEE_ATTRIBUTES.get(instruction.opcode, ())
    if position < len(names) and names[position] in instruction.attributes:
        instruction.attributes[names[position]] = new.name
        return
    for key, value in instruction.attributes.items():
        if isinstance(value, str) and value in (old.name, f"%{old.name}"):
            instruction.attributes[key] = new.name
            return
        if isinstance(value, (tuple, list)):
            hits = [k for k, item in enumerate(value) if str(item).lstrip("%") == old.name]
            if occurrence < len(hits):
                items = list(value)
                items[hits[occurrence]] = new.name
                instruction.attributes[key] = type(value)(items)
                return


def unique_computation_name(module: HloModule, name: str) -> str:
    """``name``, or ``name.N`` with the first N that no computation of ``module`` has."""
    taken = {c.name for c in module.computations}
    if name not in taken:
        return name
    counter = 1
    while f"{name}.{counter}" in taken:
        counter += 1
    return f"{name}.{counter}"


def clone_instruction(instruction: HloInstruction, operands: list[HloInstruction], module: HloModule,
                      suffix: str | None = "clone") -> HloInstruction:
    """A copy of ``instruction`` on ``operands``, named ``name.suffix`` (or
    ``name`` without a suffix) before the module makes it unique; a fusion gets
    its own copy of its fused computation, as XLA's ``CloneWithNewOperands``
    gives it."""
    copy = instruction.clone(operands, suffix=suffix or "clone")
    if suffix is None:
        copy.name = instruction.name
    copy_source(instruction, copy)
    if instruction.opcode == "fusion" and instruction.called_computations:
        fused = clone_computation(instruction.fused_computation, module)
        replace_called_computation(copy, 0, fused)
        fused.fusion_instruction = copy
    return copy


def clone_computation(computation: HloComputation, module: HloModule, suffix: str = "clone") -> HloComputation:
    """A copy of ``computation`` added to ``module`` as XLA's
    ``HloComputation::Clone`` makes it: named ``name.suffix`` (made unique),
    its instructions ``name.suffix`` too, control dependencies kept, fused
    computations copied, every other callee shared."""
    copy = HloComputation(unique_computation_name(module, f"{computation.name}.{suffix}"))
    copy.execution_thread = computation.execution_thread
    copy.result_shardings = list(computation.result_shardings)
    module.add_computation(copy)
    mapping: dict[int, HloInstruction] = {}
    for instruction in computation.instructions:
        operands = [mapping[id(o)] for o in instruction.operands]
        mapping[id(instruction)] = copy.add_instruction(clone_instruction(instruction, operands, module, suffix))
    for instruction in computation.instructions:
        for successor in instruction.control_successors:
            mapping[id(instruction)].add_control_dependency_to(mapping[id(successor)])
    if computation.root is not None:
        copy.root = mapping[id(computation.root)]
    return copy


@dataclass
class CallSite:
    """One place a computation is called: ``instruction``'s ``position``-th
    called computation."""

    instruction: HloInstruction
    position: int

    @property
    def is_control_flow(self) -> bool:
        return is_control_flow_call(self.instruction)


class CallGraph:
    """Who calls each computation, and in which context, as XLA's ``CallGraph``
    builds it: call sites in module order, contexts propagated from the
    computations nobody calls."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.callers: dict[int, list[CallSite]] = {id(c): [] for c in module.computations}
        for computation in module.computations:
            for instruction in computation.instructions:
                for position, callee in enumerate(instruction.called_computations):
                    self.callers.setdefault(id(callee), []).append(CallSite(instruction, position))
        self.context: dict[int, str] = {}
        pending = [c for c in module.computations if not self.callers[id(c)]]
        for computation in pending:
            self.context[id(computation)] = _CONTROL_FLOW
        while pending:
            computation = pending.pop(0)
            for instruction in computation.instructions:
                added = self.context[id(computation)] if is_control_flow_call(instruction) else _EMBEDDED
                for callee in instruction.called_computations:
                    known = self.context.get(id(callee))
                    merged = added if known in (None, added) else _BOTH
                    if merged != known:
                        self.context[id(callee)] = merged
                        pending.append(callee)

    def post_order(self) -> Iterator[HloComputation]:
        """Callees before callers, from each computation nobody calls in module order."""
        visited: set[int] = set()
        for start in [c for c in self.module.computations if not self.callers[id(c)]]:
            if id(start) in visited:
                continue
            visited.add(id(start))
            stack = [(start, iter(start.called_computations()))]
            while stack:
                computation, callees = stack[-1]
                callee = next(callees, None)
                if callee is None:
                    stack.pop()
                    yield computation
                elif id(callee) not in visited:
                    visited.add(id(callee))
                    stack.append((callee, iter(callee.called_computations())))


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
            both = graph.context.get(id(computation)) == _BOTH
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
