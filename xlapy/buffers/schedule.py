"""The order each computation that runs as a sequence of thunks executes its
instructions in: the entry, and the computations control flow runs (while
conditions and bodies, conditional branches, ``call`` targets, the computations
async-starts wrap). Fused computations, reducers, comparators and scatter
combiners are applied inside kernels and have no schedule."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from xlapy.buffers.liveness import FORWARDING_OPCODES, array_leaves
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.memory import buffer_bytes

# Opcodes whose called computations run as thunk sequences of their own (an async-start's, at once: the CPU
# backend runs asynchronous pairs synchronously).
SEQUENCED_CALLERS = frozenset({"while", "conditional", "call", "async-start"})


@dataclass
class ModuleSchedule:
    """One instruction sequence per computation that runs as thunks, callees
    before their callers in ``computations``."""

    module: HloModule
    computations: list[HloComputation] = field(default_factory=list)
    sequences: dict[int, list[HloInstruction]] = field(default_factory=dict)

    def sequence(self, computation: HloComputation) -> list[HloInstruction]:
        """The instructions of ``computation`` in the order they run."""
        try:
            return self.sequences[id(computation)]
        except KeyError:
            raise VerifyError(f"computation {computation.name} does not run as a sequence of thunks") from None

    def __iter__(self) -> Iterator[tuple[HloComputation, list[HloInstruction]]]:
        for computation in self.computations:
            yield computation, self.sequences[id(computation)]


def sequenced_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation control flow runs from it, callees
    before callers, each once."""
    return [computation for computation, _ in _runners(module)]


def _runners(module: HloModule) -> list[tuple[HloComputation, list[HloInstruction]]]:
    """Each sequenced computation with the control-flow instructions that run it."""
    if module.entry is None:
        raise VerifyError(f"module {module.name} has no entry computation")
    runners: dict[int, list[HloInstruction]] = {}
    order: list[tuple[HloComputation, list[HloInstruction]]] = []

    def visit(computation: HloComputation, callers: list[HloInstruction]) -> None:
        for instr in computation.instructions:
            if instr.opcode not in SEQUENCED_CALLERS:
                continue
            for callee in instr.called_computations:
                known = runners.get(id(callee))
                if known is not None:
                    if not any(i is instr for i in known):
                        known.append(instr)
                    continue
                runners[id(callee)] = [instr]
                visit(callee, runners[id(callee)])
        order.append((computation, callers))

    visit(module.entry, [])
    return order


def schedule_module(module: HloModule) -> ModuleSchedule:
    """A schedule of every computation that runs as thunks: for each, the
    order among a list scheduler's, a depth-first one's and the post order
    that needs the least memory at its peak (what XLA's default memory
    scheduler picks, ``xla/service/hlo_memory_scheduler.cc``)."""
    schedule = ModuleSchedule(module)
    for computation, callers in _runners(module):
        if len(callers) > 1:
            # Its values get one place in memory, which two callers would share.
            raise UnimplementedError(
                f"computation {computation.name} is run by both {callers[0].name} and {callers[1].name}; buffer "
                "assignment needs each computation run by one instruction (flatten-call-graph does that)")
        schedule.computations.append(computation)
        schedule.sequences[id(computation)] = schedule_computation(computation)
    return schedule


def schedule_computation(computation: HloComputation) -> list[HloInstruction]:
    """The instruction order of least peak memory among the schedulers'."""
    graph = _Graph(computation)
    candidates = [list_schedule(computation, graph), dfs_schedule(computation, graph), computation.post_order()]
    peaks = [graph.peak_memory(order) for order in candidates]
    return candidates[peaks.index(min(peaks))]


class _Graph:
    """What the schedulers need of one computation: each instruction's
    dependencies (operands, control predecessors, values its regions use),
    which defined values each instruction's value holds (views hold their
    operands'), who reads each defined value, and its bytes."""

    def __init__(self, computation: HloComputation) -> None:
        self.computation = computation
        instructions = computation.instructions
        captures = computation._implicit_captures()
        self.dependencies: dict[int, list[HloInstruction]] = {}
        for instr in instructions:
            found = [*instr.operands, *instr.control_predecessors, *captures.get(id(instr), ())]
            unique: dict[int, HloInstruction] = {}
            for d in found:
                if d.parent is computation:
                    unique.setdefault(id(d), d)
            self.dependencies[id(instr)] = list(unique.values())
        self.size: dict[int, int] = {}
        self.holds: dict[int, frozenset[int]] = {}
        for instr in computation.post_order():
            if instr.opcode in FORWARDING_OPCODES:
                held: frozenset[int] = frozenset()
                for operand in instr.operands:
                    held |= self.holds.get(id(operand), frozenset())
                self.holds[id(instr)] = held
                self.size[id(instr)] = 0
            elif instr.opcode in ("parameter", "constant"):
                # Live throughout (parameters) or stored apart (constants): the order does not change them.
                self.holds[id(instr)] = frozenset()
                self.size[id(instr)] = 0
            else:
                self.holds[id(instr)] = frozenset({id(instr)})
                self.size[id(instr)] = sum(buffer_bytes(leaf) for _, leaf in array_leaves(instr.shape))
        self.reads: dict[int, frozenset[int]] = {}
        self.readers: dict[int, int] = {id(i): 0 for i in instructions}
        for instr in instructions:
            if instr.opcode in FORWARDING_OPCODES:
                self.reads[id(instr)] = frozenset()
                continue
            read: frozenset[int] = frozenset()
            for operand in instr.operands:
                read |= self.holds.get(id(operand), frozenset())
            self.reads[id(instr)] = read
            for value in read:
                self.readers[value] += 1
        root = computation.root
        self.kept = self.holds.get(id(root), frozenset()) if root is not None else frozenset()

    def peak_memory(self, order: list[HloInstruction]) -> int:
        """The most bytes of defined values live at once when run in ``order``."""
        remaining = dict(self.readers)
        live = peak = 0
        for instr in order:
            live += self.size[id(instr)]
            peak = max(peak, live)
            for value in self.reads[id(instr)]:
                remaining[value] -= 1
                if remaining[value] == 0 and value not in self.kept:
                    live -= self.size[value]
            if self.size[id(instr)] and self.readers[id(instr)] == 0 and id(instr) not in self.kept:
                live -= self.size[id(instr)]
        return peak


def list_schedule(computation: HloComputation, graph: _Graph | None = None) -> list[HloInstruction]:
    """XLA's list scheduler: of the instructions whose dependencies have run,
    run next the one that frees the most bytes net of those it defines (then
    the one with the most users, then the earliest in post order)."""
    graph = graph or _Graph(computation)
    post_order = computation.post_order()
    rank = {id(instr): i for i, instr in enumerate(post_order)}
    waiting = {id(instr): len(graph.dependencies[id(instr)]) for instr in post_order}
    dependents: dict[int, list[HloInstruction]] = {id(instr): [] for instr in post_order}
    for instr in post_order:
        for dependency in graph.dependencies[id(instr)]:
            dependents[id(dependency)].append(instr)
    remaining = dict(graph.readers)
    ready = [instr for instr in post_order if waiting[id(instr)] == 0]
    order: list[HloInstruction] = []

    def priority(instr: HloInstruction) -> tuple[int, int, int]:
        freed = sum(graph.size[v] for v in graph.reads[id(instr)] if remaining[v] == 1 and v not in graph.kept)
        return (freed - graph.size[id(instr)], len(instr.users), -rank[id(instr)])

    while ready:
        best = max(ready, key=priority)
        ready.remove(best)
        order.append(best)
        for value in graph.reads[id(best)]:
            remaining[value] -= 1
        for dependent in dependents[id(best)]:
            waiting[id(dependent)] -= 1
            if waiting[id(dependent)] == 0:
                ready.append(dependent)
    if len(order) != len(post_order):
        raise VerifyError(f"computation {computation.name} has a cycle")
    return order


def dfs_schedule(computation: HloComputation, graph: _Graph | None = None) -> list[HloInstruction]:
    """XLA's depth-first scheduler: a post order that, at each instruction,
    visits first the operands whose subtrees have the most extra users, then
    those whose subtrees define the most bytes, so that wide subtrees finish
    before others start."""
    graph = graph or _Graph(computation)
    post_order = computation.post_order()
    extra_users: dict[int, int] = {}
    total_size: dict[int, int] = {}
    for instr in post_order:
        dependencies = graph.dependencies[id(instr)]
        extra_users[id(instr)] = max(len(instr.users) - 1, 0) + sum(extra_users[id(d)] for d in dependencies)
        total_size[id(instr)] = graph.size[id(instr)] + sum(total_size[id(d)] for d in dependencies)

    def visit_first(instr: HloInstruction) -> tuple[int, int, str]:
        return (-extra_users[id(instr)], -total_size[id(instr)], instr.name)

    visited: set[int] = set()
    order: list[HloInstruction] = []
    starts = [computation.root] if computation.root is not None else []
    starts += [instr for instr in post_order if not instr.users and instr is not computation.root]
    for start in starts:
        if id(start) in visited:
            continue
        visited.add(id(start))
        stack = [(start, iter(sorted(graph.dependencies[id(start)], key=visit_first)))]
        while stack:
            instr, pending = stack[-1]
            following = next(pending, None)
            if following is None:
                stack.pop()
                order.append(instr)
            elif id(following) not in visited:
                visited.add(id(following))
                stack.append((following, iter(sorted(graph.dependencies[id(following)], key=visit_first))))
    return order
