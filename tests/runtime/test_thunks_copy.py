"""Copies: a ``copy`` that keeps the layout moves bytes, one that changes it is a generated kernel; copies
between slices behave as a parallel assignment (every source read before any destination is written). Also
the execution context's views and allocations they rely on."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.buffers.assignment import BufferSlice
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.runtime.thunks.base import ExecutionContext, allocate
from xlapy.runtime.thunks.copy import SliceCopies
from xlapy.shapes import parse_shape


@pytest.mark.parametrize("source, destination", [
    ("{1,0}", "{0,1}"), ("{0,1}", "{1,0}"), ("{0,1}", "{0,1}"), ("{1,0}", "{1,0}"),
])
def test_copy_between_layouts(source, destination):
    module = xlapy.parse_hlo(f"""HloModule copies
ENTRY e {{ p = f32[3,5]{source} parameter(0)  c = f32[3,5]{destination} copy(p)
          ROOT n = f32[3,5]{destination} negate(c) }}""")
    x = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
    executable = xlapy.compile(module, run_hlo_passes=False)
    got = executable(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True)
    np.testing.assert_array_equal(got, -x)
    copy_kinds = {t.name: t.kind for t in executable.thunks if t.name == "c"}
    # A layout change is generated code (a transpose of the buffer); the same layout is a byte copy.
    assert copy_kinds == {"c": "kernel" if source != destination else "copy"}


def test_copies_the_code_generator_refuses_are_named_together():
    module = xlapy.parse_hlo("""HloModule tiled
ENTRY e { p = f32[3,5]{1,0:T(2,4)} parameter(0)  c = f32[3,5]{1,0} copy(p)  d = f32[3,5]{0,1:T(4)} copy(c)
          ROOT t = (f32[3,5]{1,0}, f32[3,5]{0,1:T(4)}) tuple(c, d) }""")
    with pytest.raises(UnimplementedError, match=r"cannot run tiled: tiled layout f32\[3,5\]\{1,0:T\(2,4\)\} .*, "
                                                 r"tiled layout f32\[3,5\]\{0,1:T\(4\)\}"):
        xlapy.compile(module, run_hlo_passes=False)


def _context(*sizes: int) -> ExecutionContext:
    allocations = []
    for size in sizes:
        data = allocate(size)
        data[...] = np.arange(size, dtype=np.uint8)
        allocations.append(data)
    return ExecutionContext(allocations)


def test_slice_copies_swap_overlapping_values():
    # Two values trade places inside one allocation: both are read before either is written.
    first, second = BufferSlice(0, 0, 8), BufferSlice(0, 8, 8)
    copies = SliceCopies("swap", [(first, second, 8), (second, first, 8)])
    assert copies.staged
    context = _context(16)
    copies.run(context)
    np.testing.assert_array_equal(context.allocations[0], [*range(8, 16), *range(8)])


def test_slice_copies_skip_a_value_already_in_place():
    same = BufferSlice(1, 4, 4)
    copies = SliceCopies("noop", [(same, same, 4), (BufferSlice(0, 0, 4), BufferSlice(1, 0, 4), 4)])
    assert len(copies.pairs) == 1 and not copies.staged
    context = _context(4, 8)
    copies.run(context)
    np.testing.assert_array_equal(context.allocations[1], [0, 1, 2, 3, 4, 5, 6, 7])
    assert not SliceCopies("empty", [(same, same, 4)])


def test_slice_copies_refuse_more_bytes_than_a_slice_holds():
    with pytest.raises(VerifyError, match="a copy of 8 bytes between slices of 4 and 8 bytes"):
        SliceCopies("bad", [(BufferSlice(0, 0, 4), BufferSlice(1, 0, 8), 8)])


def test_context_views_are_flat_typed_and_bounded():
    context = _context(16)
    view = context.array(BufferSlice(0, 4, 8), parse_shape("s32[2]"))
    assert view.dtype == np.int32 and view.shape == (2,)
    np.testing.assert_array_equal(view.view(np.uint8), range(4, 12))
    with pytest.raises(VerifyError, match="runs past its end"):
        context.array(BufferSlice(0, 12, 8), parse_shape("s32[2]"))
    with pytest.raises(VerifyError, match="cannot hold"):
        context.array(BufferSlice(0, 0, 4), parse_shape("s32[2]"))


def test_allocations_are_aligned():
    for size in (1, 7, 100, 4096):
        assert allocate(size).ctypes.data % 64 == 0 and allocate(size).nbytes == size
