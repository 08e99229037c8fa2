"""The rule for ``clamp``, as XLA's ``HandleClamp``: clamping a value
already clamped to the same bounds changes nothing."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic.registry import Simplifier, rule


@rule("clamp")
def _clamp(clamp: HloInstruction, s: Simplifier) -> bool:
    # clamp(a, clamp(a, x, b), b) => clamp(a, x, b)
    low, value, high = clamp.operands
    if value.opcode == "clamp" and value.operands[0] is low and value.operands[2] is high:
        return s.replace_if_compatible(clamp, value)
    return False
