"""Removal of dead ops, as MLIR's greedy rewrite driver does while Shardy
propagates (and its canonicalizer at the end of the pipeline): an op whose
results are all unused and that has no side effects (nor do the ops in its
regions) goes away; the ops defining its operands are then looked at again."""

from __future__ import annotations

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results

# Ops with side effects (or that Shardy keeps for their own sake).
_IMPURE_OPCODES = frozenset({
    "call", "sdy.sharding_constraint", "sdy.sharding_group", "sdy.data_flow_edge",
    "all-reduce", "all-gather", "all-to-all", "stablehlo.all_to_all", "reduce-scatter", "collective-permute",
    "collective-broadcast", "send", "send-done", "recv", "recv-done", "infeed", "outfeed",
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "async-start", "async-done",
})


def is_pure(instr: HloInstruction) -> bool:
    """No side effects, in its regions neither."""
    if instr.opcode in _IMPURE_OPCODES:
        return False
    if instr.opcode == "custom-call" and instr.attributes.get("custom_call_has_side_effect"):
        return False
    return all(is_pure(nested) for region in instr.called_computations for nested in region.instructions
               if nested.opcode != "parameter" and not encodes_mlir_structure(nested))


def is_unused(instr: HloInstruction) -> bool:
    parent = instr.parent
    if parent is not None and parent.root is instr:
        return False
    if not instr.shape.is_tuple:
        return not instr.users
    results = op_results(instr)
    if any(r.users or (parent is not None and parent.root is r) for r in results):
        return False
    return all(user in results for user in instr.users)


def is_trivially_dead(instr: HloInstruction) -> bool:
    return instr.parent is not None and is_unused(instr) and is_pure(instr)


def _operands_deep(instr: HloInstruction) -> list[HloInstruction]:
    """The operands of ``instr`` and of the ops in its regions."""
    values = list(instr.operands)
    for nested in _nested(instr):
        values.extend(nested.operands)
    return values


def _remove_region(computation: HloComputation, module: HloModule | None) -> None:
    for nested in reversed(list(computation.instructions)):
        for region in nested.called_computations:
            if nested.opcode != "call":
                _remove_region(region, module)
        nested.drop_all_edges()
        nested.parent = None
    computation.instructions = []
    computation.root = None
    if module is not None and computation in module.computations:
        module.computations.remove(computation)


def erase(instr: HloInstruction, module: HloModule | None) -> list[HloInstruction]:
    """Erase the dead ``instr``; returns the ops defining its operands that
    had at most one other user (they may be dead now)."""
    revisit: list[HloInstruction] = []
    seen: set[int] = set()
    inner = {id(n) for n in _nested(instr)}
    for value in _operands_deep(instr):
        if id(value) in inner:
            continue
        definer = value.operands[0] if value.opcode == "get-tuple-element" and encodes_mlir_structure(value) else value
        if definer.opcode == "parameter" or id(definer) in seen:
            continue
        others = [u for u in value.users if u is not instr and id(u) not in inner]
        if len(others) <= 1:
            seen.add(id(definer))
            revisit.append(definer)
    computation = instr.parent
    if instr.opcode != "call":
        for region in instr.called_computations:
            _remove_region(region, module)
    for result in op_results(instr) if instr.shape.is_tuple else []:
        if result is not instr and result.parent is not None:
            result.parent.remove_instruction(result)
    computation.remove_instruction(instr)
    return [d for d in revisit if d.parent is not None]


def _nested(op: HloInstruction) -> list[HloInstruction]:
    """The ops in ``op``'s regions, at any depth."""
    if op.opcode == "call":
        return []
    found = []
    for region in op.called_computations:
        for nested in region.instructions:
            found.append(nested)
            found.extend(_nested(nested))
    return found


def dce_module(module: HloModule, computations: list[HloComputation]) -> None:
    """Remove every trivially dead op (to a fixed point)."""
    changed = True
    while changed:
        changed = False
        for computation in list(computations):
            stack = [computation]
            while stack:
                comp = stack.pop()
                for instr in reversed(list(comp.instructions)):
                    if instr.parent is None or instr.opcode == "parameter" or encodes_mlir_structure(instr):
                        continue
                    if is_trivially_dead(instr):
                        erase(instr, module)
                        changed = True
                        continue
                    if instr.opcode != "call":
                        stack.extend(instr.called_computations)
