"""When a kernel writes an output with streaming (non-temporal) stores: how large the output must be, and whether
it is a result of the program (the HLO-level fact the `nontemporal-stores` pass and the kernel cache key use).

A normal store reads its line into the cache first; a streaming store writes it to memory directly. That halves
the memory traffic of writing a large output, but leaves nothing in the caches for whoever reads it next.
Measured on a 2-core AVX-512 machine (4 MiB of L2 per core, 2 threads), f32 outputs of `x * x`:

- a result of the program (handed to the caller, read by no later kernel): 1 MiB even, 2 MiB 0.38 → 0.26 ms,
  4 MiB 0.73 → 0.41 ms, 16 MiB 3.2 → 1.3 ms;
- an intermediate value reduced by the next kernel: 4 MiB 0.55 → 0.63 ms, 16 MiB 2.0 → 2.2 ms, 24 MiB even,
  32 MiB 5.5 → 4.6 ms (below that the next kernel finds the output in the caches).
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction

# The smallest output written with streaming stores when the program reads it again: larger than what the caches
# keep for the next kernel.
STREAMING_MIN_BYTES = 32 << 20
# The smallest result of the program written with streaming stores (nothing reads it in the caches).
RESULT_STREAMING_MIN_BYTES = 2 << 20
# Bytes of a cache line: a streaming store writes whole lines (a partial line is read back from memory).
CACHE_LINE = 64


def writes_program_result(fusion: HloInstruction) -> bool:
    """Whether ``fusion``'s outputs are results of the program that no later kernel reads: it is the root of the
    entry computation, or only the entry's root tuple uses it. The kernel of an op outside any fusion is described
    by a fusion named as the op, with the op's computation but outside it: the op is found by that name."""
    computation = fusion.parent
    if computation is None or not computation.is_entry:
        return False
    root = computation.root
    if fusion.name == root.name:  # names are unique in a module
        return True
    held = [op for op in root.operands if op.name == fusion.name] if root.opcode == "tuple" else []
    return bool(held) and all(user is root for user in held[0].users)


__all__ = ["CACHE_LINE", "RESULT_STREAMING_MIN_BYTES", "STREAMING_MIN_BYTES", "writes_program_result"]
