"""Executables run on their caller's arrays and hand their results over, as XLA runs on its caller's buffers:
an argument already laid out as its parameter's buffer is read where it is (never written), and a result
with an allocation of its own is computed into memory the caller then owns (both from ``IN_PLACE_BYTES``
up; smaller ones are copied): new memory, or that of an earlier result the caller holds nothing of. Every
result is compared with the reference interpreter; what may not be shared is checked with
``np.shares_memory``."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import xlapy
from tests.runtime.threaded_calls import call_from_threads
from tools.compare import assert_same
from xlapy.runtime import executable as executable_module
from xlapy.runtime.executable import IN_PLACE_BYTES

# Two results of their own, one result that is the parameter itself, one returned twice.
OUTPUTS = """HloModule outputs
ENTRY e { x = f32[256,256] parameter(0)  y = f32[256,256] parameter(1)
          e = f32[256,256] exponential(x)  s = f32[256,256] add(e, y)  m = f32[256,256] multiply(x, y)
          ROOT t = (f32[256,256], f32[256,256], f32[256,256], f32[256,256], f32[256,256]) tuple(s, m, x, m, y) }
"""

# A loop over state initialised from the parameters: the while's own buffers are written, never the caller's.
LOOP = """HloModule loop
cond { s = (s32[], f32[65536]) parameter(0)  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(3)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[65536]) parameter(0)  i = s32[] get-tuple-element(s), index=0
       v = f32[65536] get-tuple-element(s), index=1  one = s32[] constant(1)  i1 = s32[] add(i, one)
       v1 = f32[65536] multiply(v, v)  ROOT t = (s32[], f32[65536]) tuple(i1, v1) }
ENTRY e { v = f32[65536] parameter(0)  zero = s32[] constant(0)  t = (s32[], f32[65536]) tuple(zero, v)
          w = (s32[], f32[65536]) while(t), condition=cond, body=body
          ROOT r = f32[65536] get-tuple-element(w), index=1 }
"""

# The result may be written over the parameter's buffer (what jax's donate_argnums asks for).
ALIASED = """HloModule aliased, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e { p = f32[128] parameter(0)  c = f32[128] cosine(p)  ROOT n = f32[128] negate(c) }
"""

# A parameter in column-major layout: the argument (a logical array) is copied into it.
COLUMN_MAJOR = """HloModule column_major
ENTRY e { p = f32[16,8]{0,1} parameter(0)  q = f32[16,8] parameter(1)  c = f32[16,8] copy(p)
          ROOT a = f32[16,8] add(c, q) }
"""


def _compile(text: str, **options) -> tuple[xlapy.HloModule, xlapy.Executable]:
    module = xlapy.parse_hlo(text)
    return module, xlapy.compile(module, **options)


def _matrices(seed: int, count: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(count)]
    assert arrays[0].nbytes >= IN_PLACE_BYTES  # large enough to be read in place
    return arrays


def _assert_no_sharing(results: list[np.ndarray], arguments: list[np.ndarray]) -> None:
    """No result shares memory with another result or with an argument."""
    for i, result in enumerate(results):
        for other in [*results[i + 1:], *arguments]:
            assert not np.shares_memory(result, other)


@pytest.mark.parametrize("run_hlo_passes", [True, False])
def test_results_are_fresh_and_share_memory_with_nothing(run_hlo_passes):
    module, executable = _compile(OUTPUTS, run_hlo_passes=run_hlo_passes)
    x, y = _matrices(0)
    kept = [x.copy(), y.copy()]
    first = executable(x, y)
    assert_same(first, xlapy.evaluate(module, *kept), exact_bits=True)
    second = executable(x, y)
    assert_same(second, first, exact_bits=True)
    _assert_no_sharing([*first, *second], [x, y])
    assert all(result.flags.writeable and result.flags.c_contiguous for result in first)
    # The arguments are as they were.
    assert_same([x, y], kept, exact_bits=True)


def test_read_only_arguments_are_read_where_they_are():
    module, executable = _compile(OUTPUTS)
    x, y = _matrices(1)
    x.flags.writeable = False
    y.flags.writeable = False
    got = executable(x, y)
    assert_same(got, xlapy.evaluate(module, x, y), exact_bits=True)
    _assert_no_sharing(list(got), [x, y])


def test_arguments_that_are_not_their_parameters_buffer_are_copied():
    module, executable = _compile(OUTPUTS)
    rng = np.random.default_rng(2)
    wide = rng.standard_normal((256, 512)).astype(np.float32)
    strided = wide[:, ::2]  # not contiguous
    fortran = np.asfortranarray(rng.standard_normal((256, 256)).astype(np.float32))
    doubles = rng.standard_normal((256, 256))  # float64: converted to f32
    raw = np.zeros(256 * 256 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(256, 256)  # elements off their 4-byte boundary
    misaligned[...] = rng.standard_normal((256, 256))
    swapped = rng.standard_normal((256, 256)).astype(">f4")  # big-endian
    assert misaligned.ctypes.data % 4 and not strided.flags.c_contiguous
    for a, b in [(strided, fortran), (doubles, misaligned), (swapped, strided), (misaligned, misaligned)]:
        kept = [a.copy(), b.copy()]
        got = executable(a, b)
        assert_same(got, xlapy.evaluate(module, a, b), exact_bits=True)
        assert_same([a, b], kept, exact_bits=True)
        _assert_no_sharing(list(got), [a, b])


def test_small_arguments_and_results_are_copied():
    module, executable = _compile(OUTPUTS.replace("f32[256,256]", "f32[8,8]"))
    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    x.flags.writeable = False
    first = executable(x, y)
    second = executable(x, y)
    assert_same(first, xlapy.evaluate(module, x, y), exact_bits=True)
    assert_same(second, first, exact_bits=True)
    _assert_no_sharing([*first, *second], [x, y])


def test_arguments_in_another_layout_are_copied_into_it():
    module, executable = _compile(COLUMN_MAJOR)
    rng = np.random.default_rng(3)
    p, q = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(2))
    p.flags.writeable = False
    got = executable(p, q)
    assert_same(got, xlapy.evaluate(module, p, q), exact_bits=True)
    assert not np.shares_memory(got, p) and not np.shares_memory(got, q)


def test_calls_alternating_between_bound_and_copied_arguments():
    module, executable = _compile(OUTPUTS)
    x, y = _matrices(4)
    strided = np.repeat(y, 2, axis=1)[:, ::2]
    for a, b in [(x, y), (x, strided), (x, y), (np.asfortranarray(x), y), (x, y)]:
        assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


def test_a_caller_changing_its_argument_afterwards_changes_no_result():
    module, executable = _compile(OUTPUTS, run_hlo_passes=False)
    x, y = _matrices(5)
    kept = [x.copy(), y.copy()]
    got = executable(x, y)
    x[...] = 0.0
    y[...] = 0.0
    assert_same(got, xlapy.evaluate(module, *kept), exact_bits=True)
    # The same arrays with new contents: the next call reads the new values.
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)


def test_the_same_array_changed_in_place_between_calls_is_checked_again():
    # An array's memory never moves, but its dtype and shape can be set in place: the next call sees them.
    module, executable = _compile(OUTPUTS)
    x, y = _matrices(9)
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)
    x.shape = (256 * 256,)
    with pytest.raises(xlapy.XlapyError, match="shape"):
        executable(x, y)
    x.shape = (256, 256)
    x[...] = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) % 97
    x.dtype = np.int32  # the same bytes, now integers: converted to f32 like any int32 argument
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)
    x.dtype = np.float32
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)


def test_same_array_for_two_parameters():
    module, executable = _compile(OUTPUTS)
    (x,) = _matrices(6, 1)
    x.flags.writeable = False
    assert_same(executable(x, x), xlapy.evaluate(module, x, x), exact_bits=True)


def test_loop_state_initialised_from_an_argument_leaves_it_alone():
    module, executable = _compile(LOOP)
    v = np.linspace(-1.0, 1.0, 65536, dtype=np.float32)
    kept = v.copy()
    v.flags.writeable = False
    assert v.nbytes >= IN_PLACE_BYTES
    first = executable(v)
    assert_same(first, xlapy.evaluate(module, kept), exact_bits=True)
    assert_same(v, kept, exact_bits=True)
    w = np.linspace(0.0, 2.0, 65536, dtype=np.float32)
    second = executable(w)
    assert_same(second, xlapy.evaluate(module, w), exact_bits=True)
    assert not np.shares_memory(first, second)


def test_a_parameter_the_result_may_overwrite_is_copied_in():
    module, executable = _compile(ALIASED)
    p = np.linspace(-3.0, 3.0, 128, dtype=np.float32)
    kept = p.copy()
    for _ in range(2):
        assert_same(executable(p), xlapy.evaluate(module, kept), exact_bits=True)
        assert_same(p, kept, exact_bits=True)
    p.flags.writeable = False
    assert_same(executable(p), xlapy.evaluate(module, kept), exact_bits=True)


def test_a_result_outlives_its_executable_and_nothing_else_keeps_it():
    module, executable = _compile(OUTPUTS)
    x, y = _matrices(7)
    result = executable(x, y)[0]
    expected = xlapy.evaluate(module, x, y)[0]
    del executable
    gc.collect()
    others = [np.full_like(result, -1.0) for _ in range(4)]  # would take the memory, were it freed
    assert_same(result, expected, exact_bits=True)
    memory = result
    while isinstance(memory.base, np.ndarray):
        memory = memory.base
    gone = weakref.ref(memory)
    del result, memory, others
    gc.collect()
    assert gone() is None


def test_a_result_the_caller_holds_any_part_of_is_never_written_again():
    module, executable = _compile(OUTPUTS)
    calls = [_matrices(20 + n) for n in range(4)]
    first = executable(*calls[0])
    expected = xlapy.evaluate(module, *calls[0])
    # What is kept of each handed result: a strided slice of the first, a memoryview of a transposed second.
    kept = [first[0][1:, ::3], memoryview(first[1].T)]
    del first
    for n in range(1, 4):
        later = executable(*calls[n])
        assert_same(later, xlapy.evaluate(module, *calls[n]), exact_bits=True)
        assert not np.shares_memory(later[0], kept[0]) and not np.shares_memory(later[1], np.asarray(kept[1]))
    assert_same(kept[0], expected[0][1:, ::3], exact_bits=True)
    assert_same(np.asarray(kept[1]), expected[1].T, exact_bits=True)


def test_the_memory_of_a_dropped_result_is_used_again():
    module, executable = _compile(OUTPUTS)
    first, second = _matrices(30), _matrices(31)
    addresses = [result.ctypes.data for result in executable(*first)[:2]]
    gc.collect()
    tracemalloc.start()
    try:
        got = executable(*second)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [result.ctypes.data for result in got[:2]] == addresses
    assert peak < 3 * 256 * 256 * 4 + (64 << 10)  # the three results copied out (a parameter twice, m again)
    assert_same(got, xlapy.evaluate(module, *second), exact_bits=True)


def test_a_result_reshaped_in_place_by_its_caller_changes_no_later_result():
    module, executable = _compile(OUTPUTS)
    x, y = _matrices(50)
    first = executable(x, y)[0]
    address = first.ctypes.data
    first.shape = (256 * 256,)
    first.flags.writeable = False
    del first
    again = executable(x, y)
    assert again[0].ctypes.data == address  # the same memory, handed as a new array
    assert again[0].shape == (256, 256) and again[0].flags.writeable
    assert_same(again, xlapy.evaluate(module, x, y), exact_bits=True)


def test_a_loop_holding_the_last_result_alternates_between_two_blocks():
    module, executable = _compile(OUTPUTS)
    calls = [_matrices(40 + n) for n in range(6)]
    addresses, peaks = [], []
    result = None
    for call in calls:
        tracemalloc.start()
        try:
            result = executable(*call)  # the last result is alive during the call
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert_same(result, xlapy.evaluate(module, *call), exact_bits=True)
        addresses.append(result[0].ctypes.data)
    assert len(set(addresses)) == 2 and addresses[0::2] == [addresses[0]] * 3
    # From the third call on, only the three results copied out (a parameter twice, m again) are allocated.
    assert max(peaks[2:]) < 3 * 256 * 256 * 4 + (64 << 10) < min(peaks[:2])
    everything = [executable(*call) for call in calls]  # all held: each in memory of its own
    for call, got in zip(calls, everything):
        assert_same(got, xlapy.evaluate(module, *call), exact_bits=True)
    assert len({got[0].ctypes.data for got in everything}) == len(calls)


def test_an_argument_in_its_parameters_layout_is_not_copied():
    # f32[1M] in, f32[1M] out: a call makes the result's 4 MiB and nothing near the argument's size, the first
    # call (which also makes what is kept between calls) included.
    _, executable = _compile("""HloModule negate
ENTRY e { p = f32[1048576] parameter(0)  ROOT n = f32[1048576] negate(p) }
""")
    x = np.ones(1 << 20, np.float32)
    gc.collect()
    for _ in range(2):
        tracemalloc.start()
        try:
            result = executable(x)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert 4 << 20 <= peak < 5 << 20
        np.testing.assert_array_equal(result, -x)


def test_calls_from_two_threads_at_once():
    module, executable = _compile(OUTPUTS)
    cases = [_matrices(10 + n) for n in range(6)]
    for n, case in enumerate(cases):
        if n % 2:
            for array in case:
                array.flags.writeable = False
    expected = [xlapy.evaluate(module, *case) for case in cases]
    got = call_from_threads(executable, cases, expected, workers=2, rounds=4)
    _assert_no_sharing([array for value in got.values() for array in value],
                       [array for case in cases for array in case])


# The default run reads these corpus programs' arguments in place and hands their results over (loops over
# parameters, library calls on them, sorts); `pytest -m slow` every program, lowered and as XLA:CPU optimised it.
_CORPUS_DEFAULT = {("scan_rnn", "lowered"), ("sorting", "lowered"), ("mlp", "optimized")}


def _corpus_cases() -> list:
    from tools.jax_corpus import PROGRAMS

    return [pytest.param(name, source, id=f"{name}-{source}",
                         marks=[] if (name, source) in _CORPUS_DEFAULT else [pytest.mark.slow])
            for name in sorted(PROGRAMS) for source in ("lowered", "optimized")]


@pytest.mark.parametrize("name, source", _corpus_cases())
def test_corpus_programs_on_read_only_arguments(name, source, monkeypatch):
    from tools.oracles import require_jax

    require_jax()
    from tools.compare import leaves
    from tools.jax_corpus import PROGRAMS, TOLERANCES, Tolerance, flat_arguments
    from tools.loop_fusion_compare import ulp_tolerance
    from xlapy.frontends.jax import from_jax, optimized_from_jax

    # Every argument and result of the corpus' small programs in place, whatever its size.
    monkeypatch.setattr(executable_module, "IN_PLACE_BYTES", 1)
    fn, example = PROGRAMS[name]
    module = (from_jax if source == "lowered" else optimized_from_jax)(fn, *example)
    try:
        executable = xlapy.compile(module, run_hlo_passes=source == "lowered")
    except xlapy.UnimplementedError as error:
        pytest.skip(f"not compiled yet: {error}")  # tests/test_whole_programs.py lists these as xfails
    args = []
    for value in flat_arguments(name):
        array = np.array(value)
        array.flags.writeable = False
        args.append(array)
    kept = [a.copy() for a in args]
    got, expected = leaves(executable(*args)), leaves(xlapy.evaluate(module, *kept))
    assert len(got) == len(expected)
    sums, functions = TOLERANCES.get(name, Tolerance()), ulp_tolerance(module)
    for i, (g, e) in enumerate(zip(got, expected)):
        keywords = sums.keywords(i, e)
        keywords["ulps"] = max(keywords["ulps"], functions)
        assert_same(g, e, **keywords, flush=True, context=f"{name} output {i}")
    assert_same(args, kept, exact_bits=True)
    _assert_no_sharing([g for g in got if isinstance(g, np.ndarray)], args)


def test_a_result_in_another_order_of_dimensions_is_handed_over_as_a_view():
    # As XLA leaves a result in its layout: the caller gets the new memory, viewed in logical order.
    module, executable = _compile("""HloModule transposed_result
ENTRY e { x = f32[256,256] parameter(0)  ROOT n = f32[256,256]{0,1} negate(x) }
""")
    (x,) = _matrices(5, count=1)
    first, second = executable(x), executable(x)
    assert_same(first, xlapy.evaluate(module, x), exact_bits=True)
    assert first.flags.f_contiguous and not first.flags.c_contiguous
    _assert_no_sharing([first, second], [x])
