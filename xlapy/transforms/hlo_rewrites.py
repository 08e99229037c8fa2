"""Edits that several HLO passes make, with XLA's rules: whether an
instruction has side effects (``HloInstruction::HasSideEffect``), whether it
may be removed (``HloComputation::IsSafelyRemovable``), removing it with the
operands it leaves unused (``RemoveInstructionAndUnusedOperands``) and
replacing one instruction by another (``ReplaceInstruction``), all in
``xla/hlo/ir/hlo_instruction.cc`` and ``xla/hlo/ir/hlo_computation.cc``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import Shape

# Opcodes whose instructions always have side effects.
_SIDE_EFFECTING_OPCODES = frozenset({
    "send", "send-done", "recv", "recv-done", "rng", "rng-get-and-update-state", "infeed", "outfeed",
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done", "collective-broadcast",
    "collective-permute-start", "collective-permute-done",
})
# Collectives that have side effects when their layout is constrained or, as
# HLO text modules are not SPMD-partitioned, when they have a channel.
_LAYOUT_CONSTRAINED_COLLECTIVES = frozenset({"all-to-all", "all-gather", "all-reduce", "reduce-scatter"})


def _flag(instr: HloInstruction, name: str) -> bool:
    # Parsed flags are strings ("true"/"false") or Verbatim text; built ones may be bools.
    value = instr.attributes.get(name, False)
    return value is True or str(value).strip() == "true"


def is_composite_call(instr: HloInstruction) -> bool:
    """Whether ``instr`` is a ``call`` marked ``is_composite=true``."""
    return instr.opcode == "call" and _flag(instr, "is_composite")


def non_fusion_non_composite_computations(module: HloModule) -> list[HloComputation]:
    """The computations most passes visit, callees before callers: all but
    fused ones and those composite calls call (XLA's
    ``HloModule::MakeNonFusionNonCompositeComputations``)."""
    composite = {id(c) for i in module.instructions if is_composite_call(i) for c in i.called_computations}
    return [c for c in module.computation_post_order()
            if c.fusion_instruction is None and id(c) not in composite]


def has_side_effect_no_recurse(instr: HloInstruction) -> bool:
    """Whether ``instr`` itself has side effects (not looking into the
    computations it calls)."""
    opcode = instr.opcode
    if opcode in _SIDE_EFFECTING_OPCODES:
        return True
    if opcode == "custom-call":
        return _flag(instr, "custom_call_has_side_effect")
    if opcode in _LAYOUT_CONSTRAINED_COLLECTIVES and _flag(instr, "constrain_layout"):
        return True
    if opcode in _LAYOUT_CONSTRAINED_COLLECTIVES or opcode == "collective-permute":
        return instr.attributes.get("channel_id") is not None
    return False


def has_side_effect(instr: HloInstruction) -> bool:
    """XLA's ``HasSideEffect``: ``instr`` or an instruction of a computation
    it calls (transitively) has side effects."""
    return has_side_effect_no_recurse(instr) or calls_any(instr, has_side_effect_no_recurse)


def calls_any(instr: HloInstruction, test: Callable[[HloInstruction], bool]) -> bool:
    """Whether an instruction of a computation ``instr`` calls (transitively) passes ``test``."""
    seen: set[int] = set()
    pending = list(instr.called_computations)
    while pending:
        computation = pending.pop()
        if id(computation) in seen:
            continue
        seen.add(id(computation))
        for nested in computation.instructions:
            if test(nested):
                return True
            pending.extend(nested.called_computations)
    return False


def is_hlo_op(instr: HloInstruction) -> bool:
    """Whether ``instr`` is an op of HLO's opcode table, not one that only
    encodes MLIR structure nor an op of another dialect (whose effects the
    rules here do not know)."""
    return instr.opcode in OPCODES and not encodes_mlir_structure(instr)


def is_dead(instr: HloInstruction) -> bool:
    """No users and not the root of its computation."""
    return not instr.users and (instr.parent is None or instr.parent.root is not instr)


def has_control_dependencies(instr: HloInstruction) -> bool:
    return bool(instr.control_predecessors or instr.control_successors)


def is_safely_removable(instr: HloInstruction, ignore_control_dependencies: bool = False) -> bool:
    """Whether ``instr`` may go once it is dead: not while it orders others
    through control dependencies, and never a parameter (removing a fused
    computation's parameter would need its fusion edited, which no pass here
    does)."""
    if not ignore_control_dependencies and has_control_dependencies(instr):
        return False
    return instr.opcode != "parameter"


def drop_control_dependencies(instr: HloInstruction) -> None:
    """Remove every control edge into and out of ``instr``."""
    for successor in instr.control_successors:
        successor.control_predecessors.remove(instr)
    for predecessor in instr.control_predecessors:
        predecessor.control_successors.remove(instr)
    instr.control_predecessors, instr.control_successors = [], []


def safely_drop_control_dependencies(instr: HloInstruction) -> None:
    """Drop ``instr``'s control edges, keeping the order they imposed: each
    predecessor comes before each successor."""
    for predecessor in instr.control_predecessors:
        for successor in instr.control_successors:
            predecessor.add_control_dependency_to(successor)
    drop_control_dependencies(instr)


def remove_instruction_and_unused_operands(computation: HloComputation, instr: HloInstruction,
                                           ignore_control_dependencies: bool = False) -> None:
    """Remove the dead ``instr``, then every operand (transitively) that is
    left dead, removable and without side effects."""
    removed: set[int] = set()
    worklist = deque([instr])
    while worklist:
        item = worklist.popleft()
        if id(item) in removed or item.parent is not computation or not is_dead(item):
            continue
        if not is_safely_removable(item, ignore_control_dependencies):
            continue
        if item is not instr and has_side_effect(item):
            continue
        if ignore_control_dependencies:
            safely_drop_control_dependencies(item)
        worklist.extend(item.operands)
        computation.remove_instruction(item)
        removed.add(id(item))


def sharding_of(instr: HloInstruction) -> object | None:
    """The sharding written on ``instr`` (HLO's ``sharding`` attribute or a
    Shardy sharding), or None."""
    return instr.attributes.get("sharding", instr.sdy_sharding)


def _copy_annotations(old: HloInstruction, new: HloInstruction) -> None:
    # As XLA does when one instruction replaces another: the new one takes
    # the old one's metadata (if it names no op), frontend attributes (if it
    # has none) and sharding (if it has none).
    old_metadata, new_metadata = old.attributes.get("metadata"), new.attributes.get("metadata")
    if "op_name=" in str(old_metadata or "") and "op_name=" not in str(new_metadata or ""):
        new.attributes["metadata"] = old_metadata
    old_frontend = old.attributes.get("frontend_attributes")
    if old_frontend is not None and str(new.attributes.get("frontend_attributes", "{}")).strip() == "{}":
        new.attributes["frontend_attributes"] = old_frontend
    if sharding_of(new) is None:
        if "sharding" in old.attributes:
            new.attributes["sharding"] = old.attributes["sharding"]
        new.sdy_sharding = old.sdy_sharding


def replace_instruction(old: HloInstruction, new: HloInstruction, preserve_sharding: bool = False,
                        remove_unused_operands: bool = True) -> bool:
    """XLA's ``ReplaceInstruction``: ``new`` takes the place of ``old`` (users
    and root), the annotations ``new`` lacks and, when both have the same
    opcode, ``old``'s name; ``old`` is removed, with the operands it leaves
    unused. Nothing happens (False) when ``old`` has control dependencies or,
    with ``preserve_sharding``, when both have different shardings."""
    computation = old.parent
    assert computation is not None, f"{old.name} is in no computation"
    if preserve_sharding:
        old_sharding, new_sharding = sharding_of(old), sharding_of(new)
        if old_sharding is not None and new_sharding is not None and old_sharding != new_sharding:
            return False
    if has_control_dependencies(old):
        return False
    _copy_annotations(old, new)
    old.replace_all_uses_with(new)
    same_op = old.opcode == new.opcode and (
        old.opcode != "custom-call" or old.attributes.get("custom_call_target") == new.attributes.get(
            "custom_call_target"))
    old_name = old.name
    if remove_unused_operands:
        remove_instruction_and_unused_operands(computation, old)
    else:
        computation.remove_instruction(old)
    if same_op and new.name != old_name:
        # Names stay those one can follow through the passes.
        module = computation.module
        if module is not None:
            module.names.discard(new.name)
            new.name = module.unique_name(old_name)
        else:
            new.name = old_name
    return True


def without_layout(shape: Shape) -> Shape:
    """``shape`` with every layout dropped, for ``ShapeUtil::Compatible``-style comparisons."""
    if shape.is_tuple:
        return Shape.make_tuple([without_layout(s) for s in shape.tuple_shapes])
    return shape.with_layout(None) if shape.layout is not None else shape


def shapes_compatible(a: Shape, b: Shape) -> bool:
    """Equal but for layouts (XLA's ``ShapeUtil::Compatible``)."""
    return without_layout(a) == without_layout(b)


def shapes_equal(a: Shape, b: Shape) -> bool:
    """Equal, layouts included, a missing layout being the default one."""
    return a.with_default_layout() == b.with_default_layout()
