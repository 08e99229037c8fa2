"""Every elemental rule: importing this module imports each family's module, which registers its rules in
``elemental``'s tables, so code that emits or looks up rules (the emitters, ``fusion_checks``) imports from here
and never sees a table half filled."""

from __future__ import annotations

from xlapy.codegen import (  # noqa: F401 - they fill the tables
    elemental_arith,
    elemental_complex,
    elemental_convolution,
    elemental_map,
    elemental_movement,
    elemental_reduce,
    elemental_stochastic_convert,
)
from xlapy.codegen.elemental import (
    ANY_ELEMENT_TYPE,
    COMPLEX_ELEMENTAL,
    ELEMENTAL,
    CalledFunctions,
    buffer_arguments,
    emit_subgraph_function,
    result_types,
    rule_of,
)

__all__ = ["ANY_ELEMENT_TYPE", "COMPLEX_ELEMENTAL", "ELEMENTAL", "CalledFunctions", "buffer_arguments",
           "emit_subgraph_function", "result_types", "rule_of"]
