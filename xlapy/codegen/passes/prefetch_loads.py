"""`prefetch-loads` (CPU): software prefetches ahead of the vector loads of the loops that ask for them.

A core's hardware prefetchers follow a stream of reads within a 4 KiB page and start over at each new page; beyond
that, the reads ahead of the one being waited for are those the out-of-order window holds. A loop that spends many
instructions on each 64 bytes it reads (an argmax folds a vector with a chain of compares and selects: about twelve
instructions per vector, where a sum takes two) fills that window with few bytes ahead and waits for memory at every
page: f32[4096,1024] argmax rows read from memory took 1.6x the time of a plain read of their bytes, the row sum of
the same bytes none more. Prefetching the line a few pages ahead of each read hides that latency.

A loop asks by its discardable attribute ``xla.prefetch_bytes = N : i64`` (``PREFETCH_ATTR``; the emitter that
knows the loop streams through its operand sets it on an ``scf.for``, and the passes that rebuild loops keep it).
After `lower-tensors` (pointers, `llvm.load`), every load of a vector in the loop (its nested loops included) gets,
before it, one ``llvm.intr.prefetch`` (a read, locality 3: into every cache level) per cache line it reads, at its
address plus ``N`` bytes::

    %ahead = llvm.getelementptr %address[8192] : (!llvm.ptr) -> !llvm.ptr, i8
    "llvm.intr.prefetch"(%ahead) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
    %x = llvm.load %address {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>

The address ahead is not ``inbounds``: past the end of the buffer it is a hint that never faults, and changes
nothing the kernel computes. The attribute is removed. Scalar loads are left alone (a prefetch per element would
cost more than it hides). The GPU pipeline does not run this pass (its loops keep the attribute, which nothing
there reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import builtin, llvm, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, VectorType, i8
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.mlir_dialects import PrefetchOp
from xlapy.codegen.streaming import CACHE_LINE

# The loop attribute asking for prefetches: how many bytes ahead of each vector load.
PREFETCH_ATTR = "xla.prefetch_bytes"


def _vector_bytes(type_: builtin.Attribute) -> int | None:
    """Bytes of a vector type in memory; None for a scalar."""
    if not isinstance(type_, VectorType):
        return None
    element = type_.element_type
    bits = element.width.data if isinstance(element, IntegerType) else getattr(element, "bitwidth", 8)
    return max(1, type_.element_count() * bits // 8)


def prefetch_ahead(loop: scf.ForOp, distance: int) -> int:
    """Puts a prefetch of each line ``distance`` bytes ahead before every vector load in ``loop``; returns how many
    prefetches it made."""
    made = 0
    for load in [op for op in loop.body.walk() if isinstance(op, llvm.LoadOp)]:
        size = _vector_bytes(load.dereferenced_value.type)
        if size is None:
            continue
        for offset in range(0, size, CACHE_LINE):
            ahead = llvm.GEPOp(load.ptr, [distance + offset], i8)
            Rewriter.insert_op([ahead, PrefetchOp(ahead.result)], InsertPoint.before(load))
            made += 1
    return made


@dataclass(frozen=True)
class PrefetchLoadsPass(ModulePass):
    """Prefetches ahead of the vector loads of the loops marked with ``PREFETCH_ATTR`` (see the module
    docstring)."""

    name: ClassVar[str] = "prefetch-loads"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for loop in [o for o in op.walk() if isinstance(o, scf.ForOp) and PREFETCH_ATTR in o.attributes]:
            distance = loop.attributes.pop(PREFETCH_ATTR)
            assert isinstance(distance, IntegerAttr)
            prefetch_ahead(loop, distance.value.data)


__all__ = ["PREFETCH_ATTR", "PrefetchLoadsPass", "prefetch_ahead"]
