"""Logistic expansion, as XLA's ``LogisticExpander``
(``xla/hlo/transforms/expanders/logistic_expander.cc``): ``logistic(x)``
becomes ``1 / (1 + exp(-x))``, each step an HLO op of ``x``'s type (so
rounded after each step, where the ``logistic`` op rounds once)."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass


class LogisticExpander(OpExpanderPass):
    """Rewrites every ``logistic`` with ``exponential``, ``add`` and ``divide``."""

    name = "logistic-expander"

    def matches(self, instruction: HloInstruction) -> bool:
        return instruction.opcode == "logistic"

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        operand = instruction.operands[0]
        shape = operand.shape
        one = builder.scalar_like(operand, 1.0)
        exp = builder.add("exponential", shape, [builder.add("negate", shape, [operand])])
        denominator = builder.add("add", shape, [one, exp])
        return builder.add("divide", shape, [one, denominator])
