"""The in-place dynamic-update-slice emitter: a fusion whose output is a dynamic-update-slice written over the
operand it updates (one buffer slice) iterates the update's elements only, as XLA's in-place emitters do.
Results are compared with the reference interpreter bit for bit (every op here rounds once, in both)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import exact_values, kernel_thunks
from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.dialect import LoopOp
from xlapy.codegen.emitters.in_place_dynamic_update_slice import (
    emit_in_place_dynamic_update_slice_fusion,
    in_place_updates,
)
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import emitter_name, lower_fusion
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.runtime.thunks.kernel import KernelThunk
from xlapy.shapes import ELEMENT_TYPES, parse_shape

IN_PLACE = "in_place_dynamic_update_slice"


def _in_place_kernels(executable: xlapy.Executable) -> list[KernelThunk]:
    return [t for t in kernel_thunks(executable) if emitter_name(t.fusion, t.slice_indices) == IN_PLACE]


def _fusion(module: xlapy.HloModule) -> HloInstruction:
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


# The fusion updates x, the temporary `a` dying at the fusion: its output takes a's slice.
UPDATE = """HloModule dus
f {{ x = {shape} parameter(0)  u = {update} parameter(1)  {index_params}
     ROOT d = {shape} dynamic-update-slice(x, u, {starts}) }}
ENTRY e {{ p = {shape} parameter(0)  v = {update} parameter(1)  {entry_index_params}
          a = {shape} {negate}(p)  ROOT fusion = {shape} fusion(a, v, {entry_starts}), kind=kLoop, calls=f }}
"""


def _update_module(shape: str, update: str, index_type: str = "s32") -> xlapy.HloModule:
    rank = len(parse_shape(shape).dimensions)
    names = [f"i{d}" for d in range(rank)]
    return xlapy.parse_hlo(UPDATE.format(
        shape=shape, update=update, starts=", ".join(names), negate="not" if shape.startswith("pred") else "negate",
        index_params="  ".join(f"{n} = {index_type}[] parameter({2 + d})" for d, n in enumerate(names)),
        entry_index_params="  ".join(f"s{d} = {index_type}[] parameter({2 + d})" for d in range(rank)),
        entry_starts=", ".join(f"s{d}" for d in range(rank))))


@pytest.mark.parametrize(("shape", "update"), [
    ("f32[4096]", "f32[128]"),
    ("f32[1001]", "f32[37]"),
    ("f32[64,72]", "f32[8,72]"),
    ("f32[17,33]", "f32[5,7]"),
    ("f32[6,10,12]", "f32[2,3,12]"),
    ("f32[5,9,7]", "f32[5,1,7]"),
])
@pytest.mark.parametrize("starts", ["inside", "clamped"])
def test_an_update_is_written_in_place_over_its_window_only(shape: str, update: str, starts: str) -> None:
    module = _update_module(shape, update)
    rank = len(parse_shape(shape).dimensions)
    # Inside: small starts; clamped: below zero and past the end, alternately.
    values = [1 + d for d in range(rank)] if starts == "inside" else [(-7, 5000)[d % 2] for d in range(rank)]
    args = (exact_values(shape, 1), exact_values(update, 2), *(np.int32(v) for v in values))
    executable = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = _in_place_kernels(executable)
    assert thunk.elements == math.prod(parse_shape(update).dimensions)
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


@pytest.mark.parametrize(("element_type", "index_type"), [("bf16", "s32"), ("s8", "s64"), ("pred", "u32"),
                                                          ("f16", "u8"), ("s64", "s16")])
def test_element_and_index_types(element_type: str, index_type: str) -> None:
    shape, update = f"{element_type}[12,40]", f"{element_type}[3,16]"
    module = _update_module(shape, update, index_type)
    index_dtype = ELEMENT_TYPES[index_type].dtype
    for starts in ((4, 20), (200, 7), (0, 255)):  # clamped past the end (unsigned: never below zero)
        args = (exact_values(shape, 3), exact_values(update, 4), *(index_dtype.type(s) for s in starts))
        executable = xlapy.compile(module, run_hlo_passes=False)
        assert len(_in_place_kernels(executable)) == 1
        assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_negative_starts_of_a_signed_narrow_index_type_are_clamped_to_zero() -> None:
    module = _update_module("f32[9,20]", "f32[4,6]", "s8")
    args = (exact_values("f32[9,20]", 5), exact_values("f32[4,6]", 6), np.int8(-128), np.int8(-1))
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert len(_in_place_kernels(executable)) == 1
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


# The update is computed from other operands (a row broadcast, a scalar, a converted index), the start
# indices from parameters through arithmetic.
COMPUTED_UPDATE = """HloModule computed
f { x = f32[32,48] parameter(0)  u = f16[4,48] parameter(1)  row = f32[48] parameter(2)  k = s32[] parameter(3)
    c = f32[] parameter(4)  one = s32[] constant(1)  zero = s32[] constant(0)
    uf = f32[4,48] convert(u)  b = f32[4,48] broadcast(row), dimensions={1}  m = f32[4,48] multiply(uf, b)
    kc = f32[] convert(k)  s = f32[] add(kc, c)  sb = f32[4,48] broadcast(s), dimensions={}
    upd = f32[4,48] add(m, sb)  start = s32[] multiply(k, k)  start1 = s32[] add(start, one)
    ROOT d = f32[32,48] dynamic-update-slice(x, upd, start1, zero) }
ENTRY e { p = f32[32,48] parameter(0)  v = f16[4,48] parameter(1)  r = f32[48] parameter(2)  k = s32[] parameter(3)
          c = f32[] parameter(4)  a = f32[32,48] negate(p)
          ROOT fusion = f32[32,48] fusion(a, v, r, k, c), kind=kLoop, calls=f }
"""


@pytest.mark.parametrize("k", [0, 3, 5, -9])
def test_an_update_computed_by_elementwise_ops_from_other_operands(k: int) -> None:
    module = xlapy.parse_hlo(COMPUTED_UPDATE)
    args = (exact_values("f32[32,48]", 7), exact_values("f16[4,48]", 8), exact_values("f32[48]", 9), np.int32(k),
            np.float32(0.25))
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert len(_in_place_kernels(executable)) == 1
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


# The operand is read through a dynamic-slice of the update's window (a scatter's combiner): in place. Read
# reversed, or at other start indices, each element is no longer read only by the iteration writing it: the
# buffer assignment gives the fusion a buffer of its own and the loop emitter writes all of it.
READ_WINDOW = """HloModule window
f {{ x = f32[40,24] parameter(0)  u = f32[5,24] parameter(1)  i = s32[] parameter(2)  j = s32[] parameter(3)
     zero = s32[] constant(0)  w = f32[5,24] dynamic-slice(x, {read_start}, zero), dynamic_slice_sizes={{5,24}}
     r = f32[5,24] {read}  m = f32[5,24] maximum(r, u)  ROOT d = f32[40,24] dynamic-update-slice(x, m, i, zero) }}
ENTRY e {{ p = f32[40,24] parameter(0)  v = f32[5,24] parameter(1)  i = s32[] parameter(2)  j = s32[] parameter(3)
          a = f32[40,24] negate(p)  ROOT fusion = f32[40,24] fusion(a, v, i, j), kind=kLoop, calls=f }}
"""


@pytest.mark.parametrize(("read_start", "read", "in_place"), [
    ("i", "negate(w)", True),
    ("i", "reverse(w), dimensions={0}", False),
    ("j", "negate(w)", False),
])
def test_reads_of_the_updated_operand(read_start: str, read: str, in_place: bool) -> None:
    module = xlapy.parse_hlo(READ_WINDOW.format(read_start=read_start, read=read))
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert len(_in_place_kernels(executable)) == int(in_place)
    for i, j in ((3, 6), (-2, 38), (37, 0)):
        args = (exact_values("f32[40,24]", 10), exact_values("f32[5,24]", 11), np.int32(i), np.int32(j))
        assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_without_a_shared_slice_the_loop_emitter_writes_the_whole_output() -> None:
    module = xlapy.parse_hlo(UPDATE.format(shape="f32[64]", update="f32[8]", starts="i0",
                                           index_params="i0 = s32[] parameter(2)",
                                           entry_index_params="s0 = s32[] parameter(2)", entry_starts="s0",
                                           negate="negate")
                             .replace("a = f32[64] negate(p)  ROOT fusion = f32[64] fusion(a,",
                                      "ROOT fusion = f32[64] fusion(p,"))
    executable = xlapy.compile(module, run_hlo_passes=False)  # p is a parameter: never written over
    (thunk,) = kernel_thunks(executable)
    assert thunk.slice_indices is None and thunk.elements == 64
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "loop"
    args = (exact_values("f32[64]", 12), exact_values("f32[8]", 13), np.int32(60))
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_the_emitted_loop_covers_the_update_and_writes_at_the_clamped_start() -> None:
    module = _update_module("f32[64,72]", "f32[8,40]")
    fusion = _fusion(module)
    slices = (0, 1, 2, 3, 0)
    module_op, launch = emit_in_place_dynamic_update_slice_fusion(fusion, Device.host(), slices)
    main = next(op for op in module_op.ops if op.sym_name.data == "main")
    (loop,) = [op for op in main.walk() if isinstance(op, LoopOp)]
    touched = loop.indexing_map_attr.indexing_map.touched_elements()
    assert touched == set(itertools.product(range(8), range(40)))
    assert launch.blocks * launch.elements_per_block == 8 * 40
    text = str(module_op)
    # The start indices are clamped once, before the loop: to [0, 56] and [0, 32].
    before_loop = text[:text.index("xla.loop")]
    assert before_loop.count("arith.maxsi") == 2 and before_loop.count("arith.minsi") == 2
    assert "arith.constant 56 : index" in before_loop and "arith.constant 32 : index" in before_loop


def test_only_buffers_passed_as_one_slice_are_updated_in_place() -> None:
    fusion = _fusion(_update_module("f32[64,72]", "f32[8,72]"))
    assert in_place_updates(fusion, None) is None
    assert in_place_updates(fusion, (0, 1, 2, 3, 4)) is None  # the output has a slice of its own
    assert in_place_updates(fusion, (0, 0, 1, 2, 0)) is None  # the update is read from the written slice too
    assert in_place_updates(fusion, (0, 1, 2, 3)) is None  # not one index per buffer
    (update,) = in_place_updates(fusion, (0, 1, 2, 3, 0))
    assert update.parameter.parameter_number == 0
    with pytest.raises(VerifyError, match="cannot update its operands in place"):
        emit_in_place_dynamic_update_slice_fusion(fusion, Device.host(), (0, 1, 2, 3, 4))


def _run_kernel(fusion: HloInstruction, slice_indices: tuple[int, ...], buffers: list[np.ndarray]) -> None:
    lowered = lower_fusion(fusion, Device.host(), slice_indices=slice_indices)
    kernel = CpuKernel.compile(lowered.module)
    kernel(buffers, 0, lowered.launch.blocks)


# Two outputs, each written over the operand it updates; the second through a bitcast of its update.
TWO_UPDATES = """HloModule two
f { x = f32[10,8] parameter(0)  y = s32[6,8] parameter(1)  u = f32[2,8] parameter(2)  w = s32[2,8] parameter(3)
    i = s32[] parameter(4)  zero = s32[] constant(0)  d = f32[10,8] dynamic-update-slice(x, u, i, zero)
    wn = s32[2,8] negate(w)  e = s32[6,8] dynamic-update-slice(y, wn, i, zero)
    eb = s32[3,16] bitcast(e)  ROOT t = (f32[10,8], s32[3,16]) tuple(d, eb) }
ENTRY main { x = f32[10,8] parameter(0)  y = s32[6,8] parameter(1)  u = f32[2,8] parameter(2)
             w = s32[2,8] parameter(3)  i = s32[] parameter(4)
             ROOT fusion = (f32[10,8], s32[3,16]) fusion(x, y, u, w, i), kind=kLoop, calls=f }
"""


@pytest.mark.parametrize("start", [3, -1, 9])
def test_a_multi_output_fusion_updates_each_operand_in_place(start: int) -> None:
    module = xlapy.parse_hlo(TWO_UPDATES)
    fusion = _fusion(module)
    slices = (0, 1, 2, 3, 4, 0, 1)
    assert emitter_name(fusion, slices) == IN_PLACE
    args = [exact_values("f32[10,8]", 14), exact_values("s32[6,8]", 15), exact_values("f32[2,8]", 16),
            exact_values("s32[2,8]", 17), np.int32(start)]
    expected = xlapy.evaluate(module, *args)
    buffers = [np.array(a).reshape(-1) for a in args]
    _run_kernel(fusion, slices, buffers)
    assert_same((buffers[0].reshape(10, 8), buffers[1].reshape(3, 16)), expected, exact_bits=True)


def test_updates_of_different_shapes_use_the_loop_emitter() -> None:
    module = xlapy.parse_hlo(TWO_UPDATES.replace("u = f32[2,8] parameter(2)", "u = f32[3,8] parameter(2)"))
    assert emitter_name(_fusion(module), (0, 1, 2, 3, 4, 0, 1)) == "loop"


# -- dynamic-update-slices in loops, from JAX --------------------------------------------------------------

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402
from jax import numpy as jnp  # noqa: E402

from tools.jax_corpus import PROGRAMS, flat_arguments  # noqa: E402
from xlapy.frontends.jax import from_jax  # noqa: E402
from xlapy.transforms.scatter_expander import ScatterExpander  # noqa: E402


def _check_jax(module: xlapy.HloModule, args: list, expand_scatters: bool = False) -> xlapy.Executable:
    if expand_scatters:
        # The CPU pipeline leaves scatters to the scatter emitter; expanded, each is a loop of in-place updates.
        ScatterExpander(ScatterExpander.ELIMINATE_ALL_SCATTERS).run(module)
    executable = xlapy.compile(module)
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)
    return executable


def _scan_outputs(xs, carry):
    def step(c, x):
        c = c * 0.5 + x
        return c, jnp.tanh(c) * 2.0
    return lax.scan(step, carry, xs)


def _set_rows(x, v):
    return lax.fori_loop(0, x.shape[0], lambda i, acc: acc.at[i].set(v * i.astype(v.dtype) + acc[i]), x)


@pytest.mark.parametrize(("fn", "args"), [
    (_scan_outputs, [(np.arange(12 * 33, dtype=np.float32).reshape(12, 33) % 7 - 3) / 4, np.ones(33, np.float32)]),
    (_set_rows, [(np.arange(9 * 20, dtype=np.float32).reshape(9, 20) % 5) / 8, np.arange(20, dtype=np.float32) / 4]),
])
def test_updates_in_a_loop_run_in_place(fn, args) -> None:
    module = from_jax(fn, *args)
    executable = _check_jax(module, args, expand_scatters=True)
    kernels = _in_place_kernels(executable)
    assert kernels
    for thunk in kernels:
        written = [shape for _, shape in thunk.outputs]
        assert thunk.elements < max(math.prod(s.dimensions) for s in written)


def test_scatters_of_the_jax_corpus() -> None:
    # The scatter expander makes each a while loop of updates, one row of the operand per iteration.
    fn, _ = PROGRAMS["scatters"]
    args = flat_arguments("scatters")
    executable = _check_jax(from_jax(fn, *args), args, expand_scatters=True)
    assert len(_in_place_kernels(executable)) >= 4


def test_a_larger_scatter_add_updates_one_row_per_iteration() -> None:
    rng = np.random.default_rng(18)
    table = (rng.integers(-16, 17, (300, 16)) / 8).astype(np.float32)
    indices = rng.integers(-20, 320, 50).astype(np.int32)  # some out of bounds: those updates are dropped
    updates = (rng.integers(-16, 17, (50, 16)) / 8).astype(np.float32)
    module = from_jax(lambda t, i, u: t.at[i].add(u), table, indices, updates)
    executable = _check_jax(module, [table, indices, updates], expand_scatters=True)
    (thunk,) = _in_place_kernels(executable)
    assert thunk.elements == 16


# A scan's step: one computed row written at a dynamic row. The clamped start is invariant in the lane loop, so
# the row is read and written as vectors (the lanes' indices fold into one map of the start); half a row at a
# dynamic column, not provably aligned, stays scalar. Both equal the interpreter.
SCAN_STEP = """HloModule scan_step
f {{ buffer = f32[16,1024] parameter(0)  rows = f32[16,1024] parameter(1)  i = s32[] parameter(2)
     j = s32[] parameter(3)  zero = s32[] constant(0)
     row = f32[1,{width}] dynamic-slice(rows, i, {column}), dynamic_slice_sizes={{1,{width}}}
     t = f32[1,{width}] tanh(row)  ROOT d = f32[16,1024] dynamic-update-slice(buffer, t, i, {column}) }}
ENTRY e {{ p = f32[16,1024] parameter(0)  r = f32[16,1024] parameter(1)  i = s32[] parameter(2)
          j = s32[] parameter(3)  a = f32[16,1024] negate(p)
          ROOT fusion = f32[16,1024] fusion(a, r, i, j), kind=kLoop, calls=f }}
"""


@pytest.mark.parametrize(("width", "column", "vectorized"), [(1024, "zero", True), (512, "j", False)])
def test_a_row_at_a_dynamic_start_is_read_and_written_as_vectors(width: int, column: str, vectorized: bool) -> None:
    module = xlapy.parse_hlo(SCAN_STEP.format(width=width, column=column))
    executable = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = _in_place_kernels(executable)
    lowered = lower_fusion(thunk.fusion, Device.host(), slice_indices=thunk.slice_indices)
    assert (lowered.launch.vector_size > 1) == vectorized
    for i, j in ((3, 0), (15, 3), (-4, -1), (99, 700)):
        args = (exact_values("f32[16,1024]", 1), exact_values("f32[16,1024]", 2), np.int32(i), np.int32(j))
        assert_same(executable(*args), xlapy.evaluate(module, *args), ulps=0)
