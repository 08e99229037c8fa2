"""Rules for ``bitcast`` and ``bitcast-convert``, as XLA's ``HandleBitcast``
and ``HandleBitcastConvert``: a chain of them is its last one, and one that
changes nothing goes.

A ``bitcast`` reinterprets the bytes of its operand in the layouts of both
shapes, so it goes only when both shapes are equal layouts included (XLA,
in its layout-insensitive mode, also drops one that only changes the
layout, which before layout assignment it takes to be undecided).
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic.registry import Simplifier, rule
from xlapy.transforms.hlo_rewrites import shapes_equal


@rule("bitcast")
def _bitcast(bitcast: HloInstruction, s: Simplifier) -> bool:
    if bitcast.control_predecessors:
        return False
    operand = bitcast.operands[0]
    # bitcast(bitcast(A)) => bitcast(A)
    if operand.opcode == "bitcast":
        return s.replace_with_new(bitcast, "bitcast", bitcast.shape, [operand.operands[0]])
    if shapes_equal(operand.shape, bitcast.shape):
        return s.replace_if_compatible(bitcast, operand)
    return False


@rule("bitcast-convert")
def _bitcast_convert(bitcast_convert: HloInstruction, s: Simplifier) -> bool:
    operand = bitcast_convert.operands[0]
    # bitcast-convert(bitcast-convert(A)) => bitcast-convert(A)
    if operand.opcode == "bitcast-convert":
        return s.replace_with_new(bitcast_convert, "bitcast-convert", bitcast_convert.shape, [operand.operands[0]])
    # One to the operand's own shape (and type) does nothing.
    return s.replace_if_compatible(bitcast_convert, operand)
