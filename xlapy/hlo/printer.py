"""HLO text printer, in XLA's syntax (the parsable form JAX's `as_text()`
shows: `%` sigils, computation signatures, no operand shapes)."""

from __future__ import annotations

from xlapy.hlo.attributes import print_attribute
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.literal import format_literal


def print_instruction(instruction: HloInstruction) -> str:
    if instruction.opcode == "parameter":
        inside = str(instruction.parameter_number)
    elif instruction.opcode == "constant":
        literal = instruction.literal
        inside = literal if isinstance(literal, str) else format_literal(literal, instruction.shape)
    else:
        inside = ", ".join(f"%{operand.name}" for operand in instruction.operands)
    parts = [f"%{instruction.name} = {instruction.shape} {instruction.opcode}({inside})"]
    parts.extend(f"{name}={print_attribute(name, value)}" for name, value in instruction.attributes.items())
    if instruction.control_predecessors:
        names = ", ".join(f"%{p.name}" for p in instruction.control_predecessors)
        parts.append(f"control-predecessors={{{names}}}")
    root = "ROOT " if instruction.parent is not None and instruction.parent.root is instruction else ""
    return root + ", ".join(parts)


def print_computation(computation: HloComputation) -> str:
    header = ("ENTRY " if computation.is_entry else "") + f"%{computation.name}"
    params = ", ".join(f"{p.name}: {p.shape.to_string(print_layout=False)}" for p in computation.parameters)
    root_shape = computation.root.shape.to_string(print_layout=False) if computation.root else "()"
    header += f" ({params}) -> {root_shape}"
    body = "\n".join("  " + print_instruction(i) for i in computation.instructions)
    return f"{header} {{\n{body}\n}}"


def print_module(module: HloModule) -> str:
    """The module as ``HloModule::ToString`` prints it, blank lines included."""
    header = f"HloModule {module.name}" + "".join(f", {k}={v}" for k, v in module.attributes.items())
    text = header + "\n\n"
    if module.stack_frame_sections:
        text += "".join(section + "\n\n" for section in module.stack_frame_sections) + "\n"
    return text + "".join(print_computation(c) + "\n\n" for c in module.computation_post_order())
