"""The algebraic simplifier, as XLA's ``AlgebraicSimplifier``
(``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``): rewrites that
keep values but make programs simpler, one rule per opcode
(``xlapy/transforms/algebraic/``), applied to each instruction of every
non-fusion computation in post order.

One run visits each instruction once; instructions a rule creates are
simplified by the next run (XLA's pipelines run the pass to a fixed point with
``HloPassFix``). The rules so far: identities of add, subtract, multiply,
divide and power (and small integer powers as products); reassociation of
integer constants; double negations; max/min of a value with itself or with
its type's extreme; and/or with constant operands; comparisons decided by
their operands; selects with a constant predicate or equal choices;
broadcasts sunk below elementwise ops; broadcasts, reshapes, transposes,
slices, pads, concatenates and copies that change nothing, and chains of
them; converts to the same type and exact round trips; reductions of no
elements or over dimensions of size 1.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloModule
from xlapy.transforms.algebraic.all_rules import RULES
from xlapy.transforms.algebraic.registry import Simplifier, SimplifierOptions
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import is_hlo_op


class AlgebraicSimplifier(HloPass):
    """Applies the algebraic simplifier's rules once to every instruction."""

    name = "algsimp"

    def __init__(self, options: SimplifierOptions | None = None) -> None:
        self.options = options or SimplifierOptions()

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in list(module.computations):
            if computation.fusion_instruction is not None:
                continue
            simplifier = Simplifier(computation, self.options)
            for instr in computation.post_order():
                if instr.parent is not computation or not is_hlo_op(instr):
                    continue  # removed by an earlier rewrite, or not an HLO op
                simplify = RULES.get(instr.opcode)
                if simplify is not None and simplify(instr, simplifier):
                    changed = True
        return changed
