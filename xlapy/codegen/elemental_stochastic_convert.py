"""Elemental rule of ``stochastic-convert(x, random)``, with the interpreter's semantics (``xlapy/interpreter``):
the magnitude of ``x`` is rounded to an integer, up when the random bits are below its fraction scaled to their
width and down otherwise; the result carries the sign of ``x`` and is then converted to the result type as
``convert`` does (to nearest even for a float result, saturating for an integer one).

Signed integer results never get here from the CPU pipeline: ``stochastic_convert_decomposer`` expands them into
elementwise ops as XLA does. XLA defines no float result; here a float result is the stochastically rounded
integer in that type. Every step is exact in f64: the operand widened, its floor and fraction, and the fraction
scaled by ``2^bits`` (a power of two) and floored, which is below ``2^bits`` and compared with the random bits as
an unsigned integer (u64 bits would lose their low bits in f64), so only the final conversion rounds. A NaN
stays NaN, ±inf stays ±inf (its fraction is NaN: no rounding up), and -0 and negative values that round to zero
give -0.
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from xlapy.codegen.elemental import FunctionEmitter, Indices, elemental_rule
from xlapy.codegen.elemental_arith import convert
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import ELEMENT_TYPES


@elemental_rule("stochastic-convert")
def _stochastic_convert(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    source = instr.operands[0].shape.element_type
    random_type = instr.operands[1].shape.element_type
    bits = ELEMENT_TYPES[random_type].bit_width
    if bits < 8:
        raise UnimplementedError(f"stochastic-convert ({instr.name}) of {source} with {random_type} random bits: "
                                 f"only types of whole bytes")
    x = convert(em, em.operand(instr, 0, indices), source, "f64")
    random = em.operand(instr, 1, indices)
    magnitude = em.insert(math.AbsFOp(x)).result
    whole = em.insert(math.FloorOp(magnitude)).result
    fraction = em.insert(arith.SubfOp(magnitude, whole)).result
    scaled = em.insert(arith.MulfOp(fraction, em.constant(float(1 << bits), "f64"))).result
    scaled = em.insert(math.FloorOp(scaled)).result
    # The fraction of ±inf and NaN is NaN: no rounding up.
    is_nan = em.insert(arith.CmpfOp(scaled, scaled, "uno")).result
    scaled = em.insert(arith.SelectOp(is_nan, em.constant(0.0, "f64"), scaled)).result
    threshold = em.insert(arith.FPToUIOp(scaled, IntegerType(bits))).result
    round_up = em.insert(arith.CmpiOp(random, threshold, "ult")).result
    up = em.insert(arith.AddfOp(whole, em.constant(1.0, "f64"))).result
    rounded = em.insert(arith.SelectOp(round_up, up, whole)).result
    signed = em.insert(math.CopySignOp(rounded, x)).result
    result = convert(em, signed, "f64", instr.shape.element_type)
    if instr.shape.element_type != "bf16":
        return result
    # A bf16 NaN is the quiet NaN of its sign (0x7fc0 or 0xffc0), as the interpreter's conversion gives, not the
    # payload a truncation keeps.
    sign = em.insert(arith.AndIOp(em.insert(arith.BitcastOp(result, IntegerType(16))).result,
                                  em.constant(0x8000, "u16"))).result
    quiet_nan = em.insert(arith.OrIOp(sign, em.constant(0x7FC0, "u16"))).result
    quiet_nan = em.insert(arith.BitcastOp(quiet_nan, result.type)).result
    is_nan = em.insert(arith.CmpfOp(signed, signed, "uno")).result
    return em.insert(arith.SelectOp(is_nan, quiet_nan, result)).result
