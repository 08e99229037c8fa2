"""`lower-complex`: the `complex` dialect's arithmetic as arith and math ops on real and imaginary parts, and its
functions as calls of the C library's, computing what the interpreter computes, bit for bit: XLA:CPU's formulas
(`xlapy.interpreter.complex_math`) where the interpreter follows them, numpy's elsewhere.

It runs before `canonicalize`, whose folders would evaluate complex ops on constants in Python (in f64, with
another division algorithm). Afterwards complex values are only built (`complex.constant`, `complex.create`),
taken apart (`complex.re`, `complex.im`), chosen (`arith.select`, `scf.if`), loaded, stored and passed to C
functions; the CPU backend keeps them as a pair of floats.

The formulas the elemental rules of complex instructions use too (product, quotient, magnitude, and the exact
products and sums) are in `xlapy.codegen.complex_parts`; the rules here build on them.

- add, sub, neg: part by part.
- mul: re = fma(ar, br, -(ai bi)), im = fma(ai, br, ar bi): (ar br - ai bi, ai br + ar bi) as XLA:CPU's LLVM
  contracts it on hosts with FMA. The fused form is used on every host, so that results do not depend on the
  machine.
- div: HLO's divide as XLA:CPU computes it: Smith's algorithm, its sums contracted into fused multiply-adds, with
  XLA's results where it gives NaN in both parts (a zero divisor, an infinite dividend over a finite divisor, a
  finite dividend over an infinite divisor).
- abs: XLA's larger * sqrt(fma(r, r, 1)) with r = smaller / larger, and smaller where that is NaN.
- eq, neq: both parts equal; either part differs.
- sign: each part divided by that magnitude; z itself where both parts are 0.
- rsqrt: XLA's polar form |z|^-1/2 (cos t + i sin t), t = -arg(z) / 2, with `atan2`, `cos`, `sin` of the C library
  (`atan2f`, ... on c64) and its values at 0 and at infinities.
- log1p: StableHLO's expansion that XLA runs: log(larger) + log1p(r^2) / 2 for huge |z|, log((x+1)^2 + y^2) / 2
  near -1, else log1p(x^2 + 2x + y^2) / 2 with the sum in double-word arithmetic (Veltkamp's split, Dekker's
  product, Knuth's two-sum); im = atan2(y, x + 1). Real functions: the C library's `log`, `log1p`, `atan2`.
- pow: |x|^c e^(-d arg x) (cos q + i sin q), q = fma(c, arg x, d ln|x|), with |x| as abs computes it, the C
  library's `pow`, `atan2`, `exp`, `log`, `cos`, `sin`, and Kahan's special cases.
- exp, log, sqrt, sin, cos, tan, tanh: C99's `cexp`, `clog`, ... (`cexpf`, ... on c64), the functions numpy
  calls, declared as external functions (`func.func private @cexpf(complex<f32>) -> complex<f32>`).
- expm1: numpy's formula on the C library's real functions (`expm1f`, `cosf`, `sinf`, `expf`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects import complex as cplx
from xdsl.dialects import func
from xdsl.dialects.builtin import ComplexType, Float32Type, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from xlapy.codegen.complex_parts import (
    Pair,
    Parts,
    larger_and_smaller,
    magnitude,
    one_plus_square,
    product,
    quotient,
    real_rsqrt,
    square_error,
    sum_error,
)
from xlapy.codegen.mlir_text import verify_op
from xlapy.errors import UnimplementedError
from xlapy.registry import registrar

# C99's complex functions numpy calls, by op (the c64 forms end in `f`).
_C_FUNCTIONS = {"complex.exp": "cexp", "complex.log": "clog", "complex.sqrt": "csqrt", "complex.sin": "csin",
                "complex.cos": "ccos", "complex.tan": "ctan", "complex.tanh": "ctanh"}


class _Lowering:
    """What the rule of one op builds with: ``p`` inserts before the op, on floats of its complex type's parts;
    ``declared`` holds the module's declarations of C functions."""

    def __init__(self, op: Operation, module: ModuleOp, declared: dict[str, func.FuncOp]):
        block = op.parent_block()
        assert block is not None
        types = (*(v.type for v in op.operands), *(r.type for r in op.results))
        self.complex_type: ComplexType = next(t for t in types if isinstance(t, ComplexType))
        self.p = Parts(lambda new: block.insert_op_before(new, op) or new, self.complex_type.element_type)
        self.module = module
        self.declared = declared

    def parts(self, value: SSAValue) -> Pair:
        owner = value.owner
        if isinstance(owner, cplx.CreateOp):
            return owner.real, owner.imaginary
        if isinstance(owner, cplx.ConstantOp):
            return tuple(self.p.constant(v.value.data) for v in owner.value.data)  # type: ignore[return-value]
        return self.p.value(cplx.ReOp(value)), self.p.value(cplx.ImOp(value))

    def operands(self, op: Operation) -> list[Pair]:
        return [self.parts(v) for v in op.operands]

    def suffixed(self, name: str) -> str:
        """The C function's name for this op's type: `expf` on c64, `exp` on c128."""
        return name + ("f" if isinstance(self.complex_type.element_type, Float32Type) else "")

    def call(self, name: str, args: list[SSAValue], result: Attribute) -> SSAValue:
        """A call of the C library's function `name` (declared once per module)."""
        if name not in self.declared:
            declaration = func.FuncOp.external(name, [a.type for a in args], [result])
            self.module.body.block.add_op(declaration)
            self.declared[name] = declaration
        return self.p.value(func.CallOp(name, args, [result]))

    def real_call(self, name: str, *args: SSAValue) -> SSAValue:
        return self.call(self.suffixed(name), list(args), self.p.type)


Rule = Callable[[_Lowering, Operation], SSAValue | Pair]
_RULES: dict[str, Rule] = {}


_rule = registrar(_RULES, "complex lowerings")


@_rule("complex.add")
def _add(lw: _Lowering, op: Operation) -> Pair:
    (ar, ai), (br, bi) = lw.operands(op)
    return lw.p.add(ar, br), lw.p.add(ai, bi)


@_rule("complex.sub")
def _sub(lw: _Lowering, op: Operation) -> Pair:
    (ar, ai), (br, bi) = lw.operands(op)
    return lw.p.sub(ar, br), lw.p.sub(ai, bi)


@_rule("complex.neg")
def _neg(lw: _Lowering, op: Operation) -> Pair:
    (re, im), = lw.operands(op)
    return lw.p.neg(re), lw.p.neg(im)


@_rule("complex.mul")
def _mul(lw: _Lowering, op: Operation) -> Pair:
    return product(lw.p, *lw.operands(op))


@_rule("complex.div")
def _div(lw: _Lowering, op: Operation) -> Pair:
    return quotient(lw.p, *lw.operands(op))


@_rule("complex.abs")
def _abs(lw: _Lowering, op: Operation) -> SSAValue:
    return magnitude(lw.p, *lw.operands(op))


@_rule("complex.eq")
def _eq(lw: _Lowering, op: Operation) -> SSAValue:
    (ar, ai), (br, bi) = lw.operands(op)
    return lw.p.both(lw.p.compare("oeq", ar, br), lw.p.compare("oeq", ai, bi))


@_rule("complex.neq")
def _neq(lw: _Lowering, op: Operation) -> SSAValue:
    (ar, ai), (br, bi) = lw.operands(op)
    return lw.p.either(lw.p.compare("une", ar, br), lw.p.compare("une", ai, bi))


@_rule("complex.sign")
def _sign(lw: _Lowering, op: Operation) -> Pair:
    """Each part divided by |z|; z itself (signed zeros kept) where both parts are 0."""
    p = lw.p
    ((re, im),) = lw.operands(op)
    length = magnitude(p, (re, im))
    zero = p.constant(0.0)
    is_zero = p.both(p.compare("oeq", re, zero), p.compare("oeq", im, zero))
    return p.select(is_zero, re, p.div(re, length)), p.select(is_zero, im, p.div(im, length))


@_rule("complex.rsqrt")
def _rsqrt(lw: _Lowering, op: Operation) -> Pair:
    """Polar: |z|^-1/2 (cos t + i sin t), t = -arg(z) / 2, with XLA's values at 0 and at infinities."""
    p = lw.p
    ((re, im),) = lw.operands(op)
    larger, smaller = larger_and_smaller(p, (re, im))
    scale = p.mul(real_rsqrt(p, larger), p.sqrt(real_rsqrt(p, one_plus_square(p, larger, smaller))))
    scale = p.select(p.compare("uno", scale, scale), real_rsqrt(p, smaller), scale)
    angle = p.mul(lw.real_call("atan2", im, re), p.constant(-0.5))
    real, imag = p.mul(scale, lw.real_call("cos", angle)), p.mul(scale, lw.real_call("sin", angle))
    inf, zero = p.constant(float("inf")), p.constant(0.0)
    vanishing = p.either(p.both(p.compare("oeq", p.abs(im), inf), p.compare("uno", re, re)),
                         p.compare("oeq", p.abs(re), inf))
    real = p.select(vanishing, p.copysign(zero, re), real)
    imag = p.select(vanishing, p.neg(p.copysign(zero, im)), imag)
    at_zero = p.both(p.compare("oeq", re, zero), p.compare("oeq", im, zero))
    return p.select(at_zero, inf, real), p.select(at_zero, p.constant(float("nan")), imag)


@_rule(*_C_FUNCTIONS)
def _c_function(lw: _Lowering, op: Operation) -> Pair:
    return lw.parts(lw.call(lw.suffixed(_C_FUNCTIONS[op.name]), [op.operands[0]], op.results[0].type))


@_rule("complex.expm1")
def _expm1(lw: _Lowering, op: Operation) -> Pair:
    """numpy: re = expm1(x) cos(y) - 2 sin(y/2)^2, im = exp(x) sin(y)."""
    p = lw.p
    ((x, y),) = lw.operands(op)
    half_sine = lw.real_call("sin", p.mul(y, p.constant(0.5)))
    twice_square = p.mul(p.mul(p.constant(2.0), half_sine), half_sine)
    real = p.sub(p.mul(lw.real_call("expm1", x), lw.real_call("cos", y)), twice_square)
    return real, p.mul(lw.real_call("exp", x), lw.real_call("sin", y))


def _log1p_of_sum(lw: _Lowering, x: SSAValue, y: SSAValue, y_squared: SSAValue) -> SSAValue:
    """log1p(2x + y^2 + x^2) / 2, the sum and its rounding errors added up as StableHLO's expansion adds them."""
    p = lw.p
    two_x = p.add(x, x)
    s1 = p.add(two_x, y_squared)
    x_squared = p.mul(x, x)
    s2 = p.add(s1, x_squared)
    y_error = square_error(p, y, y_squared)
    s3 = p.add(s2, y_error)
    x_error = square_error(p, x, x_squared)
    s4 = p.add(s3, x_error)
    errors = p.add(p.add(p.add(sum_error(p, s1, two_x, y_squared), sum_error(p, s2, s1, x_squared)),
                         sum_error(p, s3, s2, y_error)), sum_error(p, s4, s3, x_error))
    return p.mul(lw.real_call("log1p", p.add(s4, errors)), p.constant(0.5))


@_rule("complex.log1p")
def _log1p(lw: _Lowering, op: Operation) -> Pair:
    """StableHLO's expansion (module docstring); im = atan2(y, x + 1)."""
    p = lw.p
    ((x, y),) = lw.operands(op)
    one, half = p.constant(1.0), p.constant(0.5)
    larger, smaller = larger_and_smaller(p, (x, y))
    ratio = p.div(smaller, larger)
    squared_ratio = p.select(p.compare("oeq", smaller, larger), one, p.mul(ratio, ratio))
    huge = p.add(lw.real_call("log", larger), p.mul(lw.real_call("log1p", squared_ratio), half))
    x_plus_one = p.add(x, one)
    y_squared = p.mul(y, y)
    near_minus_one = p.mul(lw.real_call("log", p.fma(x_plus_one, x_plus_one, y_squared)), half)
    part = np.float32 if isinstance(p.type, Float32Type) else np.float64
    large = float(np.sqrt(np.finfo(part).max) * part(0.01))
    near = p.compare("olt", p.add(p.abs(x_plus_one), p.abs(y)), p.constant(0.2))
    real = p.select(p.compare("ogt", larger, p.constant(large)), huge,
                    p.select(near, near_minus_one, _log1p_of_sum(lw, x, y, y_squared)))
    return real, lw.real_call("atan2", y, x_plus_one)


@_rule("complex.pow")
def _pow(lw: _Lowering, op: Operation) -> Pair:
    """The interpreter's formula and special cases (see the module docstring)."""
    p = lw.p
    (a, b), (c, d) = lw.operands(op)
    length = magnitude(p, (a, b))
    angle = lw.real_call("atan2", b, a)
    coefficient = p.mul(lw.real_call("pow", length, c), lw.real_call("exp", p.mul(p.neg(d), angle)))
    q = p.fma(c, angle, p.mul(d, lw.real_call("log", length)))
    real, imag = p.mul(coefficient, lw.real_call("cos", q)), p.mul(coefficient, lw.real_call("sin", q))
    zero, one, inf = p.constant(0.0), p.constant(1.0), p.constant(float("inf"))
    real_exponent, real_base = p.compare("oeq", d, zero), p.compare("oeq", b, zero)
    inf_base = p.both(p.both(p.compare("oeq", a, inf), real_base), real_exponent)
    cases = [  # later cases win
        (p.both(p.both(p.compare("oeq", length, zero), real_exponent), p.compare("oge", c, zero)),
         p.select(p.compare("oeq", c, zero), one, zero)),
        (p.both(p.compare("oeq", c, zero), real_exponent), one),
        (p.both(p.compare("oeq", a, one), real_base), one),
        (p.both(inf_base, p.compare("ogt", c, zero)), inf),
        (p.both(inf_base, p.compare("olt", c, zero)), zero),
    ]
    for condition, value in cases:
        real, imag = p.select(condition, value, real), p.select(condition, zero, imag)
    return real, imag


def _lower(op: Operation, rule: Rule, module: ModuleOp, declared: dict[str, func.FuncOp]) -> None:
    lw = _Lowering(op, module, declared)
    result = rule(lw, op)
    if isinstance(result, tuple):
        result = lw.p.value(cplx.CreateOp(*result, lw.complex_type))
    op.results[0].replace_all_uses_with(result)
    op.detach()
    op.erase()


def _drop_unused(module: ModuleOp) -> None:
    """complex.create/re/im left without uses by the rewrite (their users take the parts directly)."""
    changed = True
    while changed:
        changed = False
        for op in list(module.walk()):
            if isinstance(op, (cplx.CreateOp, cplx.ReOp, cplx.ImOp, cplx.ConstantOp)) and not op.results[0].uses:
                op.detach()
                op.erase()
                changed = True


@dataclass(frozen=True)
class LowerComplexPass(ModulePass):
    """Complex arithmetic → arith/math on parts; complex functions → C library calls (module docstring)."""

    name: ClassVar[str] = "lower-complex"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declared = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        complex_ops = [inner for inner in op.walk() if inner.name.startswith("complex.")]
        if not complex_ops:
            return  # nothing to lower (most kernels): no walk over the module again, no verification
        for inner in complex_ops:
            if not isinstance(inner, _KEPT):
                rule = _RULES.get(inner.name)
                if rule is None:
                    raise UnimplementedError(f"lower-complex: {inner.name} is not supported")
                _lower(inner, rule, op, declared)
        _drop_unused(op)
        verify_op(op)


# Ops that stay: they build and take apart complex values.
_KEPT = (cplx.ConstantOp, cplx.CreateOp, cplx.ReOp, cplx.ImOp)

__all__ = ["LowerComplexPass"]
