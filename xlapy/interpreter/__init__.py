"""The reference interpreter: HLO evaluated with numpy, one rule per opcode."""

from xlapy.interpreter.all_rules import RULES
from xlapy.interpreter.evaluator import Evaluator, evaluate

__all__ = ["RULES", "Evaluator", "evaluate"]
