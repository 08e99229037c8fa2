"""The interpreter's per-opcode rules: one function per opcode, registered by name.

A rule is ``rule(instruction, operands, evaluator) -> Value``: it receives the
values of the instruction's operands and returns the instruction's value. A
value is a numpy array whose dtype is the element type's (``bool`` for pred,
ml_dtypes for bf16 and the fp8 types), or a tuple of values for a tuple shape;
a token is the empty tuple.

Rules of ops that may appear inside reduce/map/sort/scatter computations work
on arrays of any shape (numpy broadcasting), so a scalar computation can be
applied to whole arrays at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from xlapy.registry import registrar

if TYPE_CHECKING:
    from xlapy.hlo import HloInstruction
    from xlapy.interpreter.evaluator import Evaluator

Value = Union[np.ndarray, tuple]  # noqa: UP007 - a runtime alias
Rule = Callable[["HloInstruction", list[Any], "Evaluator"], Any]

# opcode -> rule; register with ``@rule("opcode", ...)``.
RULES: dict[str, Rule] = {}


rule = registrar(RULES, "interpreter rules")
