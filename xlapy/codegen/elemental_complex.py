"""Elemental rules of instructions on complex numbers (c64 as ``complex<f32>``, c128 as ``complex<f64>``): one
entry per opcode in ``COMPLEX_ELEMENTAL``, emitting the ``complex`` dialect's ops as XLA's emitters do.
``lower-complex`` later computes each of them as the interpreter does.

Index-only ops, constants and select take their rules from ``ELEMENTAL`` (they move elements of any type). Ops
on complex numbers the interpreter does not compute either (ordered comparisons, maximum, minimum and clamp, which
XLA:CPU orders inconsistently; remainder, atan2, cbrt; bitcast-convert) have no rule: emitting them raises
``UnimplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import complex as cplx
from xdsl.dialects.builtin import ComplexType, IntegerType
from xdsl.ir import Operation, SSAValue

from xlapy.codegen.complex_parts import Parts, quotient
from xlapy.codegen.elemental import FunctionEmitter, Indices, complex_rule
from xlapy.codegen.elemental_arith import convert
from xlapy.codegen.types import element_type, is_complex, part_type
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction


def _operands(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> list[SSAValue]:
    return [em.emit(op, indices if op.shape.dimensions else ()) for op in instr.operands]


def _of_operands(make: Callable[..., Operation]):
    """A rule applying the op ``make(*operands)``."""

    def rule_(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
        return em.insert(make(*_operands(em, instr, indices))).results[0]

    return rule_


for _opcode, _op in {
    "add": cplx.AddOp, "subtract": cplx.SubOp, "multiply": cplx.MulOp, "divide": cplx.DivOp, "power": cplx.PowOp,
    "negate": cplx.NegOp, "abs": cplx.AbsOp, "sign": cplx.SignOp, "exponential": cplx.ExpOp,
    "exponential-minus-one": cplx.Expm1Op, "log": cplx.LogOp, "log-plus-one": cplx.Log1pOp, "sine": cplx.SinOp,
    "cosine": cplx.CosOp, "tan": cplx.TanOp, "tanh": cplx.TanhOp, "sqrt": cplx.SqrtOp, "rsqrt": cplx.RsqrtOp,
    "real": cplx.ReOp, "imag": cplx.ImOp,
}.items():
    complex_rule(_opcode)(_of_operands(_op))


@complex_rule("complex")
def _complex(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    real, imag = _operands(em, instr, indices)
    return em.insert(cplx.CreateOp(real, imag, element_type(instr.shape.element_type))).complex


@complex_rule("compare")
def _compare(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    direction = instr.attr("direction")
    op = {"EQ": cplx.EqualOp, "NE": cplx.NotEqualOp}.get(direction)
    if op is None:
        raise UnimplementedError(f"compare ({instr.name}) {direction} on {instr.operands[0].shape.element_type}: "
                                 f"complex numbers are not ordered")
    return em.insert(op(*_operands(em, instr, indices))).result


@complex_rule("logistic")
def _logistic(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """1 / (1 + e^-x) as the interpreter computes it: 1 + w adds 1 + 0i, and the division is HLO's divide."""
    (x,) = _operands(em, instr, indices)
    exp = em.insert(cplx.ExpOp(em.insert(cplx.NegOp(x)).result)).result
    denominator = em.insert(cplx.AddOp(em.constant(1, instr.shape.element_type), exp)).result
    p = Parts(em.insert, exp.type.element_type)
    parts = em.insert(cplx.ReOp(denominator)).result, em.insert(cplx.ImOp(denominator)).result
    real, imag = quotient(p, (p.constant(1.0), p.constant(0.0)), parts)
    return em.insert(cplx.CreateOp(real, imag, exp.type)).complex


@complex_rule("convert")
def _convert(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    """Complex to complex converts each part; a real number becomes the real part, with +0 as imaginary part."""
    source, target = instr.operands[0].shape.element_type, instr.shape.element_type
    if not is_complex(target):
        raise UnimplementedError(f"convert ({instr.name}) from {source} to {target}: complex numbers convert to "
                                 f"complex types only (real, imag and abs take their parts)")
    (x,) = _operands(em, instr, indices)
    target_type = element_type(target)
    if source == target:
        return x
    part = part_type(target)
    if is_complex(source):
        real, imag = (em.insert(op(x)).result for op in (cplx.ReOp, cplx.ImOp))
        real, imag = (convert(em, v, part_type(source), part) for v in (real, imag))
    else:
        real, imag = convert(em, x, source, part), em.constant(0.0, part)
    return em.insert(cplx.CreateOp(real, imag, target_type)).complex


@complex_rule("iota")
def _iota(em: FunctionEmitter, instr: HloInstruction, indices: Indices) -> SSAValue:
    position = indices[instr.attr("iota_dimension")]
    target = instr.shape.element_type
    part = part_type(target)
    as_int = em.insert(arith.IndexCastOp(position, IntegerType(64))).result
    real = convert(em, as_int, "s64", part)
    return em.insert(cplx.CreateOp(real, em.constant(0.0, part), ComplexType(element_type(part)))).complex
