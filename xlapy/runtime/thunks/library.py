"""What the library thunks (dot, convolution, sort, top-k, FFT, LAPACK custom calls) share: reading and
writing the logical array a buffer slice holds, whatever its layout, and the run of a call of two operands
(``BinaryLibraryThunk``).

A slice holds its array flat, in the physical order of the shape's layout. Without tiles or padding that
order is a permutation of the logical dimensions, so the logical array is a strided numpy view of the flat
one: reads and writes go straight to the allocation, and a column-major matrix (layout ``{0,1}``) is the
Fortran-ordered array LAPACK expects. Tiled layouts are converted through ``from_physical``/``to_physical``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.runtime.thunks.base import Thunk, dtype_of
from xlapy.shapes import Shape, from_physical, physical_element_count, to_physical

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunks.base import ExecutionContext


def _major_to_minor(shape: Shape) -> tuple[int, ...] | None:
    """The logical dimensions from the slowest varying to the fastest, or None when the layout is not a plain
    permutation of them (tiles or padding)."""
    layout = shape.layout
    rank = len(shape.dimensions)
    if layout is None:
        return tuple(range(rank))
    if layout.tiles or len(layout.minor_to_major) != rank:
        return None
    if physical_element_count(shape) != int(np.prod(shape.dimensions, dtype=np.int64)):
        return None
    return tuple(reversed(layout.minor_to_major))


def logical_view(flat: np.ndarray, shape: Shape) -> np.ndarray | None:
    """The logical array of ``shape`` as a writable view of its flat physical buffer ``flat``, or None when
    the layout is not a permutation of the dimensions."""
    order = _major_to_minor(shape)
    if order is None:
        return None
    physical = flat.reshape([shape.dimensions[d] for d in order])
    return physical.transpose(np.argsort(order)) if order != tuple(range(len(order))) else physical


def is_row_major(shape: Shape) -> bool:
    """Whether ``shape`` lays its array out in numpy's C order (the default layout)."""
    return _major_to_minor(shape) == tuple(range(len(shape.dimensions)))


def check_layout(instr: HloInstruction, shape: Shape) -> None:
    """Refuses (at compile time) a shape whose elements are packed below a byte (``E(n)`` layouts): the
    buffers here hold one element per byte."""
    layout = shape.layout
    if layout is not None and layout.element_size_in_bits and shape.type.bit_width < 8:
        raise UnimplementedError(f"{instr.opcode} {instr.name}: {shape} packs its elements; the CPU library "
                                 "thunks take one byte per element")


def read(context: ExecutionContext, slice: BufferSlice, shape: Shape) -> np.ndarray:
    """The logical array ``slice`` holds: a view of the allocation when the layout allows, else a copy."""
    flat = context.array(slice, shape)
    view = logical_view(flat, shape)
    return view if view is not None else from_physical(flat, shape)


def write(context: ExecutionContext, slice: BufferSlice, shape: Shape, value: np.ndarray) -> None:
    """Stores the logical array ``value`` (converted to the element type of ``shape``) into ``slice``."""
    flat = context.array(slice, shape)
    view = logical_view(flat, shape)
    if view is not None:
        np.copyto(view, np.asarray(value), casting="unsafe")
    else:
        flat[...] = to_physical(np.asarray(value).astype(flat.dtype, copy=False), shape)


def writable(context: ExecutionContext, slice: BufferSlice, shape: Shape) -> np.ndarray | None:
    """A writable logical view of ``slice`` (results can be computed straight into it), or None for tiled
    layouts (compute into a temporary and ``write`` it)."""
    return logical_view(context.array(slice, shape), shape)


@dataclass
class BinaryLibraryThunk(Thunk):
    """A library call of two operands and one result (dot, convolution), each the logical array of a slice."""

    name: str
    lhs: BufferSlice
    lhs_shape: Shape
    rhs: BufferSlice
    rhs_shape: Shape
    out: BufferSlice
    out_shape: Shape

    @abstractmethod
    def compute(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        """Writes the result of operands ``lhs`` and ``rhs`` into the logical array ``out``."""

    def run(self, context: ExecutionContext) -> None:
        lhs = read(context, self.lhs, self.lhs_shape)
        rhs = read(context, self.rhs, self.rhs_shape)
        out = writable(context, self.out, self.out_shape)
        if out is not None:
            self.compute(lhs, rhs, out)
        else:  # a tiled layout: through a logical temporary
            logical = np.empty(self.out_shape.dimensions, dtype_of(self.out_shape))
            self.compute(lhs, rhs, logical)
            write(context, self.out, self.out_shape, logical)


def result_shapes(instr: HloInstruction) -> list[Shape]:
    """The array results of ``instr``: its shape, or the elements of its tuple shape."""
    return list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]

