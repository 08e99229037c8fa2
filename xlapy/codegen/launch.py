"""Launch dimensions and the default thread-to-output indexing map
(XLA's launch_dimensions and GetDefaultThreadIdIndexingMap).

A device is described by how many threads a block runs and how many bytes one
thread's vector covers. On the GPU these are real threads and registers; on
the CPU a block is a unit of parallel work, the threads are an inner loop and
the vector is the host's SIMD register (``Device.host()``).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, replace

from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES, Shape


@functools.cache
def host_cores() -> int:
    """The cores this process may run on: the CPU's workers (asked once: the question is a system call)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# The entry function's attribute naming the backend a kernel is emitted for (as in XLA), e.g. "cpu": there a
# thread's vector is SIMD lanes, which the CPU passes keep as vectors instead of unrolling them.
BACKEND_KIND = "xla.backend_kind"


@dataclass(frozen=True)
class Device:
    """``threads_per_block`` threads per block; a thread handles up to
    ``vector_bytes`` bytes of output per iteration (at most ``max_vector``
    elements, XLA's unroll limit)."""

    name: str
    threads_per_block: int = 128
    vector_bytes: int = 16
    max_vector: int = 4
    # Blocks of threads_per_block or a bit fewer threads (a divisor of the number of vectors, at least half as
    # many), so that no thread falls outside the output and the bounds check goes away (the CPU's blocks are
    # units of work of any size).
    exact_blocks: bool = False
    # Vectors of a fusion reading operands through broadcasts stay within one row of the innermost dimension
    # (the CPU's vectors are SIMD lanes: such reads are then one element or consecutive elements per vector).
    rows_hold_vectors: bool = False

    @staticmethod
    def gpu() -> Device:
        """XLA:GPU's loop emitter defaults: 128 threads, up to 4 elements a thread."""
        return Device("gpu")

    @staticmethod
    def host() -> Device:
        """The CPU running xlapy: a thread's vector is as wide as its SIMD
        registers (16 f32 lanes with AVX-512, 8 with AVX2, 4 otherwise), and
        a block covers 1024 elements of f32 (a unit of parallel work)."""
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
        vector_bytes = 64 if features.get("avx512f") else 32 if features.get("avx2") else 16
        return Device("cpu", threads_per_block=1024 // (vector_bytes // 4), vector_bytes=vector_bytes,
                      max_vector=64, exact_blocks=True, rows_hold_vectors=True)

    def widened(self, registers: int) -> Device:
        """This device with a thread's vector covering ``registers`` SIMD
        registers (as many elements per block)."""
        if registers == 1:
            return self
        return replace(self, vector_bytes=self.vector_bytes * registers,
                       threads_per_block=max(1, self.threads_per_block // registers))

    def scalar(self) -> Device:
        """This device with one element per thread and as many elements per
        block (the CPU's fallback for fusions whose lanes do not vectorize)."""
        elements = self.threads_per_block * max(1, min(self.max_vector, self.vector_bytes // 4))
        return replace(self, threads_per_block=elements, max_vector=1)


@dataclass(frozen=True)
class LaunchDimensions:
    threads_per_block: int
    blocks: int
    vector_size: int

    @property
    def elements_per_block(self) -> int:
        return self.threads_per_block * self.vector_size


def loop_launch_dimensions(shape: Shape, device: Device, within_rows: bool = False) -> LaunchDimensions:
    """Threads, blocks and vector size of a loop fusion writing ``shape``.

    The vector covers ``vector_bytes`` of the widest element computed (at
    least 4 bytes: narrow floats are computed in f32), and must divide the
    element count so that no vector straddles the end; with ``within_rows``,
    also the innermost (physical) dimension, so that none straddles two rows."""
    count = math.prod(shape.dimensions)
    row = count
    if within_rows and shape.dimensions:
        minor_to_major = shape.layout.minor_to_major if shape.layout is not None else (len(shape.dimensions) - 1,)
        row = shape.dimensions[minor_to_major[0]]
    bits = max(32, ELEMENT_TYPES[shape.element_type].bit_width)
    vector = max(1, min(device.max_vector, device.vector_bytes * 8 // bits))
    while vector > 1 and (count % vector or row % vector):
        vector //= 2
    threads = min(device.threads_per_block, max(1, -(-count // vector)))
    if device.exact_blocks and count % (threads * vector):
        vectors = count // vector
        divisor = next(t for t in range(threads, 0, -1) if vectors % t == 0)
        threads = divisor if 2 * divisor >= threads else threads
    blocks = max(1, -(-count // (threads * vector)))
    return LaunchDimensions(threads, blocks, vector)


def thread_id_to_output_map(launch: LaunchDimensions, shape: Shape) -> IndexingMap:
    """``(th_x, bl_x)[vector_index] -> (output indices)``: consecutive threads
    and vector lanes write consecutive elements in the output's physical order
    (coalesced writes); the element count bounds the linear index."""
    dims = shape.dimensions
    count = math.prod(dims)
    linear = add(mul(add(mul(dim(1), const(launch.threads_per_block)), dim(0)), const(launch.vector_size)), sym(0))
    minor_to_major = shape.layout.minor_to_major if shape.layout is not None else tuple(range(len(dims) - 1, -1, -1))
    results = [const(0)] * len(dims)
    stride = 1
    for d in minor_to_major:
        part = floordiv(linear, const(stride)) if stride > 1 else linear
        results[d] = mod(part, const(dims[d])) if stride * dims[d] < count else part
        stride *= dims[d]
    constraints = [] if launch.blocks * launch.elements_per_block == count else [(linear, Interval(0, count - 1))]
    indexing_map = IndexingMap.from_exprs(
        results,
        [Variable(Interval(0, launch.threads_per_block - 1), "th_x"), Variable(Interval(0, launch.blocks - 1), "bl_x")],
        [Variable(Interval(0, launch.vector_size - 1), "vector_index")],
        constraints=constraints,
    )
    return indexing_map.simplify().sort_summands()
