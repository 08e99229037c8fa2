"""What an HLO module read from MLIR keeps of the MLIR program's structure.

An MLIR op has any number of results; an HLO instruction has one (possibly
tuple-shaped) value. The StableHLO frontend (``xlapy.frontends.stablehlo``)
therefore maps an op with several results (or none) to a tuple-shaped
instruction followed by one ``get-tuple-element`` per result, and a function
or region returning several values (or one value of an enclosing
computation) to a root ``tuple``. Those instructions only encode the MLIR
structure: they are not ops of the program and are not printed back. That is
a fact of the IR, ``HloInstruction.encodes_mlir_structure``, which the
frontend sets, ``clone`` copies, and ``encodes_mlir_structure`` reads; how
many values an op or a region produces follows from it (``op_results``,
``region_results``, and for values ``region_result_values``, ``op_value``).

The frontend also keeps a record of how each instruction, computation and
module was written (``instr.mlir``, ``computation.mlir``, ``module.mlir``),
only to print them back. The records' base classes are declared here so that
the IR can type those fields, and passes that edit the program (sharding
propagation adds, copies and renames ops and functions) can keep the records
in step, without depending on the frontend. Passes reach an instruction's
record through ``source_of`` (which stands in for a missing one) and
``copy_source``. Nothing but printing depends on a record: dropping one
changes how the program is printed, not what it means.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from xlapy.hlo.ir import HloComputation, HloInstruction
    from xlapy.shapes import Shape


def _copy_with_containers(record: object) -> object:
    """A copy of ``record`` whose lists and dicts are copies too, so that
    editing one does not edit the other."""
    duplicate = copy.copy(record)
    for name, value in vars(duplicate).items():
        if isinstance(value, (list, dict)):
            setattr(duplicate, name, copy.copy(value))
    return duplicate


class InstructionSource:
    """How the frontend that read an instruction will print it back (the MLIR
    op's name, SSA result names, attributes HLO has no place for, location).

    Passes treat a record as the frontend's business: they may copy it with
    the instruction, or drop it (the frontend then prints the instruction
    from its opcode and attributes), and edit it only through the methods
    below, whose defaults leave a record that is not of an op (a block
    argument) as it is. The record holds nothing the program's meaning
    depends on."""

    def describe(self) -> str | None:
        """How messages name it as written: the op and its first result
        (``stablehlo.add %3``), an argument (``%arg0``)."""
        return None

    def attribute_texts(self) -> dict[str, str]:
        """The attributes it was written with that the IR does not hold, each
        as written."""
        return {}

    def copied(self) -> Self:
        """A copy to edit without editing this one."""
        return _copy_with_containers(self)

    def rename_op(self, op_name: str) -> None:
        """Print it as the op ``op_name`` from now on."""

    def forget_result_names(self) -> None:
        """Print its results under fresh SSA names (their names went elsewhere)."""

    def drop_attributes(self) -> None:
        """Print it without the attributes it was written with."""

    def set_callee(self, name: str) -> None:
        """A call now calls the function ``name``."""


class ComputationSource:
    """How the frontend that read a computation (a function or a region of an
    op) will print it back. Passes edit it only through the methods below,
    which leave a region as it is."""

    @property
    def is_function(self) -> bool:
        """Whether the computation was a function (not a region of an op)."""
        return False

    @property
    def is_private(self) -> bool:
        """Whether the computation is a function only its module can call."""
        return False

    def copied(self) -> Self:
        """A copy to edit without editing this one."""
        return _copy_with_containers(self)

    def rename(self, name: str) -> None:
        """A function is printed under the symbol ``name`` from now on."""

    def make_private(self) -> None:
        """A function becomes private, without the attributes of the function
        or of its results it was written with."""


class ModuleSource(ABC):
    """How the frontend that read a module will print it back (its top-level
    items in order, module attributes, text around it). Passes that add,
    remove or reorder functions or ops keep it in step through these methods;
    a module the frontend did not read has no record, so nothing to keep."""

    @property
    @abstractmethod
    def functions(self) -> list[HloComputation]:
        """The module's functions (not the regions of ops) in the order written."""

    @abstractmethod
    def set_functions(self, functions: list[HloComputation]) -> None:
        """The module's functions become ``functions``, in that order."""

    @abstractmethod
    def new_op_record(self, op_name: str, shape: Shape) -> InstructionSource:
        """The record of an op a pass creates, the op ``op_name`` with results
        of ``shape`` (one result per element of a tuple shape)."""

    @abstractmethod
    def renumber_values(self, functions: list[HloComputation]) -> None:
        """Number the values of ``functions`` again, as the frontend's language
        numbers them after ops were added and removed."""


# What an instruction no frontend read (or that a pass created) was written
# as: nothing to print back, and nothing for edits to keep in step.
_NOT_WRITTEN = InstructionSource()


def source_of(instr: HloInstruction) -> InstructionSource:
    """The record of how ``instr`` was written, to read and edit through the
    methods of ``InstructionSource``: for an instruction without one, a record
    that says nothing and that edits leave as it is."""
    return instr.mlir if instr.mlir is not None else _NOT_WRITTEN


def copy_source(source: HloInstruction, target: HloInstruction) -> None:
    """``target`` (a copy of ``source``, or ``source`` itself) gets a copy of
    ``source``'s record of its own, to edit without editing the other's."""
    target.mlir = None if source.mlir is None else source.mlir.copied()


def encodes_mlir_structure(instr: HloInstruction) -> bool:
    """Whether ``instr`` only encodes MLIR structure (a result of a
    multi-result op, the tuple of values a function or region returns)
    rather than being an op of the program."""
    return instr.encodes_mlir_structure


def op_results(instr: HloInstruction) -> list[HloInstruction]:
    """The values an op defines: itself, or the ``get-tuple-element`` of each
    of its results (in result order) when it has a tuple shape."""
    if not instr.shape.is_tuple:
        return [instr]
    results = [user for user in instr.users if user.opcode == "get-tuple-element" and encodes_mlir_structure(user)]
    return sorted(results, key=lambda user: user.attributes["index"])


def _returns_a_tuple_of_values(computation: HloComputation) -> bool:
    root = computation.root
    return root is not None and root.opcode == "tuple" and encodes_mlir_structure(root)


def region_results(computation: HloComputation) -> list[HloInstruction]:
    """The values a function or region returns, in order: the operands of the
    root tuple that encodes a return of several values, else the root."""
    root = computation.root
    if root is None:
        return []
    return list(root.operands) if _returns_a_tuple_of_values(computation) else [root]


def region_result_values(computation: HloComputation, value: Any) -> tuple:
    """What ``region_results`` is for values: the values ``computation``
    returns, given ``value``, the value of its root (a tuple of them when the
    root encodes a return of several values)."""
    return tuple(value) if _returns_a_tuple_of_values(computation) else (value,)


def op_value(values: tuple) -> Any:
    """The value of an op that produces ``values`` (the opposite of
    ``region_result_values``): the one value of an op of one result, else
    their tuple (an op of several results, or none)."""
    return values[0] if len(values) == 1 else values
