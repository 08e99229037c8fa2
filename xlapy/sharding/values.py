"""The values of a program as Shardy sees them, on xlapy's HLO IR.

An MLIR op has any number of results; an HLO instruction has one (possibly
tuple-shaped) value. The StableHLO frontend maps an op with several results
(or none) to a tuple-shaped instruction followed by one ``get-tuple-element``
per result, and a function or region returning several values to a root
``tuple``; both are marked implicit (``instr.mlir.implicit``) and not printed.
These helpers hide that encoding from propagation."""

from __future__ import annotations

from xlapy.hlo import HloComputation, HloInstruction, HloModule


def is_implicit(instr: HloInstruction) -> bool:
    """Whether ``instr`` stands for a result or a return of the MLIR program
    rather than an op of its own."""
    return bool(getattr(instr.mlir, "implicit", False))


def op_results(instr: HloInstruction) -> list[HloInstruction]:
    """The values an op defines: itself, or the get-tuple-element of each of
    its results (in result order) when it has a tuple shape."""
    if not instr.shape.is_tuple:
        return [instr]
    results = [user for user in instr.users if user.opcode == "get-tuple-element" and is_implicit(user)]
    return sorted(results, key=lambda user: user.attributes["index"])


def returned_values(computation: HloComputation) -> list[HloInstruction]:
    """The values a function or region returns, in order."""
    root = computation.root
    if root is not None and root.opcode == "tuple" and is_implicit(root):
        return list(root.operands)
    return [] if root is None else [root]


def region_owners(module: HloModule) -> dict[int, HloInstruction]:
    """id(region) -> the op whose region it is (a call's callee is a function, not a region)."""
    owners: dict[int, HloInstruction] = {}
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode != "call":
                for region in instr.called_computations:
                    owners[id(region)] = instr
    return owners
