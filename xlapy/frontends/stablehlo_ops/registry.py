"""The registry of the StableHLO (and Shardy, func, chlo) ops the frontend
knows: one ``OpSpec`` per op name, registered by the module of its family
(``catalog.py`` imports them all and looks specs up)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xlapy.frontends.stablehlo_ops.drafts import OpDraft


@dataclass(frozen=True)
class OpSpec:
    name: str
    # The HLO opcode, or a function of the draft; "" keeps the MLIR name.
    opcode: str | Callable[[OpDraft], str] = ""
    parse: Callable[[Any, OpDraft], None] | None = None
    print: Callable[[Any, Any], str] | None = None
    hlo: Callable[[OpDraft], dict[str, Any]] | None = None
    # Region and operand checks beyond types: (parser, draft) -> None, raising ParseError.
    check: Callable[[Any, OpDraft], None] | None = None
    # Attributes the op's own syntax prints; every other one goes to its attribute dictionary.
    elided: tuple[str, ...] = ()
    # The op ends its block (its operands are the block's results).
    terminator: bool = False
    # The op's syntax holds its results' shardings (no `sdy.sharding` in its attribute dictionary).
    inline_shardings: bool = False
    # The op's inherent attributes: the generic form prints them inside `<{...}>`.
    properties: tuple[str, ...] = ()
    # The names MLIR's printer gives the op's results (``%cst``, ``%output_state``...), if any.
    result_names: tuple[str, ...] = ()
    # For an op written in the generic form: move what its pretty syntax keeps
    # outside the attributes (inline shardings, callees) where ``parse`` puts it.
    from_generic: Callable[[Any, OpDraft], None] | None = None

    def opcode_for(self, draft: OpDraft) -> str:
        if callable(self.opcode):
            return self.opcode(draft)
        return self.opcode or self.name


REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"op {spec.name} registered twice")
    REGISTRY[spec.name] = spec
    return spec
