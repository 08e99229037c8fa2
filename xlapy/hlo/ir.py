"""The HLO IR: modules of computations of instructions, as XLA has them.

Made for passes: operand and user edges are kept in sync by the mutators,
names are unique within a module, and fusion instructions own the
computation they call.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from xlapy.errors import VerifyError, XlapyError
from xlapy.hlo.mlir_structure import ComputationSource, InstructionSource, ModuleSource
from xlapy.shapes import Shape

if TYPE_CHECKING:
    # Shardy's shardings and meshes are values the IR carries; the sharding
    # package builds on this one, so they are named for type checkers only.
    from xlapy.sharding.mesh import Mesh
    from xlapy.sharding.tensor_sharding import TensorSharding


class HloInstruction:
    """One HLO instruction. ``attributes`` holds the typed values of the
    attributes after the operand list (XLA's spelling as keys, in the order
    they are printed); values of attributes xlapy does not model are kept as
    their text, verbatim."""

    def __init__(self, name: str, opcode: str, shape: Shape, operands: list[HloInstruction] | None = None,
                 attributes: dict[str, Any] | None = None, called_computations: list[HloComputation] | None = None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.called_computations: list[HloComputation] = list(called_computations or [])
        self.control_predecessors: list[HloInstruction] = []
        self.control_successors: list[HloInstruction] = []
        self.parent: HloComputation | None = None
        # parameter(N): the parameter number; constant(...): the literal (see literal.py).
        self.parameter_number: int | None = None
        self.literal: Any = None
        # Shardy sharding of the value, if any.
        self.sdy_sharding: TensorSharding | None = None
        # Whether it only encodes MLIR structure (a result of a multi-result
        # op, the tuple a region returns) rather than being an op of the
        # program; see ``xlapy.hlo.mlir_structure``.
        self.encodes_mlir_structure = False
        # How the StableHLO frontend prints this op (None for HLO text and
        # instructions passes create); see ``xlapy.hlo.mlir_structure``.
        self.mlir: InstructionSource | None = None
        for operand in operands or []:
            self.append_operand(operand)

    # -- edges --------------------------------------------------------------
    def append_operand(self, operand: HloInstruction) -> None:
        # A user is listed once per distinct operand. Either list tells whether
        # it already is: searching the shorter keeps this O(1) both for a value
        # with very many users and for a tuple with very many operands.
        if len(self.operands) <= len(operand.users):
            listed = any(o is operand for o in self.operands)
        else:
            listed = any(u is self for u in operand.users)
        if not listed:
            operand.users.append(self)
        self.operands.append(operand)

    def replace_operand(self, index: int, new: HloInstruction) -> None:
        old = self.operands[index]
        already_user = any(o is new for o in self.operands)
        self.operands[index] = new
        if not any(o is old for o in self.operands):
            old.users.remove(self)
        if not already_user:
            new.users.append(self)

    def replace_operand_with(self, old: HloInstruction, new: HloInstruction) -> None:
        for i, operand in enumerate(self.operands):
            if operand is old:
                self.replace_operand(i, new)

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        """Make every user of this instruction (and the root, if it is) use ``new``."""
        for user in list(self.users):
            user.replace_operand_with(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def add_control_dependency_to(self, successor: HloInstruction) -> None:
        if successor not in self.control_successors:
            self.control_successors.append(successor)
            successor.control_predecessors.append(self)

    def drop_all_edges(self) -> None:
        for operand in set(self.operands):
            operand.users.remove(self)
        self.operands = []
        for predecessor in self.control_predecessors:
            predecessor.control_successors.remove(self)
        for successor in self.control_successors:
            successor.control_predecessors.remove(self)
        self.control_predecessors, self.control_successors = [], []

    def clone(self, operands: list[HloInstruction] | None = None, suffix: str = "clone") -> HloInstruction:
        """A copy named ``name.suffix`` (as XLA's ``Clone``), on ``operands``
        (default: the same ones), not yet in any computation."""
        copy = HloInstruction(f"{self.name}.{suffix}", self.opcode, self.shape,
                              list(self.operands if operands is None else operands), self.attributes,
                              self.called_computations)
        copy.parameter_number, copy.literal = self.parameter_number, self.literal
        copy.sdy_sharding = self.sdy_sharding
        copy.encodes_mlir_structure = self.encodes_mlir_structure
        return copy

    # -- views --------------------------------------------------------------
    def operand(self, index: int) -> HloInstruction:
        return self.operands[index]

    @property
    def fused_computation(self) -> HloComputation:
        if self.opcode != "fusion":
            raise VerifyError(f"{self.name} is a {self.opcode}, not a fusion")
        return self.called_computations[0]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attributes.get(name, default)

    def __repr__(self) -> str:
        return f"<HloInstruction {self.name} = {self.shape} {self.opcode}>"


# How far ``HloComputation._index_of`` looks around where an instruction was.
_MAX_SEARCH_WINDOW = 4096
_MISSES_PER_REINDEX = 32


class HloComputation:
    """A computation: parameters, instructions in order, a root."""

    def __init__(self, name: str, is_entry: bool = False):
        self.name = name
        self.is_entry = is_entry
        self.instructions: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.module: HloModule | None = None
        # The thread it runs on; computations of async ops may name another.
        self.execution_thread = "main"
        # The fusion instruction that owns this computation, if any.
        self.fusion_instruction: HloInstruction | None = None
        # Shardy shardings of a function's results (``func.func`` result attributes).
        self.result_shardings: list[TensorSharding | None] = []
        # How the StableHLO frontend prints this function or region (None for HLO text).
        self.mlir: ComputationSource | None = None
        # Where instructions were last seen in ``instructions``, so that adding
        # before one or removing one need not search the whole list (see
        # ``_index_of``): id -> (position, inserts, removals) at that time.
        self._positions: dict[int, tuple[int, int, int]] = {}
        self._inserts = self._removals = self._misses = 0

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number)

    def parameter(self, number: int) -> HloInstruction:
        return self.parameters[number]

    def add_instruction(self, instruction: HloInstruction, before: HloInstruction | None = None) -> HloInstruction:
        """Add ``instruction`` (named uniquely within the module)."""
        instruction.parent = self
        if self.module is not None:
            instruction.name = self.module.unique_name(instruction.name)
        if before is None:
            self.instructions.append(instruction)
        else:
            position = self._index_of(before)
            self.instructions.insert(position, instruction)
            self._inserts += 1
            self._positions[id(instruction)] = (position, self._inserts, self._removals)
        return instruction

    def remove_instruction(self, instruction: HloInstruction) -> None:
        if instruction.users:
            raise VerifyError(f"cannot remove {instruction.name}: it still has users")
        if instruction is self.root:
            raise VerifyError(f"cannot remove {instruction.name}: it is the root of {self.name}")
        instruction.drop_all_edges()
        del self.instructions[self._index_of(instruction)]
        self._removals += 1
        self._positions.pop(id(instruction), None)
        if self.module is not None:
            self.module.names.discard(instruction.name)
        instruction.parent = None

    def _index_of(self, instruction: HloInstruction) -> int:
        """``instructions.index(instruction)``, mostly without a search: since
        ``instruction`` was last seen at position p, each insertion moved it
        at most one place later and each removal one place earlier, so it is
        between p - removals and p + insertions since then (unless the list
        was edited directly), and edits in program order leave it at one end."""
        instructions = self.instructions
        seen = self._positions.get(id(instruction))
        index = -1
        low, high = 0, len(instructions)
        if seen is not None:
            position, inserts, removals = seen
            low = max(0, position - (self._removals - removals))
            high = min(high, position + (self._inserts - inserts) + 1)
            if low < high and instructions[high - 1] is instruction:
                index = high - 1
            elif low < high and instructions[low] is instruction:
                index = low
            if index >= 0:
                self._positions[id(instruction)] = (index, self._inserts, self._removals)
                return index
            if high - low > _MAX_SEARCH_WINDOW or low >= high:
                low, high = 0, len(instructions)
        try:
            index = instructions.index(instruction, low, high)
        except ValueError:
            index = instructions.index(instruction)
        self._misses += 1
        # Noting every position costs about as much as a few dozen searches:
        # done the first time (e.g. after parsing), and again once that many
        # searches were needed.
        if not self._positions or self._misses >= _MISSES_PER_REINDEX:
            self._reindex()
        else:
            self._positions[id(instruction)] = (index, self._inserts, self._removals)
        return index

    def _reindex(self) -> None:
        edits = (self._inserts, self._removals)
        self._positions = {id(instr): (i, *edits) for i, instr in enumerate(self.instructions)}
        self._misses = 0

    def post_order(self) -> list[HloInstruction]:
        """Every operand and control predecessor before its users, in the order
        of XLA's ``MakeInstructionPostOrder``: a depth-first walk from each
        instruction without users, control predecessors first, then operands
        left to right. A value of this computation that the regions of one of
        its ops use directly (StableHLO's implicit capture) comes before that
        op too, as if it were one more operand of it."""
        captures = self._implicit_captures()
        visiting, visited = 1, 2
        state: dict[int, int] = {}
        order: list[HloInstruction] = []
        for start in self.instructions:
            if start.users or id(start) in state:
                continue
            stack = [start]
            while stack:
                current = stack[-1]
                seen = state.get(id(current))
                if seen is not None:
                    stack.pop()
                    if seen == visiting:
                        state[id(current)] = visited
                        order.append(current)
                    continue
                state[id(current)] = visiting
                dependencies = [*current.operands, *captures.get(id(current), ())] if captures else current.operands
                for operand in reversed(dependencies):
                    if operand.parent is not self and operand.parent is not None:
                        continue  # a value of an enclosing computation, defined before this region runs
                    if state.get(id(operand)) == visiting:
                        raise VerifyError(f"computation {self.name} has a cycle through {operand.name}")
                    stack.append(operand)
                stack.extend(current.control_predecessors)
        if len(order) != len(self.instructions):
            missing = next(i for i in self.instructions if id(i) not in state)
            raise VerifyError(f"computation {self.name} has a cycle through {missing.name}")
        return order

    def _implicit_captures(self) -> dict[int, list[HloInstruction]]:
        """id(op) -> the values of this computation used directly inside the
        regions (transitively nested) of ``op``, in instruction order. Empty
        for HLO, where computations only see their parameters."""
        foreign = [(value, user) for value in self.instructions for user in value.users if user.parent is not self]
        if not foreign:
            return {}
        owners: dict[int, HloInstruction] = {}
        for op in self.instructions:
            pending = list(op.called_computations)
            while pending:
                region = pending.pop()
                if id(region) in owners or region is self:
                    continue
                owners[id(region)] = op
                pending.extend(c for i in region.instructions for c in i.called_computations)
        captures: dict[int, list[HloInstruction]] = {}
        for value, user in foreign:
            owner = owners.get(id(user.parent)) if user.parent is not None else None
            if owner is None:
                continue  # not a region of this computation: the verifier reports such an edge
            values = captures.setdefault(id(owner), [])
            if not any(v is value for v in values):
                values.append(value)
        return captures

    def called_computations(self) -> list[HloComputation]:
        seen: dict[int, HloComputation] = {}
        for instruction in self.instructions:
            for computation in instruction.called_computations:
                seen.setdefault(id(computation), computation)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}>"


class HloModule:
    """A module: computations (callees before callers, as XLA prints them),
    one of them the entry, and module-level attributes."""

    def __init__(self, name: str):
        self.name = name
        self.computations: list[HloComputation] = []
        self.entry: HloComputation | None = None
        # Module header attributes after the name, e.g. is_scheduled,
        # entry_computation_layout, kept in order, values as text.
        self.attributes: dict[str, str] = {}
        # FileNames / FunctionNames / FileLocations / StackFrames sections, verbatim.
        self.stack_frame_sections: list[str] = []
        # Shardy meshes by symbol name, in declaration order (``sdy.mesh``).
        self.meshes: dict[str, Mesh] = {}
        # How the StableHLO frontend prints the module (None for HLO text).
        self.mlir: ModuleSource | None = None
        self.names: set[str] = set()
        self._name_counters: dict[str, itertools.count] = {}

    def add_computation(self, computation: HloComputation, entry: bool = False) -> HloComputation:
        computation.module = self
        for instruction in computation.instructions:
            self.names.add(instruction.name)
        self.computations.append(computation)
        if entry:
            computation.is_entry = True
            self.entry = computation
        return computation

    def computation(self, name: str) -> HloComputation:
        for computation in self.computations:
            if computation.name == name:
                return computation
        raise KeyError(name)

    def unique_name(self, name: str) -> str:
        """``name`` if unused in the module, else ``name.N`` with a fresh N (as XLA does)."""
        if name not in self.names:
            self.names.add(name)
            return name
        base = re.sub(r"\.\d+$", "", name)
        counter = self._name_counters.setdefault(base, itertools.count(1))
        while True:
            candidate = f"{base}.{next(counter)}"
            if candidate not in self.names:
                self.names.add(candidate)
                return candidate

    def computation_post_order(self) -> list[HloComputation]:
        """Callees before callers, starting from the computations nobody calls,
        in the order of XLA's ``MakeComputationPostOrder`` (the order it prints)."""
        called = {id(c) for comp in self.computations for c in comp.called_computations()}
        order: list[HloComputation] = []
        added: set[int] = set()
        for computation in self.computations:
            if id(computation) in called:
                continue
            for embedded in _embedded_computations(computation):
                if id(embedded) not in added:
                    added.add(id(embedded))
                    order.append(embedded)
            added.add(id(computation))
            order.append(computation)
        # Computations reachable only from a cycle of calls (invalid, kept for printing).
        order.extend(c for c in self.computations if id(c) not in added)
        return order

    @property
    def instructions(self) -> Iterator[HloInstruction]:
        for computation in self.computations:
            yield from computation.instructions

    def to_text(self) -> str:
        from xlapy.hlo.printer import print_module

        return print_module(self)

    def __str__(self) -> str:
        return self.to_text()


def while_condition_and_body(instr: HloInstruction) -> tuple[HloComputation, HloComputation]:
    """The condition and body of HLO's ``while``: the computations its
    ``condition`` and ``body`` attributes name; without them, XLA's order
    (body first)."""
    called = {c.name: c for c in instr.called_computations}
    condition, body = called.get(str(instr.attributes.get("condition"))), called.get(str(instr.attributes.get("body")))
    if condition is None or body is None or condition is body:
        body, condition = instr.called_computations
    return condition, body


def _embedded_computations(computation: HloComputation) -> list[HloComputation]:
    """Every computation called (transitively) from ``computation``, callees
    first; a callee is claimed when its caller is reached, as XLA's
    ``MakeEmbeddedComputationsList`` does."""
    visited: set[int] = set()
    order: list[HloComputation] = []
    stack: list[tuple[HloComputation, Iterator[HloInstruction]]] = []

    def push_callees(instruction: HloInstruction) -> None:
        for callee in reversed(instruction.called_computations):
            if id(callee) not in visited:
                visited.add(id(callee))
                stack.append((callee, iter(callee.instructions)))

    for instruction in computation.instructions:
        push_callees(instruction)
        while stack:
            current, remaining = stack[-1]
            nxt = next(remaining, None)
            if nxt is None:
                stack.pop()
                order.append(current)
            else:
                push_callees(nxt)
    return order


def require_module(value: object, entry_point: str) -> HloModule:
    """``value`` when it is an ``HloModule``; otherwise ``XlapyError`` naming what ``entry_point`` got (text
    is parsed first)."""
    if not isinstance(value, HloModule):
        hint = " (parse HLO text with xlapy.parse_hlo first)" if isinstance(value, str) else ""
        raise XlapyError(f"{entry_point} takes an HloModule, not {type(value).__name__}{hint}")
    return value
