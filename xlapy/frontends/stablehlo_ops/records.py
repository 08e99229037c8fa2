"""What the StableHLO frontend remembers about the text of a program, kept on
the HLO IR (``instr.mlir``, ``computation.mlir``, ``module.mlir``) so that the
printer can write the program back as it was written: SSA names, MLIR
attributes the HLO IR has no place for, locations, result types. The records
implement the sources the IR declares (``xlapy.hlo.mlir_structure``),
with the edits passes make through them (an op renamed or created, a callee
renamed, values numbered again).

Shardings are not kept here: they live on the IR (``instr.sdy_sharding``,
``computation.result_shardings``) and the printer regenerates them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from xlapy.frontends.mlir_syntax import Attr, SymbolRefAttr, Type, type_of
from xlapy.frontends.stablehlo_ops.catalog import spec_for
from xlapy.hlo import HloComputation
from xlapy.hlo.mlir_structure import (
    ComputationSource,
    InstructionSource,
    ModuleSource,
    encodes_mlir_structure,
    op_results,
)
from xlapy.shapes import Shape


@dataclass
class OpRecord(InstructionSource):
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

    def describe(self) -> str:
        return f"{self.name} %{self.results[0][0]}" if self.results else self.name

    def attribute_texts(self) -> dict[str, str]:
        return {name: str(value) for name, value in self.attributes.items()}

    def rename_op(self, op_name: str) -> None:
        self.name = op_name

    def forget_result_names(self) -> None:
        self.results = []

    def drop_attributes(self) -> None:
        self.attributes = {}

    def set_callee(self, name: str) -> None:
        if "callee" in self.attributes:
            self.attributes = {**self.attributes, "callee": SymbolRefAttr((name,))}


@dataclass
class ArgRecord(InstructionSource):
    """A function or block argument (a ``parameter`` instruction)."""

    name: str
    type: Type
    attributes: dict[str, Attr] = field(default_factory=dict)
    location: str | None = None

    def describe(self) -> str | None:
        return f"%{self.name}" if self.name else None

    def attribute_texts(self) -> dict[str, str]:
        return {name: str(value) for name, value in self.attributes.items()}

    def drop_attributes(self) -> None:
        self.attributes = {}


@dataclass
class TerminatorRecord:
    name: str   # stablehlo.return, sdy.return, func.return
    attributes: dict[str, Attr] = field(default_factory=dict)
    location: str | None = None


@dataclass
class FuncRecord(ComputationSource):
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

    @property
    def is_private(self) -> bool:
        return self.visibility == "private"

    def rename(self, name: str) -> None:
        self.name = name

    def make_private(self) -> None:
        self.visibility = "private"
        self.attributes = {}
        self.result_attributes = [{} for _ in self.result_attributes]


@dataclass
class RegionRecord(ComputationSource):
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
class ModuleRecord(ModuleSource):
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

    def set_functions(self, functions: list[HloComputation]) -> None:
        # Meshes keep their places; functions follow them.
        self.items = [item for item in self.items if item[0] != "func"] + [("func", f) for f in functions]

    def new_op_record(self, op_name: str, shape: Shape) -> OpRecord:
        shapes = shape.tuple_shapes if shape.is_tuple else (shape,)
        return OpRecord(op_name, [], {}, (), [type_of(s) for s in shapes])

    def renumber_values(self, functions: list[HloComputation]) -> None:
        """Number op results the way MLIR's printer does: per block in order,
        each nested region continuing from the count after its parent block;
        named results keep their names (see ``_keeps_name``)."""
        for function in functions:
            stack = [(function, 0)]
            while stack:
                region, next_value = stack.pop()
                body = [i for i in region.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]
                for instr in body:
                    count = len(op_results(instr)) if instr.shape.is_tuple else 1
                    if count == 0:
                        continue
                    if not isinstance(instr.mlir, OpRecord):
                        instr.mlir = self.new_op_record(instr.opcode, instr.shape)
                    record = instr.mlir
                    if record.results and all(_keeps_name(record.name, name) for name, _ in record.results):
                        continue
                    record.results = [(str(next_value), count)]
                    next_value += 1
                for instr in body:
                    if instr.opcode != "call":
                        stack.extend((callee, next_value) for callee in instr.called_computations)


# The names MLIR's printer gives constants: `%c`, `%cst`, `%c_3`.
_CONSTANT_NAME = re.compile(r"(c|cst)(_\d+)?")


def _keeps_name(op_name: str, name: str) -> bool:
    """Whether a result keeps the name the text gave it: names of the user's
    are kept, but the names MLIR gives constants go when the constant is no
    longer a ``stablehlo.constant`` (an ``sdy.constant`` made by splitting
    constants), as MLIR then numbers it."""
    if name.isdigit():
        return False
    if op_name == "stablehlo.constant" or not _CONSTANT_NAME.fullmatch(name):
        return True
    spec = spec_for(op_name)
    return spec is not None and bool(spec.result_names)
