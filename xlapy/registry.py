"""Per-opcode registries: each kind of per-op knowledge (shape rules,
interpreter rules, ...) is a dict from opcode to one function, filled by a
decorator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def registrar(table: dict[str, F], what: str) -> Callable[..., Callable[[F], F]]:
    """A decorator factory: ``@register("add", "subtract")`` makes the
    decorated function ``table``'s entry for each opcode; registering an
    opcode twice is an error."""

    def register(*opcodes: str) -> Callable[[F], F]:
        def add(function: F) -> F:
            for opcode in opcodes:
                if opcode in table:
                    raise ValueError(f"two {what} for {opcode}")
                table[opcode] = function
            return function

        return add

    return register
