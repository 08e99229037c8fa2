"""Where an instruction imported from StableHLO differs from the HLO instruction
of the same opcode, and how the rules that accept both tell them apart.

The StableHLO frontend keeps the MLIR structure that sharding propagation works
on, so an imported module is HLO with these differences:

- ``while`` takes one operand per loop value (not one tuple), its condition and
  body one parameter each, and lists its computations condition first;
- ``conditional`` takes only the branch index: its branches have no parameters
  and use the enclosing computation's values directly (implicit capture);
- ``opt-barrier`` takes any number of operands (not one tuple);
- ``broadcast`` (``broadcast_in_dim``) may stretch an operand dimension of size 1;
- ``all-to-all`` may concatenate along another dimension than it splits
  (``split_dimension``, ``concat_dimension``, ``split_count``).
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction


def read_from_stablehlo(instr: HloInstruction) -> bool:
    """Whether ``instr`` was read from StableHLO (and follows its op's rules)."""
    return instr.mlir is not None


def while_condition_and_body(instr: HloInstruction) -> tuple[HloComputation, HloComputation]:
    """The condition and body of a ``while``, found by the names its attributes
    give; without them, HLO's order (body first)."""
    called = {c.name: c for c in instr.called_computations}
    condition, body = called.get(str(instr.attributes.get("condition"))), called.get(str(instr.attributes.get("body")))
    if condition is None or body is None or condition is body:
        body, condition = instr.called_computations
    return condition, body


def region_results(computation: HloComputation) -> list[HloInstruction]:
    """The values a computation returns: its root, or the operands of the
    root tuple the StableHLO frontend adds for a region returning several
    values (or one of an enclosing computation)."""
    root = computation.root
    if root is None:
        return []
    if root.opcode == "tuple" and getattr(root.mlir, "implicit", False):
        return list(root.operands)
    return [root]
