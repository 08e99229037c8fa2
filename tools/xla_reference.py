"""Loop-fusion modules as XLA:CPU takes them.

XLA:CPU keeps a fusion it is given as it is, and aborts the process (a failed
CHECK, not an error) on fused computations whose shapes carry no layout,
which HLO text without layouts gives it; a fusion of a concatenate or a
reshape is enough. Its own pipeline fuses unfused HLO, as it would get it from
JAX, so XLA runs the module with every entry fusion inlined.

The conversion of HLO to StableHLO on the way into XLA:CPU mixes up the
layouts of ``bitcast`` (it rejects a bitcast whose operand and result ranks
differ), so bitcasts become the transposes and reshape they stand for.
"""

from __future__ import annotations

from typing import Any

import xlapy
from tools.xla_cpu import run_on_xla_cpu
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape


def inline_fusion(fusion: HloInstruction) -> HloInstruction:
    """Replace ``fusion`` in its computation by copies of its fused
    instructions; returns the copy of the fused root."""
    entry = fusion.parent
    fused = fusion.fused_computation
    copies: dict[int, HloInstruction] = {id(p): fusion.operands[i] for i, p in enumerate(fused.parameters)}
    for instruction in fused.post_order():
        if instruction.opcode == "parameter":
            continue
        copy = instruction.clone([copies[id(o)] for o in instruction.operands], suffix="inlined")
        copies[id(instruction)] = entry.add_instruction(copy, before=fusion)
    root = copies[id(fused.root)]
    fusion.replace_all_uses_with(root)
    entry.remove_instruction(fusion)
    return root


def _major_to_minor(shape: Shape) -> tuple[int, ...]:
    return tuple(reversed(shape.layout_or_default.minor_to_major))


def _transpose(operand: HloInstruction, permutation: tuple[int, ...], name: str) -> HloInstruction:
    if permutation == tuple(range(len(permutation))):
        return operand
    dims = [operand.shape.dimensions[p] for p in permutation]
    shape = Shape.array(operand.shape.element_type, dims)
    transpose = HloInstruction(name, "transpose", shape, [operand], {"dimensions": permutation})
    return operand.parent.add_instruction(transpose, before=operand.parent.root)


def logical_bitcast(bitcast: HloInstruction) -> HloInstruction:
    """Replace ``bitcast`` by what it does to logical values: its operand's
    dimensions put in physical order, reshaped to the result's physical
    dimensions, put back in logical order."""
    operand, shape = bitcast.operand(0), bitcast.shape
    computation = bitcast.parent
    physical = _transpose(operand, _major_to_minor(operand.shape), f"{bitcast.name}.physical")
    result_order = _major_to_minor(shape)
    reshape = HloInstruction(f"{bitcast.name}.reshape", "reshape",
                             Shape.array(shape.element_type, [shape.dimensions[d] for d in result_order]), [physical])
    computation.add_instruction(reshape, before=bitcast)
    inverse = tuple(result_order.index(d) for d in range(len(result_order)))
    result = _transpose(reshape, inverse, f"{bitcast.name}.logical")
    bitcast.replace_all_uses_with(result)
    computation.remove_instruction(bitcast)
    return result


def unfused(module: HloModule) -> HloModule:
    """``module`` (changed in place) with every fusion of the entry computation
    inlined and every bitcast of the entry replaced by its logical meaning."""
    entry: HloComputation = module.entry
    for fusion in [i for i in entry.instructions if i.opcode == "fusion"]:
        computation = fusion.fused_computation
        inline_fusion(fusion)
        if not any(computation in i.called_computations for i in module.instructions):
            module.computations.remove(computation)
    for bitcast in [i for i in entry.instructions if i.opcode == "bitcast"]:
        logical_bitcast(bitcast)
    return module


def unfused_text(text: str) -> str:
    """HLO text of the module ``text`` with its entry fusions inlined, layouts printed."""
    return unfused(xlapy.parse_hlo(text)).to_text()


def run_unfused_on_xla_cpu(text: str, *args: Any) -> Any:
    """The value XLA:CPU computes for the module ``text`` with its entry fusions inlined."""
    return run_on_xla_cpu(unfused_text(text), *args)
