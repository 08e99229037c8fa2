"""Replace ``call`` instructions by the instructions of the computations they call.

As XLA's ``CallInliner`` (``xla/service/call_inliner.cc``): computations are
visited callees first, so a callee's own calls are already inlined when it is
copied into its callers. Each inlined instruction is a copy of the callee's
(same name, made unique in the module), on the copies of its operands, the
callee's parameters standing for the call's operands; the call's users then use
the copy of the callee's root. Control dependencies inside the callee are
copied, every copy runs after the call's control predecessors, and the call's
control successors run after the copy of the root. The copy of the root takes
the call's frontend attributes, sharding and metadata when it has none of its
own (as ``HloComputation::ReplaceInstruction`` does), and the call's name when
it is itself a ``call``. Callees with side effects are inlined too.

Not inlined, as in XLA: calls with a ``backend_config``, calls whose frontend
attribute ``inlineable`` is not ``"true"``, composites whose
``composite.name`` is in ``composites_to_preserve`` (none by default: other
composites are inlined, their ``composite.*`` frontend attributes dropped),
calls in computations that async ops wrap, and with ``single_call_site`` calls
of computations called from more than one place. When anything was inlined the
module is cleaned up with ``HloDCE``, which removes the callees no longer
called and the values only the calls used.
"""

from __future__ import annotations

from collections.abc import Iterable

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.transforms.call_graph import CallGraph, async_computations, clone_instruction
from xlapy.transforms.dce import HloDCE
from xlapy.transforms.hlo_pass import HloPass

_COMPOSITE_KEYS = ("composite.name", "composite.attributes", "composite.version")


def _split_top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it is outside quotes and brackets."""
    parts, depth, quoted, start, index = [], 0, False, 0, 0
    while index < len(text):
        char = text[index]
        if quoted:
            if char == "\\":
                index += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
        index += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def frontend_attributes(instruction: HloInstruction) -> dict[str, str]:
    """The ``frontend_attributes={k="v", ...}`` of ``instruction``, values as
    written (quotes removed from quoted ones)."""
    text = str(instruction.attributes.get("frontend_attributes", "") or "").strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    entries: dict[str, str] = {}
    for entry in _split_top_level(text, ","):
        key, _, value = entry.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        entries[key.strip()] = value
    return entries


def _without_composite_keys(text: str) -> str:
    inner = text.strip()[1:-1] if text.strip().startswith("{") else text
    kept = [e for e in _split_top_level(inner, ",") if e.partition("=")[0].strip() not in _COMPOSITE_KEYS]
    return "{" + ",".join(kept) + "}"


def _has_value(instruction: HloInstruction, attribute: str) -> bool:
    value = instruction.attributes.get(attribute)
    return value is not None and str(value).strip() not in ("", '""', "{}")


class CallInliner(HloPass):
    """Inlines ``call`` instructions (all of them, or with ``single_call_site``
    those of computations called once)."""

    name = "call-inliner"

    def __init__(self, single_call_site: bool = False, composites_to_preserve: Iterable[str] = ()) -> None:
        self.single_call_site = single_call_site
        self.composites_to_preserve = frozenset(composites_to_preserve)

    def is_inlineable(self, call: HloInstruction, wrapped: set[int]) -> bool:
        if call.opcode != "call" or len(call.called_computations) != 1:
            return False
        if "backend_config" in call.attributes or (call.parent is not None and id(call.parent) in wrapped):
            return False
        attributes = frontend_attributes(call)
        if attributes.get("inlineable", "true") != "true":
            return False
        is_composite = str(call.attributes.get("is_composite", "false")).lower() == "true"
        return not (is_composite and attributes.get("composite.name") in self.composites_to_preserve)

    def run(self, module: HloModule) -> bool:
        graph = CallGraph(module)
        wrapped = async_computations(module)
        changed = False
        for computation in list(graph.post_order()):
            for instruction in computation.post_order():
                if not self.is_inlineable(instruction, wrapped):
                    continue
                callee = instruction.called_computations[0]
                if self.single_call_site and len(graph.callers[id(callee)]) != 1:
                    continue
                inline(instruction)
                changed = True
        if changed:
            HloDCE().run(module)
        return changed


def inline(call: HloInstruction) -> dict[int, HloInstruction]:
    """Replaces ``call`` by a copy of its callee's instructions; returns the
    map from id of each callee instruction to what stands for it in the caller."""
    caller: HloComputation = call.parent
    module = caller.module
    callee = call.called_computations[0]
    if str(call.attributes.get("is_composite", "false")).lower() == "true" and "frontend_attributes" in call.attributes:
        # Otherwise the composite's description would land on the copy of the root.
        call.attributes["frontend_attributes"] = _without_composite_keys(str(call.attributes["frontend_attributes"]))
        if call.attributes["frontend_attributes"] == "{}":
            del call.attributes["frontend_attributes"]
    mapping: dict[int, HloInstruction] = {}
    for instruction in callee.post_order():
        if instruction.opcode == "parameter":
            mapping[id(instruction)] = call.operands[instruction.parameter_number]
            continue
        operands = [mapping[id(o)] for o in instruction.operands]
        copy = caller.add_instruction(clone_instruction(instruction, operands, module, suffix=None), before=call)
        mapping[id(instruction)] = copy
        for predecessor in instruction.control_predecessors:
            mapping[id(predecessor)].add_control_dependency_to(copy)
        for predecessor in call.control_predecessors:
            predecessor.add_control_dependency_to(copy)
    new_root = mapping[id(callee.root)]
    _replace(call, new_root)
    return mapping


def _replace(call: HloInstruction, new_root: HloInstruction) -> None:
    """``call``'s users, control edges and (where the root has none) frontend
    attributes, metadata and sharding move to ``new_root``; ``call`` goes."""
    # The root may be one of the call's operands (a callee returning its parameter).
    for predecessor in call.control_predecessors:
        if predecessor is not new_root:
            predecessor.add_control_dependency_to(new_root)
    for successor in call.control_successors:
        if successor is not new_root:
            new_root.add_control_dependency_to(successor)
    if "op_name=" in str(call.attributes.get("metadata", "")) and "op_name=" not in str(
            new_root.attributes.get("metadata", "")):
        new_root.attributes["metadata"] = call.attributes["metadata"]
    for attribute in ("frontend_attributes", "sharding"):
        if _has_value(call, attribute) and not _has_value(new_root, attribute):
            new_root.attributes[attribute] = call.attributes[attribute]
    if new_root.sdy_sharding is None:
        new_root.sdy_sharding = call.sdy_sharding
    call.replace_all_uses_with(new_root)
    caller = call.parent
    name = call.name
    caller.remove_instruction(call)
    if new_root.opcode == call.opcode and caller.module is not None:
        caller.module.names.discard(new_root.name)
        caller.module.names.add(name)
        new_root.name = name
