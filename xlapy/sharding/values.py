"""Which op owns each region, as Shardy sees a program on xlapy's HLO IR.

How values and results of MLIR ops are encoded on the IR is described (and
read) in ``xlapy.hlo.mlir_structure``."""

from __future__ import annotations

from xlapy.hlo import HloInstruction, HloModule


def region_owners(module: HloModule) -> dict[int, HloInstruction]:
    """id(region) -> the op whose region it is (a call's callee is a function, not a region)."""
    owners: dict[int, HloInstruction] = {}
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode != "call":
                for region in instr.called_computations:
                    owners[id(region)] = instr
    return owners
