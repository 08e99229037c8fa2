"""The native pool that runs kernels' blocks (``xlapy/runtime/native_pool.py``): every block of every launch
runs exactly once (counted by a kernel that adds 1 to a mark per block, atomically), whatever the block count,
the chunk size, whether the workers spin or sleep, and how many Python threads launch at once; a forked child
and whole programs compute what the reference interpreter does."""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import subprocess
import sys
import threading
import time

import llvmlite.binding as llvm
import numpy as np
import pytest

import xlapy
from xlapy.errors import VerifyError
from xlapy.runtime import native_pool, thread_pool

pytestmark = pytest.mark.skipif(not native_pool.supported(), reason="the native pool runs on Linux x86-64")

# marks[block] += 1 for each block of [begin, end) (atomically: two runs of a block would both count), after
# spinning ``spins`` pauses; frames[block] = the frame's address, which tells the threads apart.
# Arguments: {marks (i32), spins, frames (i64)}.
_MARKING_KERNEL = """
declare ptr @llvm.frameaddress.p0(i32)
declare void @llvm.x86.sse2.pause()
define void @mark(ptr %args, i64 %begin, i64 %end) {
entry:
  %marks = load ptr, ptr %args
  %spins_p = getelementptr ptr, ptr %args, i64 1
  %spins = load i64, ptr %spins_p
  %frames_p = getelementptr ptr, ptr %args, i64 2
  %frames = load ptr, ptr %frames_p
  %frame = call ptr @llvm.frameaddress.p0(i32 0)
  %frame_bits = ptrtoint ptr %frame to i64
  %empty = icmp uge i64 %begin, %end
  br i1 %empty, label %out, label %block
block:
  %i = phi i64 [ %begin, %entry ], [ %next, %spun ]
  %mark = getelementptr i32, ptr %marks, i64 %i
  %old = atomicrmw add ptr %mark, i32 1 seq_cst
  %where = getelementptr i64, ptr %frames, i64 %i
  store i64 %frame_bits, ptr %where
  br label %spin
spin:
  %k = phi i64 [ 0, %block ], [ %k_next, %pause ]
  %k_next = add i64 %k, 1
  %more = icmp ult i64 %k, %spins
  br i1 %more, label %pause, label %spun
pause:
  call void @llvm.x86.sse2.pause()
  br label %spin
spun:
  %next = add i64 %i, 1
  %again = icmp ult i64 %next, %end
  br i1 %again, label %block, label %out
out:
  ret void
}
"""
_Kernel = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@pytest.fixture(scope="module")
def marking_kernel():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(jit=True)
    module = llvm.parse_assembly(_MARKING_KERNEL)
    module.verify()
    module.triple = machine.triple
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    yield engine.get_function_address("mark"), engine


class _Marks:
    """A launch's buffers: the marks and frames of ``blocks`` blocks (and a few past them, which must stay 0)."""

    def __init__(self, blocks: int, spins: int = 0):
        self.blocks = blocks
        self.marks = np.zeros(blocks + 8, np.int32)
        self.frames = np.zeros(blocks + 8, np.int64)
        self.arguments = (ctypes.c_void_p * 3)(self.marks.ctypes.data, spins, self.frames.ctypes.data)

    def launcher(self, function: int, chunk: int, serial_calls: list | None = None):
        kernel = _Kernel(function)

        def serial() -> None:
            if serial_calls is not None:
                serial_calls.append(1)
            kernel(ctypes.addressof(self.arguments), 0, self.blocks)

        return native_pool.launcher(function, ctypes.addressof(self.arguments), self.blocks, chunk, 2, serial)

    def assert_ran(self, launches: int) -> None:
        assert self.marks[:self.blocks].tolist() == [launches] * self.blocks
        assert not self.marks[self.blocks:].any()


@pytest.mark.parametrize("blocks", [1, 2, 3, 5, 17, 64, 1000])
def test_every_block_runs_once_per_launch(marking_kernel, blocks):
    function, _ = marking_kernel
    for chunk in sorted({1, 2, 3, 7, max(1, blocks // 16), blocks, blocks + 5}):
        marks, serial_calls = _Marks(blocks), []
        launch = marks.launcher(function, chunk, serial_calls)
        for _ in range(25):
            launch()
        marks.assert_ran(25)
        assert not serial_calls  # one launching thread: the pool took every launch


def test_workers_woken_from_sleep_take_part(marking_kernel):
    function, _ = marking_kernel
    # Milliseconds a launch on one core: a woken worker gets a core before the caller is done, even on a busy host.
    marks = _Marks(64, spins=10000)
    launch = marks.launcher(function, 1)
    threads_per_launch = []
    for _ in range(6):
        time.sleep(3 * native_pool.SPIN_MICROSECONDS * 1e-6)  # the workers go to sleep on the futex
        launch()
        threads_per_launch.append(len(set(marks.frames[:64].tolist())))
    marks.assert_ran(6)
    assert max(threads_per_launch) >= 2


def test_launches_from_several_threads_at_once(marking_kernel):
    function, _ = marking_kernel
    workers, rounds = 4, 150
    cases = [_Marks(blocks, spins=blocks % 3 * 50) for blocks in (1, 7, 33, 256)]
    serial_calls: list = []
    barrier = threading.Barrier(workers)

    def work(marks: _Marks) -> None:
        launch = marks.launcher(function, 2, serial_calls)
        barrier.wait()
        for _ in range(rounds):
            launch()

    threads = [threading.Thread(target=work, args=(marks,)) for marks in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for marks in cases:
        marks.assert_ran(rounds)


def test_a_launch_while_another_thread_launches_runs_on_the_calling_thread(marking_kernel):
    function, _ = marking_kernel
    marks, serial_calls = _Marks(40), []
    launch = marks.launcher(function, 1, serial_calls)
    state = (ctypes.c_int64 * 64).from_address(native_pool.current_pool(2).state)
    state[native_pool._BUSY] = 1  # as while another thread's launch runs
    try:
        launch()
    finally:
        state[native_pool._BUSY] = 0
    assert not serial_calls and len(set(marks.frames[:40].tolist())) == 1
    marks.assert_ran(1)


def test_a_launch_without_a_pool_runs_on_the_calling_thread(marking_kernel):
    function, _ = marking_kernel
    marks, serial_calls = _Marks(40), []
    launch = marks.launcher(function, 1, serial_calls)
    state = native_pool._cell.value
    native_pool._cell.value = None  # as once exit began
    try:
        launch()
    finally:
        native_pool._cell.value = state
    launch()
    assert len(serial_calls) == 1
    marks.assert_ran(2)


@pytest.mark.parametrize("asleep", [False, True])
def test_a_stopped_pool_joins_its_workers(marking_kernel, asleep):
    function, _ = marking_kernel
    native_pool.current_pool(2)  # compiles the pool's code
    pool = native_pool.NativePool(native_pool._code, 2)
    marks = _Marks(100, spins=10)
    cell = ctypes.c_void_p(pool.state)
    job = (ctypes.c_int64 * 8)(ctypes.addressof(cell), function, ctypes.addressof(marks.arguments), 100, 3)
    assert native_pool._code.run(ctypes.addressof(job)) == 0
    if asleep:
        time.sleep(3 * native_pool.SPIN_MICROSECONDS * 1e-6)
    pool.stop()
    assert not any(thread.is_alive() for thread in pool.threads)
    marks.assert_ran(1)


def test_the_interpreter_exits_while_workers_sleep():
    program = ("import time, numpy as np, xlapy\n"
               "text = 'HloModule m\\nENTRY e { x = f32[65536] parameter(0)  ROOT t = f32[65536] tanh(x) }'\n"
               "executable = xlapy.compile(xlapy.parse_hlo(text))\n"
               "executable(np.ones(65536, np.float32))\n"
               "from xlapy.runtime import native_pool\n"
               "assert native_pool._pool is not None\n"
               "time.sleep(0.01)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_refused_launches(marking_kernel):
    function, _ = marking_kernel
    with pytest.raises(VerifyError, match="cannot launch 0 blocks"):
        native_pool.launcher(function, 0, 0, 1, 2, lambda: None)
    with pytest.raises(VerifyError, match="chunks of 0"):
        native_pool.launcher(function, 0, 4, 0, 2, lambda: None)


# -- whole programs ---------------------------------------------------------------------------------------------

_TANH = """HloModule tanh
ENTRY e { x = f32[64,4096] parameter(0)  h = f32[] constant(0.5)  b = f32[64,4096] broadcast(h), dimensions={}
          m = f32[64,4096] multiply(x, b)  ROOT t = f32[64,4096] tanh(m) }
"""


def _run_in_child(x: np.ndarray) -> tuple[bytes, bool]:
    got = xlapy.compile(xlapy.parse_hlo(_TANH))(x)
    pool = native_pool._pool
    return got.tobytes(), pool is not None and all(thread.is_alive() for thread in pool.threads)


# The child runs no JAX code (JAX warns of forking once it has threads, when other tests imported it).
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called")
def test_a_forked_child_builds_its_own_pool():
    x = np.random.default_rng(3).standard_normal((64, 4096)).astype(np.float32)
    expected = np.asarray(xlapy.evaluate(xlapy.parse_hlo(_TANH), x))
    got = xlapy.compile(xlapy.parse_hlo(_TANH))(x)  # the parent's pool is running when it forks
    assert got.tobytes() == expected.tobytes()
    assert native_pool._pool is not None
    with multiprocessing.get_context("fork").Pool(1) as children:
        child_bytes, child_pool_runs = children.apply(_run_in_child, (x,))
    assert child_bytes == expected.tobytes() and child_pool_runs


def test_gelu_from_jax_equals_the_interpreter():
    jax = pytest.importorskip("jax")
    from xlapy.frontends.jax import from_jax

    x = np.random.default_rng(4).standard_normal((64, 4096)).astype(np.float32)
    module = from_jax(functools.partial(jax.nn.gelu, approximate=True), x)
    executable = xlapy.compile(module, backend="cpu")
    (kernel,) = [t for t in executable.thunks.walk() if t.kind == "kernel"]
    assert not thread_pool.runs_serially(kernel.blocks, kernel.pool_work, native=True) or \
        thread_pool.worker_count() == 1
    expected = np.asarray(xlapy.evaluate(module, x))
    for _ in range(3):  # prepared once, then launched again
        assert executable(x).tobytes() == expected.tobytes()


@pytest.mark.parametrize("elements", [8, 1 << 20])  # on the calling thread alone, and on the pool
def test_a_launch_keeps_its_kernels_pointer_array_and_buffers_alive(elements):
    # block_launcher hands the native code the address of the bound launch's pointer array: the launch it returns
    # must keep that array (and the buffers in it) alive once the caller drops the bound launch.
    import gc
    import weakref

    from xlapy.runtime.thunks.base import allocate

    text = f"""HloModule twice
ENTRY main {{
  x = f32[{elements}] parameter(0)
  ROOT y = f32[{elements}] add(x, x)
}}"""
    module = xlapy.parse_hlo(text)
    (kernel,) = xlapy.compile(module, run_hlo_passes=False).kernels.values()
    x, out = (allocate(4 * elements).view(np.float32) for _ in range(2))  # aligned as streaming stores need
    x[:] = np.arange(elements)
    bound = kernel.bind([x, out])
    alive = weakref.ref(bound)
    launch = thread_pool.block_launcher(bound, kernel.signature.blocks, elements)
    del bound, x
    gc.collect()
    assert alive() is not None
    reuse = [(ctypes.c_void_p * 4)(1, 2, 3, 4) for _ in range(1000)]  # memory a freed array would be reused for
    launch()
    assert np.array_equal(out, np.arange(elements, dtype=np.float32) * 2)
    del reuse
