"""The reference interpreter: HLO evaluated with numpy, one rule per opcode."""

from xlapy.interpreter import (  # noqa: F401 - importing registers the rules
    collectives,
    control_flow,
    convolution,
    custom_call,
    data_movement,
    dot,
    elementwise,
    gather_scatter,
    random,
    reduce,
    sharding_ops,
    sorting,
    windows,
)
from xlapy.interpreter.evaluator import Evaluator, evaluate
from xlapy.interpreter.registry import RULES

__all__ = ["RULES", "Evaluator", "evaluate"]
