"""What the StableHLO frontend remembers about the text of a program, kept on
the HLO IR (``instr.mlir``, ``computation.mlir``, ``module.mlir``) so that the
printer can write the program back as it was written: SSA names, MLIR
attributes the HLO IR has no place for, locations, result types.

Shardings are not kept here: they live on the IR (``instr.sdy_sharding``,
``computation.result_shardings``) and the printer regenerates them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xlapy.frontends.mlir_syntax import Attr, Type
from xlapy.hlo import HloComputation, HloInstruction


@dataclass
class OpRecord:
    """One MLIR op: its name, how its results are named, its MLIR attributes
    (properties and discardable attributes, minus the shardings) and result types."""

    name: str
    # Result groups as written: [("0", 2)] for `%0:2 = `, [("a", 1), ("b", 1)] for `%a, %b = `.
    results: list[tuple[str, int]] = field(default_factory=list)
    attributes: dict[str, Attr] = field(default_factory=dict)
    # Names written inside `<{...}>` when the op is written in the generic form.
    properties: tuple[str, ...] = ()
    result_types: list[Type] = field(default_factory=list)
    generic: bool = False
    location: str | None = None
    # Op-specific details of the pretty syntax (e.g. which sharding_group form was used).
    extra: dict[str, Any] = field(default_factory=dict)
    implicit: bool = False


@dataclass
class ImplicitRecord:
    """Marks an instruction the frontend added for the HLO encoding of MLIR
    (a result's get-tuple-element, a root tuple): it is not printed."""

    implicit: bool = True


@dataclass
class ArgRecord:
    """A function or block argument (a ``parameter`` instruction)."""

    name: str
    type: Type
    attributes: dict[str, Attr] = field(default_factory=dict)
    location: str | None = None
    implicit: bool = False


@dataclass
class TerminatorRecord:
    name: str   # stablehlo.return, sdy.return, func.return
    attributes: dict[str, Attr] = field(default_factory=dict)
    location: str | None = None


@dataclass
class FuncRecord:
    name: str
    visibility: str | None = None
    result_attributes: list[dict[str, Attr]] = field(default_factory=list)
    attributes: dict[str, Attr] = field(default_factory=dict)
    result_types: list[Type] = field(default_factory=list)
    terminator: TerminatorRecord = field(default_factory=lambda: TerminatorRecord("func.return"))
    location: str | None = None

    @property
    def is_function(self) -> bool:
        return True


@dataclass
class RegionRecord:
    """A region of an op: whether its block label (``^bb0(...):``) was written."""

    label: str | None = None
    terminator: TerminatorRecord = field(default_factory=lambda: TerminatorRecord("stablehlo.return"))

    @property
    def is_function(self) -> bool:
        return False


@dataclass
class MeshRecord:
    attributes: dict[str, Attr] = field(default_factory=dict)
    location: str | None = None


@dataclass
class ModuleRecord:
    name: str | None = None
    attributes: dict[str, Attr] = field(default_factory=dict)
    # Top-level items in order: ("mesh", name) or ("func", computation).
    items: list[tuple[str, Any]] = field(default_factory=list)
    meshes: dict[str, MeshRecord] = field(default_factory=dict)
    location: str | None = None
    # Attribute alias definitions (`#loc1 = loc(...)`) before and after the module, verbatim.
    prologue: list[str] = field(default_factory=list)
    epilogue: list[str] = field(default_factory=list)

    @property
    def functions(self) -> list[HloComputation]:
        return [item for kind, item in self.items if kind == "func"]


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
