"""Evaluation of HLO computations with the per-opcode rules of the registry."""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.interpreter.element_kinds import check_element_kinds
from xlapy.interpreter.numerics import dtype_of, narrow
from xlapy.interpreter.registry import RULES, Value
from xlapy.shapes import Shape


class Evaluator:
    """Evaluates the computations of one module. Holds the state a run needs
    beyond values: the random generator of ``rng`` and the replica/partition ids."""

    def __init__(self, module: HloModule, seed: int = 0, replica_id: int = 0, partition_id: int = 0):
        self.module = module
        self.random = np.random.default_rng(seed)
        self.replica_id = replica_id
        self.partition_id = partition_id
        self._orders: dict[int, list[HloInstruction]] = {}
        # The values of the computations being evaluated, innermost last: a
        # region imported from StableHLO may use its enclosing computations' values.
        self._frames: list[dict[int, Any]] = []

    def call(self, computation: HloComputation, *args: Value) -> Value:
        """The value of ``computation``'s root given its parameters' values."""
        params = computation.parameters
        if len(args) != len(params):
            raise XlapyError(f"computation {computation.name} takes {len(params)} arguments, got {len(args)}")
        values: dict[int, Any] = {id(p): a for p, a in zip(params, args)}
        order = self._orders.get(id(computation))
        if order is None:
            order = self._orders[id(computation)] = computation.post_order()
        self._frames.append(values)
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
        finally:
            self._frames.pop()
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


def evaluate(module: HloModule, *args: Any, seed: int = 0) -> Value:
    """Run ``module``'s entry computation on ``args`` (array-likes, converted
    to the parameters' element types) with the reference interpreter."""
    entry = module.entry
    params = entry.parameters
    if len(args) != len(params):
        raise XlapyError(f"{entry.name} takes {len(params)} arguments, got {len(args)}")
    values = [_argument(a, p.shape, p.name) for a, p in zip(args, params)]
    return Evaluator(module, seed=seed).call(entry, *values)


def _argument(value: Any, shape: Shape, name: str) -> Value:
    if shape.tuple_shapes:
        return tuple(_argument(v, s, name) for v, s in zip(value, shape.tuple_shapes))
    if shape.element_type == "token":
        return ()
    array = np.asarray(value)
    if array.shape != tuple(shape.dimensions):
        raise XlapyError(f"argument for {name} has shape {array.shape}, expected {shape}")
    return array.astype(dtype_of(shape.element_type), copy=False)
