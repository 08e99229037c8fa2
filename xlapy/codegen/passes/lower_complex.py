"""`lower-complex`: the `complex` dialect's arithmetic as arith and math ops on real and imaginary parts, and its
functions as calls of the C library's, computing what numpy (the interpreter's oracle) computes, bit for bit.

It runs before `canonicalize`, whose folders would evaluate complex ops on constants in Python (in f64, with
another division algorithm). Afterwards complex values are only built (`complex.constant`, `complex.create`),
taken apart (`complex.re`, `complex.im`), chosen (`arith.select`, `scf.if`), loaded, stored and passed to C
functions; the CPU backend keeps them as a pair of floats.

- add, sub, neg: part by part.
- mul: as numpy's SIMD loop computes it, re = fma(ar, br, -(ai bi)) and im = fma(ar, bi, ai br) (numpy's
  `npyv_muladdsub`, which numpy runs on every host with FMA: x86-64-v3 and up, AArch64). The fused form is used
  on every host, so that results do not depend on the machine.
- div: HLO's divide as the interpreter computes it: Smith's algorithm, with XLA's results where it gives NaN (a
  zero divisor, an infinite dividend over a finite divisor, a finite dividend over an infinite divisor).
- abs: numpy's SIMD loop: larger * sqrt(fma(r, r, 1)) with r = smaller / larger, infinities and NaNs first.
- eq, neq: both parts equal; either part differs.
- sign, rsqrt: numpy's z / |z| and 1 / sqrt(z), dividing as numpy's complex division does (`numpy_divide`).
- exp, log, sqrt, sin, cos, tan, tanh: C99's `cexp`, `clog`, ... (`cexpf`, ... on c64), the functions numpy
  calls, declared as external functions (`func.func private @cexpf(complex<f32>) -> complex<f32>`).
- expm1, log1p: numpy's formulas on the C library's real functions (`expm1f`, `cosf`, `sinf`, `expf`;
  `hypotf`, `atan2f`, `logf`).
- pow: the interpreter's formula |x|^c e^(-d arg x) (cos q + i sin q), q = c arg x + d ln|x|, on the C library's
  real functions, with its special cases. (numpy's SIMD `arctan2`, `power`, `exp`, ... that the interpreter's
  formula calls round differently from the C library: results agree to a few ulps of their magnitude.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith, func, math
from xdsl.dialects import complex as cplx
from xdsl.dialects.builtin import ComplexType, Float32Type, Float64Type, FloatAttr, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from xlapy.codegen.mlir_text import verify_op
from xlapy.errors import UnimplementedError

Pair = tuple[SSAValue, SSAValue]


class Parts:
    """Builds arith and math ops on floats of the type ``type_``; ``insert`` places each op and returns it."""

    def __init__(self, insert: Callable[[Operation], Operation], type_: Attribute):
        self.insert = insert
        self.type = type_

    def value(self, op: Operation) -> SSAValue:
        return self.insert(op).results[0]

    def constant(self, number: float) -> SSAValue:
        return self.value(arith.ConstantOp(FloatAttr(number, self.type)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.DivfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.value(arith.NegfOp(a))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self.value(math.FmaOp(a, b, c))

    def abs(self, a: SSAValue) -> SSAValue:
        return self.value(math.AbsFOp(a))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.value(math.SqrtOp(a))

    def copysign(self, magnitude: SSAValue, sign: SSAValue) -> SSAValue:
        return self.value(math.CopySignOp(magnitude, sign))

    def compare(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.CmpfOp(a, b, predicate))

    def is_finite(self, a: SSAValue) -> SSAValue:
        return self.compare("one", self.abs(a), self.constant(float("inf")))

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.SelectOp(condition, a, b))

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.AndIOp(a, b))

    def either(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.OrIOp(a, b))

    def widened(self, wide: Attribute) -> Parts:
        return Parts(self.insert, wide)

    def extend(self, a: SSAValue, wide: Attribute) -> SSAValue:
        return a if a.type == wide else self.value(arith.ExtFOp(a, wide))

    def truncate(self, a: SSAValue) -> SSAValue:
        return a if a.type == self.type else self.value(arith.TruncFOp(a, self.type))


# --- the formulas, on parts ------------------------------------------------------------------------------------


def numpy_product(p: Parts, a: Pair, b: Pair) -> Pair:
    """numpy's complex multiplication (its SIMD loop, with fused multiply-adds)."""
    (ar, ai), (br, bi) = a, b
    return p.fma(ar, br, p.neg(p.mul(ai, bi))), p.fma(ar, bi, p.mul(ai, br))


def numpy_divide(p: Parts, a: Pair, b: Pair) -> Pair:
    """numpy's complex division: Smith's algorithm scaled by the reciprocal of the denominator; a zero divisor
    divides each part by +0."""
    (ar, ai), (br, bi) = a, b
    one = p.constant(1.0)
    abs_r, abs_i = p.abs(br), p.abs(bi)
    real_larger = p.compare("oge", abs_r, abs_i)
    rat = p.div(bi, br)
    scale = p.div(one, p.add(br, p.mul(bi, rat)))
    by_real = p.mul(p.add(ar, p.mul(ai, rat)), scale), p.mul(p.sub(ai, p.mul(ar, rat)), scale)
    rat = p.div(br, bi)
    scale = p.div(one, p.add(bi, p.mul(br, rat)))
    by_imag = p.mul(p.add(p.mul(ar, rat), ai), scale), p.mul(p.sub(p.mul(ai, rat), ar), scale)
    by_zero = p.div(ar, abs_r), p.div(ai, abs_i)
    zero = p.compare("oeq", abs_r, p.constant(0.0))
    return tuple(p.select(real_larger, p.select(zero, z, r), i)  # type: ignore[return-value]
                 for z, r, i in zip(by_zero, by_real, by_imag))


def numpy_abs(p: Parts, z: Pair) -> SSAValue:
    """numpy's |z| (its SIMD loop): infinities win over NaNs, then larger * sqrt(1 + (smaller / larger)^2)."""
    inf, nan = p.constant(float("inf")), p.constant(float("nan"))
    re, im = p.abs(z[0]), p.abs(z[1])
    re_inf, im_inf = p.compare("oeq", re, inf), p.compare("oeq", im, inf)
    re, im = p.select(im_inf, inf, re), p.select(re_inf, inf, im)
    re_number, im_number = p.compare("ord", re, re), p.compare("ord", im, im)
    re, im = p.select(im_number, re, nan), p.select(re_number, im, nan)
    larger, smaller = p.value(arith.MaximumfOp(re, im)), p.value(arith.MinimumfOp(im, re))
    no_ratio = p.either(p.compare("oeq", larger, p.constant(0.0)), p.compare("oeq", smaller, inf))
    ratio = p.select(no_ratio, p.constant(0.0), p.div(smaller, larger))
    return p.mul(p.sqrt(p.fma(ratio, ratio, p.constant(1.0))), larger)


def hlo_divide(p: Parts, a: Pair, b: Pair) -> Pair:
    """HLO's complex divide as the interpreter computes it (Smith's algorithm with XLA's special cases). The
    special values of infinite operands are computed in f64, as the interpreter's numpy promotes them."""
    (ar, ai), (br, bi) = a, b
    r_over_i, i_over_r = p.div(br, bi), p.div(bi, br)
    r_denominator, i_denominator = p.add(bi, p.mul(r_over_i, br)), p.add(br, p.mul(i_over_r, bi))
    real_smaller = p.compare("olt", p.abs(br), p.abs(bi))
    real = p.select(real_smaller, p.div(p.add(p.mul(r_over_i, ar), ai), r_denominator),
                    p.div(p.add(p.mul(i_over_r, ai), ar), i_denominator))
    imag = p.select(real_smaller, p.div(p.sub(p.mul(r_over_i, ai), ar), r_denominator),
                    p.div(p.sub(ai, p.mul(i_over_r, ar)), i_denominator))
    inf, zero = p.constant(float("inf")), p.constant(0.0)

    def is_inf(x: SSAValue) -> SSAValue:  # +inf only, as the interpreter tests it
        return p.compare("oeq", x, inf)

    nonzero_dividend = p.either(p.compare("une", ar, zero), p.compare("une", ai, zero))
    zero_divisor = p.both(p.both(p.compare("oeq", br, zero), p.compare("oeq", bi, zero)), nonzero_dividend)
    inf_over_finite = p.both(p.either(is_inf(ar), is_inf(ai)), p.both(p.is_finite(br), p.is_finite(bi)))
    finite_over_inf = p.both(p.either(is_inf(br), is_inf(bi)), p.both(p.is_finite(ar), p.is_finite(ai)))
    w = p.widened(Float64Type())
    war, wai, wbr, wbi = (w.extend(x, w.type) for x in (ar, ai, br, bi))

    def unit(x: SSAValue, wide: SSAValue) -> SSAValue:  # ±1 where x is +inf, else ±0, with x's sign
        return w.copysign(w.select(is_inf(x), w.constant(1.0), w.constant(0.0)), wide)

    ar_inf, ai_inf, br_inf, bi_inf = unit(ar, war), unit(ai, wai), unit(br, wbr), unit(bi, wbi)
    w_inf, w_zero = w.constant(float("inf")), w.constant(0.0)
    signed_inf = p.copysign(inf, br)
    specials = [  # by priority, lowest first
        (finite_over_inf, w.mul(w_zero, w.add(w.mul(war, br_inf), w.mul(wai, bi_inf))),
         w.mul(w_zero, w.sub(w.mul(wai, br_inf), w.mul(war, bi_inf)))),
        (inf_over_finite, w.mul(w_inf, w.add(w.mul(ar_inf, wbr), w.mul(ai_inf, wbi))),
         w.mul(w_inf, w.sub(w.mul(ai_inf, wbr), w.mul(ar_inf, wbi)))),
        (zero_divisor, p.mul(signed_inf, ar), p.mul(signed_inf, ai)),
    ]
    is_nan = p.both(p.compare("uno", real, real), p.compare("uno", imag, imag))
    for condition, special_real, special_imag in specials:
        chosen = p.both(is_nan, condition)
        real = p.select(chosen, p.truncate(special_real), real)
        imag = p.select(chosen, p.truncate(special_imag), imag)
    return real, imag


# --- the rewrite -----------------------------------------------------------------------------------------------

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


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for name in names:
            _RULES[name] = rule
        return rule

    return register


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
    return numpy_product(lw.p, *lw.operands(op))


@_rule("complex.div")
def _div(lw: _Lowering, op: Operation) -> Pair:
    return hlo_divide(lw.p, *lw.operands(op))


@_rule("complex.abs")
def _abs(lw: _Lowering, op: Operation) -> SSAValue:
    return numpy_abs(lw.p, *lw.operands(op))


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
    """numpy's z / |z| (the magnitude as a complex number with +0 imaginary part); 0 where |z| is 0."""
    p = lw.p
    (z,) = lw.operands(op)
    magnitude = numpy_abs(p, z)
    zero = p.constant(0.0)
    is_zero = p.compare("oeq", magnitude, zero)
    quotient = numpy_divide(p, z, (p.select(is_zero, p.constant(1.0), magnitude), zero))
    return p.select(is_zero, zero, quotient[0]), p.select(is_zero, zero, quotient[1])


@_rule("complex.rsqrt")
def _rsqrt(lw: _Lowering, op: Operation) -> Pair:
    root = lw.call(lw.suffixed("csqrt"), [op.operands[0]], op.results[0].type)
    return numpy_divide(lw.p, (lw.p.constant(1.0), lw.p.constant(0.0)), lw.parts(root))


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


@_rule("complex.log1p")
def _log1p(lw: _Lowering, op: Operation) -> Pair:
    """numpy: re = log(hypot(x + 1, y)), im = atan2(y, x + 1)."""
    p = lw.p
    ((x, y),) = lw.operands(op)
    shifted = p.add(x, p.constant(1.0))
    return lw.real_call("log", lw.real_call("hypot", shifted, y)), lw.real_call("atan2", y, shifted)


@_rule("complex.pow")
def _pow(lw: _Lowering, op: Operation) -> Pair:
    """The interpreter's formula and special cases (see the module docstring)."""
    p = lw.p
    (a, b), (c, d) = lw.operands(op)
    magnitude = numpy_abs(p, (a, b))
    angle = lw.real_call("atan2", b, a)
    coefficient = p.mul(lw.real_call("pow", magnitude, c), lw.real_call("exp", p.mul(p.neg(d), angle)))
    q = p.add(p.mul(c, angle), p.mul(d, lw.real_call("log", magnitude)))
    real, imag = p.mul(coefficient, lw.real_call("cos", q)), p.mul(coefficient, lw.real_call("sin", q))
    zero, one, inf = p.constant(0.0), p.constant(1.0), p.constant(float("inf"))
    real_exponent, real_base = p.compare("oeq", d, zero), p.compare("oeq", b, zero)
    inf_base = p.both(p.both(p.compare("oeq", a, inf), real_base), real_exponent)
    cases = [  # later cases win
        (p.both(p.both(p.compare("oeq", magnitude, zero), real_exponent), p.compare("oge", c, zero)),
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
        for inner in list(op.walk()):
            if inner.name.startswith("complex.") and not isinstance(inner, _KEPT):
                rule = _RULES.get(inner.name)
                if rule is None:
                    raise UnimplementedError(f"lower-complex: {inner.name} is not supported")
                _lower(inner, rule, op, declared)
        _drop_unused(op)
        verify_op(op)


# Ops that stay: they build and take apart complex values.
_KEPT = (cplx.ConstantOp, cplx.CreateOp, cplx.ReOp, cplx.ImOp)

__all__ = ["LowerComplexPass", "Parts", "hlo_divide", "numpy_abs", "numpy_divide", "numpy_product"]
