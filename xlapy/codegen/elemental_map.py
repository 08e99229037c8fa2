"""Elemental rule of ``map``, as XLA's ``EmitElementalMap`` (``xla/service/elemental_ir_emitter.cc``): the
element at some indices is the mapped computation applied to the operands' elements at the same indices.

The computation becomes one private function of scalars (``CalledFunctions``, as a reducer does) and each element
is a ``func.call`` of it, as XLA:CPU calls the computation per element (``EmitThreadLocalCall``). Its
instructions are emitted by their own elemental rules, on scalars: elementwise ops, scalar constants, compares
and selects, converts, a nested ``map`` (itself a call) and anything else a rule computes on rank-0 values. An
instruction with no rule, or an array inside the computation, is refused with ``UnimplementedError`` before or
while the kernel is compiled. The rule only moves elements into and out of the call, so it stands for complex
elements too (the computation's own ops are looked up by their types).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, complex_rule, elemental_rule
from xlapy.hlo.ir import HloInstruction


@elemental_rule("map")
@complex_rule("map")
def _map(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    # Every operand has the map's dimensions (the shape rule checks it): they are read at the map's indices.
    elements = [em.operand(instr, k, indices) for k in range(len(instr.operands))]
    (value,) = em.call(instr.called_computations[0], elements)
    return value
