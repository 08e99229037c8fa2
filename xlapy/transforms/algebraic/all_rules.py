"""The algebraic simplifier's complete table of rules: each family module
registers its rules in ``registry.RULES`` when imported, and this module
imports them all."""

from xlapy.transforms.algebraic import (  # noqa: F401 - importing a family registers its rules
    arithmetic,
    comparison,
    conversion,
    data_movement,
    logical,
    reduction,
)
from xlapy.transforms.algebraic.registry import RULES

__all__ = ["RULES"]
