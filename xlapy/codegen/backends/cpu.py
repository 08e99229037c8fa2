"""The CPU backend: the final xDSL module (after `lower-tensors`) → LLVM IR (llvmlite) → O3 → MCJIT → ctypes.

The GPU execution model is mapped onto the CPU: the entry function `@main(%p0: !llvm.ptr, ...)`
becomes `void @main(ptr %buffers, i64 %block_begin, i64 %block_end)`. `%buffers` is an array of buffer pointers
(the entry function's pointer arguments in order: params, then outputs). Its body runs in two loops: blocks
`bl` over [block_begin, block_end) and threads `th` over [0, threads), where `gpu.block_id x` is `bl` and
`gpu.thread_id x` is `th` (`threads` is the upper bound + 1 of the `xla.range` of `gpu.thread_id`). The runtime
calls it from a thread pool with disjoint block ranges; ctypes releases the GIL during the call.

A block's shared tile and barriers (`xla.allocate_shared`, `xla.sync_threads`; `lower-tensors` turns the tile into
an `llvm.alloca` and leaves the bare barrier) map onto this loop nest: the tile is one stack array per CPU thread
running the kernel (hoisted to the kernel's entry, reused by each of its blocks), and each barrier splits the thread
loop into phases, every thread running the code before the barrier before any runs the code after it. Before the
backend (after `lower-tensors`) and after it, in the loop structure of the LLVM IR:

    %shmem = llvm.alloca %c1024 x f32 {alignment = 64 : i64}     %shmem = alloca float, i64 1024, align 64
    <A: stores to %shmem>                                         for bl in [block_begin, block_end):
    xla.sync_threads                                                for th in [0, threads): A
    <B: loads from %shmem>                                          for th in [0, threads): B

Index values of A that B uses are computed again in B's loop (with B's `th`); any other value must go through the
tile, as on a GPU (`_Phase`). A loop at the top level whose body holds barriers (one every thread runs alike, as the
rows of the reduction emitter's column-tile form) runs once per block, with its body's phases in thread loops
inside each step (`_emit_loops`).

`@main` only loads the pointers and calls the internal, non-inlined `@main.kernel(ptr noalias ..., i64, i64)`: the
loops live there, where LLVM sees `noalias` (+ `dereferenceable`) arguments — the runtime never passes
overlapping buffers (duplicates were merged by `lower-tensors`).

Streaming stores: an `llvm.store` marked `nontemporal` (by `nontemporal-stores`: a whole-line vector store into a
large output the kernel never reads) becomes a store with `!nontemporal` metadata at its `alignment` (64), which
x86 emits as `vmovntps`/`vmovntdq`; the kernel then ends with `sfence` (streaming stores are weakly ordered: the
threads that read the output next must see them). A pointer argument with `llvm.align` gets LLVM's `align`, and the
signature records it: `CpuKernel` refuses a buffer that does not start on that boundary (an aligned streaming
store to an unaligned address faults).

Semantics choices:
- `index` is i64.
- bf16 and f16 arithmetic is done in f32 and rounded back after every op (XLA's semantics; exact for the
  IEEE-correctly-rounded ops since f32 has more than twice the precision). Narrowing conversions round once:
  f32 → bf16 is an integer round-to-nearest-even sequence (exact for denormals too; a NaN becomes its sign's
  quiet NaN, as in XLA:CPU), or for vectors on hosts with AVX512-BF16 its vcvtneps2bf16 with the integer
  sequence for vectors holding a denormal or a NaN (which the instruction flushes, or keeps the payload of:
  `_f32_to_bf16_by_instruction`), bit for bit the same; f64 → bf16/f16 goes through f32
  with round-to-odd; bf16 → f32 shifts the bits (`_bf16_to_f32`: LLVM would narrow ops on `fpext`ed values back
  to bf16 ones, rounded with vcvtneps2bf16). This also avoids the compiler-rt helpers (`__truncsfbf2`,
  `__truncdfhf2`, ...) LLVM would call, which are not present in the Python process. f16 ↔ f32 conversions
  need F16C (x86-64-v3). bf16 values are loaded and stored as i16 (`_in_memory`): LLVM's x86 backend cannot
  legalize the masked bfloat loads its vectorizers make of strided reads.
- The 8- and 4-bit floats (f8E4M3FN, f8E5M2, ..., f4E2M1FN) are i8 values holding their bits (one element per
  byte in memory, as ml_dtypes stores them). Only `arith.extf` from them (a lookup in a 256-entry f32 table)
  and `arith.truncf` to them (integer rounding to nearest even, with each format's overflow, NaN, -0 and
  subnormal rules, bit-exact with ml_dtypes; f64 rounds to odd on the way through f32) touch them: the emitter
  computes their ops in f32. Sub-byte integers (i1, i2, i4) are LLVM integers of their width.
- Vector values are LLVM vectors: a fusion whose lanes `vectorize-lanes` turned into vector ops computes SIMD
  vectors (`vector_index` is the SIMD lane), math functions included (their vector forms). Where lanes are
  still read one by one (`vector.extract`), vectors are kept per lane (`_Lanes`) so that the loop vectorizer
  vectorizes the thread loop across threads; the thread loop then carries a vectorization-width hint
  (`_thread_loop_width`) when its body is straight-line code (`_always_vectorizable`).
- Integer division and remainder never trap: the divisor is replaced by 1 where it is 0 (or where signed
  division overflows), and x / 0 = -1 (all ones), x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0 (XLA's semantics).
- `math.*` transcendentals call the always-inline functions of `math_library.math_function`; `arith.remf`
  is LLVM's `frem` (lowered by LLVM to a call of `fmod`/`fmodf`, resolved in the process's libm).
- Complex numbers (`complex<f32>`, `complex<f64>`, and `!llvm.struct` of two floats in memory) are the LLVM
  struct {re, im}; `lower-complex` leaves only their construction, parts, selects and calls. Functions declared
  without a body (`cexpf`, `hypotf`, ...) are the C library's, resolved in the process like `fmod`; complex
  numbers cross those calls as C passes them (on x86-64, a float complex is one `<2 x float>`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from xdsl.dialects import arith, func, gpu, scf, vector
from xdsl.dialects import llvm as xllvm
from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    DenseIntOrFPElementsAttr,
    Float4E2M1FNType,
    Float8E3M4Type,
    Float8E4M3B11FNUZType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E4M3Type,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from xlapy.codegen.backends.mathlib.emitter import (
    bf16_rounded_bits,
    bf16_to_f32,
    concatenate_vectors,
    pack_bf16,
    vector_lanes,
)
from xlapy.codegen.backends.mathlib.emitter import like as _like  # the backend's name for it
from xlapy.codegen.backends.object_check import check_object, host_machine
from xlapy.codegen.passes.lower_tensors import is_block_level
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.registry import registrar

# --- types ------------------------------------------------------------------------------------------------------


class BFloatType(ir.Type):
    """LLVM's `bfloat`. llvmlite has no class for it: this one derives from `ir.Type`, the public base of its types,
    and defines what a type defines (its name in LLVM IR, equality, `format_constant`: constants print as
    `0xRXXXX`)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash(BFloatType)

    def format_constant(self, value: float) -> str:
        bits = int(np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
        return f"0xR{bits:04X}"


F32 = ir.FloatType()
F64 = ir.DoubleType()
BF16 = BFloatType()
F16 = ir.HalfType()
I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()

_SCALAR_TYPES: dict[type[Attribute], ir.Type] = {
    IndexType: I64,
    BFloat16Type: BF16,
    Float16Type: F16,
    Float32Type: F32,
    Float64Type: F64,
    xllvm.LLVMPointerType: PTR,
}


@dataclass(frozen=True)
class NarrowFloat:
    """An 8- or 4-bit float format: an LLVM i8 holding its bits (in the low bits, one element per byte)."""

    dtype: Any  # the ml_dtypes type
    exponent_bits: int
    mantissa_bits: int
    bias: int
    # "ieee": infinities and NaNs as IEEE; "fn": no infinities, NaN all ones; "fnuz": no infinities, no -0, NaN is
    # -0's code; "e8m0": an unsigned power of two, NaN all ones; "f4": no infinities nor NaNs (overflow saturates)
    kind: str


NARROW_FLOATS: dict[type[Attribute], NarrowFloat] = {
    Float8E5M2Type: NarrowFloat(ml_dtypes.float8_e5m2, 5, 2, 15, "ieee"),
    Float8E4M3Type: NarrowFloat(ml_dtypes.float8_e4m3, 4, 3, 7, "ieee"),
    Float8E3M4Type: NarrowFloat(ml_dtypes.float8_e3m4, 3, 4, 3, "ieee"),
    Float8E4M3FNType: NarrowFloat(ml_dtypes.float8_e4m3fn, 4, 3, 7, "fn"),
    Float8E4M3FNUZType: NarrowFloat(ml_dtypes.float8_e4m3fnuz, 4, 3, 8, "fnuz"),
    Float8E5M2FNUZType: NarrowFloat(ml_dtypes.float8_e5m2fnuz, 5, 2, 16, "fnuz"),
    Float8E4M3B11FNUZType: NarrowFloat(ml_dtypes.float8_e4m3b11fnuz, 4, 3, 11, "fnuz"),
    Float8E8M0FNUType: NarrowFloat(ml_dtypes.float8_e8m0fnu, 8, 0, 127, "e8m0"),
    Float4E2M1FNType: NarrowFloat(ml_dtypes.float4_e2m1fn, 2, 1, 1, "f4"),
}


def narrow_float(attr: Attribute) -> NarrowFloat | None:
    """The format of an 8- or 4-bit float xDSL type (or vector of one); None for other types."""
    element = attr.element_type if isinstance(attr, VectorType) else attr
    return NARROW_FLOATS.get(type(element))


def llvm_type(attr: Attribute) -> ir.Type:
    """The LLVM type of an xDSL type (index → i64, bf16 → bfloat, the 8- and 4-bit floats → i8 holding their
    bits, vector<NxT> → <N x T>)."""
    if type(attr) in NARROW_FLOATS:
        return ir.IntType(8)
    if isinstance(attr, IntegerType):
        return ir.IntType(attr.width.data)
    if isinstance(attr, VectorType):
        shape = attr.get_shape()
        if len(shape) != 1:
            raise UnimplementedError(f"cpu backend: {attr} (only 1-D vectors)")
        return ir.VectorType(llvm_type(attr.element_type), shape[0])
    if isinstance(attr, ComplexType):
        return ir.LiteralStructType([llvm_type(attr.element_type)] * 2)
    if isinstance(attr, xllvm.LLVMStructType):
        return ir.LiteralStructType([llvm_type(t) for t in attr.types])
    scalar = _SCALAR_TYPES.get(type(attr))
    if scalar is None:
        raise UnimplementedError(f"cpu backend: type {attr}")
    return scalar


def _element(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def _constant(t: ir.Type, value: Any) -> ir.Constant:
    """A scalar or splat constant of type `t`."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [_constant(t.element, value)] * t.count)
    if isinstance(t, ir.IntType):
        return ir.Constant(t, _signed(int(value), t.width))
    return ir.Constant(t, value)


def _signed(value: int, width: int) -> int:
    value &= (1 << width) - 1
    return value - (1 << width) if width > 1 and value >> (width - 1) else value


def _mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return t.intrinsic_name


# --- host -------------------------------------------------------------------------------------------------------


@functools.cache
def host_target() -> tuple[str, str, str]:
    """(triple, cpu name, feature string) of this machine."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    _load_compiler_runtime()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def _load_compiler_runtime() -> None:
    """Makes libgcc's soft-float helpers (``__truncdfhf2``: f64 → f16 without a
    native instruction) visible to the JIT; LLVM emits calls to them."""
    import ctypes.util

    name = ctypes.util.find_library("gcc_s")
    if name is not None:
        with contextlib.suppress(RuntimeError):
            llvm.load_library_permanently(name)


def _target_machine() -> llvm.TargetMachine:
    """A fresh host target machine (an MCJIT engine takes ownership of the one it is given)."""
    triple, cpu, features = host_target()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=3, codemodel="jitdefault", jit=True)


# `llvm.is.fpclass`'s test bits for NaNs (signaling, quiet) and subnormals (negative, positive), and vfpclassps's
# category bits for them (quiet NaN, subnormal, signaling NaN).
_FP_CLASS_SUBNORMAL_OR_NAN = 0x1 | 0x2 | 0x10 | 0x80
_X86_CLASS_SUBNORMAL_OR_NAN = 0x01 | 0x20 | 0x80
# The smallest dividend (in magnitude, zero apart) whose quotient by a broadcast scalar `_divf` corrects: the
# residual a - s q is a multiple of ulp(s) ulp(q), which reaches the subnormals (and is rounded) when |a| is near
# 2^-103 or below.
MIN_CORRECTED_DIVIDEND = 2.0 ** -100


def _host_has_feature(name: str) -> bool:
    return f"+{name}" in host_target()[2].split(",")


def _host_has_bf16_conversion() -> bool:
    return _host_has_feature("avx512bf16") or _host_has_feature("avxneconvert")


def vector_bits() -> int:
    """The width of this machine's widest SIMD registers, in bits."""
    features = host_target()[2].split(",")
    return 512 if "+avx512f" in features else 256 if "+avx" in features else 128


def _thread_loop_width(function: func.FuncOp) -> int:
    """Vectorization factor hint for the thread loop: two registers of the widest computed element type (16-bit
    floats are computed in f32; index arithmetic only addresses memory). LLVM's cost model tends to pick narrow
    factors for bodies full of bf16 roundings; two registers per value also hide the latency of long op chains."""
    widest = 32
    for op in function.walk():
        if op.name in ("arith.index_cast", "arith.index_castui"):  # offsets of loads and stores
            continue
        for result in op.results:
            element = result.type.element_type if isinstance(result.type, VectorType) else result.type
            if isinstance(element, (IntegerType, Float64Type)):
                width = element.width.data if isinstance(element, IntegerType) else 64
                widest = max(widest, width)
    return max(4, 2 * vector_bits() // widest)


def _is_vectorized(function: func.FuncOp) -> bool:
    """Whether the body computes on vectors (`vector_index` lowered to SIMD lanes by `vectorize-lanes`): it has
    vector values and reads no lane out of a vector loaded from memory. Lanes read out of a loop's vector
    accumulators (a row reduction's final horizontal combine) leave the loads and the loop whole vectors: taken
    for per-lane code, the loop's loads become scalar ones that the SLP vectorizer only partly joins again (bf16
    rows were read half by `vpinsrw`, 1.4x slower on AVX2)."""
    has_vectors = False
    for op in function.walk():
        if isinstance(op, vector.ExtractOp) and isinstance(op.vector.owner, xllvm.LoadOp):
            return False
        has_vectors = has_vectors or any(isinstance(r.type, VectorType) for r in op.results)
    return has_vectors


def _always_vectorizable(function: func.FuncOp) -> bool:
    """Whether LLVM's loop vectorizer can always widen the thread loop of `function`: its body, with the helpers it
    calls (inlined by then), is straight-line code without complex numbers (LLVM structs). Loops inside (a
    reduction's) and branches are not: the if-conversion of branches can fail (SimplifyCFG turns a chain of
    `scf.if` on one value into a switch the vectorizer does not take). Only these loops get the width hint: on a
    loop it does not vectorize, a hint makes LLVM print its analysis and a warning to stderr ("loop not
    vectorized: ..."); without one the cost model decides, silently."""
    module = function.parent_op()
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)] if isinstance(module, ModuleOp) else []
    for op in (op for f in functions or [function] for op in f.walk()):
        if isinstance(op, (scf.ForOp, scf.IfOp, scf.WhileOp, scf.IndexSwitchOp)):
            return False
        if any(isinstance(r.type, ComplexType) for r in op.results):
            return False
    return True


def _loop_metadata(module: ir.Module, width: int) -> ir.values.MDValue:
    """`!llvm.loop` metadata asking the loop vectorizer for `width` lanes (a self-referencing loop id)."""
    hint = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.width"), _constant(I32, width)])
    enable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"), _constant(I1, 1)])
    # Every operand after the self-reference must be a node: LLVM's loop passes cast them to MDNode.
    name = module.add_metadata([ir.MetaDataString(module, "xlapy.thread_loop")])
    loop_id = module.add_metadata([hint, enable, name])
    loop_id.operands = (loop_id, *loop_id.operands)
    return loop_id


# --- translation ------------------------------------------------------------------------------------------------

OpLowering = Callable[["_Translator", Operation], None]
_OPS: dict[str, OpLowering] = {}


_lowers = registrar(_OPS, "LLVM lowerings")


_NO_IDS: dict[str, ir.Value] = {}


@dataclass
class _Lanes:
    """A 1-D vector value kept as one scalar per lane.

    When a thread's body is per-lane scalar code between a vector load and a vector store (unrolled lanes that
    were not turned back into vector ops, e.g. a module lowered for the GPU), keeping those vectors as separate
    scalars (loads and stores become one scalar access per lane) leaves the thread loop free of vector-typed
    instructions, so LLVM's loop vectorizer can vectorize *across threads* (interleaved accesses, full SIMD width)
    instead of the SLP vectorizer forming K-lane vectors only. Vectorized bodies (`vectorize-lanes`, no
    `vector.extract` left) load and store whole vectors.
    """

    type: ir.VectorType
    lanes: list[ir.Value]


class _Translator:
    """Translates the ops of one function body into `builder`."""

    def __init__(self, module: ir.Module, function: ir.Function, ids: dict[str, ir.Value], bf16_instruction: bool):
        # `ids` is empty for helper functions: only the entry function has thread/block loops.
        self.module = module
        self.function = function
        self.b = ir.IRBuilder(function.append_basic_block("entry"))
        self.ids = ids  # "gpu.thread_id" / "gpu.block_id" → loop variable
        # Vectors are narrowed to bf16 with the host's instruction, exactly (`_f32_to_bf16_by_instruction`).
        self.bf16_instruction = bf16_instruction
        # id of a bf16 vector narrowed that way → (the vector, its value as f32), for `_bf16_to_f32`.
        self._bf16_widened: dict[int, tuple[ir.Value, ir.Value]] = {}
        self.values: dict[SSAValue, ir.Value] = {}
        self.is_entry = ids is not _NO_IDS
        # Vector loads and stores are split into lanes (`_Lanes`) only where the lanes are read one by one.
        self.scalar_lanes = True
        # Whether a streaming (`!nontemporal`) store was emitted: the kernel then ends with a store fence.
        self.streaming_stores = False

    # values
    def get(self, value: SSAValue) -> ir.Value:
        """The LLVM value of `value` (a per-lane vector is assembled where it is needed)."""
        result = self.values[value]
        if isinstance(result, _Lanes):
            vector = ir.Constant(result.type, ir.Undefined)
            for k, lane in enumerate(result.lanes):
                vector = self.b.insert_element(vector, lane, _constant(I32, k))
            return vector
        return result

    def lanes(self, value: SSAValue) -> list[ir.Value]:
        """The lanes of the 1-D vector `value`."""
        result = self.values[value]
        if isinstance(result, _Lanes):
            return list(result.lanes)
        return [self.b.extract_element(result, _constant(I32, k)) for k in range(result.type.count)]

    def is_lanes(self, value: SSAValue) -> bool:
        return isinstance(self.values[value], _Lanes)

    def args(self, op: Operation) -> list[ir.Value]:
        return [self.get(v) for v in op.operands]

    def set(self, op: Operation, *values: ir.Value) -> None:
        for result, value in zip(op.results, values, strict=True):
            self.values[result] = value

    def block(self, block: Block) -> list[ir.Value]:
        """Translate the ops of `block`; returns the operands of its terminator (`scf.yield`)."""
        yielded: list[ir.Value] = []
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                yielded = self.args(op)
                continue
            lowering = _OPS.get(op.name)
            if lowering is None and op.name.startswith("math."):
                lowering = _math_library_op
            if lowering is None:
                raise UnimplementedError(f"cpu backend: {op.name}")
            lowering(self, op)
        return yielded

    # helpers
    def intrinsic(self, name: str, result: ir.Type, args: Sequence[ir.Value], mangle: Sequence[ir.Type]) -> ir.Value:
        full = ".".join([name, *(_mangle(t) for t in mangle)])
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(result, [a.type for a in args]), name=full)
        return self.b.call(fn, args)

    def widen(self, value: ir.Value) -> ir.Value:
        """bf16/f16 (or vectors of them) → f32 (exact); other values unchanged."""
        if _element(value.type) == BF16:
            return self._bf16_to_f32(value)
        if _element(value.type) == F16:
            return self.b.fpext(value, _like(value.type, F32))
        return value

    def _bf16_to_f32(self, value: ir.Value) -> ir.Value:
        """bf16 → f32 (`bf16_to_f32`), reusing the f32 value a rounding just made."""
        widened = self._bf16_widened.get(id(value))
        if widened is not None and widened[0] is value:
            return widened[1]
        return bf16_to_f32(self.b, value)

    def narrow(self, value: ir.Value, target: ir.Type) -> ir.Value:
        """Float `value` converted to the float type `target`, rounding (to nearest even) at most once."""
        source, element = _element(value.type), _element(target)
        if source == element:
            return value
        if source in (BF16, F16):  # widening is exact; go through f32
            value, source = self.widen(value), F32
            if element == F32:
                return value
        if element == F64:
            return self.b.fpext(value, target)
        if element == F32:
            return self.b.fptrunc(value, target)
        if source == F64:  # to bf16/f16: round to odd first so that the second rounding is the only one
            value = self._to_f32_round_to_odd(value)
        if element == BF16:
            return self._f32_to_bf16(value)
        return self.b.fptrunc(value, target)

    def _to_f32_round_to_odd(self, value: ir.Value) -> ir.Value:
        """f64 → f32 rounding to odd: a later rounding to a type of ≤ 22 bits of precision is then exact."""
        b = self.b
        i32 = _like(value.type, I32)
        rounded = b.fptrunc(value, _like(value.type, F32))
        back = b.fpext(rounded, value.type)
        bits = b.bitcast(rounded, i32)
        inexact = b.fcmp_ordered("one", back, value)
        fabs = functools.partial(self.intrinsic, "llvm.fabs", value.type, mangle=[value.type])
        away = b.fcmp_ordered("ogt", fabs([back]), fabs([value]))
        toward_zero = b.select(b.and_(inexact, away), b.sub(bits, _constant(i32, 1)), bits)
        odd = b.select(inexact, b.or_(toward_zero, _constant(i32, 1)), toward_zero)
        return b.bitcast(odd, _like(value.type, F32))

    def _f32_to_bf16(self, value: ir.Value) -> ir.Value:
        """f32 → bf16, round to nearest even, denormals rounded like other values, a NaN its sign's quiet NaN."""
        if isinstance(value.type, ir.VectorType) and self.bf16_instruction:
            return self._f32_to_bf16_by_instruction(value)
        return pack_bf16(self.b, bf16_rounded_bits(self.b, value), _like(value.type, BF16))

    def _f32_to_bf16_by_instruction(self, value: ir.Value) -> ir.Value:
        """`_f32_to_bf16` of a vector with the host's conversion (vcvtneps2bf16, one instruction where the integer
        sequence takes six per 16 lanes). It rounds to nearest even like the integer sequence, but flushes denormal
        inputs to zero and keeps the high bits of a NaN's payload: a vector with a denormal or NaN lane takes the
        integer sequence instead, on a branch marked unlikely, so the common path pays one class test per 16
        lanes."""
        b = self.b
        native = b.fptrunc(value, _like(value.type, BF16))
        any_special = self._any_lane(self._subnormal_or_nan_lanes(value))
        rounded_bits = bf16_rounded_bits(b, value)
        # The two roundings meet as i16 vectors: a phi of bfloat vectors makes LLVM's x86 backend take the rare
        # path one lane at a time.
        words = _like(value.type, ir.IntType(16))
        native_words = b.bitcast(native, words)
        common = b.block
        with b.if_then(any_special, likely=False):
            exact = b.bitcast(pack_bf16(b, rounded_bits, native.type), words)
            rare = b.block
        merged = b.phi(words)
        merged.add_incoming(native_words, common)
        merged.add_incoming(exact, rare)
        result = b.bitcast(merged, native.type)
        # bf16 arithmetic widens each rounded result again for the next op: that reads the rounded bits in place
        # (one mask), cheaper than widening the packed halves; unused, the integer sequence is dead code.
        i32 = rounded_bits.type
        high_half = b.and_(rounded_bits, _constant(i32, 0xFFFF0000))
        self._bf16_widened[id(result)] = (result, b.bitcast(high_half, value.type))
        return result

    def _subnormal_or_nan_lanes(self, value: ir.Value) -> ir.Value:
        """Which lanes of the f32 vector `value` are subnormal or NaN, as a vector of i1."""
        return self._class_lanes(value, _FP_CLASS_SUBNORMAL_OR_NAN, _X86_CLASS_SUBNORMAL_OR_NAN)

    def _class_lanes(self, value: ir.Value, classes: int, x86_classes: int) -> ir.Value:
        """Which lanes of the f32 vector `value` are of the classes `classes` (`llvm.is.fpclass`'s mask; the same
        classes are `x86_classes` in vfpclassps' immediate), as a vector of i1: AVX512-DQ's vfpclassps a register
        at a time (LLVM expands the generic class test into integer ops)."""
        count = value.type.count
        pieces = count // 16
        if not (count % 16 == 0 and pieces & (pieces - 1) == 0 and _host_has_feature("avx512dq")):
            return self.intrinsic("llvm.is.fpclass", _like(value.type, ir.IntType(1)),
                                  [value, _constant(I32, classes)], mangle=[value.type])
        masks = [self.intrinsic("llvm.x86.avx512.fpclass.ps.512", ir.VectorType(ir.IntType(1), 16),
                                [vector_lanes(self.b, value, first, 16), _constant(I32, x86_classes)], mangle=[])
                 for first in range(0, count, 16)]  # one zmm register at a time
        while len(masks) > 1:  # concatenated pairwise
            masks = [concatenate_vectors(self.b, low, high) for low, high in zip(masks[0::2], masks[1::2])]
        return masks[0]

    def _any_lane(self, lanes: ir.Value) -> ir.Value:
        """Whether any lane of the i1 vector `lanes` is set (one mask test)."""
        mask = ir.IntType(lanes.type.count)
        return self.b.icmp_unsigned("!=", self.b.bitcast(lanes, mask), _constant(mask, 0))

    def divide_by_scalar(self, dividend: ir.Value, divisor: ir.Value, scalar: ir.Value) -> ir.Value:
        """`dividend / divisor` for an f32 vector `dividend` and a `divisor` whose lanes are all the f32 `scalar`, by
        Markstein's correction of a product with the reciprocal: with y = RN(1/s) and q = RN(a y),
        r = a - s q is exact (an FMA) and RN(q + r y) is the correctly rounded quotient RN(a/s) whenever nothing
        underflows or overflows (J.-M. Muller et al., Handbook of Floating-Point Arithmetic, Markstein's theorem).
        A vector with a lane outside that (y not normal; a quotient that is subnormal, infinite or NaN, or 0 from a
        dividend that is not; a dividend below `MIN_CORRECTED_DIVIDEND`, whose residual could underflow) is divided
        instead, on a branch marked unlikely; a zero dividend's quotient is the
        product q, a zero of the right sign. The reciprocal is one scalar division, which LLVM hoists out of the
        loops the scalar is constant in."""
        b = self.b
        count = dividend.type.count
        reciprocal = b.fdiv(_constant(F32, 1.0), scalar)
        one = b.insert_element(ir.Constant(ir.VectorType(F32, 1), ir.Undefined), reciprocal, _constant(I32, 0))
        reciprocals = b.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, count), [0] * count))
        fma = "llvm.fma"
        product = b.fmul(dividend, reciprocals)
        residual = self.intrinsic(fma, dividend.type, [b.fneg(product), divisor, dividend], [dividend.type])
        corrected = self.intrinsic(fma, dividend.type, [residual, reciprocals, product], [dividend.type])
        zero = _constant(dividend.type, 0.0)
        zero_dividend = b.fcmp_ordered("==", dividend, zero)
        quotient = b.select(zero_dividend, product, corrected)
        reciprocal_abs = self.intrinsic("llvm.fabs", F32, [reciprocal], [F32])
        usable = b.and_(b.fcmp_ordered(">=", reciprocal_abs, _constant(F32, 2.0 ** -126)),
                        b.fcmp_ordered("<", reciprocal_abs, _constant(F32, float("inf"))))
        # A lane is corrected when its quotient is normal and finite and its dividend at least 2^-100 (below, the
        # residual a - s q, a multiple of ulp(s) ulp(q), may underflow and be rounded); a zero dividend always is.
        # Ordered compares (false for NaN): a class test is one vfpclassps on AVX-512 but a dozen integer
        # instructions on AVX2 (softmax's division loop on Zen 3: 72 instructions per 16 lanes, now 53).
        def fabs(value: ir.Value) -> ir.Value:
            return self.intrinsic("llvm.fabs", value.type, [value], [value.type])

        quotient_magnitude = fabs(quotient)
        in_range = b.and_(b.and_(b.fcmp_ordered(">=", quotient_magnitude, _constant(dividend.type, 2.0 ** -126)),
                                 b.fcmp_ordered("<", quotient_magnitude, _constant(dividend.type, float("inf")))),
                          b.fcmp_ordered(">=", fabs(dividend), _constant(dividend.type, MIN_CORRECTED_DIVIDEND)))
        special = b.and_(b.not_(in_range), b.not_(zero_dividend))
        common = b.block
        with b.if_then(b.or_(b.not_(usable), self._any_lane(special)), likely=False):
            divided = b.fdiv(dividend, divisor)
            rare = b.block
        merged = b.phi(dividend.type)
        merged.add_incoming(quotient, common)
        merged.add_incoming(divided, rare)
        return merged

    def in_f32(self, op: Operation, compute: Callable[..., ir.Value]) -> None:
        """Define `op`'s result as `compute(*operands)`, done in f32 for bf16/f16 and rounded back."""
        result_type = llvm_type(op.results[0].type)
        args = [self.widen(a) for a in self.args(op)]
        self.set(op, self.narrow(compute(*args), result_type))


# arith: constants


def _constant_value(attr: Attribute, t: ir.Type) -> ir.Constant:
    if isinstance(attr, IntegerAttr):
        return _constant(t, attr.value.data)
    if isinstance(attr, FloatAttr):
        return _constant(t, attr.value.data)
    if isinstance(attr, DenseIntOrFPElementsAttr) and isinstance(t, ir.VectorType):
        values = list(attr.get_values())
        if len(values) == 1:
            values *= t.count
        return ir.Constant(t, [_constant(t.element, v) for v in values])
    raise UnimplementedError(f"cpu backend: arith.constant {attr}")


@_lowers("arith.constant", "llvm.mlir.constant")
def _arith_constant(t: _Translator, op: Operation) -> None:
    value = op.properties.get("value", op.attributes.get("value"))
    result_type = op.results[0].type
    narrow = narrow_float(result_type.element_type if isinstance(result_type, VectorType) else result_type)
    if narrow is not None and isinstance(value, FloatAttr | DenseIntOrFPElementsAttr):  # the bits in its format
        floats = [value.value.data] if isinstance(value, FloatAttr) else list(value.get_values())
        bits = np.array(floats, np.float32).astype(narrow.dtype).view(np.uint8).tolist()
        llvm_result = llvm_type(result_type)
        t.set(op, _constant(llvm_result, bits[0]) if len(bits) == 1 else  # a scalar or a splat
              ir.Constant(llvm_result, [_constant(llvm_result.element, b) for b in bits]))
        return
    t.set(op, _constant_value(value, llvm_type(op.results[0].type)))


# arith: floating point

_FLOAT_BINARY = {
    "arith.addf": "fadd",
    "arith.subf": "fsub",
    "arith.mulf": "fmul",
    "arith.remf": "frem",
}
_FLOAT_INTRINSICS = {
    "arith.maximumf": "llvm.maximum",
    "arith.minimumf": "llvm.minimum",
    "arith.maxnumf": "llvm.maxnum",
    "arith.minnumf": "llvm.minnum",
    "math.absf": "llvm.fabs",
    "math.copysign": "llvm.copysign",
    "math.fma": "llvm.fma",
    "math.floor": "llvm.floor",
    "math.ceil": "llvm.ceil",
    "math.roundeven": "llvm.roundeven",
    "math.round": "llvm.round",
    "math.trunc": "llvm.trunc",
    "math.sqrt": "llvm.sqrt",
}


def _float_binary(instruction: str) -> OpLowering:
    def lower(t: _Translator, op: Operation) -> None:
        t.in_f32(op, getattr(t.b, instruction))

    return lower


def _float_intrinsic(name: str) -> OpLowering:
    def lower(t: _Translator, op: Operation) -> None:
        t.in_f32(op, lambda *args: t.intrinsic(name, args[0].type, args, [args[0].type]))

    return lower


for _name, _instruction in _FLOAT_BINARY.items():
    _OPS[_name] = _float_binary(_instruction)
for _name, _intrinsic in _FLOAT_INTRINSICS.items():
    _OPS[_name] = _float_intrinsic(_intrinsic)


def corrects_division_by_scalar() -> bool:
    """Whether `_divf` divides f32 vectors by a broadcast scalar with `_Translator.divide_by_scalar`: on AVX-512
    hosts, where vdivps on 16 lanes keeps the divider busy for about ten cycles. With 8 lanes a vdivps issues every
    3.5 cycles (AMD Zen 3), less than the correction takes: softmax f32[4096,1024] 3.3-4.2 ms corrected, 2.8-3.4 ms
    with vdivps (benchmarks/programs_vs_xla.py)."""
    return vector_bits() >= 512


@_lowers("arith.divf")
def _divf(t: _Translator, op: Operation) -> None:
    """Division; on AVX-512 hosts (`corrects_division_by_scalar`) an f32 (or narrower) vector divided by a broadcast
    scalar corrects its product with the scalar's reciprocal (`_Translator.divide_by_scalar`): vdivps keeps the
    divider busy for about ten cycles per 16 lanes, and the last walk of softmax over a row (`e / sum`) waits on it;
    three FMA-unit operations and a few compares take about a third of that. Bit for bit the quotient vdivps gives."""
    source = op.operands[1].owner
    scalar = None
    if isinstance(source, Operation) and source.name in ("vector.broadcast", "vector.splat") \
            and not isinstance(source.operands[0].type, VectorType):
        scalar = source.operands[0]

    def divide(dividend: ir.Value, divisor: ir.Value) -> ir.Value:
        if scalar is None or not isinstance(dividend.type, ir.VectorType) or dividend.type.element != F32 \
                or not corrects_division_by_scalar():
            return t.b.fdiv(dividend, divisor)
        return t.divide_by_scalar(dividend, divisor, t.widen(t.get(scalar)))

    t.in_f32(op, divide)


@_lowers("arith.negf")
def _negf(t: _Translator, op: Operation) -> None:
    t.in_f32(op, t.b.fneg)


@_lowers("math.rsqrt")
def _rsqrt(t: _Translator, op: Operation) -> None:
    def rsqrt(x: ir.Value) -> ir.Value:
        return t.b.fdiv(_constant(x.type, 1.0), t.intrinsic("llvm.sqrt", x.type, [x], [x.type]))

    t.in_f32(op, rsqrt)


_CMPF = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno")


@_lowers("arith.cmpf")
def _cmpf(t: _Translator, op: arith.CmpfOp) -> None:
    lhs, rhs = (t.widen(a) for a in t.args(op))
    predicate = op.predicate.value.data
    result = _like(lhs.type, I1)
    if predicate == 15:  # true
        t.set(op, _constant(result, 1))
    elif predicate == 0:
        t.set(op, _constant(result, 0))
    else:
        t.set(op, t.b.fcmp_ordered(_CMPF[predicate], lhs, rhs))


# arith: integers

_INT_BINARY = {
    "arith.addi": "add",
    "arith.subi": "sub",
    "arith.muli": "mul",
    "arith.andi": "and_",
    "arith.ori": "or_",
    "arith.xori": "xor",
    "arith.shli": "shl",
    "arith.shrsi": "ashr",
    "arith.shrui": "lshr",
}
_INT_INTRINSICS = {
    "arith.maxsi": "llvm.smax",
    "arith.minsi": "llvm.smin",
    "arith.maxui": "llvm.umax",
    "arith.minui": "llvm.umin",
    "math.ctpop": "llvm.ctpop",
}


def _int_binary(instruction: str) -> OpLowering:
    def lower(t: _Translator, op: Operation) -> None:
        t.set(op, getattr(t.b, instruction)(*t.args(op)))

    return lower


def _int_intrinsic(name: str) -> OpLowering:
    def lower(t: _Translator, op: Operation) -> None:
        args = t.args(op)
        t.set(op, t.intrinsic(name, args[0].type, args, [args[0].type]))

    return lower


for _name, _instruction in _INT_BINARY.items():
    _OPS[_name] = _int_binary(_instruction)
for _name, _intrinsic in _INT_INTRINSICS.items():
    _OPS[_name] = _int_intrinsic(_intrinsic)


@_lowers("math.ctlz", "math.cttz")
def _count_zeros(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    name = "llvm.ctlz" if op.name == "math.ctlz" else "llvm.cttz"
    t.set(op, t.intrinsic(name, x.type, [x, _constant(I1, 0)], [x.type]))


@_lowers("math.absi")
def _absi(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    t.set(op, t.intrinsic("llvm.abs", x.type, [x, _constant(I1, 0)], [x.type]))


def _safe_division(t: _Translator, x: ir.Value, y: ir.Value, signed: bool) -> tuple[ir.Value, ir.Value]:
    """(divisor that cannot trap, y == 0)."""
    b = t.b
    zero = b.icmp_unsigned("==", y, _constant(y.type, 0))
    bad = zero
    if signed:
        width = _element(y.type).width
        overflow = b.and_(
            b.icmp_signed("==", x, _constant(x.type, -(1 << (width - 1)))),
            b.icmp_signed("==", y, _constant(y.type, -1)),
        )
        bad = b.or_(zero, overflow)
    return b.select(bad, _constant(y.type, 1), y), zero


@_lowers("arith.divsi", "arith.divui", "arith.remsi", "arith.remui")
def _division(t: _Translator, op: Operation) -> None:
    x, y = t.args(op)
    signed = op.name.endswith("si")
    divisor, zero = _safe_division(t, x, y, signed)
    if op.name.startswith("arith.div"):
        quotient = t.b.sdiv(x, divisor) if signed else t.b.udiv(x, divisor)
        t.set(op, t.b.select(zero, _constant(x.type, -1), quotient))
    else:
        remainder = t.b.srem(x, divisor) if signed else t.b.urem(x, divisor)
        t.set(op, t.b.select(zero, x, remainder))


@_lowers("arith.floordivsi", "arith.ceildivsi")
def _rounded_division(t: _Translator, op: Operation) -> None:
    b = t.b
    x, y = t.args(op)
    divisor, zero = _safe_division(t, x, y, signed=True)
    quotient = b.sdiv(x, divisor)
    remainder = b.srem(x, divisor)
    inexact = b.icmp_signed("!=", remainder, _constant(x.type, 0))
    zero_value = _constant(x.type, 0)
    opposite_signs = b.xor(b.icmp_signed("<", x, zero_value), b.icmp_signed("<", y, zero_value))
    if op.name == "arith.floordivsi":
        adjust, delta = b.and_(inexact, opposite_signs), -1
    else:
        adjust, delta = b.and_(inexact, b.not_(opposite_signs)), 1
    adjusted = b.select(adjust, b.add(quotient, _constant(x.type, delta)), quotient)
    t.set(op, b.select(zero, _constant(x.type, -1), adjusted))


_CMPI = {
    "eq": ("==", True),
    "ne": ("!=", True),
    "slt": ("<", True),
    "sle": ("<=", True),
    "sgt": (">", True),
    "sge": (">=", True),
    "ult": ("<", False),
    "ule": ("<=", False),
    "ugt": (">", False),
    "uge": (">=", False),
}
_CMPI_NAMES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


@_lowers("arith.cmpi")
def _cmpi(t: _Translator, op: arith.CmpiOp) -> None:
    symbol, signed = _CMPI[_CMPI_NAMES[op.predicate.value.data]]
    compare = t.b.icmp_signed if signed else t.b.icmp_unsigned
    t.set(op, compare(symbol, *t.args(op)))


@_lowers("arith.select")
def _select(t: _Translator, op: Operation) -> None:
    t.set(op, t.b.select(*t.args(op)))


# arith: conversions


def _cast(instruction: str) -> OpLowering:
    def lower(t: _Translator, op: Operation) -> None:
        target = llvm_type(op.results[0].type)
        (source,) = op.operands
        if t.is_lanes(source):  # e.g. the i8 → i1 truncation of a pred vector load: stay per lane
            convert = getattr(t.b, instruction)
            t.set(op, _Lanes(target, [convert(lane, target.element) for lane in t.lanes(source)]))
            return
        x = t.get(source)
        t.set(op, x if x.type == target else getattr(t.b, instruction)(x, target))

    return lower


for _name, _instruction in {
    "arith.extsi": "sext",
    "arith.extui": "zext",
    "arith.trunci": "trunc",
    "llvm.sext": "sext",
    "llvm.zext": "zext",
    "llvm.trunc": "trunc",
    "arith.bitcast": "bitcast",
    "llvm.bitcast": "bitcast",
}.items():
    _OPS[_name] = _cast(_instruction)


@_lowers("arith.index_cast", "arith.index_castui")
def _index_cast(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    target = llvm_type(op.results[0].type)
    source_width, target_width = _element(x.type).width, _element(target).width
    if source_width == target_width:
        t.set(op, x)
    elif source_width > target_width:
        t.set(op, t.b.trunc(x, target))
    else:
        t.set(op, (t.b.sext if op.name == "arith.index_cast" else t.b.zext)(x, target))


@_lowers("arith.extf", "arith.truncf")
def _float_cast(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    source, target = narrow_float(op.operands[0].type), narrow_float(op.results[0].type)
    if source is not None:
        x = _decode_narrow(t, x, source)
        if target is None:
            t.set(op, t.narrow(x, llvm_type(op.results[0].type)))
            return
    if target is not None:  # f64 rounds to odd on the way, so that the rounding to the narrow type is the only one
        x = t._to_f32_round_to_odd(x) if _element(x.type) == F64 else t.narrow(x, _like(x.type, F32))
        t.set(op, _encode_narrow(t, x, target))
        return
    t.set(op, t.narrow(x, llvm_type(op.results[0].type)))


def _decode_narrow(t: _Translator, bits: ir.Value, fmt: NarrowFloat) -> ir.Value:
    """The f32 value of the bits of an 8- or 4-bit float: a lookup in a table of the 256 values (exact)."""
    name = f"xlapy.decode.{np.dtype(fmt.dtype).name}"
    table = t.module.globals.get(name)
    if table is None:
        count = 1 << (fmt.exponent_bits + fmt.mantissa_bits + (fmt.kind not in ("e8m0",)))
        values = np.arange(256, dtype=np.uint8)
        values[count:] = 0
        decoded = values.view(fmt.dtype).astype(np.float32)
        array = ir.ArrayType(F32, 256)
        table = ir.GlobalVariable(t.module, array, name)
        table.global_constant = True
        table.linkage = "internal"
        # Bit patterns, so that NaNs keep their sign and payload.
        table.initializer = ir.Constant(array, [ir.Constant(F32, float(v)) for v in decoded])

    def lookup(lane: ir.Value) -> ir.Value:
        index = t.b.zext(lane, I64)
        return t.b.load(t.b.gep(table, [_constant(I64, 0), index], inbounds=True, source_etype=table.value_type),
                        typ=F32)

    if not isinstance(bits.type, ir.VectorType):
        return lookup(bits)
    result = ir.Constant(_like(bits.type, F32), ir.Undefined)
    for k in range(bits.type.count):
        position = _constant(I32, k)
        result = t.b.insert_element(result, lookup(t.b.extract_element(bits, position)), position)
    return result


def _encode_narrow(t: _Translator, x: ir.Value, fmt: NarrowFloat) -> ir.Value:
    """The bits of f32 `x` rounded to an 8- or 4-bit float as ml_dtypes rounds: to nearest even (the power-of-two
    e8m0: half up in the bits), overflow to inf, NaN or the largest value as the format has them."""
    b = t.b
    i32 = _like(x.type, I32)

    def c(value: int) -> ir.Constant:
        return _constant(i32, value)

    bits = b.bitcast(x, i32)
    magnitude = b.and_(bits, c(0x7FFFFFFF))
    sign = b.lshr(bits, c(31))
    is_nan = b.fcmp_unordered("uno", x, x)
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    if fmt.kind == "e8m0":
        code = b.lshr(b.add(magnitude, c(0x400000)), c(23))
        # f32 subnormals: ml_dtypes gives 2^-126 above 2^-127, else 2^-127
        subnormal = b.zext(b.icmp_unsigned(">", magnitude, c(0x400000)), i32)
        code = b.select(b.icmp_unsigned("<", magnitude, c(0x800000)), subnormal, code)
        invalid = b.or_(is_nan, b.or_(b.icmp_unsigned("!=", sign, c(0)), b.icmp_unsigned("==", magnitude, c(0))))
        code = b.select(invalid, c(0xFF), code)
        return b.trunc(code, _like(x.type, ir.IntType(8)))
    shift = 23 - m
    # to nearest even with m mantissa bits at x's own exponent (a carry moves to the exponent)
    rounded = b.add(magnitude, b.add(c((1 << (shift - 1)) - 1), b.and_(b.lshr(magnitude, c(shift)), c(1))))
    rounded = b.and_(rounded, c(~((1 << shift) - 1) & 0xFFFFFFFF))
    normal = b.or_(b.shl(b.sub(b.lshr(rounded, c(23)), c(127 - fmt.bias)), c(m)),
                   b.and_(b.lshr(rounded, c(shift)), c((1 << m) - 1)))
    # below the smallest normal: to nearest even multiple of the smallest subnormal (an f32 addition rounds so)
    smallest_normal = 2.0 ** (1 - fmt.bias)
    absolute = b.bitcast(magnitude, x.type)
    quantum = 2.0 ** (1 - fmt.bias - m)
    shifter = _constant(x.type, quantum * 2.0**23)
    subnormal = b.fsub(b.fadd(absolute, shifter), shifter)
    subnormal = b.fptoui(b.fmul(subnormal, _constant(x.type, 1 / quantum)), i32)
    small = b.fcmp_ordered("<", absolute, _constant(x.type, smallest_normal))
    code = b.select(small, subnormal, normal)
    largest = float(ml_dtypes.finfo(fmt.dtype).max)
    largest_bits = int(np.array(largest, np.float32).view(np.uint32))
    largest_code = int(np.array(largest, np.float32).astype(fmt.dtype).view(np.uint8))
    over = b.and_(b.not_(small), b.icmp_unsigned(">", rounded, c(largest_bits)))
    all_ones = (1 << (e + m)) - 1
    if fmt.kind == "ieee":
        overflow, nan = (all_ones >> m) << m, ((all_ones >> m) << m) | (1 << (m - 1))
    elif fmt.kind == "fn":
        overflow = nan = all_ones
    elif fmt.kind == "fnuz":
        overflow = nan = 0
    else:
        overflow, nan = largest_code, 0
    code = b.select(over, c(overflow), code)
    code = b.select(is_nan, c(nan), code)
    signed = b.or_(code, b.shl(sign, c(e + m)))
    if fmt.kind == "fnuz":  # no -0; NaN is the sign bit alone
        signed = b.select(b.icmp_unsigned("==", code, c(0)), c(0), signed)
        signed = b.select(b.or_(is_nan, over), c(1 << (e + m)), signed)
    elif fmt.kind == "f4":  # NaN (which the format lacks) becomes ml_dtypes' zero of the opposite sign
        signed = b.select(is_nan, b.shl(b.xor(sign, c(1)), c(e + m)), signed)
    return b.trunc(signed, _like(x.type, ir.IntType(8)))


@_lowers("arith.sitofp", "arith.uitofp")
def _int_to_float(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    target = llvm_type(op.results[0].type)
    convert = t.b.sitofp if op.name == "arith.sitofp" else t.b.uitofp
    if _element(target) in (BF16, F16):
        # Through f64 (exact for ≤ 32-bit integers), then one rounding to the narrow type.
        t.set(op, t.narrow(convert(x, _like(target, F64)), target))
    else:
        t.set(op, convert(x, target))


@_lowers("arith.fptosi", "arith.fptoui")
def _float_to_int(t: _Translator, op: Operation) -> None:
    (x,) = t.args(op)
    convert = t.b.fptosi if op.name == "arith.fptosi" else t.b.fptoui
    t.set(op, convert(t.widen(x), llvm_type(op.results[0].type)))


# math: transcendentals — every `math.*` op without a lowering above calls the math library


def _math_library_op(t: _Translator, op: Operation) -> None:
    from xlapy.codegen.backends.math_library import math_function  # only math ops need it

    args = [t.widen(a) for a in t.args(op)]
    # Vectors call the vector form of the function (every lane at once).
    fn = math_function(t.module, op.name.removeprefix("math."), args[0].type)
    t.set(op, t.narrow(t.b.call(fn, args), llvm_type(op.results[0].type)))


# complex numbers: {re, im} structs


@_lowers("complex.constant")
def _complex_constant(t: _Translator, op: Operation) -> None:
    struct = llvm_type(op.results[0].type)
    t.set(op, ir.Constant(struct, [_constant(e, v.value.data) for e, v in zip(struct.elements, op.value.data)]))


@_lowers("complex.create")
def _complex_create(t: _Translator, op: Operation) -> None:
    struct = llvm_type(op.results[0].type)
    real, imag = t.args(op)
    t.set(op, t.b.insert_value(t.b.insert_value(ir.Constant(struct, ir.Undefined), real, 0), imag, 1))


@_lowers("complex.re", "complex.im")
def _complex_part(t: _Translator, op: Operation) -> None:
    t.set(op, t.b.extract_value(t.get(op.operands[0]), 0 if op.name == "complex.re" else 1))


@_lowers("builtin.unrealized_conversion_cast")
def _unrealized_cast(t: _Translator, op: Operation) -> None:
    """Between a complex number and the struct it is in memory: the same LLVM value."""
    (x,) = t.args(op)
    if x.type != llvm_type(op.results[0].type):
        raise UnimplementedError(f"cpu backend: cast from {op.operands[0].type} to {op.results[0].type}")
    t.set(op, x)


def _c_type(t: ir.Type) -> ir.Type:
    """How the C ABI passes an LLVM value: on x86-64 a float complex ({float, float}) is packed in one SSE
    register, `<2 x float>`; everything else (double complex: two registers) as it is."""
    if isinstance(t, ir.LiteralStructType) and list(t.elements) == [F32, F32] and host_target()[0].startswith("x86_64"):
        return ir.VectorType(F32, 2)
    return t


def _repack(t: _Translator, value: ir.Value, target: ir.Type) -> ir.Value:
    """`value` as `target`: the same two floats as a struct or a vector."""
    if value.type == target:
        return value
    packed = ir.Constant(target, ir.Undefined)
    for k in range(2):
        index = _constant(I32, k)
        part = t.b.extract_value(value, k) if isinstance(value.type, ir.LiteralStructType) else \
            t.b.extract_element(value, index)
        packed = t.b.insert_value(packed, part, k) if isinstance(target, ir.LiteralStructType) else \
            t.b.insert_element(packed, part, index)
    return packed


# vector


def _position(t: _Translator, op: vector.ExtractOp | vector.InsertOp) -> ir.Value:
    position = op.get_mixed_position()
    if len(position) != 1:
        raise UnimplementedError(f"cpu backend: {op.name} with {len(position)} positions (only 1-D vectors)")
    if isinstance(position[0], int):
        return _constant(I64, position[0])
    value = t.get(position[0])
    return value if not isinstance(value, ir.Constant) else _constant(I64, value.constant)


@_lowers("vector.extract")
def _vector_extract(t: _Translator, op: vector.ExtractOp) -> None:
    position = _position(t, op)
    if isinstance(position, ir.Constant) and t.is_lanes(op.vector):
        t.set(op, t.lanes(op.vector)[position.constant])
    else:
        t.set(op, t.b.extract_element(t.get(op.vector), position))


@_lowers("vector.insert")
def _vector_insert(t: _Translator, op: vector.InsertOp) -> None:
    position = _position(t, op)
    if isinstance(position, ir.Constant):
        lanes = t.lanes(op.dest)
        lanes[position.constant] = t.get(op.source)
        t.set(op, _Lanes(llvm_type(op.result.type), lanes))
    else:
        t.set(op, t.b.insert_element(t.get(op.dest), t.get(op.source), position))


@_lowers("vector.broadcast", "vector.splat")
def _vector_broadcast(t: _Translator, op: Operation) -> None:
    target = llvm_type(op.results[0].type)
    (x,) = t.args(op)
    if isinstance(x.type, ir.VectorType):
        raise UnimplementedError(f"cpu backend: {op.name} of a vector")
    # A bf16 is broadcast as its bits: x86 without AVX512-BF16 would move a bfloat through an f32 register and
    # round it back with compiler-rt's __truncsfbf2, which the process may lack.
    words = _carried(t, x)
    one = t.b.insert_element(ir.Constant(ir.VectorType(words.type, 1), ir.Undefined), words, _constant(I32, 0))
    splat = t.b.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, target.count), [0] * target.count))
    t.set(op, _uncarried(t, splat, target))


@_lowers("vector.shuffle")
def _vector_shuffle(t: _Translator, op: vector.ShuffleOp) -> None:
    """Lanes of the two operands (those of the second numbered after the first's) in the order of the mask."""
    mask = [int(k) for k in op.mask.get_values()]
    first, second = t.args(op)
    t.set(op, t.b.shuffle_vector(first, second, ir.Constant(ir.VectorType(I32, len(mask)), mask)))


# memory


@_lowers("llvm.getelementptr")
def _gep(t: _Translator, op: xllvm.GEPOp) -> None:
    dynamic = iter(t.get(v) for v in op.ssa_indices)
    indices = [
        next(dynamic) if i == xllvm.GEP_USE_SSA_VAL else _constant(I64, i) for i in op.rawConstantIndices.iter_values()
    ]
    t.set(
        op,
        t.b.gep(t.get(op.ptr), indices, inbounds=op.inbounds is not None, source_etype=llvm_type(op.elem_type)),
    )


def _alignment(op: Operation) -> int | None:
    return op.alignment.value.data if op.alignment is not None else None


@_lowers("llvm.load")
def _load(t: _Translator, op: xllvm.LoadOp) -> None:
    result_type = llvm_type(op.dereferenced_value.type)
    pointer = t.get(op.ptr)

    def load(address: ir.Value, load_type: ir.Type) -> ir.Value:
        value = t.b.load(address, typ=_in_memory(load_type), align=_alignment(op))
        if "invariant" in op.attributes:
            value.set_metadata("invariant.load", t.module.add_metadata([]))
        return value if value.type == load_type else t.b.bitcast(value, load_type)

    if isinstance(result_type, ir.VectorType) and t.scalar_lanes:  # one scalar load per lane (see `_Lanes`)
        element = result_type.element
        addresses = [t.b.gep(pointer, [_constant(I64, k)], inbounds=True, source_etype=element) if k else pointer
                     for k in range(result_type.count)]  # fmt: skip
        t.set(op, _Lanes(result_type, [load(address, element) for address in addresses]))
    else:
        t.set(op, load(pointer, result_type))


@_lowers("llvm.store")
def _store(t: _Translator, op: xllvm.StoreOp) -> None:
    pointer = t.get(op.ptr)
    alignment = _alignment(op)
    if t.is_lanes(op.value) and t.scalar_lanes:
        # Scalar stores, never streaming ones: LLVM's loop vectorizer leaves loops with streaming stores scalar.
        value_type = t.values[op.value].type
        element_bytes = _ELEMENT_BYTES.get(str(value_type.element))
        for k, lane in enumerate(t.lanes(op.value)):
            address = t.b.gep(pointer, [_constant(I64, k)], inbounds=True, source_etype=value_type.element)
            # Lane k is aligned to what its offset keeps of the vector's alignment.
            lane_alignment = alignment if not k or alignment is None or element_bytes is None else \
                math.gcd(alignment, k * element_bytes)
            t.b.store(_as_stored(t, lane), address if k else pointer, align=lane_alignment)
    else:
        store = t.b.store(_as_stored(t, t.get(op.value)), pointer, align=alignment)
        if op.nontemporal is not None:
            store.set_metadata("nontemporal", t.module.add_metadata([_constant(I32, 1)]))
            t.streaming_stores = True


@_lowers("llvm.intr.prefetch")
def _prefetch(t: _Translator, op: Operation) -> None:
    address = t.get(op.operands[0])
    hints = [_constant(I32, op.properties[name].value.data) for name in ("rw", "hint", "cache")]
    t.intrinsic("llvm.prefetch", ir.VoidType(), [address, *hints], [address.type])


# Bytes of the scalar LLVM types a vector's lanes can have.
_ELEMENT_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "bfloat": 2, "float": 4, "double": 8}


def _in_memory(value_type: ir.Type) -> ir.Type:
    """The type bf16 values (and vectors of them) are loaded and stored as: i16. The vectorizers turn strided
    bfloat accesses into masked vector loads that LLVM's x86 backend cannot legalize (it aborts the process);
    as integers they are moved like any 16-bit data, and a bitcast gives the value back."""
    if value_type == BF16:
        return I16
    if isinstance(value_type, ir.VectorType) and value_type.element == BF16:
        return ir.VectorType(I16, value_type.count)
    return value_type


def _as_stored(t: _Translator, value: ir.Value) -> ir.Value:
    stored = _in_memory(value.type)
    return value if stored == value.type else t.b.bitcast(value, stored)


# control flow


def _carried(t: _Translator, value: ir.Value) -> ir.Value:
    """``value`` as a phi carries it between blocks: bf16 values as their bits. x86 without AVX512-BF16 keeps a
    bfloat phi in an f32 register and rounds it back with compiler-rt's __truncsfbf2, which the process may lack."""
    words = _in_memory(value.type)
    return value if words == value.type else t.b.bitcast(value, words)


def _uncarried(t: _Translator, phi: ir.Value, value_type: ir.Type) -> ir.Value:
    """The value a phi made by `_carried` stands for."""
    return phi if phi.type == value_type else t.b.bitcast(phi, value_type)


@_lowers("scf.for")
def _for(t: _Translator, op: scf.ForOp) -> None:
    b = t.b
    lower, upper, step = t.get(op.lb), t.get(op.ub), t.get(op.step)
    inits = [t.get(v) for v in op.iter_args]
    types = [init.type for init in inits]
    inits = [_carried(t, init) for init in inits]
    before = b.block
    header = t.function.append_basic_block("for.header")
    body = t.function.append_basic_block("for.body")
    exit_block = t.function.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lower.type)
    iv.add_incoming(lower, before)
    carried = []
    for init in inits:
        phi = b.phi(init.type)
        phi.add_incoming(init, before)
        carried.append(phi)
    b.cbranch(b.icmp_signed("<", iv, upper), body, exit_block)
    b.position_at_end(body)
    block = op.body.block
    t.values[block.args[0]] = iv
    for arg, phi, value_type in zip(block.args[1:], carried, types):
        t.values[arg] = _uncarried(t, phi, value_type)
    yielded = [_carried(t, value) for value in t.block(block)]
    latch = b.block
    iv.add_incoming(b.add(iv, step), latch)
    for phi, value in zip(carried, yielded):
        phi.add_incoming(value, latch)
    b.branch(header)
    b.position_at_end(exit_block)
    t.set(op, *(_uncarried(t, phi, value_type) for phi, value_type in zip(carried, types)))


@_lowers("scf.if")
def _if(t: _Translator, op: scf.IfOp) -> None:
    b = t.b
    then_block = t.function.append_basic_block("if.then")
    has_else = bool(op.false_region.blocks)
    else_block = t.function.append_basic_block("if.else") if has_else else None
    merge = t.function.append_basic_block("if.end")
    b.cbranch(t.get(op.cond), then_block, else_block or merge)
    incoming = []
    for region, block in ((op.true_region, then_block), (op.false_region, else_block)):
        if block is None:
            continue
        b.position_at_end(block)
        incoming.append(([_carried(t, value) for value in t.block(region.block)], b.block))
        b.branch(merge)
    b.position_at_end(merge)
    results = []
    for i, result in enumerate(op.results):
        value_type = llvm_type(result.type)
        phi = b.phi(_in_memory(value_type))
        for values, block in incoming:
            phi.add_incoming(values[i], block)
        results.append(_uncarried(t, phi, value_type))
    t.set(op, *results)


@_lowers("gpu.thread_id", "gpu.block_id")
def _gpu_id(t: _Translator, op: Operation) -> None:
    dimension = op.dimension.data
    if str(dimension) == "x" and op.name in t.ids:
        t.set(op, t.ids[op.name])
        return
    bounds = op.attributes.get("xla.range")
    if bounds is not None and bounds.data[1].value.data == 0:
        t.set(op, _constant(I64, 0))
        return
    raise UnimplementedError(f"cpu backend: {op.name} {dimension} outside of the entry function's x dimension")


@_lowers("func.call")
def _call(t: _Translator, op: func.CallOp) -> None:
    fn = t.module.globals[op.callee.string_value()]
    args = t.args(op)
    if fn.linkage != "internal":  # a C function
        args = [_repack(t, a, c) for a, c in zip(args, fn.function_type.args)]
        result = t.b.call(fn, args)
        t.set(op, *([_repack(t, result, llvm_type(op.results[0].type))] if op.results else []))
        return
    result = t.b.call(fn, args)
    if len(op.results) > 1:
        t.set(op, *(t.b.extract_value(result, i) for i in range(len(op.results))))
    else:
        t.set(op, *([result] if op.results else []))


@_lowers("func.return")
def _return(t: _Translator, op: func.ReturnOp) -> None:
    if t.is_entry:  # the entry body continues with the next thread
        if op.operands:
            raise VerifyError("cpu backend: the entry function returns values (run lower-tensors first)")
        return
    values = t.args(op)
    if not values:
        t.b.ret_void()
    elif len(values) == 1:
        t.b.ret(values[0])
    else:  # several results: one struct value (llvmlite has no aggregate return)
        aggregate: ir.Value = ir.Constant(t.function.function_type.return_type, ir.Undefined)
        for i, value in enumerate(values):
            aggregate = t.b.insert_value(aggregate, value, i)
        t.b.ret(aggregate)


# --- functions --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelSignature:
    """What a caller needs to know about a compiled entry function (also embedded in its object code)."""

    buffer_sizes: tuple[int, ...]  # minimum byte size of each buffer (0 = unknown), in argument order
    threads: int  # threads per block (inner loop trip count)
    blocks: int  # number of blocks of the launch (block ranges are subsets of [0, blocks))
    # The byte boundary each buffer must start on (the `llvm.align` of its argument: written with streaming
    # stores), in argument order; empty when no buffer needs more than its elements' alignment.
    buffer_alignments: tuple[int, ...] = ()

    def alignment(self, index: int) -> int:
        """The byte boundary buffer ``index`` must start on (1: any address its elements fit)."""
        return self.buffer_alignments[index] if self.buffer_alignments else 1


# No buffer is asked to start on a larger boundary than a page.
_MAX_ALIGNMENT = 4096


def _signature_symbol(entry: str) -> str:
    return f"{entry}.signature"


def embed_signature(module: ir.Module, entry: str, signature: KernelSignature) -> None:
    """The signature as a constant in the object code, `[buffers, threads, blocks, size..., alignment...] x i64`,
    so that object code alone (e.g. from a kernel cache) is enough to run the kernel."""
    count = len(signature.buffer_sizes)
    alignments = [signature.alignment(i) for i in range(count)]
    values = [count, signature.threads, signature.blocks, *signature.buffer_sizes, *alignments]
    array = ir.ArrayType(I64, len(values))
    variable = ir.GlobalVariable(module, array, name=_signature_symbol(entry))
    variable.global_constant = True
    variable.initializer = ir.Constant(array, values)


def _read_signature(engine: llvm.ExecutionEngine, entry: str, size: int | None = None) -> KernelSignature:
    """The signature embedded by `embed_signature`; `size` is its byte size when the object code says it (code
    loaded from a file), so that a bad count cannot make this read past it."""
    address = engine.get_global_value_address(_signature_symbol(entry))
    if not address:
        raise VerifyError(f"cpu backend: the object code has no signature of @{entry}")
    count = ctypes.c_int64.from_address(address).value
    if count < 0 or (size is not None and size != (2 * count + 3) * 8):
        raise VerifyError(f"cpu backend: the signature of @{entry} is malformed")
    values = (ctypes.c_int64 * (2 * count + 3)).from_address(address)
    sizes, alignments = tuple(values[3:count + 3]), tuple(values[count + 3:])
    if values[1] < 1 or values[2] < 1 or any(v < 0 for v in sizes) or \
            any(a < 1 or a > _MAX_ALIGNMENT or a & (a - 1) for a in alignments):
        raise VerifyError(f"cpu backend: the signature of @{entry} is malformed")
    return KernelSignature(sizes, values[1], values[2], alignments if any(a > 1 for a in alignments) else ())


def _id_count(function: func.FuncOp, op_type: type[Operation]) -> int | None:
    counts = set()
    for op in function.walk():
        if isinstance(op, op_type) and str(op.dimension.data) == "x":
            bounds = op.attributes.get("xla.range")
            if bounds is None:
                raise VerifyError(f"cpu backend: {op.name} without an xla.range attribute")
            counts.add(bounds.data[1].value.data + 1)
    if len(counts) > 1:
        raise VerifyError(f"cpu backend: {op_type.name} ops with different ranges {sorted(counts)}")
    return counts.pop() if counts else None


def _arg_attr(function: func.FuncOp, index: int, name: str) -> Attribute | None:
    if function.arg_attrs is None:
        return None
    return function.arg_attrs.data[index].data.get(name)


# Ops a kernel may reach once every helper is inlined at every call. Beyond it, helpers called from several
# places are left to LLVM's inliner: a DAG of helpers each calling the next twice (the 20 rounds of a ThreeFry
# generator) would otherwise be copied exponentially often before anything merges the copies.
INLINED_OPS_BUDGET = 50_000


def _shared_helpers_to_keep(functions: Sequence[func.FuncOp], entry: func.FuncOp) -> set[str]:
    """The helpers not forced inline: those called from more than one place, when forcing every helper inline
    would give ``entry`` more than ``INLINED_OPS_BUDGET`` ops; none otherwise."""
    by_name = {f.sym_name.data: f for f in functions}
    calls: dict[str, list[str]] = {}
    own: dict[str, int] = {}
    for function in functions:
        ops = list(function.walk())
        own[function.sym_name.data] = len(ops)
        calls[function.sym_name.data] = [op.callee.root_reference.data for op in ops
                                         if isinstance(op, func.CallOp) and op.callee.root_reference.data in by_name]
    inlined: dict[str, int] = {}
    for name in _callees_first(calls, entry.sym_name.data):
        inlined[name] = own[name] + sum(inlined[callee] for callee in calls[name])
    if inlined[entry.sym_name.data] <= INLINED_OPS_BUDGET:
        return set()
    sites = Counter(callee for callees in calls.values() for callee in callees)
    return {name for name, count in sites.items() if count > 1}


def _callees_first(calls: dict[str, list[str]], root: str) -> list[str]:
    """The functions ``root`` reaches, each after the functions it calls (helpers do not recurse)."""
    order: list[str] = []
    seen: set[str] = set()
    stack = [(root, iter(calls[root]))]
    seen.add(root)
    while stack:
        name, pending = stack[-1]
        callee = next(pending, None)
        if callee is None:
            stack.pop()
            order.append(name)
        elif callee not in seen:
            seen.add(callee)
            stack.append((callee, iter(calls[callee])))
    return order


def _declare(module: ir.Module, function: func.FuncOp, always_inline: bool = True) -> ir.Function:
    inputs = [llvm_type(t) for t in function.function_type.inputs.data]
    outputs = [llvm_type(t) for t in function.function_type.outputs.data]
    result = ir.VoidType() if not outputs else outputs[0] if len(outputs) == 1 else ir.LiteralStructType(outputs)
    if not function.body.blocks:  # a function of the C library (see `_call`)
        c_function = ir.FunctionType(_c_type(result), [_c_type(t) for t in inputs])
        return ir.Function(module, c_function, name=function.sym_name.data)
    fn = ir.Function(module, ir.FunctionType(result, inputs), name=function.sym_name.data)
    fn.linkage = "internal"
    if always_inline:
        fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    return fn


def _define_helper(module: ir.Module, function: func.FuncOp, bf16_instruction: bool) -> None:
    fn = module.globals[function.sym_name.data]
    translator = _Translator(module, fn, _NO_IDS, bf16_instruction)
    for arg, value in zip(function.body.block.args, fn.args):
        translator.values[arg] = value
    translator.block(function.body.block)


def _arg_alignment(function: func.FuncOp, index: int) -> int:
    """The `llvm.align` of pointer argument ``index`` (1 without one)."""
    attr = _arg_attr(function, index, "llvm.align")
    alignment = attr.value.data if isinstance(attr, IntegerAttr) else 1
    if alignment < 1 or alignment > _MAX_ALIGNMENT or alignment & (alignment - 1):
        raise VerifyError(f"cpu backend: argument {index} aligned to {alignment} bytes (a power of two up to "
                          f"{_MAX_ALIGNMENT})")
    return alignment


def _kernel_function(module: ir.Module, function: func.FuncOp, sizes: list[int]) -> ir.Function:
    """`void @<entry>.kernel(ptr noalias dereferenceable(N) ..., i64 %block_begin, i64 %block_end)`."""
    count = len(sizes)
    kernel_type = ir.FunctionType(ir.VoidType(), [PTR] * count + [I64, I64])
    kernel = ir.Function(module, kernel_type, name=f"{function.sym_name.data}.kernel")
    kernel.linkage = "internal"
    # Not inlined into the wrapper: `noalias` on arguments is what lets LLVM vectorize freely.
    kernel.attributes.add("noinline")
    kernel.attributes.add("nounwind")
    for i, arg in enumerate(kernel.args[:count]):
        if _arg_attr(function, i, "llvm.noalias") is not None:
            arg.add_attribute("noalias")
        if (alignment := _arg_alignment(function, i)) > 1:
            arg.attributes.align = alignment  # checked by `CpuKernel` before every launch
        # No `dereferenceable`: with it LLVM may speculate loads that an scf.if guards
        # (pad, concatenate) to addresses outside the buffer.
    return kernel


# Ops whose values the CPU backend computes again in a later phase of the block's threads when that phase uses
# them (see `_emit_loops`): they read no memory and only depend on their operands and the thread and block ids.
def _recomputable(op: Operation) -> bool:
    if op.regions or op.name in ("llvm.load", "llvm.store", "llvm.alloca", "func.call", "xla.sync_threads"):
        return False
    return op.name in _OPS or op.name.startswith("math.")


# A phase of the block's threads (ops that every thread runs before any runs the next phase), or a loop at the top
# level of the entry function whose body holds barriers: every thread runs it alike, its body in phases.
_Segment = list[Operation] | scf.ForOp


def _is_uniform_loop(op: Operation) -> bool:
    """Whether ``op`` is a loop holding barriers (which every thread of the block runs alike)."""
    return isinstance(op, scf.ForOp) and any(inner.name == "xla.sync_threads" for inner in op.walk())


def _segments(block: Block) -> list[_Segment]:
    """The ops of ``block`` split at each `xla.sync_threads` (the barrier itself in no phase) and around each loop
    holding barriers; its terminator (a loop body's `scf.yield`) is left out."""
    segments: list[_Segment] = [[]]
    for op in block.ops:
        if op.name == "xla.sync_threads":
            segments.append([])
        elif _is_uniform_loop(op):
            segments.extend([op, []])  # type: ignore[list-item]
        elif op.name != "scf.yield":
            segments[-1].append(op)  # type: ignore[union-attr]
    return [s for s in segments if not isinstance(s, list) or s]


def _check_barriers(function: func.FuncOp) -> None:
    for op in function.walk():
        if op.name == "xla.sync_threads" and not is_block_level(op, function.body.block):
            raise UnimplementedError("cpu backend: xla.sync_threads inside a loop or a branch (only at the top "
                                     "level of the entry function and of the loops there)")
    for op in function.body.block.ops:
        if _is_uniform_loop(op):
            if op.iter_args or op.results:
                raise VerifyError("cpu backend: a loop holding xla.sync_threads carries values (run lower-tensors "
                                  "first)")
            if not all(isinstance(v.owner, arith.ConstantOp) for v in (op.lb, op.ub, op.step)):
                raise UnimplementedError("cpu backend: a loop holding xla.sync_threads with bounds that are not "
                                         "constants")


class _Phase:
    """The translation of one phase of the block's threads: values of the earlier phases that it uses are
    computed again (`_recomputable`) in its own thread loop, where they dominate their uses. A value that is not
    recomputable cannot live across a barrier: as on the GPU, it must go through the shared tile. ``levels`` are
    the blocks whose ops run in phases (the entry's body and the bodies of the loops holding barriers)."""

    def __init__(self, t: _Translator, levels: set[Block], kept: dict[SSAValue, ir.Value]):
        self.t = t
        self.levels = levels
        t.values = dict(kept)

    def translate(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            for inner in op.walk():
                for operand in inner.operands:
                    self.recompute(operand)
            lowering = _OPS.get(op.name) or (_math_library_op if op.name.startswith("math.") else None)
            if lowering is None:
                raise UnimplementedError(f"cpu backend: {op.name}")
            lowering(self.t, op)

    def recompute(self, value: SSAValue) -> None:
        owner = value.owner
        if value in self.t.values or not isinstance(owner, Operation) or owner.parent_block() not in self.levels:
            return
        if not _recomputable(owner):
            raise VerifyError(f"cpu backend: the value of {owner.name} is used after an xla.sync_threads (values "
                              "live across the barrier go through the shared tile)")
        for operand in owner.operands:
            self.recompute(operand)
        lowering = _OPS.get(owner.name) or _math_library_op
        lowering(self.t, owner)


def _hoist_allocas(t: _Translator, function: func.FuncOp) -> None:
    """The shared tiles (`llvm.alloca` at the entry's top level) go to the kernel's entry block: one per CPU thread
    running the kernel, reused by each of its blocks."""
    for op in function.body.block.ops:
        if op.name == "llvm.alloca":
            count = op.size.owner
            if not isinstance(count, arith.ConstantOp):
                raise VerifyError("cpu backend: a shared tile of a size that is not a constant")
            size = _constant(I64, count.value.value.data)
            alloca = t.b.alloca(llvm_type(op.elem_type), size=size, name=op.res.name_hint or "")
            alloca.align = op.alignment.value.data if op.alignment is not None else None
            alloca.type = PTR  # an opaque pointer, like the buffers' (llvmlite types it `elem*`)
            t.values[op.res] = alloca


_lowers("llvm.alloca")(lambda t, op: None)  # hoisted by `_hoist_allocas`
_lowers("xla.sync_threads")(lambda t, op: None)  # the phases of `_emit_loops`


def _loop_header(t: _Translator, name: str, start: ir.Value, end: ir.Value, iv_name: str) \
        -> tuple[ir.PhiInstr, ir.Block, ir.Block]:
    """A loop's header block, counting from ``start`` while below ``end``: its induction variable (the latch adds
    its increment), the header (the latch branches back to it) and the exit; the builder is left in the body."""
    b = t.b
    before = b.block
    header = t.function.append_basic_block(f"{name}.header")
    body = t.function.append_basic_block(f"{name}.body")
    exit_block = t.function.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(I64, name=iv_name)
    iv.add_incoming(start, before)
    b.cbranch(b.icmp_signed("<", iv, end), body, exit_block)
    b.position_at_end(body)
    return iv, header, exit_block


def _emit_loops(t: _Translator, function: func.FuncOp, threads: int) -> None:
    """bl over [block_begin, block_end), th over [0, threads); the entry function's body runs inside.

    The GPU model on the CPU: a block's threads run one after another. Each `xla.sync_threads` (a barrier of the
    block's threads) splits the thread loop in two: every thread runs the code before the barrier, then every
    thread the code after it, in a loop of its own (`_segments`); the shared tile (`xla.allocate_shared`) is one
    scratch array per CPU thread (`_hoist_allocas`). Without a barrier the body runs in one thread loop. For a
    body `A; xla.sync_threads; B`:

        for bl in [block_begin, block_end):
          for th in [0, threads): A
          for th in [0, threads): B

    A loop at the top level whose body holds barriers (every thread runs it alike) runs once per block, its body's
    phases inside: `A; sync; scf.for %r { C; sync }; D` (the column-tile form of the reduction emitter) is

        for bl in [block_begin, block_end):
          for th in [0, threads): A
          for r in [lower, upper):
            for th in [0, threads): C
          for th in [0, threads): D
    """
    kernel, b = t.function, t.b
    begin, end = kernel.args[-2:]
    for arg, value in zip(function.body.block.args, kernel.args):
        t.values[arg] = value
    _hoist_allocas(t, function)
    _check_barriers(function)
    kept = dict(t.values)
    top = function.body.block
    levels = {top, *(op.body.block for op in top.ops if _is_uniform_loop(op))}
    bl, block_header, exit_block = _loop_header(t, "block", begin, end, "bl")
    # A vectorized body is already SIMD code, and a loop of fewer iterations than lanes has nothing to widen.
    width = _thread_loop_width(function)
    hint = t.scalar_lanes and threads >= width and _always_vectorizable(function)

    def thread_loop(ops: list[Operation], values: dict[SSAValue, ir.Value]) -> None:
        before = b.block
        header = kernel.append_basic_block("thread.header")
        b.branch(header)
        b.position_at_end(header)
        th = b.phi(I64, name="th")
        th.add_incoming(_constant(I64, 0), before)
        t.ids["gpu.thread_id"], t.ids["gpu.block_id"] = th, bl
        _Phase(t, levels, values).translate(ops)
        next_th = b.add(th, _constant(I64, 1), name="th.next")
        th.add_incoming(next_th, b.block)
        after = kernel.append_basic_block("thread.exit")
        latch = b.cbranch(b.icmp_signed("<", next_th, _constant(I64, threads)), header, after)
        if hint:
            latch.set_metadata("llvm.loop", _loop_metadata(t.module, width))
        b.position_at_end(after)

    def uniform_loop(op: scf.ForOp) -> None:
        lower, upper, step = (_constant(I64, v.owner.value.value.data) for v in (op.lb, op.ub, op.step))
        iv, header, after = _loop_header(t, "uniform", lower, upper, "uniform.iv")
        values = {**kept, op.body.block.args[0]: iv}
        for segment in _segments(op.body.block):
            thread_loop(segment, values)  # type: ignore[arg-type]  # no loop nests in a loop's body
        iv.add_incoming(b.add(iv, step), b.block)
        b.branch(header)
        b.position_at_end(after)

    for segment in _segments(top):
        if isinstance(segment, scf.ForOp):
            uniform_loop(segment)
        else:
            thread_loop(segment, kept)
    bl.add_incoming(b.add(bl, _constant(I64, 1), name="bl.next"), b.block)
    b.branch(block_header)
    b.position_at_end(exit_block)
    if t.streaming_stores:
        _store_fence(t)
    b.ret_void()


def _store_fence(t: _Translator) -> None:
    """Orders the kernel's streaming stores before whatever this thread does next (signalling that its blocks are
    done): x86 keeps streaming stores out of its store order, `sfence` puts them back; elsewhere a full fence."""
    if host_target()[0].startswith(("x86_64", "i686", "i386")):
        fence = t.module.globals.get("llvm.x86.sse.sfence")
        if fence is None:
            fence = ir.Function(t.module, ir.FunctionType(ir.VoidType(), []), name="llvm.x86.sse.sfence")
        t.b.call(fence, [])
    else:
        t.b.fence("seq_cst")


def _emit_wrapper(module: ir.Module, name: str, kernel: ir.Function, count: int) -> None:
    """`void @<entry>(ptr %buffers, i64, i64)`: loads the `count` buffer pointers and calls the kernel."""
    wrapper = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name=name)
    buffers, begin, end = wrapper.args
    w = ir.IRBuilder(wrapper.append_basic_block("entry"))
    pointers = [w.load(w.gep(buffers, [_constant(I64, i)], inbounds=True, source_etype=PTR), typ=PTR)
                for i in range(count)]  # fmt: skip
    w.call(kernel, [*pointers, begin, end])
    w.ret_void()


def _define_entry(module: ir.Module, function: func.FuncOp, bf16_instruction: bool) -> KernelSignature:
    types = function.function_type.inputs.data
    if not all(isinstance(ty, xllvm.LLVMPointerType) for ty in types):
        raise VerifyError("cpu backend: the entry function takes non-pointer arguments (run lower-tensors first)")
    if function.function_type.outputs.data:
        raise VerifyError("cpu backend: the entry function returns values (run lower-tensors first)")
    threads = _id_count(function, gpu.ThreadIdOp) or 1
    blocks = _id_count(function, gpu.BlockIdOp) or 1
    sizes = []
    for i in range(len(types)):
        size = _arg_attr(function, i, "llvm.dereferenceable")
        sizes.append(size.value.data if isinstance(size, IntegerAttr) else 0)
    kernel = _kernel_function(module, function, sizes)
    translator = _Translator(module, kernel, {}, bf16_instruction)
    translator.scalar_lanes = not _is_vectorized(function)
    _emit_loops(translator, function, threads)
    _emit_wrapper(module, function.sym_name.data, kernel, len(types))
    alignments = tuple(_arg_alignment(function, i) for i in range(len(types)))
    signature = KernelSignature(tuple(sizes), threads, blocks, alignments if any(a > 1 for a in alignments) else ())
    embed_signature(module, function.sym_name.data, signature)
    return signature


def translate_module(
    module: ModuleOp, entry: str = "main", bf16_instruction: bool | None = None
) -> tuple[ir.Module, KernelSignature]:
    """The LLVM module of a lowered xDSL module, and the signature of its entry function.

    `bf16_instruction`: whether vectors are rounded from f32 to bf16 with the host's instruction (AVX512-BF16's
    `vcvtneps2bf16`, exact whatever the choice: see `_Translator._f32_to_bf16_by_instruction`); by default (and
    only) when the host has one."""
    triple = host_target()[0]
    result = ir.Module(name="xlapy")
    result.triple = triple
    bf16_instruction = bf16_instruction is not False and _host_has_bf16_conversion()
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    entries = [f for f in functions if f.sym_name.data == entry]
    if not entries:
        raise VerifyError(f"cpu backend: no entry function @{entry}")
    helpers = [f for f in functions if f.sym_name.data != entry]
    kept = _shared_helpers_to_keep(functions, entries[0])
    for function in helpers:
        _declare(result, function, always_inline=function.sym_name.data not in kept)
    for function in helpers:
        if function.body.blocks:
            _define_helper(result, function, bf16_instruction)
    signature = _define_entry(result, entries[0], bf16_instruction)
    return result, signature


# --- compilation and execution ----------------------------------------------------------------------------------

# A CFUNCTYPE (not PYFUNCTYPE) pointer: calls release the GIL, so a thread pool runs block ranges in parallel.
_KernelFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
# llvmlite parses into one global LLVM context, which is not thread-safe: LLVM work is done one at a time.
_LLVM_LOCK = threading.RLock()


def optimize(module: llvm.ModuleRef, target_machine: llvm.TargetMachine) -> None:
    """O3 for the host, with loop and SLP vectorization (new pass manager)."""
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = True
    options.loop_interleaving = True
    options.loop_unrolling = True
    builder = llvm.create_pass_builder(target_machine, options)
    builder.getModulePassManager().run(module, builder)


# Kernels compiled from LLVM IR in this process, by the hash of their text (insertion order: the oldest first).
_COMPILED: dict[bytes, CpuKernel] = {}
_COMPILED_LIMIT = 64


class CpuKernel:
    """A compiled entry function: `kernel(buffers, block_begin, block_end)` runs blocks [begin, end)."""

    def __init__(
        self,
        engine: llvm.ExecutionEngine,
        target_machine: llvm.TargetMachine,
        module: llvm.ModuleRef | None,
        name: str,
        object_code: bytes | None = None,
        signature_bytes: int | None = None,
    ):
        self._engine = engine  # owns the machine code: keep it alive as long as the kernel
        self._target_machine = target_machine
        self._module = module
        self.signature = _read_signature(engine, name, signature_bytes)
        self._object_code = object_code
        self._asm: str | None = None
        self.llvm_ir: str | None = str(module) if module is not None else None
        self._function = _KernelFunction(engine.get_function_address(name))

    @classmethod
    def compile(cls, module: ModuleOp, entry: str = "main", bf16_instruction: bool | None = None) -> CpuKernel:
        """Translate, verify, optimise and JIT-compile the lowered xDSL `module` (see `translate_module`)."""
        llvm_module, _ = translate_module(module, entry, bf16_instruction)
        return cls.from_llvm_ir(str(llvm_module), entry)

    @classmethod
    def from_llvm_ir(cls, text: str, entry: str = "main") -> CpuKernel:
        """A kernel from the text of a module made by `translate_module` (possibly edited). The same text compiled
        before in this process gives the same kernel: fusions that differ only in their names (a model's repeated
        layers) are optimised and turned into machine code once."""
        key = hashlib.sha256(f"{entry}\n{text}".encode()).digest()
        with _LLVM_LOCK:
            kernel = _COMPILED.get(key)
            if kernel is None:
                kernel = cls._compile_llvm_ir(text, entry)
                if len(_COMPILED) >= _COMPILED_LIMIT:
                    del _COMPILED[next(iter(_COMPILED))]  # the oldest
                _COMPILED[key] = kernel
            return kernel

    @classmethod
    def _compile_llvm_ir(cls, text: str, entry: str) -> CpuKernel:
        with _LLVM_LOCK:
            try:
                parsed = llvm.parse_assembly(text)
                parsed.verify()
            except RuntimeError as error:
                raise VerifyError(f"cpu backend: invalid LLVM IR: {error}") from error
            target_machine = _target_machine()
            parsed.triple = target_machine.triple
            parsed.data_layout = str(target_machine.target_data)
            optimize(parsed, target_machine)
            engine = llvm.create_mcjit_compiler(parsed, target_machine)
            # The object code MCJIT produces is kept: it is what `from_object` loads back.
            captured: list[bytes] = []
            engine.set_object_cache(notify_func=lambda _module, data: captured.append(bytes(data)))
            engine.finalize_object()
            return cls(engine, target_machine, parsed, entry, captured[0] if captured else None)

    @classmethod
    def from_object(cls, data: bytes, entry: str = "main") -> CpuKernel:
        """A kernel from the bytes of `object_code` (e.g. read from a kernel cache); they include the signature.
        The bytes are checked first (`check_object`): LLVM's linker would crash the process on a malformed file."""
        triple = host_target()[0]
        machine = host_machine(triple)
        if machine is None:
            raise UnimplementedError(f"cpu backend: object code for {triple} cannot be checked before loading")
        symbols = check_object(data, machine, (entry, _signature_symbol(entry)),
                               lambda name: bool(llvm.address_of_symbol(name)))
        with _LLVM_LOCK:
            target_machine = _target_machine()
            empty = llvm.parse_assembly("")
            empty.triple = target_machine.triple
            engine = llvm.create_mcjit_compiler(empty, target_machine)
            engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            engine.finalize_object()
            return cls(engine, target_machine, None, entry, data, symbols[_signature_symbol(entry)])

    @property
    def object_code(self) -> bytes:
        """The relocatable object code of the kernel (what `from_object` loads)."""
        if self._object_code is None:
            with _LLVM_LOCK:
                self._object_code = self._target_machine.emit_object(self._module)
        return self._object_code

    @property
    def asm(self) -> str:
        """The host assembly of the optimised module (computed on first use)."""
        if self._asm is None:
            if self._module is None:
                raise UnimplementedError("cpu backend: no assembly for a kernel loaded from object code")
            with _LLVM_LOCK:
                self._asm = self._target_machine.emit_assembly(self._module)
        return self._asm

    def __call__(self, buffers: Sequence[np.ndarray], block_begin: int = 0, block_end: int | None = None) -> None:
        end = self.signature.blocks if block_end is None else block_end
        self._check_blocks(block_begin, end)
        self._function(ctypes.cast(self._pointers(buffers), ctypes.c_void_p), block_begin, end)

    def bind(self, buffers: Sequence[np.ndarray]) -> Callable[[int, int], None]:
        """The kernel on ``buffers`` as ``launch(block_begin, block_end)``, for buffers that stay where they are
        (an execution context's): the checks of ``__call__`` on the buffers (count, contiguity, byte sizes) are
        made and the pointer array is built here, once; a launch only checks its block range. The launch keeps
        the buffers alive."""
        pointers = self._pointers(buffers)
        argument = ctypes.cast(pointers, ctypes.c_void_p)
        function, blocks, check = self._function, self.signature.blocks, self._check_blocks

        def launch(block_begin: int, block_end: int) -> None:
            if not 0 <= block_begin <= block_end <= blocks:
                check(block_begin, block_end)
            function(argument, block_begin, block_end)

        launch.buffers = (tuple(buffers), pointers)  # type: ignore[attr-defined]
        # For a native dispatcher: the entry's address, the pointer array's (alive with the launch), the blocks.
        entry = ctypes.cast(function, ctypes.c_void_p).value
        launch.native = (entry, ctypes.addressof(pointers), blocks)  # type: ignore[attr-defined]
        return launch

    def bind_all_blocks(self, buffers: Sequence[np.ndarray]) -> Callable[[], None]:
        """The kernel on ``buffers`` over all its blocks, as a call of no arguments: ``bind``'s checks made once,
        and nothing left to check at a launch (a loop's small kernels run many times)."""
        pointers = self._pointers(buffers)
        launch = functools.partial(self._function, ctypes.cast(pointers, ctypes.c_void_p), 0, self.signature.blocks)
        launch.buffers = (tuple(buffers), pointers)  # type: ignore[attr-defined]  # alive as long as the launch
        return launch

    def _pointers(self, buffers: Sequence[np.ndarray]) -> ctypes.Array:
        """The array of the buffers' addresses the kernel takes, once each buffer is checked against the kernel's
        signature."""
        sizes = self.signature.buffer_sizes
        if len(buffers) != len(sizes):
            raise VerifyError(f"cpu kernel: expected {len(sizes)} buffers, got {len(buffers)}")
        pointers = (ctypes.c_void_p * max(1, len(buffers)))()
        for i, (buffer, size) in enumerate(zip(buffers, sizes)):
            if not buffer.flags.c_contiguous:
                raise VerifyError(f"cpu kernel: buffer {i} is not contiguous")
            if buffer.nbytes < size:
                raise VerifyError(f"cpu kernel: buffer {i} has {buffer.nbytes} bytes, the kernel reads {size}")
            alignment = self.signature.alignment(i)
            if buffer.ctypes.data % alignment:
                raise VerifyError(f"cpu kernel: buffer {i} does not start on a {alignment}-byte boundary (the kernel "
                                  "writes it with aligned streaming stores)")
            pointers[i] = buffer.ctypes.data
        return pointers

    def _check_blocks(self, block_begin: int, block_end: int) -> None:
        if not 0 <= block_begin <= block_end <= self.signature.blocks:
            raise VerifyError(f"cpu kernel: block range [{block_begin}, {block_end}) outside "
                              f"[0, {self.signature.blocks})")


def compile_kernel(module: ModuleOp, entry: str = "main", bf16_instruction: bool | None = None) -> CpuKernel:
    """`CpuKernel.compile`: the lowered xDSL `module` as a callable kernel."""
    return CpuKernel.compile(module, entry, bf16_instruction)


__all__ = ["BFloatType", "CpuKernel", "KernelSignature", "compile_kernel", "llvm_type", "optimize", "translate_module"]
