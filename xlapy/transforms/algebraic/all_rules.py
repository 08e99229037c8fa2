"""The algebraic simplifier's complete table of rules: each family module
registers its rules in ``registry.RULES`` when imported, and this module
imports them all."""

from xlapy.transforms.algebraic import (  # noqa: F401 - importing a family registers its rules
    arithmetic,
    bitcasts,
    clamp,
    comparison,
    conversion,
    data_movement,
    dot,
    dynamic_shapes,
    dynamic_slicing,
    gather,
    iota,
    logical,
    reduction,
    remainder,
    reverse,
    sorting,
    unary,
    windows,
)
from xlapy.transforms.algebraic.registry import RULES

__all__ = ["RULES"]
