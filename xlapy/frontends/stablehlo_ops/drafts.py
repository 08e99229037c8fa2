"""What the StableHLO reader fills in while it reads an op or a block
argument, before it becomes an instruction (the op specs' ``parse`` write
into an ``OpDraft``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xlapy.frontends.mlir_syntax import Attr, Type
from xlapy.hlo import HloComputation, HloInstruction


@dataclass
class ArgDecl:
    """A block argument being declared: ``%name: type loc(...)``."""

    name: str
    type: Type
    pos: int
    location: str | None = None


@dataclass
class OpDraft:
    """An op as read, before it becomes an instruction."""

    name: str
    pos: int
    operands: list[HloInstruction] = field(default_factory=list)
    operand_positions: list[int] = field(default_factory=list)
    # The operand types the op's syntax declares (checked against the values).
    operand_types: list[Type] | None = None
    result_types: list[Type] = field(default_factory=list)
    attributes: dict[str, Attr] = field(default_factory=dict)
    properties: tuple[str, ...] = ()
    regions: list[HloComputation] = field(default_factory=list)
    generic: bool = False
    # Inline Shardy shardings: the op's own (sharding_constraint) and its results' (out_shardings).
    sharding: Any = None
    result_shardings: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # HLO attributes some syntaxes hold directly (in_shardings, manual_axes).
    hlo_attributes: dict[str, Any] = field(default_factory=dict)
