"""Every sharding a module holds, wherever it lives: function arguments and
results, op results (including sharding constraints and data-flow edges)
and the in/out shardings of manual computations."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from xlapy.hlo import HloInstruction, HloModule
from xlapy.sharding.tensor_sharding import TensorSharding

ShardingFn = Callable[[TensorSharding], TensorSharding]


def transform_shardings(module: HloModule, fn: ShardingFn) -> None:
    """Replace every sharding ``s`` of the module by ``fn(s)`` (a function of
    the sharding's value: it is called once per sharding object, and values
    share objects after propagation)."""
    # id(s) -> (s, fn(s)); holding s keeps its id from being reused meanwhile.
    done: dict[int, tuple[TensorSharding, TensorSharding]] = {}

    def apply(sharding: TensorSharding) -> TensorSharding:
        found = done.get(id(sharding))
        if found is None:
            found = done[id(sharding)] = (sharding, fn(sharding))
        return found[1]

    for computation in module.computations:
        computation.result_shardings = [None if s is None else apply(s) for s in computation.result_shardings]
        for instr in computation.instructions:
            if instr.sdy_sharding is not None:
                instr.sdy_sharding = apply(instr.sdy_sharding)
            if instr.attributes.get("in_shardings"):
                instr.attributes["in_shardings"] = tuple(apply(s) for s in instr.attributes["in_shardings"])


def all_shardings(module: HloModule) -> Iterator[TensorSharding]:
    for computation in module.computations:
        yield from (s for s in computation.result_shardings if s is not None)
        for instr in computation.instructions:
            if instr.sdy_sharding is not None:
                yield instr.sdy_sharding
            yield from instr.attributes.get("in_shardings") or ()


def manual_computations(module: HloModule) -> Iterator[HloInstruction]:
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode == "sdy.manual_computation":
                yield instr
