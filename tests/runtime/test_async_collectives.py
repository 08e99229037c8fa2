"""The asynchronous pairs (start, async-update, done) of collectives, copies and wrapped computations, compiled for
one device: run synchronously, at the start, against the reference interpreter, with and without the HLO passes.
Their buffers alias as XLA's dataflow analysis says (``xla/service/hlo_dataflow_analysis.cc``): a start holds its
operands' own buffers in element {0} (copy-start: {1}); a done's value is its start's result element ({1};
copy-done: {0}; all-reduce-done: the start's whole value); an async-start's result is the root of the computation
it wraps, whose parameters are its operands."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.buffer_replay import assert_replay_matches_interpreter
from tools.compare import assert_same
from xlapy.buffers.assignment import assign_buffers
from xlapy.buffers.schedule import schedule_module

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")

_COMPUTATIONS = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

sum_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}

gather_columns {
  x = f32[4,6] parameter(0)
  ROOT g = f32[4,6] all-gather(x), replica_groups={{0}}, dimensions={1}
}

scale_and_count {
  x = f32[4,6] parameter(0)
  n = s32[3] parameter(1)
  three = f32[] constant(3)
  threes = f32[4,6] broadcast(three), dimensions={}
  scaled = f32[4,6] multiply(x, threes)
  one = s32[] constant(1)
  ones = s32[3] broadcast(one), dimensions={}
  counted = s32[3] add(n, ones)
  ROOT t = (f32[4,6], s32[3]) tuple(scaled, counted)
}

pass_through {
  x = f32[4,6] parameter(0)
  ROOT same = f32[4,6] copy(x)
}
"""

# name -> the entry's body over p = f32[4,6] and n = s32[3].
_BODIES = {
    "all-reduce": """
  start = f32[4,6] all-reduce-start(p), replica_groups={{0}}, to_apply=sum
  ROOT done = f32[4,6] all-reduce-done(start)""",
    "all-reduce-variadic": """
  m = f32[3] convert(n)
  start = (f32[4,6], f32[3]) all-reduce-start(p, m), replica_groups={}, to_apply=sum
  done = (f32[4,6], f32[3]) all-reduce-done(start)
  a = f32[4,6] get-tuple-element(done), index=0
  b = f32[3] get-tuple-element(done), index=1
  ROOT t = (f32[4,6], f32[3]) tuple(a, b)""",
    "all-gather": """
  start = (f32[4,6], f32[4,6]) all-gather-start(p), replica_groups={{0}}, dimensions={1}
  ROOT done = f32[4,6] all-gather-done(start)""",
    "all-gather-variadic": """
  start = ((f32[4,6], s32[3]), (f32[4,6], s32[3])) all-gather-start(p, n), replica_groups={{0}}, dimensions={0}
  ROOT done = (f32[4,6], s32[3]) all-gather-done(start)""",
    "collective-permute-to-itself": """
  start = (f32[4,6], f32[4,6], u32[], u32[]) collective-permute-start(p), source_target_pairs={{0,0}}
  ROOT done = f32[4,6] collective-permute-done(start)""",
    "collective-permute-to-no-one": """
  start = (f32[4,6], f32[4,6], u32[], u32[]) collective-permute-start(p), channel_id=1, source_target_pairs={}
  ROOT done = f32[4,6] collective-permute-done(start)""",
    "copy": """
  start = (f32[4,6], f32[4,6], u32[]) copy-start(p)
  ROOT done = f32[4,6] copy-done(start)""",
    "async-collective": """
  start = ((f32[4,6]), f32[4,6], s32[]) async-start(p), calls=gather_columns
  update = ((f32[4,6]), f32[4,6], s32[]) async-update(start)
  ROOT done = f32[4,6] async-done(update)""",
    "async-computation": """
  start = ((f32[4,6], s32[3]), (f32[4,6], s32[3]), s32[]) async-start(p, n), calls=scale_and_count
  ROOT done = (f32[4,6], s32[3]) async-done(start)""",
    # Values live across the pairs: the operand is read after the start and the done, the result by a kernel.
    "interleaved": """
  negated = f32[4,6] negate(p)
  reduce_start = f32[4,6] all-reduce-start(negated), replica_groups={{0}}, to_apply=sum
  copy_start = (f32[4,6], f32[4,6], u32[]) copy-start(negated)
  wrapped_start = ((f32[4,6]), f32[4,6], s32[]) async-start(p), calls=pass_through
  reduced = f32[4,6] all-reduce-done(reduce_start)
  copied = f32[4,6] copy-done(copy_start)
  passed = f32[4,6] async-done(wrapped_start)
  both = f32[4,6] add(reduced, copied)
  ROOT t = (f32[4,6], f32[4,6], f32[4,6]) tuple(both, passed, negated)""",
    # A pair inside a loop body, its result the next iteration's state.
    "in-a-loop": """
  zero = s32[] constant(0)
  state = (s32[], f32[4,6]) tuple(zero, p)
  loop = (s32[], f32[4,6]) while(state), condition=three_times, body=permute_and_double
  ROOT result = f32[4,6] get-tuple-element(loop), index=1""",
}

_LOOP = """
three_times {
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] constant(3)
  ROOT lt = pred[] compare(i, limit), direction=LT
}

permute_and_double {
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,6] get-tuple-element(s), index=1
  permute_start = (f32[4,6], f32[4,6], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,0}}
  permuted = f32[4,6] collective-permute-done(permute_start)
  doubled = f32[4,6] add(permuted, permuted)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (s32[], f32[4,6]) tuple(next, doubled)
}
"""


def _text(name: str) -> str:
    return f"""HloModule {name.replace("-", "_")}
{_COMPUTATIONS}{_LOOP}
ENTRY e {{
  p = f32[4,6] parameter(0)
  n = s32[3] parameter(1)
  {_BODIES[name].strip()}
}}"""


def _arguments() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal((4, 6)).astype(np.float32), rng.integers(-50, 50, 3).astype(np.int32)


@pytest.mark.parametrize("run_hlo_passes", [True, False], ids=["passes", "as-given"])
@pytest.mark.parametrize("name", sorted(_BODIES))
def test_compiled_async_pairs_match_the_interpreter(name: str, run_hlo_passes: bool) -> None:
    module = xlapy.parse_hlo(_text(name))
    args = _arguments()
    executable = xlapy.compile(module, backend="cpu", run_hlo_passes=run_hlo_passes)
    # Copies, negations, sums of two equal values and multiplications by 3: exact in any order.
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_buffers_of_async_pairs_hold_every_value_while_it_is_needed(name: str) -> None:
    """The interpreter replayed over the buffer assignment: no value is overwritten while it is needed."""
    module = xlapy.parse_hlo(_text(name))
    schedule = schedule_module(module)
    assert_replay_matches_interpreter(schedule, assign_buffers(module, schedule), _arguments(), name)


def _slices(name: str) -> tuple[xlapy.HloModule, object]:
    module = xlapy.parse_hlo(_text(name))
    return module, assign_buffers(module, schedule_module(module))


def _named(module: xlapy.HloModule, name: str):
    return next(i for i in module.instructions if i.name == name)


@pytest.mark.parametrize("name, operand_element, result_element", [
    ("all-gather", (0,), (1,)), ("collective-permute-to-itself", (0,), (1,)), ("copy", (1,), (0,)),
    ("async-collective", (0, 0), (1,)),
])
def test_starts_hold_their_operands_and_dones_are_their_results(name: str, operand_element: tuple[int, ...],
                                                                result_element: tuple[int, ...]) -> None:
    module, assignment = _slices(name)
    start, done, p = _named(module, "start"), _named(module, "done"), _named(module, "p")
    assert assignment.slice(start, operand_element) == assignment.slice(p)
    assert assignment.slice(done) == assignment.slice(start, result_element)
    assert assignment.slice(done) != assignment.slice(p)


def test_an_async_start_result_is_its_wrapped_computations_root() -> None:
    module, assignment = _slices("async-computation")
    start, done = _named(module, "start"), _named(module, "done")
    root = next(c for c in module.computations if c.name == "scale_and_count").root
    for i in range(2):
        assert assignment.slice(start, (0, i)) == assignment.slice(module.entry.parameters[i])
        assert assignment.slice(start, (1, i)) == assignment.slice(root, (i,)) == assignment.slice(done, (i,))


def test_all_reduce_done_is_its_start() -> None:
    module, assignment = _slices("all-reduce-variadic")
    start, done = _named(module, "start"), _named(module, "done")
    assert [s for _, s in assignment.leaf_slices(done)] == [s for _, s in assignment.leaf_slices(start)]


def test_async_pairs_on_several_devices_are_refused() -> None:
    text = _text("all-gather").replace("HloModule all_gather", "HloModule all_gather, replica_count=2")
    text = text.replace("replica_groups={{0}}, dimensions={1}\n  ROOT done = f32[4,6]",
                        "replica_groups={{0,1}}, dimensions={1}\n  ROOT done = f32[4,12]")
    text = text.replace("(f32[4,6], f32[4,6]) all-gather-start", "(f32[4,6], f32[4,12]) all-gather-start")
    with pytest.raises(xlapy.UnimplementedError, match=r"all-gather-start \(start\) on 2 devices"):
        xlapy.compile(xlapy.parse_hlo(text), backend="cpu")
