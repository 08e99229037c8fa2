"""Indexing maps of single HLO ops (XLA's docs/indexing.md), both directions, one rule
per opcode in ``registry.py``'s tables, filled by the family modules
(``elementwise``, ``movement``, ``reduction``, ``dynamic``); ``op_indexing``
looks them up. Fusions are composed on top of these
(``xlapy.indexing.hlo_indexing``).

An opcode without a rule, or an instruction whose attributes do not fit its
opcode, gets undefined maps (XLA's "unknown indexing"), never an exception.
"""

from xlapy.indexing.ops.op_indexing import op_input_to_output, op_output_to_input
from xlapy.indexing.ops.registry import INPUT_TO_OUTPUT, OUTPUT_TO_INPUT

__all__ = ["INPUT_TO_OUTPUT", "OUTPUT_TO_INPUT", "op_input_to_output", "op_output_to_input"]
