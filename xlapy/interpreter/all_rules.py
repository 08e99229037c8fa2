"""The interpreter's complete table of rules: each family module registers its
rules in ``registry.RULES`` when imported, and this module imports them all."""

from xlapy.interpreter import (  # noqa: F401 - importing a family registers its rules
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
from xlapy.interpreter.registry import RULES

__all__ = ["RULES"]
