"""`nontemporal-stores` (CPU): vector stores that write whole cache lines of a large output the kernel never reads
become streaming (non-temporal) stores.

A normal store first brings its destination line into the cache (a read for ownership): writing N bytes moves 2N
bytes over the memory bus. A streaming store writes the line to memory without reading it, and keeps nothing in the
caches: it pays for outputs that the next kernel would not find there anyway (`xlapy/codegen/streaming.py` has
the measurements behind the sizes).

The rule, after `lower-tensors` (pointers, `llvm.load`, `llvm.store`): an `llvm.store` of the entry function gets
`nontemporal` and `alignment = 64` when

1. its address is `llvm.getelementptr %arg[%i]` of a pointer argument of at least ``min_bytes`` bytes (its
   `llvm.dereferenceable`, the static size of the buffer): ``STREAMING_MIN_BYTES``, or
   ``RESULT_STREAMING_MIN_BYTES`` with ``program_result`` (the pipeline sets it for the kernel of a fusion whose
   outputs are results of the program that no later kernel reads);
2. the argument is write-only: every use of it, through `getelementptr`, is the address of an `llvm.store` (no load,
   no call), and it is not an operand too (`xla.aliased`, which `lower-tensors` puts on an output written over an
   operand passed in the same slice: in-place updates keep their lines in the cache);
3. the stored value is a vector of a whole number of cache lines (``CACHE_LINE`` bytes) and its byte offset
   ``%i * element size`` is a multiple of ``CACHE_LINE`` for every thread, block and loop index
   (``trailing_zero_bits`` follows the integer arithmetic of the index: ``th * 64 + bl * 1024`` f32 elements is a
   multiple of 256 bytes). A store that is not provably aligned stays a normal store: LLVM splits a streaming
   store it cannot prove aligned into scalar pieces.

The argument then gets `llvm.align = 64`: the CPU backend declares it on the kernel's parameter and refuses a
buffer that does not start on a cache line (the runtime's allocations do, and so do the slices of at least 64 bytes
inside them: `xlapy/runtime/thunks/base.py`, `xlapy/buffers/assignment.py`). Streaming stores are weakly ordered
on x86: the CPU backend ends a kernel that made some with a store fence (`sfence`) before other threads read the
data. The GPU pipeline does not run this pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import builtin, func, llvm, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    IntegerType,
    UnitAttr,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from xlapy.codegen.passes.lower_tensors import ALIASED_ATTR, DEREFERENCEABLE_ATTR
from xlapy.codegen.streaming import CACHE_LINE, RESULT_STREAMING_MIN_BYTES, STREAMING_MIN_BYTES

# The alignment of a pointer argument, in bytes (MLIR's LLVM dialect argument attribute).
ALIGN_ATTR = "llvm.align"

# Known trailing zero bits of a value that is 0 (divisible by everything an index can be).
_ZERO = 64


def _constant_value(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, Operation) and owner.name == "arith.constant":
        attr = owner.properties.get("value", owner.attributes.get("value"))
        if isinstance(attr, IntegerAttr):
            return attr.value.data
    return None


def _trailing_zeros_of(number: int) -> int:
    return _ZERO if number == 0 else (number & -number).bit_length() - 1


def _exact_shift(value: SSAValue, divisor: SSAValue, known: dict[SSAValue, int]) -> int:
    """Trailing zeros of ``value / divisor`` when the divisor is a constant power of two that divides the value
    (an exact division); 0 otherwise."""
    constant = _constant_value(divisor)
    if constant is None or constant <= 0 or constant & (constant - 1):
        return 0
    shift = constant.bit_length() - 1
    zeros = trailing_zero_bits(value, known)
    return zeros - shift if zeros >= shift else 0


def _shift_amount(amount: SSAValue) -> int | None:
    constant = _constant_value(amount)
    return constant if constant is not None and 0 <= constant < 64 else None


def _left_shift(op: Operation, known: dict[SSAValue, int]) -> int:
    amount = _shift_amount(op.operands[1])
    return 0 if amount is None else min(_ZERO, trailing_zero_bits(op.operands[0], known) + amount)


def _right_shift(op: Operation, known: dict[SSAValue, int]) -> int:
    amount = _shift_amount(op.operands[1])
    zeros = trailing_zero_bits(op.operands[0], known)
    return zeros - amount if amount is not None and zeros >= amount else 0


def _operands(op: Operation, known: dict[SSAValue, int]) -> list[int]:
    return [trailing_zero_bits(v, known) for v in op.operands]


# How many trailing zero bits each integer op's result has at least, from its operands'. Divisibility by a power of
# two survives the wrap-around of fixed-width arithmetic, so these hold for `index` and i64 alike.
_RULES = {
    "arith.addi": lambda op, k: min(_operands(op, k)),
    "arith.subi": lambda op, k: min(_operands(op, k)),
    "arith.muli": lambda op, k: min(_ZERO, sum(_operands(op, k))),
    # a % m = a - m * (a / m)
    "arith.remui": lambda op, k: min(_operands(op, k)),
    "arith.remsi": lambda op, k: min(_operands(op, k)),
    "arith.divui": lambda op, k: _exact_shift(op.operands[0], op.operands[1], k),
    "arith.divsi": lambda op, k: _exact_shift(op.operands[0], op.operands[1], k),
    "arith.floordivsi": lambda op, k: _exact_shift(op.operands[0], op.operands[1], k),
    "arith.ceildivsi": lambda op, k: _exact_shift(op.operands[0], op.operands[1], k),
    "arith.shli": _left_shift,
    "arith.shrui": _right_shift,
    "arith.shrsi": _right_shift,
    "arith.andi": lambda op, k: max(_operands(op, k)),
    "arith.ori": lambda op, k: min(_operands(op, k)),
    "arith.xori": lambda op, k: min(_operands(op, k)),
    "arith.minui": lambda op, k: min(_operands(op, k)),
    "arith.minsi": lambda op, k: min(_operands(op, k)),
    "arith.maxui": lambda op, k: min(_operands(op, k)),
    "arith.maxsi": lambda op, k: min(_operands(op, k)),
    "arith.select": lambda op, k: min(_operands(op, k)[1:]),
    "arith.index_cast": lambda op, k: trailing_zero_bits(op.operands[0], k),
    "arith.index_castui": lambda op, k: trailing_zero_bits(op.operands[0], k),
    "arith.extsi": lambda op, k: trailing_zero_bits(op.operands[0], k),
    "arith.extui": lambda op, k: trailing_zero_bits(op.operands[0], k),
}


def trailing_zero_bits(value: SSAValue, known: dict[SSAValue, int] | None = None) -> int:
    """How many low bits of the integer (or ``index``) ``value`` are zero whatever the thread, block and loop ids:
    ``value`` is a multiple of ``2 ** trailing_zero_bits(value)`` (64 for a value that is always 0). ``known``
    remembers the values already seen (shared operands are walked once)."""
    known = {} if known is None else known
    if value in known:
        return known[value]
    known[value] = 0  # a value reached again through itself (none in straight-line index code) proves nothing
    owner = value.owner
    zeros = 0
    if isinstance(owner, Operation):
        constant = _constant_value(value)
        if constant is not None:
            zeros = _trailing_zeros_of(constant)
        elif (rule := _RULES.get(owner.name)) is not None:
            zeros = rule(owner, known)
    elif isinstance(owner.parent_op(), scf.ForOp) and value is owner.parent_op().body.block.args[0]:
        loop = owner.parent_op()
        zeros = min(trailing_zero_bits(loop.lb, known), trailing_zero_bits(loop.step, known))
    known[value] = zeros
    return zeros


def _byte_width(type_: Attribute) -> int | None:
    """Bytes of one element of ``type_`` in memory (None for a type without a fixed byte size here)."""
    width = type_.width.data if isinstance(type_, IntegerType) else getattr(type_, "bitwidth", None)
    return width // 8 if isinstance(width, int) and width % 8 == 0 and width > 0 else None


def _vector_bytes(type_: Attribute) -> int | None:
    if not isinstance(type_, VectorType) or type_.get_num_dims() != 1:
        return None
    element = _byte_width(type_.element_type)
    return None if element is None else element * type_.get_shape()[0]


def _address(pointer: SSAValue) -> tuple[BlockArgument, llvm.GEPOp] | None:
    """The pointer argument and the `getelementptr` of ``pointer`` = `getelementptr %arg[%i]` (one index)."""
    gep = pointer.owner
    if not isinstance(gep, llvm.GEPOp) or not isinstance(gep.ptr, BlockArgument):
        return None
    if len(tuple(gep.rawConstantIndices.iter_values())) != 1:
        return None
    return gep.ptr, gep


def _offset_zeros(gep: llvm.GEPOp, known: dict[SSAValue, int]) -> int:
    """Known trailing zero bits of the byte offset of a one-index `getelementptr`."""
    element = _byte_width(gep.elem_type)
    if element is None:
        return 0
    (index,) = gep.rawConstantIndices.iter_values()
    zeros = trailing_zero_bits(gep.ssa_indices[0], known) if index == llvm.GEP_USE_SSA_VAL else \
        _trailing_zeros_of(index)
    return min(_ZERO, zeros + _trailing_zeros_of(element))


def _write_only(argument: BlockArgument) -> bool:
    """Whether every use of ``argument`` (through `getelementptr`s) is the address of an `llvm.store`."""
    pending = [argument]
    while pending:
        pointer = pending.pop()
        for use in pointer.uses:
            user = use.operation
            if isinstance(user, llvm.GEPOp) and use.index == 0:
                pending.append(user.result)
            elif not (isinstance(user, llvm.StoreOp) and use.index == 1):
                return False
    return True


def _arg_attrs(function: func.FuncOp) -> list[dict[str, Attribute]]:
    if function.arg_attrs is None:
        return [{} for _ in function.args]
    return [dict(d.data) for d in function.arg_attrs.data]


def streamed_arguments(function: func.FuncOp, min_bytes: int) -> set[int]:
    """The positions of the pointer arguments of ``function`` that are large and write-only (rules 1 and 2)."""
    streamed = set()
    for position, (argument, attrs) in enumerate(zip(function.args, _arg_attrs(function))):
        size = attrs.get(DEREFERENCEABLE_ATTR)
        if not isinstance(argument.type, llvm.LLVMPointerType) or ALIASED_ATTR in attrs:
            continue
        if isinstance(size, IntegerAttr) and size.value.data >= min_bytes and _write_only(argument):
            streamed.add(position)
    return streamed


def mark_streaming_stores(function: func.FuncOp, min_bytes: int = STREAMING_MIN_BYTES) -> int:
    """Marks the stores of ``function`` that the rules allow as streaming stores; returns how many."""
    candidates = streamed_arguments(function, min_bytes)
    if not candidates:
        return 0
    known: dict[SSAValue, int] = {}
    marked_arguments: set[int] = set()
    count = 0
    for op in function.walk():
        if not isinstance(op, llvm.StoreOp) or op.nontemporal is not None:
            continue
        address = _address(op.ptr)
        size = _vector_bytes(op.value.type)
        if address is None or size is None or size % CACHE_LINE:
            continue
        argument, gep = address
        if argument.owner is not function.body.block or argument.index not in candidates:
            continue
        if _offset_zeros(gep, known) < _trailing_zeros_of(CACHE_LINE):
            continue
        op.properties["nontemporal"] = UnitAttr()
        op.properties["alignment"] = IntegerAttr(CACHE_LINE, i64)
        marked_arguments.add(argument.index)
        count += 1
    if marked_arguments:
        attrs = _arg_attrs(function)
        for position in marked_arguments:
            attrs[position][ALIGN_ATTR] = IntegerAttr(CACHE_LINE, i64)
        function.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
    return count


@dataclass(frozen=True)
class NontemporalStoresPass(ModulePass):
    """Whole-line vector stores into large write-only outputs → `llvm.store ... {nontemporal, alignment = 64}`:
    outputs of at least ``min_bytes``, or ``result_min_bytes`` when the kernel writes results of the program
    (``program_result``)."""

    name: ClassVar[str] = "nontemporal-stores"
    entry: str = "main"
    program_result: bool = False
    min_bytes: int = STREAMING_MIN_BYTES
    result_min_bytes: int = RESULT_STREAMING_MIN_BYTES

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.sym_name.data == self.entry and function.body.blocks:
                mark_streaming_stores(function, self.result_min_bytes if self.program_result else self.min_bytes)


__all__ = ["ALIGN_ATTR", "NontemporalStoresPass", "mark_streaming_stores", "streamed_arguments",
           "trailing_zero_bits"]
