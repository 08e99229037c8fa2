"""What makes running cheap must not change what runs: an executable keeps its allocations (and what was
prepared over them) from one call to the next, loops read their predicate straight from its buffer, copies
move bytes between addresses resolved once, and small kernels stay off the thread pool. Every call is
compared with the reference interpreter, bit for bit, several times over on the same executable."""

from __future__ import annotations

import gc
import threading
import tracemalloc

import numpy as np
import pytest

import xlapy
from tests.runtime.threaded_calls import call_from_threads
from tools.compare import assert_same
from xlapy.buffers.assignment import BufferSlice
from xlapy.errors import VerifyError
from xlapy.runtime.thread_pool import SERIAL_ELEMENTS, block_launcher, runs_serially, worker_count
from xlapy.runtime.thunk_emitter import TRANSCENDENTAL_WORK
from xlapy.runtime.thunks.base import ExecutionContext, ThunkSequence, allocate
from xlapy.runtime.thunks.copy import SliceCopies
from xlapy.shapes import parse_shape

# Counts to n, updating a vector and a running sum on each iteration; the loop state has three values.
LOOP = """HloModule loop
cond { s = (s32[], f32[8], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       n = s32[] get-tuple-element(s), index=2  ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[8], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[8] get-tuple-element(s), index=1  n = s32[] get-tuple-element(s), index=2
       one = s32[] constant(1)  i1 = s32[] add(i, one)  f = f32[] convert(i)  b = f32[8] broadcast(f), dimensions={}
       half = f32[] constant(0.5)  h = f32[8] broadcast(half), dimensions={}  m = f32[8] multiply(v, h)
       v1 = f32[8] add(m, b)  ROOT t = (s32[], f32[8], s32[]) tuple(i1, v1, n) }
ENTRY e { n = s32[] parameter(0)  v = f32[8] parameter(1)  zero = s32[] constant(0)
          t = (s32[], f32[8], s32[]) tuple(zero, v, n)
          w = (s32[], f32[8], s32[]) while(t), condition=cond, body=body
          count = s32[] get-tuple-element(w), index=0  vector = f32[8] get-tuple-element(w), index=1
          ROOT r = (s32[], f32[8]) tuple(count, vector) }
"""

# The loop values trade places on each iteration: the copies back into the loop state overlap.
SWAP = """HloModule swap
cond { s = (s32[], f32[5], f32[5]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(5)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[5], f32[5]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       a = f32[5] get-tuple-element(s), index=1  b = f32[5] get-tuple-element(s), index=2
       one = s32[] constant(1)  i1 = s32[] add(i, one)  a1 = f32[5] add(a, a)
       ROOT t = (s32[], f32[5], f32[5]) tuple(i1, b, a1) }
ENTRY e { a = f32[5] parameter(0)  b = f32[5] parameter(1)  zero = s32[] constant(0)
          t = (s32[], f32[5], f32[5]) tuple(zero, a, b)
          ROOT w = (s32[], f32[5], f32[5]) while(t), condition=cond, body=body }
"""

BRANCHES = """HloModule branches
b0 { x = s32[3] parameter(0)  ROOT n = s32[3] negate(x) }
b1 { x = s32[3] parameter(0)  ROOT m = s32[3] multiply(x, x) }
b2 { x = s32[3] parameter(0)  c = s32[3] constant({7, 8, 9})  ROOT s = s32[3] subtract(x, c) }
on_true { x = s32[3] parameter(0)  ROOT a = s32[3] add(x, x) }
on_false { x = s32[3] parameter(0)  ROOT n = s32[3] not(x) }
ENTRY e { i = s32[] parameter(0)  p = pred[] parameter(1)  x = s32[3] parameter(2)
          c = s32[3] conditional(i, x, x, x), branch_computations={b0, b1, b2}
          ROOT d = s32[3] conditional(p, c, c), true_computation=on_true, false_computation=on_false }
"""


def _compile(text: str):
    module = xlapy.parse_hlo(text)
    return module, xlapy.compile(module, run_hlo_passes=False)


def test_a_loop_called_again_and_again_equals_the_interpreter():
    module, executable = _compile(LOOP)
    rng = np.random.default_rng(1)
    # Counts that differ from call to call, including a loop that never runs its body.
    for n in (5, 0, 17, 1, 5):
        v = rng.standard_normal(8).astype(np.float32)
        got = executable(np.int32(n), v)
        assert_same(got, xlapy.evaluate(module, np.int32(n), v), exact_bits=True)
        assert int(got[0]) == max(n, 0)


def test_overlapping_loop_copies_are_staged_on_every_iteration_and_every_call():
    module, executable = _compile(SWAP)
    for seed in range(3):
        a, b = (np.random.default_rng(seed).standard_normal((2, 5)).astype(np.float32))
        assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("index", [0, 1, 2, 3, -1, -(2**31)])
def test_conditionals_read_their_selector_afresh_on_every_call(index):
    module, executable = _compile(BRANCHES)
    x = np.array([3, -4, 5], np.int32)
    for predicate in (True, False, True):
        args = (np.int32(index), np.bool_(predicate), x)
        assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_results_are_fresh_arrays_whatever_the_next_call_writes():
    module, executable = _compile(LOOP)
    v = np.arange(8, dtype=np.float32)
    first = executable(np.int32(3), v)
    kept = [np.copy(value) for value in first]
    first[1][...] = -1.0  # writing a result touches nothing the executable keeps
    second = executable(np.int32(4), v)
    assert_same(first[0], kept[0], exact_bits=True)
    assert_same(second, xlapy.evaluate(module, np.int32(4), v), exact_bits=True)
    assert_same(executable(np.int32(3), v), kept, exact_bits=True)
    assert not np.shares_memory(first[1], second[1])


def test_a_refused_argument_leaves_the_executable_usable():
    module, executable = _compile(LOOP)
    v = np.ones(8, np.float32)
    with pytest.raises(xlapy.XlapyError):
        executable(np.int32(2), np.ones(7, np.float32))
    assert_same(executable(np.int32(2), v), xlapy.evaluate(module, np.int32(2), v), exact_bits=True)


def test_calls_from_several_threads_get_allocations_of_their_own():
    module, executable = _compile(LOOP)
    cases = [(np.int32(n), np.full(8, n, np.float32)) for n in range(8)]
    expected = [xlapy.evaluate(module, *case) for case in cases]
    call_from_threads(executable, cases, expected, workers=4, rounds=5)


def test_a_kernel_whose_buffers_do_not_fit_is_refused_on_every_call():
    _, executable = _compile("""HloModule m
f { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }
ENTRY e { p = f32[4] parameter(0)  ROOT fusion = f32[4] fusion(p), kind=kLoop, calls=f }
""")
    (thunk,) = executable.thunks
    thunk.outputs = [(thunk.operands[0][0], parse_shape("f32[2]"))]
    thunk.refresh()
    for _ in range(2):
        with pytest.raises(VerifyError, match="buffer 1 has 8 bytes"):
            executable(np.ones(4, np.float32))


def test_an_executable_frees_its_allocations_when_it_goes():
    # A loop keeps prepared runs that refer to their allocations: they go with the executable, without
    # waiting for the garbage collector.
    _, executable = _compile(LOOP.replace("f32[8]", "f32[1048576]"))
    gc.collect()
    gc.disable()
    tracemalloc.start()  # sees the allocations the first call makes
    try:
        executable(np.int32(1), np.ones(1 << 20, np.float32))
        kept = tracemalloc.get_traced_memory()[0]
        del executable
        left = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert kept >= 4 << 20 and left < 1 << 20  # the loop vector's 4 MiB at least were kept, then freed


def test_a_prepared_run_is_made_once_per_context():
    context = ExecutionContext([allocate(16)])
    context.allocations[0][...] = np.arange(16, dtype=np.uint8)
    copies = SliceCopies("swap", [(BufferSlice(0, 0, 8), BufferSlice(0, 8, 8), 8),
                                  (BufferSlice(0, 8, 8), BufferSlice(0, 0, 8), 8)])
    sequence = ThunkSequence([copies])
    run = context.prepared(sequence)
    assert context.prepared(sequence) is run and context.prepared(copies) is context.prepared(copies)
    run()
    np.testing.assert_array_equal(context.allocations[0], [*range(8, 16), *range(8)])
    run()  # the temporaries are reused: swapping twice restores the bytes
    np.testing.assert_array_equal(context.allocations[0], range(16))
    view = context.array(BufferSlice(0, 4, 8), parse_shape("s32[2]"))
    assert context.array(BufferSlice(0, 4, 8), parse_shape("s32[2]")) is view
    with pytest.raises(VerifyError, match="runs past its end"):
        context.array(BufferSlice(0, 12, 8), parse_shape("s32[2]"))


@pytest.mark.parametrize("blocks, elements", [(1, 1), (7, 100), (1, 1 << 20), (5, SERIAL_ELEMENTS),
                                              (3, 1 << 20), (64, 1 << 20)])
def test_a_launch_covers_every_block_once(blocks, elements):
    ranges: list[tuple[int, int]] = []
    lock = threading.Lock()

    def call(begin: int, end: int) -> None:
        with lock:
            ranges.append((begin, end))

    launch = block_launcher(call, blocks, elements)
    for _ in range(2):
        ranges.clear()
        launch()
        covered = sorted(b for begin, end in ranges for b in range(begin, end))
        assert covered == list(range(blocks))
        serial = blocks == 1 or elements < SERIAL_ELEMENTS or worker_count() == 1
        assert len(ranges) == (1 if serial else min(blocks, worker_count()))


# A kernel over a large argument and result: both are bound to new memory on every call (used in place, handed
# over), so its launch follows them instead of being prepared again.
SCALE = """HloModule scale
ENTRY e { x = f32[65536] parameter(0)  two = f32[] constant(2)  b = f32[65536] broadcast(two), dimensions={}
          ROOT m = f32[65536] multiply(x, b) }
"""


def test_kernels_follow_arguments_and_results_to_new_memory_without_being_prepared_again(monkeypatch):
    _, executable = _compile(SCALE)
    prepares = []
    original = ExecutionContext.prepared

    def counting(self, thunk):
        if id(thunk) not in self._prepared:
            prepares.append(thunk)
        return original(self, thunk)

    monkeypatch.setattr(ExecutionContext, "prepared", counting)
    results = []
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal(65536).astype(np.float32)
        results.append((x, executable(x)))
        if seed == 0:
            prepared_first = len(prepares)
    assert prepared_first > 0 and len(prepares) == prepared_first
    for x, result in results:  # every result still holds its own call's values: nothing wrote over it later
        np.testing.assert_array_equal(result, x * 2)


def test_an_argument_passed_again_is_read_as_it_is_now(monkeypatch):
    """The arrays of the call before are not bound again, but read where they are: what the caller wrote into
    them since counts, and other arrays in between change nothing."""
    _, executable = _compile(SCALE)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(65536).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(executable(x), x * 2)
    binds = []
    original = ExecutionContext.bind
    monkeypatch.setattr(ExecutionContext, "bind", lambda self, index, *rest: (binds.append(index),
                                                                             original(self, index, *rest))[1])
    x[::3] = 7.0
    np.testing.assert_array_equal(executable(x), x * 2)
    parameter_allocation = executable.assignment.slice(executable.module.entry.parameters[0], ()).allocation
    assert parameter_allocation not in binds
    for argument in (y, x, y):
        np.testing.assert_array_equal(executable(argument), argument * 2)


def test_an_argument_whose_strides_changed_in_place_is_read_by_its_new_strides():
    _, executable = _compile("""HloModule m
ENTRY e { x = f32[256,256] parameter(0)  ROOT n = f32[256,256] negate(x) }
""")
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    np.testing.assert_array_equal(executable(x), -x)
    with pytest.warns(DeprecationWarning):
        x.strides = x.strides[::-1]  # the same array object, now the transpose of its memory
    np.testing.assert_array_equal(executable(x), -x)
    assert not x.flags.c_contiguous


def test_a_copied_argument_is_copied_again_on_every_call():
    _, executable = _compile("""HloModule m
ENTRY e { x = s32[2,3] parameter(0)  ROOT n = s32[2,3] negate(x) }
""")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(executable(x), -x)
    x[1, 2] = 40
    np.testing.assert_array_equal(executable(x), -x)


def test_a_run_that_cannot_follow_drops_everything_prepared():
    context = ExecutionContext([allocate(16), allocate(16)])
    moves = []
    sequence = ThunkSequence([SliceCopies("copy", [(BufferSlice(1, 0, 8), BufferSlice(1, 8, 8), 8)])])

    class Follower(SliceCopies):
        def prepare(self, context):
            context.allocations[0]  # read, then followed instead of depended on
            context.follow(0, lambda data, address: moves.append(data) or data is not None)
            return lambda: None

    follower = Follower("follower", [])
    followed = context.prepared(follower)
    run = context.prepared(sequence)
    context.bind(0, allocate(16))
    assert len(moves) == 1 and context.prepared(follower) is followed and context.prepared(sequence) is run
    context.bind(0, None)  # the follower gives up: everything is prepared afresh
    assert len(moves) == 2 and context.prepared(follower) is not followed and context.prepared(sequence) is not run


def test_a_kernel_does_not_follow_its_output_to_memory_its_streaming_stores_cannot_write():
    # The kernel writes its large result with streaming stores, which fault off a 64-byte boundary: bound to
    # memory that starts elsewhere, the launch is prepared afresh, where the kernel's checks refuse it.
    _, executable = _compile("""HloModule stream
ENTRY e { x = f32[4096,1024] parameter(0)  ROOT a = f32[4096,1024] add(x, x) }""")
    (kernel,) = executable.kernels.values()
    assert kernel.signature.alignment(1) == 64
    x = np.ones((4096, 1024), np.float32)
    np.testing.assert_array_equal(executable(x), x + x)
    run = executable._take_run()
    (output, size, _), = executable._handed
    context = run.context
    context.bind(output, allocate(size))
    launch = context.prepared(executable.thunks)
    raw = allocate(size + 64)
    context.bind(output, raw[64:64 + size])
    assert context.prepared(executable.thunks) is launch  # followed
    context.bind(output, raw[4:4 + size])
    with pytest.raises(VerifyError, match="64-byte boundary"):
        context.prepared(executable.thunks)


def test_transcendental_work_weighs_more_than_elements():
    compute = """HloModule compute
ENTRY e { x = f32[256,1024] parameter(0)  ROOT t = f32[256,1024] tanh(x) }"""
    (computed,) = [t for t in _compile(compute)[1].thunks.walk() if t.kind == "kernel"]
    # tanh weighs as TRANSCENDENTAL_WORK cheap elements on top of its own (the write)
    assert computed.pool_work == 256 * 1024 * (1 + TRANSCENDENTAL_WORK) >= SERIAL_ELEMENTS


# A fill (zeros), then what reads it: nothing (the zeros are the result), a scatter on one thread (narrow windows,
# no flags), or an elementwise kernel large enough for the pool.
FILL_RESULT = """HloModule fill
ENTRY e { z = f32[] constant(0)  ROOT b = f32[256,1024] broadcast(z), dimensions={} }"""
FILL_SCATTERED = """HloModule scattered
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e { z = f32[] constant(0)  zeros = f32[16384,16] broadcast(z), dimensions={}
          i = s32[64,1] parameter(0)  u = f32[64,16] parameter(1)
          ROOT s = f32[16384,16] scatter(zeros, i, u), update_window_dims={1}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb }"""
FILL_ADDED = """HloModule added
ENTRY e { z = f32[] constant(0)  zeros = f32[256,1024] broadcast(z), dimensions={}
          x = f32[256,1024] parameter(0)  ROOT s = f32[256,1024] add(zeros, x) }"""


@pytest.mark.parametrize(("text", "on_pool"), [(FILL_RESULT, True), (FILL_SCATTERED, False), (FILL_ADDED, True)],
                         ids=["result", "scattered into on one thread", "read on the pool"])
def test_kernels_that_only_write_memory_run_where_their_reader_runs(text, on_pool):
    module, executable = _compile(text)
    kernels = [t for t in executable.thunks.walk() if t.kind == "kernel"]
    (fill,) = [t for t in kernels if t.fusion.fused_computation.root.opcode == "broadcast"]
    assert (fill.pool_work > 0) is on_pool
    rng = np.random.default_rng(4)
    args = [rng.integers(0, 16384, (64, 1)).astype(np.int32), rng.standard_normal((64, 16)).astype(np.float32)] \
        if "scatter" in text else [rng.standard_normal((256, 1024)).astype(np.float32)] if "add(" in text else []
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


EXP_LOG = """f { x = f32[4096] parameter(0)  e = f32[4096] exponential(x)  ROOT l = f32[4096] log(e) }
ENTRY e { x = f32[4096] parameter(0)  ROOT r = f32[4096] fusion(x), kind=kLoop, calls=f }"""
SCALAR_TANH = """f { x = f32[] parameter(0)  t = f32[] tanh(x)  ROOT b = f32[4096] broadcast(t), dimensions={} }
ENTRY e { x = f32[] parameter(0)  ROOT r = f32[4096] fusion(x), kind=kLoop, calls=f }"""


@pytest.mark.parametrize(("text", "serial"), [
    ("ENTRY e { x = f32[4096] parameter(0)  ROOT t = f32[4096] tanh(x) }", False),
    (EXP_LOG, False),
    ("ENTRY e { x = f32[4096] parameter(0)  ROOT t = f32[4096] multiply(x, x) }", True),
    (SCALAR_TANH, True),  # one tanh per kernel, not per element
])
def test_transcendental_kernels_share_their_blocks_from_fewer_elements(text, serial):
    (kernel,) = [t for t in _compile("HloModule m\n" + text)[1].thunks.walk() if t.kind == "kernel"]
    assert runs_serially(kernel.blocks, kernel.pool_work, native=True) is (serial or worker_count() == 1)
