"""HLO text printer, in XLA's syntax (the parsable form JAX's `as_text()`
shows: `%` sigils, computation signatures, no operand shapes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlapy.errors import XlapyError
from xlapy.hlo.attribute_order import attribute_rank
from xlapy.hlo.attributes import is_default, print_attribute, quote
from xlapy.hlo.literal import format_literal
from xlapy.hlo.mlir_structure import source_of
from xlapy.hlo.opcodes import OPCODES

if TYPE_CHECKING:  # the IR's to_text() calls this printer
    from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule


class NotHloError(XlapyError):
    """A module that HLO text cannot express: it holds an op HLO has no
    opcode for (a StableHLO form such as ``stablehlo.while``, a Shardy op, an
    op of another MLIR dialect), so the text would not read back."""


def _check_printable(instruction: HloInstruction) -> None:
    # Every instruction of HLO's opcodes prints faithfully, those that encode
    # MLIR's several results or returns too (HLO's ``tuple`` and
    # ``get-tuple-element`` mean the same); only the regions of StableHLO's
    # control flow use values of enclosing computations, and those ops are
    # refused here anyway.
    if instruction.opcode in OPCODES:
        return
    written = source_of(instruction).describe() or instruction.opcode
    where = f" of {instruction.parent.name}" if instruction.parent is not None else ""
    raise NotHloError(f"cannot print {written} (instruction {instruction.name}{where}) as HLO text: HLO has no "
                      f"opcode {instruction.opcode}; the module is StableHLO, print it with the StableHLO printer "
                      "(xlapy.frontends.stablehlo.print_module)")


def print_instruction(instruction: HloInstruction) -> str:
    """The instruction's line of HLO text; a ``NotHloError`` for an op HLO has no opcode for."""
    _check_printable(instruction)
    if instruction.opcode == "parameter":
        inside = str(instruction.parameter_number)
    elif instruction.opcode == "constant":
        literal = instruction.literal
        inside = literal if isinstance(literal, str) else format_literal(literal, instruction.shape)
    else:
        # Like tuple shapes, XLA marks every fifth operand with its index.
        inside = "".join((f", /*index={i}*/" if i % 5 == 0 else ", ") * (i > 0) + f"%{operand.name}"
                         for i, operand in enumerate(instruction.operands))
    parts = [f"%{instruction.name} = {instruction.shape} {instruction.opcode}({inside})"]
    parts.extend(_attributes(instruction))
    root = "ROOT " if instruction.parent is not None and instruction.parent.root is instruction else ""
    return root + ", ".join(parts)


def _attributes(instruction: HloInstruction) -> list[str]:
    """``name=value`` of each attribute to print, in XLA's order for the opcode
    whatever order they were given in; attributes XLA does not print on it
    come last, in their own order."""
    parts = {name: f"{name}={print_attribute(name, value)}" for name, value in instruction.attributes.items()
             if not is_default(name, value)}
    if instruction.opcode == "custom-call" and "to_apply" in parts:
        # XLA reads a custom call's to_apply but prints it among its called computations.
        parts["called_computations"] = f"called_computations={{%{instruction.attributes['to_apply']}}}"
        del parts["to_apply"]
    if instruction.control_predecessors and "control-predecessors" not in parts:
        names = ", ".join(f"%{p.name}" for p in instruction.control_predecessors)
        parts["control-predecessors"] = f"control-predecessors={{{names}}}"
    if len(parts) < 2:
        return list(parts.values())
    rank = attribute_rank(instruction.opcode)
    last = len(rank)
    # The sort is stable: the unknown ones, all ranked last, keep their order.
    return [parts[name] for name in sorted(parts, key=lambda name: rank.get(name, last))]


def print_computation(computation: HloComputation) -> str:
    module = computation.module
    scheduled = module is not None and module.attributes.get("is_scheduled") == "true"
    # XLA prints a scheduled computation in schedule order, any other in post order.
    order = computation.instructions if scheduled else computation.post_order()
    # The signature lists the parameters by number; parameters sharing a number
    # (invalid, the verifier reports it) in the order of the body, so that the
    # text reads back to the same signature.
    parameters = sorted((i for i in order if i.opcode == "parameter"), key=lambda p: p.parameter_number)
    header = ("ENTRY " if computation.is_entry else "") + f"%{computation.name}"
    params = ", ".join(f"{p.name}: {p.shape.to_string(print_layout=False)}" for p in parameters)
    root_shape = computation.root.shape.to_string(print_layout=False) if computation.root else "()"
    header += f" ({params}) -> {root_shape}"
    body = "\n".join("  " + print_instruction(i) for i in order)
    thread = computation.execution_thread
    suffix = f", execution_thread={quote(thread)}" if thread != "main" else ""
    return f"{header} {{\n{body}\n}}{suffix}"


def print_module(module: HloModule) -> str:
    """The module as ``HloModule::ToString`` prints it, blank lines included;
    a ``NotHloError`` for a module holding an op HLO has no opcode for."""
    for computation in module.computations:
        for instruction in computation.instructions:
            _check_printable(instruction)
    attributes = dict(module.attributes)
    if "entry_computation_layout" not in attributes and module.entry is not None:
        attributes = _with_entry_layout(attributes, module.entry)
    header = f"HloModule {module.name}" + "".join(f", {k}={v}" for k, v in attributes.items())
    text = header + "\n\n"
    if module.stack_frame_sections:
        text += "".join(section + "\n\n" for section in module.stack_frame_sections) + "\n"
    return text + "".join(print_computation(c) + "\n\n" for c in module.computation_post_order())


def entry_computation_layout(entry: HloComputation) -> str:
    """``{(param shapes)->result shape}`` with layouts, defaults filled in, as XLA prints it."""
    params = ", ".join(str(p.shape.with_default_layout()) for p in entry.parameters)
    return f"{{({params})->{entry.root.shape.with_default_layout()}}}"


def _with_entry_layout(attributes: dict[str, str], entry: HloComputation) -> dict[str, str]:
    # XLA prints it after is_scheduled, input_output_alias and buffer_donor.
    result: dict[str, str] = {}
    keys = list(attributes)
    leading = [k for k in keys if k in ("is_scheduled", "input_output_alias", "buffer_donor")]
    for key in leading:
        result[key] = attributes[key]
    result["entry_computation_layout"] = entry_computation_layout(entry)
    for key in keys:
        result.setdefault(key, attributes[key])
    return result
