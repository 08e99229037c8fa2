"""SSA names as MLIR's printer gives them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlapy.frontends.stablehlo_ops.catalog import spec_for
from xlapy.frontends.stablehlo_ops.records import FuncRecord
from xlapy.hlo import HloComputation, HloInstruction
from xlapy.hlo.mlir_structure import encodes_mlir_structure

if TYPE_CHECKING:
    # The printer runs the naming (and imports this module); names are given through it.
    from xlapy.frontends.stablehlo.printer import Printer


class MlirNames:
    """SSA names as MLIR's printer gives them: per function, values numbered in
    order within a block before the regions nested in it (each of which starts
    from the count after its parent block), entry block arguments ``%argN``,
    named results (``%cst``, ``%c``, ``%values``) made unique with ``_N``."""

    def __init__(self, printer: Printer):
        self.printer = printer

    def name_function(self, function: HloComputation) -> None:
        stack: list[tuple[HloComputation, int, int, int, tuple[set[str], ...], HloInstruction | None]] = [
            (function, 0, 0, 0, (), None)]
        while stack:
            region, next_value, next_arg, next_conflict, parents, owner = stack.pop()
            local: set[str] = set()
            scopes = (*parents, local)
            state = {"conflict": next_conflict}

            def unique(name: str, scopes=scopes, local=local, state=state) -> str:
                if not any(name in s for s in scopes):
                    local.add(name)
                    return name
                while True:
                    candidate = f"{name}_{state['conflict']}"
                    state["conflict"] += 1
                    if not any(candidate in s for s in scopes):
                        local.add(candidate)
                        return candidate

            owner_name = self.printer.record(owner).name if owner is not None else ""
            for param in region.parameters:
                if owner_name == "stablehlo.while":
                    self.printer.names[id(param)] = unique("iterArg")
                else:
                    self.printer.names[id(param)] = unique(f"arg{next_arg}")
                    next_arg += 1
            body = [i for i in region.instructions if i.opcode != "parameter" and not encodes_mlir_structure(i)]
            for instr in body:
                results = self.printer.results(instr)
                names = self._asm_names(instr, len(results))
                if names is not None:
                    groups = [(unique(name), 1) for name in names]
                elif results:
                    groups = [(str(next_value), len(results))]
                    next_value += 1
                else:
                    groups = []
                self.printer.assign_names(instr, results, groups)
            for instr in body:
                for callee in instr.called_computations:
                    if not isinstance(callee.mlir, FuncRecord):
                        stack.append((callee, next_value, next_arg, state["conflict"], scopes, instr))

    def _asm_names(self, instr: HloInstruction, count: int) -> list[str] | None:
        record = self.printer.record(instr)
        if record.name in ("stablehlo.constant",) and count == 1:
            from xlapy.frontends.stablehlo_ops.data_movement import constant_result_names

            return list(constant_result_names(self.printer, instr))
        spec = spec_for(record.name)
        if spec is not None and spec.result_names and len(spec.result_names) == count:
            return list(spec.result_names)
        return None
