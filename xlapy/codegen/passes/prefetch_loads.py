"""`prefetch-loads` (CPU): software prefetches ahead of the vector loads of the loops that ask for them.

A core's hardware prefetchers follow a stream of reads within a 4 KiB page and start over at each new page; beyond
that, the reads ahead of the one being waited for are those the out-of-order window holds. A loop that spends many
instructions on each 64 bytes it reads (an argmax folds a vector with a chain of compares and selects: about twelve
instructions per vector, where a sum takes two) fills that window with few bytes ahead and waits for memory at every
page: f32[4096,1024] argmax rows read from memory took 1.6x the time of a plain read of their bytes, the row sum of
the same bytes none more. Prefetching the line a few pages ahead of each read hides that latency.

A loop asks by its discardable attribute ``xla.prefetch_bytes = N : i64`` (``PREFETCH_ATTR``; the emitter that
knows the loop streams through its operand sets it on an ``scf.for`` with ``mark_prefetch``, and the passes that
rebuild loops keep it). The entry function ``@main`` may carry it too: its body is the body of the CPU backend's
loops over blocks and threads (``xlapy/codegen/backends/cpu.py``), and a thread's loads continue where the previous
thread's stopped when the emitter lays the threads along its operand (the loop emitter's copies). After
`lower-tensors` (pointers, `llvm.load`), every load of a vector in the loop (its nested loops included) gets, before
it, one ``llvm.intr.prefetch`` (a read) per cache line it reads, at its address plus ``N`` bytes::

    %ahead = llvm.getelementptr %address[8192] : (!llvm.ptr) -> !llvm.ptr, i8
    "llvm.intr.prefetch"(%ahead) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
    %x = llvm.load %address {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>

The prefetch's ``hint`` is the loop's ``xla.prefetch_locality`` (``PREFETCH_LOCALITY_ATTR``, LLVM's temporal
locality: 3, the default, brings the line into every cache level, x86's ``prefetcht0``; 2 stops at the second
level, ``prefetcht1``). The address ahead is not ``inbounds``: past the end of the buffer it is a hint that never
faults, and changes nothing the kernel computes. The attributes are removed. Scalar loads are left alone (a prefetch
per element would cost more than it hides). The GPU pipeline does not run this pass (its loops keep the attribute,
which nothing there reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import builtin, func, llvm, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, VectorType, i8, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.mlir_dialects import PrefetchOp
from xlapy.codegen.streaming import CACHE_LINE

# The loop attribute asking for prefetches: how many bytes ahead of each vector load ...
PREFETCH_ATTR = "xla.prefetch_bytes"
# ... and into which cache levels (LLVM's temporal locality, 0 to 3; 3 when the loop does not say).
PREFETCH_LOCALITY_ATTR = "xla.prefetch_locality"
# Every cache level (x86's prefetcht0).
ALL_LEVELS = 3


def mark_prefetch(op: scf.ForOp | func.FuncOp, distance: int, locality: int = ALL_LEVELS) -> None:
    """Asks `prefetch-loads` for prefetches ``distance`` bytes ahead of the vector loads of loop ``op`` (or of the
    entry function's body, which the CPU backend's loops over blocks and threads run), with temporal ``locality``."""
    op.attributes[PREFETCH_ATTR] = IntegerAttr(distance, i64)
    if locality != ALL_LEVELS:
        op.attributes[PREFETCH_LOCALITY_ATTR] = IntegerAttr(locality, i64)


def _vector_bytes(type_: builtin.Attribute) -> int | None:
    """Bytes of a vector type in memory; None for a scalar."""
    if not isinstance(type_, VectorType):
        return None
    element = type_.element_type
    bits = element.width.data if isinstance(element, IntegerType) else getattr(element, "bitwidth", 8)
    return max(1, type_.element_count() * bits // 8)


def prefetch_ahead(loop: scf.ForOp | func.FuncOp, distance: int, locality: int = ALL_LEVELS) -> int:
    """Puts a prefetch of each line ``distance`` bytes ahead, with temporal ``locality``, before every vector load
    in ``loop`` (a loop or a function); returns how many prefetches it made."""
    made = 0
    for load in [op for op in loop.body.walk() if isinstance(op, llvm.LoadOp)]:
        size = _vector_bytes(load.dereferenced_value.type)
        if size is None:
            continue
        for offset in range(0, size, CACHE_LINE):
            ahead = llvm.GEPOp(load.ptr, [distance + offset], i8)
            Rewriter.insert_op([ahead, PrefetchOp(ahead.result, hint=locality)], InsertPoint.before(load))
            made += 1
    return made


@dataclass(frozen=True)
class PrefetchLoadsPass(ModulePass):
    """Prefetches ahead of the vector loads of the loops (and entry functions) marked with ``PREFETCH_ATTR`` (see
    the module docstring)."""

    name: ClassVar[str] = "prefetch-loads"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        marked = [o for o in op.walk() if isinstance(o, (scf.ForOp, func.FuncOp)) and PREFETCH_ATTR in o.attributes]
        for loop in marked:
            prefetch_ahead(loop, _pop_int(loop, PREFETCH_ATTR), _pop_int(loop, PREFETCH_LOCALITY_ATTR, ALL_LEVELS))


def _pop_int(op: Operation, name: str, default: int = 0) -> int:
    value = op.attributes.pop(name, None)
    if value is None:
        return default
    assert isinstance(value, IntegerAttr)
    return value.value.data


__all__ = ["ALL_LEVELS", "PREFETCH_ATTR", "PREFETCH_LOCALITY_ATTR", "PrefetchLoadsPass", "mark_prefetch",
           "prefetch_ahead"]
