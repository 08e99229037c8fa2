"""A parallel-for in generated native code, for kernel launches: dispatch in about a microsecond.

Handing blocks to Python threads costs tens of microseconds (each hand-off takes the GIL and wakes a thread
through a condition variable). XLA:CPU runs its kernels on an Eigen thread pool (``Eigen::ThreadPool``, used
through ``xla/backends/cpu/runtime/thread_pool_task_runner.h``), whose workers spin a little before they sleep,
so that a kernel launched soon after the previous one finds them awake. This pool does the same in a few
functions written in LLVM IR and compiled once per process with llvmlite:

- ``worker(state, index)``: a worker's whole life. It claims chunks of the current job while there are any,
  else spins (``pause``, and ``sched_yield`` every ``YIELD_PAUSES``) for ``SPIN_MICROSECONDS``, then sleeps on
  a futex until a job or the shutdown wakes it. Each of ``worker_count() - 1`` daemon threads calls it through
  ctypes, which releases the GIL for the call; it returns only at shutdown.
- ``run(job)``: a launch. The job is a line of words made once per launch (``launcher``): the address of the
  process's pool cell, then a kernel's entry ``void (void **arguments, i64 block_begin, i64 block_end)``, its
  arguments, the block count and the chunk size. It publishes the job in the pool's state, wakes the sleeping
  workers, claims chunks like a worker, then waits (spinning, yielding) until every block is done. A worker
  that is asleep or busy elsewhere costs nothing: the caller takes the blocks it does not. While another thread
  launches on the pool, the blocks run on the calling thread alone; with no pool in the process (the cell is
  null) it returns 1 and Python builds one.
- ``run_alone(job)``: the job's blocks on the calling thread (``alone``: a one-argument call for a kernel too
  small to share, cheaper through ctypes than the kernel's own three arguments).
- ``run_steps(steps, count, iterations, budget)``: a run of launches (alone or on the pool), byte moves and
  tests in a loop, so that a loop of small kernels makes one call through ctypes instead of one per step
  (``runtime/native_steps.py`` builds the steps).
- ``shutdown(state)``: makes every worker return.

The state is a few 64-byte lines (one per field written by different threads, so that no two writers share a
line): the job counter ``generation << 32 | next block``, the job (function, arguments, blocks, chunk), the
finished-blocks counter, the futex word, the shutdown flag, constants (libc's ``syscall``, the spin length,
the worker count), the busy flag, one "sleeping" flag per worker. Native code touches nothing else but the
job's words and what the kernel itself reads and writes.

Claims are compare-and-swaps on the job counter. A job is published in two steps: the counter first moves to
the new generation with no block left to claim (``next = 0xFFFFFFFF``), then the job's fields are written,
then the counter is set to the new generation's block 0. A worker reads the counter, then the fields; its
claim succeeds only if the counter is still the value it read, so a worker late from an earlier job (that read
the new job's fields under the old generation) never runs a block, and no block of a job runs twice.

A worker going to sleep sets its flag, then reads the futex word and the counter (sequentially consistent);
the caller sets the counter, then reads the flags, and bumps the futex word and wakes the futex when one is
set. One of the two sees the other's write, so no wake-up is lost (a futex wait on a stale word returns at
once).

The states and the compiled code are never freed: the states live in memory this module keeps for the
process, and the worker threads hold references to both for as long as they run. At exit the workers are told
to stop and joined (with a timeout), and launches run alone from then on; in a child made by ``fork`` (which
has none of the workers) the cell is cleared and the first launch builds a pool of the child's own."""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import platform
import sys
import threading
import time
from collections.abc import Callable

from xlapy.errors import VerifyError

# How long a worker with nothing to do spins before it sleeps on the futex (a futex wake costs a system call
# and a few microseconds of the sleeper's wake-up; a loop launching kernels back to back keeps them awake).
SPIN_MICROSECONDS = 100
# Pauses (a few nanoseconds to tens each) between two ``sched_yield`` calls of a spinning thread: when the
# launching thread and a worker share a core (other processes keep the others busy), a spinning thread gives it
# up within a microsecond or so instead of holding it for its whole time slice.
YIELD_PAUSES = 64
# Chunks per participating thread: enough for a thread slowed down by other work on its core to take fewer.
CHUNKS_PER_THREAD = 8
# The packed counter keeps the next block in 32 bits, one value of which means "nothing to claim".
MAX_BLOCKS = (1 << 32) - 2
JOIN_SECONDS = 1.0

_SYS_FUTEX = 202  # x86-64 Linux system call numbers
_SYS_SCHED_YIELD = 24
_FUTEX_WAIT_PRIVATE = 0 | 128
_FUTEX_WAKE_PRIVATE = 1 | 128

# State words (i64), each group on a 64-byte line of its own.
_COUNTER = 0
_FUNCTION, _ARGUMENTS, _BLOCKS, _CHUNK = 8, 9, 10, 11
_FINISHED = 16
_FUTEX = 24  # an i32 at the start of the line
_SHUTDOWN = 32
_SYSCALL, _SPIN_TICKS, _WORKERS = 40, 41, 42
_BUSY = 48  # 1 while a thread launches on the pool
_FLAGS = 56  # the sleeping flag of worker i at word _FLAGS + 8 * i
_LINE_WORDS = 8

# The kinds of ``xlapy_pool_run_steps``' steps (words a, b, c): a launch of the job at a on the calling thread;
# a launch of the job at a on the pool; a move of c bytes from b to a; a test that stops the loop when the byte at
# a is 0.
STEP_ALONE, STEP_ON_POOL, STEP_MOVE, STEP_TEST = range(4)
STEP_WORDS = 4

_IR = f"""
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)

define private ptr @word(ptr %s, i64 %i) alwaysinline {{
  %p = getelementptr i64, ptr %s, i64 %i
  ret ptr %p
}}

; Claims and runs chunks of the current job until none is left; whether it ran any.
define private i1 @work(ptr %s) {{
entry:
  %counter = call ptr @word(ptr %s, i64 {_COUNTER})
  %blocks_p = call ptr @word(ptr %s, i64 {_BLOCKS})
  %function_p = call ptr @word(ptr %s, i64 {_FUNCTION})
  %arguments_p = call ptr @word(ptr %s, i64 {_ARGUMENTS})
  %chunk_p = call ptr @word(ptr %s, i64 {_CHUNK})
  %finished = call ptr @word(ptr %s, i64 {_FINISHED})
  br label %claim
claim:
  %ran = phi i1 [ false, %entry ], [ %ran, %retry ], [ true, %done ]
  %c = load atomic i64, ptr %counter acquire, align 8
  %next = and i64 %c, 4294967295
  %blocks = load atomic i64, ptr %blocks_p acquire, align 8
  %open = icmp ult i64 %next, %blocks
  br i1 %open, label %try, label %out
try:
  %function = load atomic ptr, ptr %function_p acquire, align 8
  %arguments = load atomic ptr, ptr %arguments_p acquire, align 8
  %chunk = load atomic i64, ptr %chunk_p acquire, align 8
  %wanted = add i64 %next, %chunk
  %short = icmp ult i64 %wanted, %blocks
  %end = select i1 %short, i64 %wanted, i64 %blocks
  %generation = and i64 %c, -4294967296
  %claimed = or i64 %generation, %end
  %swap = cmpxchg ptr %counter, i64 %c, i64 %claimed seq_cst seq_cst, align 8
  %won = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %won, label %run, label %retry
retry:
  br label %claim
run:
  call void %function(ptr %arguments, i64 %next, i64 %end)
  %count = sub i64 %end, %next
  %old = atomicrmw add ptr %finished, i64 %count release, align 8
  br label %done
done:
  br label %claim
out:
  ret i1 %ran
}}

define void @xlapy_pool_worker(ptr %s, i64 %index) {{
entry:
  %limit_p = call ptr @word(ptr %s, i64 {_SPIN_TICKS})
  %spin_ticks = load i64, ptr %limit_p, align 8
  %syscall_p = call ptr @word(ptr %s, i64 {_SYSCALL})
  %syscall = load ptr, ptr %syscall_p, align 8
  %flag_word = mul i64 %index, {_LINE_WORDS}
  %flag_index = add i64 %flag_word, {_FLAGS}
  %flag = call ptr @word(ptr %s, i64 %flag_index)
  %futex = call ptr @word(ptr %s, i64 {_FUTEX})
  %shutdown = call ptr @word(ptr %s, i64 {_SHUTDOWN})
  %counter = call ptr @word(ptr %s, i64 {_COUNTER})
  %blocks_p = call ptr @word(ptr %s, i64 {_BLOCKS})
  br label %awake
awake:
  %t0 = call i64 @llvm.readcyclecounter()
  br label %poll
poll:
  %spins = phi i64 [ 0, %awake ], [ %spins_next, %pause ], [ 0, %yield ]
  %did = call i1 @work(ptr %s)
  br i1 %did, label %awake, label %idle
idle:
  %stop = load atomic i64, ptr %shutdown acquire, align 8
  %stopping = icmp ne i64 %stop, 0
  br i1 %stopping, label %exit, label %timing
timing:
  %now = call i64 @llvm.readcyclecounter()
  %elapsed = sub i64 %now, %t0
  %spinning = icmp ult i64 %elapsed, %spin_ticks
  br i1 %spinning, label %spin, label %sleep
spin:
  %spins_next = add i64 %spins, 1
  %due = icmp uge i64 %spins_next, {YIELD_PAUSES}
  br i1 %due, label %yield, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  br label %poll
yield:
  ; lets the launching thread run when it shares this core
  %y = call i64 (i64, ...) %syscall(i64 {_SYS_SCHED_YIELD})
  br label %poll
sleep:
  store atomic i64 1, ptr %flag seq_cst, align 8
  %word = load atomic i32, ptr %futex seq_cst, align 8
  %c = load atomic i64, ptr %counter seq_cst, align 8
  %next = and i64 %c, 4294967295
  %blocks = load atomic i64, ptr %blocks_p seq_cst, align 8
  %open = icmp ult i64 %next, %blocks
  %stop_now = load atomic i64, ptr %shutdown seq_cst, align 8
  %stopping_now = icmp ne i64 %stop_now, 0
  %skip = or i1 %open, %stopping_now
  br i1 %skip, label %woken, label %wait
wait:
  %value = zext i32 %word to i64
  %r = call i64 (i64, ...) %syscall(i64 {_SYS_FUTEX}, ptr %futex, i64 {_FUTEX_WAIT_PRIVATE}, i64 %value, ptr null)
  br label %woken
woken:
  store atomic i64 0, ptr %flag seq_cst, align 8
  br label %awake
exit:
  ret void
}}

define private void @wake_sleepers(ptr %s) {{
entry:
  %workers_p = call ptr @word(ptr %s, i64 {_WORKERS})
  %workers = load i64, ptr %workers_p, align 8
  br label %scan
scan:
  %i = phi i64 [ 0, %entry ], [ %i_next, %asleep_no ]
  %more = icmp ult i64 %i, %workers
  br i1 %more, label %look, label %none
look:
  %flag_word = mul i64 %i, {_LINE_WORDS}
  %flag_index = add i64 %flag_word, {_FLAGS}
  %flag = call ptr @word(ptr %s, i64 %flag_index)
  %asleep = load atomic i64, ptr %flag seq_cst, align 8
  %i_next = add i64 %i, 1
  %is_asleep = icmp ne i64 %asleep, 0
  br i1 %is_asleep, label %wake, label %asleep_no
asleep_no:
  br label %scan
wake:
  call void @wake_all(ptr %s)
  br label %none
none:
  ret void
}}

define private void @wake_all(ptr %s) {{
  %futex = call ptr @word(ptr %s, i64 {_FUTEX})
  %old = atomicrmw add ptr %futex, i32 1 seq_cst, align 8
  %syscall_p = call ptr @word(ptr %s, i64 {_SYSCALL})
  %syscall = load ptr, ptr %syscall_p, align 8
  %r = call i64 (i64, ...) %syscall(i64 {_SYS_FUTEX}, ptr %futex, i64 {_FUTEX_WAKE_PRIVATE}, i64 2147483647)
  ret void
}}

; A launch of the job at %job: {{ the pool cell, function, arguments, blocks, chunk }}. Returns 1 when this
; process has no pool (the cell is null: Python builds one, or runs the blocks itself), else 0 once every block
; has run: on the pool, or on this thread alone when another thread is launching on the pool.
define i64 @xlapy_pool_run(ptr %job) {{
entry:
  %cell = load ptr, ptr %job, align 8
  %s = load atomic ptr, ptr %cell acquire, align 8
  %none = icmp eq ptr %s, null
  br i1 %none, label %no_pool, label %job_fields
no_pool:
  ret i64 1
job_fields:
  %function_j = getelementptr i64, ptr %job, i64 1
  %function = load ptr, ptr %function_j, align 8
  %arguments_j = getelementptr i64, ptr %job, i64 2
  %arguments = load ptr, ptr %arguments_j, align 8
  %blocks_j = getelementptr i64, ptr %job, i64 3
  %blocks = load i64, ptr %blocks_j, align 8
  %chunk_j = getelementptr i64, ptr %job, i64 4
  %chunk = load i64, ptr %chunk_j, align 8
  %busy = call ptr @word(ptr %s, i64 {_BUSY})
  %take = cmpxchg ptr %busy, i64 0, i64 1 acquire monotonic, align 8
  %taken = extractvalue {{ i64, i1 }} %take, 1
  br i1 %taken, label %publish, label %alone
alone:
  call void %function(ptr %arguments, i64 0, i64 %blocks)
  ret i64 0
publish:
  %counter = call ptr @word(ptr %s, i64 {_COUNTER})
  %c = load atomic i64, ptr %counter acquire, align 8
  %generation = lshr i64 %c, 32
  %following = add i64 %generation, 1
  %high = shl i64 %following, 32
  %closed = or i64 %high, 4294967295
  store atomic i64 %closed, ptr %counter seq_cst, align 8
  %function_p = call ptr @word(ptr %s, i64 {_FUNCTION})
  store atomic ptr %function, ptr %function_p release, align 8
  %arguments_p = call ptr @word(ptr %s, i64 {_ARGUMENTS})
  store atomic ptr %arguments, ptr %arguments_p release, align 8
  %blocks_p = call ptr @word(ptr %s, i64 {_BLOCKS})
  store atomic i64 %blocks, ptr %blocks_p release, align 8
  %chunk_p = call ptr @word(ptr %s, i64 {_CHUNK})
  store atomic i64 %chunk, ptr %chunk_p release, align 8
  %finished = call ptr @word(ptr %s, i64 {_FINISHED})
  store atomic i64 0, ptr %finished release, align 8
  store atomic i64 %high, ptr %counter seq_cst, align 8
  call void @wake_sleepers(ptr %s)
  %ran = call i1 @work(ptr %s)
  %syscall_p = call ptr @word(ptr %s, i64 {_SYSCALL})
  %syscall = load ptr, ptr %syscall_p, align 8
  br label %check
check:
  %spins = phi i64 [ 0, %publish ], [ %spins_next, %pause ], [ 0, %yield ]
  %done = load atomic i64, ptr %finished acquire, align 8
  %all = icmp eq i64 %done, %blocks
  br i1 %all, label %exit, label %spin
spin:
  %spins_next = add i64 %spins, 1
  %due = icmp uge i64 %spins_next, {YIELD_PAUSES}
  br i1 %due, label %yield, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  br label %check
yield:
  ; a worker still runs a chunk: if it waits for this core (or was pre-empted), let it run
  %r = call i64 (i64, ...) %syscall(i64 {_SYS_SCHED_YIELD})
  br label %check
exit:
  store atomic i64 0, ptr %busy release, align 8
  ret i64 0
}}

; The job's blocks on the calling thread (the cell is not read).
define void @xlapy_pool_run_alone(ptr %job) {{
  %function_j = getelementptr i64, ptr %job, i64 1
  %function = load ptr, ptr %function_j, align 8
  %arguments_j = getelementptr i64, ptr %job, i64 2
  %arguments = load ptr, ptr %arguments_j, align 8
  %blocks_j = getelementptr i64, ptr %job, i64 3
  %blocks = load i64, ptr %blocks_j, align 8
  call void %function(ptr %arguments, i64 0, i64 %blocks)
  ret void
}}

; Runs the steps at %steps ({{ kind, a, b, c }} each: STEP_* in runtime/native_steps.py) in order, %iterations
; times or until the cycle counter has advanced %budget ticks past the start at the end of an iteration. Returns
; the iterations completed, or -1 when a test step found its byte 0 (the rest of that iteration is not run).
define i64 @xlapy_pool_run_steps(ptr %steps, i64 %count, i64 %iterations, i64 %budget) {{
entry:
  %start = call i64 @llvm.readcyclecounter()
  br label %iteration
iteration:
  %i = phi i64 [ 0, %entry ], [ %i_next, %iterated ]
  %more = icmp ult i64 %i, %iterations
  br i1 %more, label %step, label %finished
step:
  %s = phi i64 [ 0, %iteration ], [ %s_next, %stepped ]
  %more_steps = icmp ult i64 %s, %count
  br i1 %more_steps, label %dispatch, label %iterated
dispatch:
  %first = mul i64 %s, 4
  %kind_p = getelementptr i64, ptr %steps, i64 %first
  %kind = load i64, ptr %kind_p, align 8
  %a_p = getelementptr i64, ptr %kind_p, i64 1
  %a = load ptr, ptr %a_p, align 8
  %b_p = getelementptr i64, ptr %kind_p, i64 2
  %b = load ptr, ptr %b_p, align 8
  %c_p = getelementptr i64, ptr %kind_p, i64 3
  %c = load i64, ptr %c_p, align 8
  switch i64 %kind, label %stepped [ i64 {STEP_ALONE}, label %alone
                                     i64 {STEP_ON_POOL}, label %pooled
                                     i64 {STEP_MOVE}, label %move
                                     i64 {STEP_TEST}, label %test ]
alone:
  call void @xlapy_pool_run_alone(ptr %a)
  br label %stepped
pooled:
  %no_pool = call i64 @xlapy_pool_run(ptr %a)
  %refused = icmp ne i64 %no_pool, 0
  br i1 %refused, label %alone, label %stepped
move:
  call void @llvm.memmove.p0.p0.i64(ptr %a, ptr %b, i64 %c, i1 false)
  br label %stepped
test:
  %flag = load i8, ptr %a, align 1
  %holds = icmp ne i8 %flag, 0
  br i1 %holds, label %stepped, label %stopped
stepped:
  %s_next = add i64 %s, 1
  br label %step
iterated:
  %i_next = add i64 %i, 1
  %now = call i64 @llvm.readcyclecounter()
  %elapsed = sub i64 %now, %start
  %in_time = icmp ult i64 %elapsed, %budget
  br i1 %in_time, label %iteration, label %out_of_time
out_of_time:
  ret i64 %i_next
finished:
  ret i64 %i
stopped:
  ret i64 -1
}}

define void @xlapy_pool_shutdown(ptr %s) {{
  %shutdown = call ptr @word(ptr %s, i64 {_SHUTDOWN})
  store atomic i64 1, ptr %shutdown seq_cst, align 8
  call void @wake_all(ptr %s)
  ret void
}}

define i64 @xlapy_pool_ticks() {{
  %t = call i64 @llvm.readcyclecounter()
  ret i64 %t
}}
"""

_WorkerFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
_RunFunction = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_ShutdownFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_AloneFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_TicksFunction = ctypes.CFUNCTYPE(ctypes.c_int64)
_StepsFunction = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)

# The job words (a line of its own per launch): the pool cell's address, function, arguments, blocks, chunk.
_JOB_WORDS = 8


class _Code:
    """The pool's functions, compiled once per process (a child made by ``fork`` keeps them)."""

    def __init__(self) -> None:
        import llvmlite.binding as llvm

        from xlapy.codegen.backends.cpu import _LLVM_LOCK, _target_machine

        with _LLVM_LOCK:  # llvmlite's LLVM context is shared with the kernels' compilation
            target_machine = _target_machine()
            module = llvm.parse_assembly(_IR)
            module.triple = target_machine.triple
            module.data_layout = str(target_machine.target_data)
            module.verify()
            self.engine = llvm.create_mcjit_compiler(module, target_machine)
            self.engine.finalize_object()
            address = self.engine.get_function_address
            self.worker = _WorkerFunction(address("xlapy_pool_worker"))
            self.run = _RunFunction(address("xlapy_pool_run"))
            self.run_alone = _AloneFunction(address("xlapy_pool_run_alone"))
            self.shutdown = _ShutdownFunction(address("xlapy_pool_shutdown"))
            self.run_steps = _StepsFunction(address("xlapy_pool_run_steps"))
            self._ticks = _TicksFunction(address("xlapy_pool_ticks"))
        self.syscall = ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value

    @functools.cached_property
    def ticks_per_second(self) -> float:
        """The cycle counter's rate (constant on the hosts this runs on), for the spin lengths."""
        start, first = time.perf_counter(), self._ticks()
        time.sleep(0.002)
        return (self._ticks() - first) / (time.perf_counter() - start)


def supported() -> bool:
    """Whether this host can run the pool: Linux (futexes) on x86-64 (``pause``, ``rdtsc``, its system call
    numbers)."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


class NativePool:
    """``workers`` threads running the blocks of the jobs published in ``state`` (an address)."""

    def __init__(self, code: _Code, workers: int):
        self._code = code
        words = _FLAGS + _LINE_WORDS * workers
        self._memory = (ctypes.c_int64 * (words + _LINE_WORDS))()
        address = ctypes.addressof(self._memory)
        self.state = address + (-address) % (8 * _LINE_WORDS)
        state = (ctypes.c_int64 * words).from_address(self.state)
        state[_COUNTER] = 0xFFFFFFFF  # generation 0, nothing to claim
        state[_SYSCALL] = code.syscall
        state[_SPIN_TICKS] = int(code.ticks_per_second * SPIN_MICROSECONDS * 1e-6)
        state[_WORKERS] = workers
        self.threads: list[threading.Thread] = []
        for index in range(workers):
            thread = threading.Thread(target=_serve, args=(code, self._memory, self.state, index), daemon=True,
                                      name=f"xlapy-kernel-{index}")
            try:
                thread.start()
            except RuntimeError:  # the process may start no more threads: the launching threads do more blocks
                break
            self.threads.append(thread)

    def stop(self) -> None:
        """Makes the workers return and joins them (waiting at most ``JOIN_SECONDS`` in all). A launch under way
        on another thread finishes its blocks alone."""
        self._code.shutdown(self.state)
        deadline = time.monotonic() + JOIN_SECONDS
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _serve(code: _Code, memory: ctypes.Array, state: int, index: int) -> None:
    # ``code`` and ``memory`` are arguments so that this frame keeps the machine code and the state alive for as
    # long as the worker runs in them, whatever happens to the module's globals at exit.
    code.worker(state, index)


# The process's pool as launches find it: the address of its state, or 0 when there is none (not built yet, in
# a child made by ``fork``, or after exit began). Allocated once and never freed, as are the pools' states
# (``_pools``): a launch or a worker may still read them while they are replaced.
_cell = ctypes.c_void_p(None)
_cell_address = ctypes.addressof(_cell)
_build_lock = threading.Lock()
_code: _Code | None = None
_pool: NativePool | None = None
_pools: list[NativePool] = []
_stopped = False


def _compiled() -> _Code:
    global _code
    with _build_lock:
        if _code is None:
            _code = _Code()
        return _code


def current_pool(workers: int) -> NativePool | None:
    """The process's pool (built on first use with ``workers - 1`` threads besides the launching one), or None
    when there is none to use: an unsupported host, one core, the interpreter exiting."""
    global _pool
    pool = _pool
    if pool is not None:
        return pool
    code = _compiled() if workers > 1 and supported() else None
    with _build_lock:
        if _pool is None and not _stopped and code is not None:
            _pool = NativePool(code, workers - 1)
            _pools.append(_pool)
            _cell.value = _pool.state
        return _pool


def launcher(function: int, arguments: int, blocks: int, chunk: int, workers: int,
             serial: Callable[[], None], *, owner: object = None) -> Callable[[], None]:
    """A launch of ``function(arguments, begin, end)`` over ``[0, blocks)`` on the pool, in chunks of ``chunk``
    blocks (on the calling thread alone while another thread launches on the pool); ``serial()`` (the same
    blocks on the calling thread) when there is no pool. ``function`` and ``arguments`` must stay valid as long
    as the launch: the launch keeps ``owner`` (what holds the memory they point to) alive."""
    if not 0 < blocks <= MAX_BLOCKS or chunk < 1:
        raise VerifyError(f"native pool: cannot launch {blocks} blocks in chunks of {chunk}")
    pool = current_pool(workers)
    if pool is None:
        return serial
    job = (ctypes.c_int64 * _JOB_WORDS)(_cell_address, function, arguments, blocks, chunk)
    run = functools.partial(pool._code.run, ctypes.addressof(job))

    def launch() -> None:
        # A launch finding no pool in this process (any more: a child made by ``fork``, exit under way) builds
        # one, or runs alone.
        if run() and (current_pool(workers) is None or run()):
            serial()

    launch.job, launch.owner = job, owner  # type: ignore[attr-defined]  # alive as long as the launch
    launch.native_steps = ((STEP_ON_POOL, ctypes.addressof(job), 0, 0),)  # type: ignore[attr-defined]
    return launch


def alone(function: int, arguments: int, blocks: int, *, owner: object = None) -> Callable[[], None]:
    """``function(arguments, 0, blocks)`` on the calling thread, as a call of no arguments: one argument for ctypes
    to convert instead of three (a loop's small kernels are launched many times). The launch keeps ``owner`` (what
    holds the memory ``function`` and ``arguments`` point to) alive."""
    if blocks <= 0:
        raise VerifyError(f"native pool: cannot launch {blocks} blocks")
    job = (ctypes.c_int64 * _JOB_WORDS)(0, function, arguments, blocks, blocks)
    launch = functools.partial(_compiled().run_alone, ctypes.addressof(job))
    launch.job, launch.owner = job, owner  # type: ignore[attr-defined]  # alive as long as the launch
    launch.native_steps = ((STEP_ALONE, ctypes.addressof(job), 0, 0),)  # type: ignore[attr-defined]
    return launch


def steps_runner() -> tuple[Callable[[int, int, int, int], int], float]:
    """``xlapy_pool_run_steps(steps, count, iterations, budget)`` as a ctypes function, and the rate of the cycle
    counter its budget is counted in (ticks per second)."""
    code = _compiled()
    return code.run_steps, code.ticks_per_second


@atexit.register
def _stop_at_exit() -> None:
    global _pool, _stopped
    with _build_lock:
        pool, _pool, _stopped = _pool, None, True
        _cell.value = None
    if pool is not None:
        pool.stop()


def _forget_in_child() -> None:
    # The child of a fork has none of the workers: its first launch builds a pool of its own.
    global _pool, _build_lock
    _pool, _build_lock = None, threading.Lock()
    _cell.value = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
