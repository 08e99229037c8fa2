"""The instruction emitter of the math library kernels, the double-double helpers and the op registry."""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

F64 = ir.DoubleType()
F32 = ir.FloatType()
I64 = ir.IntType(64)
I32 = ir.IntType(32)

INF = float("inf")
NAN = float("nan")


def like(type: ir.Type, element: ir.Type) -> ir.Type:
    """``element``, or a vector of it with the lane count of ``type``."""
    return ir.VectorType(element, type.count) if isinstance(type, ir.VectorType) else element


def splat(type: ir.Type, value: float | int) -> ir.Constant:
    """The constant ``value`` of the scalar type ``type``, or in every lane of the vector type ``type``."""
    if isinstance(type, ir.VectorType):
        return ir.Constant(type, [ir.Constant(type.element, value)] * type.count)
    return ir.Constant(type, value)


class Emitter:
    """Straight-line f64 / i64 arithmetic on top of an IRBuilder: no branches, only intrinsics that lower to
    instructions, so that the vectorizers can widen every function after inlining.

    With ``lanes`` the values are LLVM vectors of that many f64 / i64 (constants are splats): the same kernels
    then compute a whole SIMD vector."""

    def __init__(self, builder: ir.IRBuilder, lanes: int | None = None):
        self.b = builder
        self.module: ir.Module = builder.module
        self.lanes = lanes
        self.F64: ir.Type = F64 if lanes is None else ir.VectorType(F64, lanes)
        self.I64: ir.Type = I64 if lanes is None else ir.VectorType(I64, lanes)

    # values
    def _splat(self, type: ir.Type, value: float | int) -> ir.Constant:
        return splat(type, value)

    def f(self, value: float | ir.Value) -> ir.Value:
        return self._splat(self.F64, value) if isinstance(value, (float, int)) else value

    def i(self, value: int | ir.Value) -> ir.Value:
        return self._splat(self.I64, value) if isinstance(value, int) else value

    def _intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        full = f"{name}.f64" if self.lanes is None else f"{name}.v{self.lanes}f64"
        return self.b.call(declared(self.module, full, self.F64, [self.F64] * len(args)), list(args))

    def gather(self, table: ir.GlobalVariable, index: ir.Value) -> ir.Value:
        """``table[index]`` for a constant ``[N x double]`` table and an i64 index; for vectors one masked gather
        (a few instructions for LLVM to optimise, where a load per lane would be thousands of instructions at 64
        lanes). x86 code generation makes it a hardware gather on AVX-512 and on AVX2 CPUs with fast gathers
        (Intel's), and only then a load per lane on the others (AMD's Zen 3)."""
        pointer = self.b.gep(table, [ir.Constant(I64, 0), index], inbounds=True, source_etype=table.value_type)
        if self.lanes is None:
            return self.b.load(pointer, typ=F64)
        pointers = ir.VectorType(ir.PointerType(), self.lanes)
        pointer.type = pointers  # llvmlite types a GEP by its base pointer; LLVM's is a vector of pointers
        mask = ir.VectorType(ir.IntType(1), self.lanes)
        name = f"llvm.masked.gather.v{self.lanes}f64.v{self.lanes}p0"
        fn = declared(self.module, name, self.F64, [pointers, ir.IntType(32), mask, self.F64])
        every_lane = ir.Constant(mask, [ir.Constant(ir.IntType(1), 1)] * self.lanes)
        alignment = ir.Constant(ir.IntType(32), 8)
        return self.b.call(fn, [pointer, alignment, every_lane, ir.Constant(self.F64, ir.Undefined)])

    # float arithmetic (no fast-math flags: the error-free transformations rely on IEEE rounding)
    def add(self, a, b) -> ir.Value:
        return self.b.fadd(self.f(a), self.f(b))

    def sub(self, a, b) -> ir.Value:
        return self.b.fsub(self.f(a), self.f(b))

    def mul(self, a, b) -> ir.Value:
        return self.b.fmul(self.f(a), self.f(b))

    def div(self, a, b) -> ir.Value:
        return self.b.fdiv(self.f(a), self.f(b))

    def neg(self, a) -> ir.Value:
        return self.b.fneg(self.f(a))

    def fma(self, a, b, c) -> ir.Value:
        """a*b + c rounded once (used where exactness matters)."""
        return self._intrinsic("llvm.fma", self.f(a), self.f(b), self.f(c))

    def mad(self, a, b, c) -> ir.Value:
        """a*b + c, fused when the target has FMA (polynomial steps, where either rounding is fine)."""
        return self._intrinsic("llvm.fmuladd", self.f(a), self.f(b), self.f(c))

    def abs(self, a) -> ir.Value:
        return self._intrinsic("llvm.fabs", self.f(a))

    def floor(self, a) -> ir.Value:
        return self._intrinsic("llvm.floor", self.f(a))

    def rint(self, a) -> ir.Value:
        return self._intrinsic("llvm.roundeven", self.f(a))

    def sqrt(self, a) -> ir.Value:
        return self._intrinsic("llvm.sqrt", self.f(a))

    def copysign(self, magnitude, sign) -> ir.Value:
        return self._intrinsic("llvm.copysign", self.f(magnitude), self.f(sign))

    def horner(self, x: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        """c0 + c1 x + c2 x^2 + ... (coefficients in increasing degree)."""
        result = self.f(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            result = self.mad(result, x, c)
        return result

    # comparisons (ordered: false when an operand is NaN) and selection
    def lt(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("<", self.f(a), self.f(b))

    def le(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("<=", self.f(a), self.f(b))

    def gt(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered(">", self.f(a), self.f(b))

    def eq(self, a, b) -> ir.Value:
        return self.b.fcmp_ordered("==", self.f(a), self.f(b))

    def ne(self, a, b) -> ir.Value:
        """a != b, true when either is NaN."""
        return self.b.fcmp_unordered("!=", self.f(a), self.f(b))

    def isnan(self, a) -> ir.Value:
        return self.b.fcmp_unordered("uno", self.f(a), self.f(a))

    def select(self, cond, a, b) -> ir.Value:
        """cond ? a : b; Python numbers become constants of the other operand's type (two ints: i64, else f64)."""
        type = a.type if isinstance(a, ir.Value) else b.type if isinstance(b, ir.Value) else None
        type = type or (self.I64 if isinstance(a, int) and isinstance(b, int) else self.F64)
        a = a if isinstance(a, ir.Value) else self._splat(type, a)
        b = b if isinstance(b, ir.Value) else self._splat(type, b)
        return self.b.select(cond, a, b)

    def and_(self, a, b) -> ir.Value:
        return self.b.and_(a, b)

    def or_(self, a, b) -> ir.Value:
        return self.b.or_(a, b)

    def not_(self, a) -> ir.Value:
        return self.b.not_(a)

    def clamp(self, x, low: float, high: float) -> ir.Value:
        """x limited to [low, high]; NaN stays NaN."""
        return clamp_in_type(self.b, self.f(x), low, high)

    # bits and integers
    def bits(self, x) -> ir.Value:
        return self.b.bitcast(self.f(x), self.I64)

    def from_bits(self, i) -> ir.Value:
        return self.b.bitcast(self.i(i), self.F64)

    def iadd(self, a, b) -> ir.Value:
        return self.b.add(self.i(a), self.i(b))

    def isub(self, a, b) -> ir.Value:
        return self.b.sub(self.i(a), self.i(b))

    def iand(self, a, b) -> ir.Value:
        return self.b.and_(self.i(a), self.i(b))

    def ior(self, a, b) -> ir.Value:
        return self.b.or_(self.i(a), self.i(b))

    def ixor(self, a, b) -> ir.Value:
        return self.b.xor(self.i(a), self.i(b))

    def shl(self, a, b) -> ir.Value:
        return self.b.shl(self.i(a), self.i(b))

    def lshr(self, a, b) -> ir.Value:
        return self.b.lshr(self.i(a), self.i(b))

    def ashr(self, a, b) -> ir.Value:
        return self.b.ashr(self.i(a), self.i(b))

    def icmp(self, op: str, a, b) -> ir.Value:
        return self.b.icmp_signed(op, self.i(a), self.i(b))

    def itof(self, i) -> ir.Value:
        return self.b.sitofp(self.i(i), self.F64)

    def pow2(self, k) -> ir.Value:
        """2**k for an i64 k in [-1022, 1023]."""
        return self.from_bits(self.shl(self.iadd(k, 1023), 52))

    def scale(self, x, k) -> ir.Value:
        """x * 2**k rounded once, for i64 k in [-2044, 2046] (two factors keep each one a normal number)."""
        half = self.ashr(k, 1)
        return self.mul(self.mul(x, self.pow2(half)), self.pow2(self.isub(k, half)))

    def clear_low_word(self, x) -> ir.Value:
        """x with the low 32 bits of its significand zeroed (a value whose products with short constants are
        exact)."""
        return self.from_bits(self.iand(self.bits(x), -(1 << 32)))


# --- double-double helpers ---------------------------------------------------------------------------------------


def two_sum(e: Emitter, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(hi, lo) with hi = fl(a + b) and hi + lo = a + b exactly (Knuth's 2Sum)."""
    hi = e.add(a, b)
    bv = e.sub(hi, a)
    return hi, e.add(e.sub(a, e.sub(hi, bv)), e.sub(b, bv))


def fast_two_sum(e: Emitter, a, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """2Sum for |a| >= |b| (Dekker)."""
    hi = e.add(a, b)
    return hi, e.sub(b, e.sub(hi, a))


def dd_div(e: Emitter, nh: ir.Value, nl: ir.Value, dh: ir.Value, dl: ir.Value) -> ir.Value:
    """(nh + nl) / (dh + dl) for double-double operands, to ~0.5 ulp: one correction step on the quotient."""
    q = e.div(nh, dh)
    remainder = e.sub(e.add(e.fma(e.neg(q), dh, nh), nl), e.mul(q, dl))
    return e.add(q, e.div(remainder, dh))


def flip_sign(e: Emitter, value: ir.Value, flip: ir.Value) -> ir.Value:
    """-value where the i1 `flip` is set."""
    return e.from_bits(e.ixor(e.bits(value), e.shl(e.b.zext(flip, e.I64), 63)))


def constant_table(e: Emitter, name: str, values: Callable[[], list[float]]) -> ir.GlobalVariable:
    """The internal constant [N x double] global `name` of the module, created from values() the first time.
    `values` is a module-level function: the table's IR text is made once per process for it (as llvmlite formats
    constants, thousands of doubles take tens of milliseconds)."""
    existing = e.module.globals.get(name)
    if existing is not None:
        return existing
    size, text = _formatted_table(values)
    array = ir.ArrayType(F64, size)
    table = ir.GlobalVariable(e.module, array, name)
    table.global_constant = True
    table.linkage = "internal"
    table.initializer = ir.FormattedConstant(array, text)
    return table


# The size of a table `register_table` reads: two AVX-512 registers of doubles.
REGISTER_TABLE_SIZE = 16


def register_table(e: Emitter, name: str, values: Callable[[], list[float]], index: ir.Value) -> ir.Value:
    """``values()[index mod 16]`` for a constant table of REGISTER_TABLE_SIZE doubles and an i64 index (its low 4
    bits). Vector forms of 8, 16, 32, ... lanes on an AVX-512 host (the JIT's target) keep the table in two
    registers and pick each 8 lanes' entries with one two-table permute (vpermi2pd), without the memory accesses
    of a gather; the other forms read the constant table `name` (the same doubles, so that every form computes the
    same bits)."""
    table = values()
    assert len(table) == REGISTER_TABLE_SIZE, (name, len(table))
    if e.lanes is None or e.lanes < 8 or e.lanes & (e.lanes - 1) or not host_has_avx512():
        return e.gather(constant_table(e, name, values), e.iand(index, REGISTER_TABLE_SIZE - 1))
    v8f64, v8i64 = ir.VectorType(F64, 8), ir.VectorType(I64, 8)
    permute_name = "llvm.x86.avx512.vpermi2var.pd.512"  # (entries 0-7, index, entries 8-15)
    permute = declared(e.module, permute_name, v8f64, [v8f64, v8i64, v8f64])
    low, high = (ir.Constant(v8f64, [ir.Constant(F64, v) for v in half]) for half in (table[:8], table[8:]))
    pieces = [e.b.call(permute, [low, vector_lanes(e.b, index, first, 8), high]) for first in range(0, e.lanes, 8)]
    while len(pieces) > 1:  # concatenated pairwise
        pieces = [concatenate_vectors(e.b, pieces[k], pieces[k + 1]) for k in range(0, len(pieces), 2)]
    return pieces[0]


def clamp_in_type(b: ir.IRBuilder, x: ir.Value, low: float, high: float) -> ir.Value:
    """``x`` (a float or a vector of floats, of any width) limited to [low, high] (both exact in its type); NaN
    stays NaN."""
    low_value, high_value = splat(x.type, low), splat(x.type, high)
    x = b.select(b.fcmp_ordered("<", x, low_value), low_value, x)
    return b.select(b.fcmp_ordered(">", x, high_value), high_value, x)


def bf16_to_f32(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """The bf16 ``value`` (or vector) as f32: its bits shifted into the high half (exact, subnormals included). Not
    ``fpext``: LLVM narrows ops on ``fpext``ed values (``maximum(fpext a, fpext b)``, compares) back to bf16 ones,
    which x86 computes in f32 and rounds back with AVX512-BF16's vcvtneps2bf16 (flushing subnormals) or, without
    it, with calls to compiler-rt's ``__truncsfbf2``."""
    i32 = like(value.type, I32)
    bits = b.zext(b.bitcast(value, like(value.type, ir.IntType(16))), i32)
    return b.bitcast(b.shl(bits, splat(i32, 16)), like(value.type, F32))


def bf16_rounded_bits(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """The bits of the f32 ``value`` (or vector) with its bf16 rounding (to nearest even, a NaN its sign's quiet
    NaN, as XLA:CPU converts) in their high 16 bits: integer operations, where LLVM's ``fptrunc`` to bfloat calls
    compiler-rt's ``__truncsfbf2`` on hosts without a bf16 conversion instruction (libgcc before 13 lacks it)."""
    i32 = like(value.type, I32)
    bits = b.bitcast(value, i32)
    lsb = b.and_(b.lshr(bits, splat(i32, 16)), splat(i32, 1))
    rounded = b.add(bits, b.add(lsb, splat(i32, 0x7FFF)))
    quiet = b.or_(b.and_(bits, splat(i32, 0xFF800000)), splat(i32, 0x400000))
    return b.select(b.fcmp_unordered("uno", value, value), quiet, rounded)


def pack_bf16(b: ir.IRBuilder, rounded_bits: ir.Value, bf16_type: ir.Type) -> ir.Value:
    """The bf16 values (of type ``bf16_type``, a scalar or a vector) whose bits are the high halves of
    ``rounded_bits``."""
    if isinstance(bf16_type, ir.VectorType):
        # The high 16-bit halves (words 2k + 1, little-endian) picked by one shuffle: x86 packs 32 lanes with one
        # vpermt2w, where a shift and a truncation take two shifts, two vpmovdw and a vinserti64x4.
        count = bf16_type.count
        words = b.bitcast(rounded_bits, ir.VectorType(ir.IntType(16), 2 * count))
        high = b.shuffle_vector(words, ir.Constant(words.type, None),
                                ir.Constant(ir.VectorType(I32, count), [2 * k + 1 for k in range(count)]))
        return b.bitcast(high, bf16_type)
    high = b.trunc(b.lshr(rounded_bits, ir.Constant(I32, 16)), ir.IntType(16))
    return b.bitcast(high, bf16_type)


def declared(module: ir.Module, name: str, result: ir.Type, arguments: list[ir.Type]) -> ir.Function:
    """The function ``name`` of ``module`` (an LLVM intrinsic), declared with that type the first time."""
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(result, arguments), name)


def vector_lanes(b: ir.IRBuilder, vector: ir.Value, first: int, count: int) -> ir.Value:
    """Lanes ``first``, ..., ``first + count - 1`` of ``vector``, as a vector."""
    if first == 0 and count == vector.type.count:
        return vector
    mask = ir.Constant(ir.VectorType(ir.IntType(32), count), list(range(first, first + count)))
    return b.shuffle_vector(vector, ir.Constant(vector.type, ir.Undefined), mask)


def concatenate_vectors(b: ir.IRBuilder, low: ir.Value, high: ir.Value) -> ir.Value:
    """The lanes of ``low`` then those of ``high``, as one vector."""
    count = low.type.count + high.type.count
    return b.shuffle_vector(low, high, ir.Constant(ir.VectorType(ir.IntType(32), count), list(range(count))))


@functools.cache
def host_has_avx512() -> bool:
    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


@functools.cache
def _formatted_table(values: Callable[[], list[float]]) -> tuple[int, str]:
    data = values()
    bits = struct.unpack(f"<{len(data)}Q", struct.pack(f"<{len(data)}d", *data))
    return len(data), "[" + ", ".join(f"double 0x{b:016X}" for b in bits) + "]"  # LLVM's exact form of a double


# --- registry ----------------------------------------------------------------------------------------------------

Kernel = Callable[..., ir.Value]  # (Emitter, *f64 arguments) -> f64 result
NativeKernel = Callable[[ir.IRBuilder, ir.Value], ir.Value]


@dataclass(frozen=True)
class Op:
    arity: int
    f64: Kernel
    f32: Kernel | None  # evaluated in f64 for f32 (and f16/bf16) arguments, then rounded once; None: use f64
    # The interval the f32 kernel's argument is clamped to, in f32 before it is extended (the kernel assumes it):
    # a clamp of the extended value takes twice the instructions, an f32 vector being two f64 vectors.
    f32_domain: tuple[float, float] | None = None
    # A kernel computed in f32 arithmetic on f32 scalars and vectors, in place of the others for f32 (and f16/bf16)
    # arguments: for an op whose f32 results follow XLA:CPU's approximation rather than the rounded exact value.
    f32_native: NativeKernel | None = None


OPS: dict[str, Op] = {}


def register(
    name: str, arity: int = 1, *, f64: Kernel, f32: Kernel | None = None, aliases: tuple[str, ...] = (),
    f32_domain: tuple[float, float] | None = None, f32_native: NativeKernel | None = None,
) -> None:
    """Makes `name` (and its aliases) a math library op computed by the given kernels."""
    for n in (name, *aliases):
        OPS[n] = Op(arity, f64, f32, f32_domain, f32_native)
