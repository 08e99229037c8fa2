"""Evaluation of HLO computations with the per-opcode rules of the registry."""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.arguments import check_argument, check_arguments
from xlapy.hlo.ir import require_module
from xlapy.interpreter.all_rules import RULES
from xlapy.interpreter.element_kinds import check_element_kinds
from xlapy.interpreter.numerics import dtype_of, narrow
from xlapy.interpreter.registry import Value
from xlapy.interpreter.spmd import Device, DeviceLayout, Meeting, unsupported
from xlapy.memory import out_of_memory_as_error
from xlapy.shapes import Shape


class Evaluator:
    """Evaluates the computations of one module. Holds the state a run needs
    beyond values: the random generator of ``rng``, the device it plays
    (replica/partition ids) and, when several simulated devices run together
    (the body of a manual computation), where they meet at collectives.

    ``max_while_iterations``: a ``while`` that would run its body more often
    raises ``XlapyError`` (None: no limit; an endless loop runs forever, as in XLA)."""

    def __init__(self, module: HloModule, seed: int = 0, replica_id: int = 0, partition_id: int = 0,
                 max_while_iterations: int | None = None):
        if max_while_iterations is not None and (
                isinstance(max_while_iterations, bool) or not isinstance(max_while_iterations, (int, np.integer))
                or max_while_iterations < 0):
            raise XlapyError(f"max_while_iterations must be a non-negative integer or None, "
                             f"got {max_while_iterations!r}")
        self.module = module
        self.seed = seed
        self.random = np.random.default_rng(seed)
        self.replica_id = replica_id
        self.partition_id = partition_id
        self.max_while_iterations = None if max_while_iterations is None else int(max_while_iterations)
        self.layout = DeviceLayout.of(module)
        # Set on the evaluators of simulated devices: the devices running
        # together and where they exchange collectives' values.
        self.meeting: Meeting | None = None
        self.simulated: frozenset[Device] = frozenset()
        self._visits: dict[int, int] = {}
        self._orders: dict[int, list[HloInstruction]] = {}
        # The values of the computations being evaluated, innermost last: a
        # region imported from StableHLO may use its enclosing computations' values.
        self._frames: list[dict[int, Any]] = []
        # The computations being evaluated (ids): one calling itself never ends.
        self._active: set[int] = set()

    @property
    def device(self) -> Device:
        return (self.replica_id, self.partition_id)

    def for_device(self, layout: DeviceLayout, device: Device, meeting: Meeting | None,
                   simulated: frozenset[Device]) -> Evaluator:
        """An evaluator for one of several simulated devices running together."""
        child = Evaluator(self.module, seed=self.seed + layout.global_id(device) + 1, replica_id=device[0],
                          partition_id=device[1], max_while_iterations=self.max_while_iterations)
        child.layout, child.meeting, child.simulated = layout, meeting, simulated
        child._orders = self._orders
        return child

    def exchange(self, instr: HloInstruction, group: list[Device], value: Any) -> list[Any]:
        """The values the devices of ``group`` (this one among them) bring to
        the collective ``instr``, in group order."""
        if group == [self.device]:
            return [value]
        if self.meeting is None:
            raise unsupported(instr, self.layout, group, "the interpreter evaluates one device")
        missing = [d for d in group if d not in self.simulated]
        if missing:
            raise unsupported(instr, self.layout, group, f"devices {missing} are not among those simulated")
        count = self._visits[id(instr)] = self._visits.get(id(instr), 0) + 1
        return self.meeting.exchange((id(instr), tuple(group), count), group, self.device, value, instr.name)

    def call(self, computation: HloComputation, *args: Value) -> Value:
        """The value of ``computation``'s root given its parameters' values."""
        params = computation.parameters
        if len(args) != len(params):
            raise XlapyError(f"computation {computation.name} takes {len(params)} arguments, got {len(args)}")
        if id(computation) in self._active:
            raise XlapyError(f"computation {computation.name} calls itself (directly or through the computations it "
                             "calls): its evaluation would never end")
        values: dict[int, Any] = {id(p): a for p, a in zip(params, args)}
        order = self._orders.get(id(computation))
        if order is None:
            order = self._orders[id(computation)] = computation.post_order()
        self._frames.append(values)
        self._active.add(id(computation))
        try:
            for instruction in order:
                if instruction.opcode == "parameter":
                    continue
                try:
                    operands = [values[id(o)] for o in instruction.operands]
                except KeyError:
                    operands = [values[id(o)] if id(o) in values else self._captured(o, computation)
                                for o in instruction.operands]
                values[id(instruction)] = self.apply(instruction, operands)
        except RecursionError:
            # Nesting deeper than Python's stack (not a cycle, which is caught above).
            raise XlapyError(f"computation {computation.name}: calls nested too deeply to evaluate") from None
        finally:
            self._frames.pop()
            self._active.discard(id(computation))
        return values[id(computation.root)]

    def _captured(self, value: HloInstruction, region: HloComputation) -> Value:
        """The value of an enclosing computation's instruction that ``region`` uses."""
        for frame in reversed(self._frames[:-1]):
            if id(value) in frame:
                return frame[id(value)]
        raise XlapyError(f"computation {region.name} uses {value.name}, which is neither its own nor a value of "
                         "a computation it runs inside")

    def apply(self, instruction: HloInstruction, operands: list[Value]) -> Value:
        """The value of one instruction given its operands' values."""
        rule = RULES.get(instruction.opcode)
        if rule is None:
            raise UnimplementedError(f"the interpreter has no rule for {instruction.opcode} ({instruction.name})")
        check_element_kinds(instruction)
        with np.errstate(all="ignore"):
            return conform(rule(instruction, operands, self), instruction.shape)


def conform(value: Any, shape: Shape) -> Value:
    """``value`` as an array of ``shape``'s element type (floats rounded,
    integers wrapped), or a tuple of conformed values."""
    if shape.tuple_shapes or shape.element_type == "tuple":
        return tuple(conform(v, s) for v, s in zip(value, shape.tuple_shapes))
    if shape.element_type == "token":
        return ()
    return narrow(np.asarray(value), dtype_of(shape.element_type))


def evaluate(module: HloModule, *args: Any, seed: int = 0, verify: bool = True,
             max_while_iterations: int | None = None) -> Value:
    """Run ``module``'s entry computation on ``args`` with the reference
    interpreter. The module is verified first (``verify=False`` skips that for
    a module known to be valid); the arguments are checked and converted to
    the parameters' types by ``xlapy.hlo.arguments.check_argument`` (no value
    may change beyond rounding). ``seed`` seeds ``rng``; a ``while`` running
    its body more than ``max_while_iterations`` times raises ``XlapyError``
    (None: no limit)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise XlapyError(f"seed must be a non-negative integer, got {seed!r}")
    require_module(module, "evaluate")
    if verify:
        from xlapy.hlo.verifier import verify as verify_module

        verify_module(module)
    entry = module.entry
    values = check_arguments(args, entry.parameters, entry.name)
    with out_of_memory_as_error(f"evaluating {module.name}"):
        return Evaluator(module, seed=seed, max_while_iterations=max_while_iterations).call(entry, *values)


def _argument(value: Any, shape: Shape, name: str) -> Value:
    """One argument, checked and converted (see ``xlapy.hlo.arguments``)."""
    return check_argument(value, shape, name)
