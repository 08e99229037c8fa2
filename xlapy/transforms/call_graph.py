"""The call graph of a module and the edits passes make on it: who calls each
computation and in which context (XLA's ``xla/service/call_graph.cc``: control
flow runs a computation on whole values, an embedded callee is applied inside
its caller), and cloning instructions and computations with fresh names.
Shared by call-graph flattening, call inlining and the expanders that add
computations."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import copy_source

# Opcodes whose called computations run as control flow on whole values
# (XLA's ``CallContext::kControlFlow``); any other caller embeds its callee.
CONTROL_FLOW_OPCODES = frozenset({"call", "while", "conditional", "async-start", "async-update", "async-done"})
ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})

# The attributes naming a multi-callee instruction's computations, in the order
# of ``called_computations``.
_CALLEE_ATTRIBUTES = {"while": ("body", "condition"), "select-and-scatter": ("select", "scatter"),
                      "conditional": ("true_computation", "false_computation")}

CONTROL_FLOW, EMBEDDED, BOTH = "control-flow", "embedded", "both"


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
            self.context[id(computation)] = CONTROL_FLOW
        while pending:
            computation = pending.pop(0)
            for instruction in computation.instructions:
                added = self.context[id(computation)] if is_control_flow_call(instruction) else EMBEDDED
                for callee in instruction.called_computations:
                    known = self.context.get(id(callee))
                    merged = added if known in (None, added) else BOTH
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


def clone_module(module: HloModule) -> HloModule:
    """A deep copy of ``module`` under the same names: every computation,
    instruction (attributes, literal, sharding, control dependencies, the
    records of how it was written) and the module's header, so that passes may
    edit the copy without touching ``module``."""
    copy = HloModule(module.name)
    copy.attributes = dict(module.attributes)
    copy.stack_frame_sections = list(module.stack_frame_sections)
    copy.meshes = dict(module.meshes)
    computations: dict[int, HloComputation] = {}
    for computation in module.computations:
        duplicate = HloComputation(computation.name, is_entry=computation.is_entry)
        duplicate.execution_thread = computation.execution_thread
        duplicate.result_shardings = list(computation.result_shardings)
        duplicate.mlir = None if computation.mlir is None else computation.mlir.copied()
        computations[id(computation)] = duplicate
    instructions: dict[int, HloInstruction] = {}
    for computation in module.computations:
        duplicate = computations[id(computation)]
        for instruction in computation.instructions:
            # Operands come before users except for StableHLO's implicit captures of enclosing values,
            # which the second loop below wires once every instruction exists.
            twin = HloInstruction(instruction.name, instruction.opcode, instruction.shape, [],
                                  copy_module_attributes(instruction.attributes),
                                  [computations[id(c)] for c in instruction.called_computations])
            twin.parameter_number = instruction.parameter_number
            twin.literal = instruction.literal.copy() if hasattr(instruction.literal, "copy") else instruction.literal
            twin.sdy_sharding = instruction.sdy_sharding
            twin.encodes_mlir_structure = instruction.encodes_mlir_structure
            copy_source(instruction, twin)
            twin.parent = duplicate
            duplicate.instructions.append(twin)
            instructions[id(instruction)] = twin
        if computation.root is not None:
            duplicate.root = instructions[id(computation.root)]
    for instruction in module.instructions:
        twin = instructions[id(instruction)]
        for operand in instruction.operands:
            twin.append_operand(instructions[id(operand)])
        for successor in instruction.control_successors:
            twin.add_control_dependency_to(instructions[id(successor)])
    for computation in module.computations:
        duplicate = computations[id(computation)]
        if computation.fusion_instruction is not None:
            duplicate.fusion_instruction = instructions.get(id(computation.fusion_instruction))
        copy.add_computation(duplicate, entry=computation is module.entry)
    copy.names = set(module.names)
    copy.mlir = None if module.mlir is None else _copied_module_source(module.mlir, computations)
    return copy


def copy_module_attributes(attributes: dict) -> dict:
    """A copy of an instruction's attributes whose mutable values (lists, dicts, arrays) are copies too."""
    import copy as copying

    return {key: copying.deepcopy(value) for key, value in attributes.items()}


def _copied_module_source(source: object, computations: dict[int, HloComputation]) -> object:
    """A copy of a module's record whose list of functions names the copied computations."""
    import copy as copying

    def renamed(item: object) -> object:
        if isinstance(item, HloComputation):
            return computations.get(id(item), item)
        if isinstance(item, tuple):
            return tuple(renamed(part) for part in item)
        return item

    duplicate = copying.copy(source)
    for name, value in vars(duplicate).items():
        if isinstance(value, list):
            setattr(duplicate, name, [renamed(item) for item in value])
        elif isinstance(value, dict):
            setattr(duplicate, name, dict(value))
    return duplicate
