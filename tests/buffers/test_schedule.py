"""Scheduling: every computation that runs as thunks gets an order that
respects its dependencies and keeps few bytes live at once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.buffers.loop_programs import LOOP
from tools.random_hlo import hlo_modules
from xlapy.buffers.schedule import _Graph, dfs_schedule, list_schedule, schedule_module, sequenced_computations
from xlapy.errors import UnimplementedError
from xlapy.hlo import HloModule, parse_module
from xlapy.transforms.flatten_call_graph import FlattenCallGraph

# Two 1 KiB temporaries, each reduced to 4 bytes: the best orders finish one before starting the other.
TWO_BRANCHES = """HloModule two_branches

ENTRY main {
  p = f32[256]{0} parameter(0)
  big_a = f32[256]{0} exponential(p)
  big_b = f32[256]{0} negate(p)
  small_b = f32[1]{0} slice(big_b), slice={[0:1]}
  small_a = f32[1]{0} slice(big_a), slice={[0:1]}
  ROOT sum = f32[1]{0} add(small_a, small_b)
}
"""


def _names(order) -> list[str]:
    return [instr.name for instr in order]


def test_peak_memory_of_orders() -> None:
    module = parse_module(TWO_BRANCHES)
    graph = _Graph(module.entry)
    named = {i.name: i for i in module.entry.instructions}
    interleaved = [named[n] for n in ("p", "big_a", "big_b", "small_b", "small_a", "sum")]
    one_after_the_other = [named[n] for n in ("p", "big_a", "small_a", "big_b", "small_b", "sum")]
    # Parameters are live throughout whatever the order and are not counted.
    assert graph.peak_memory(interleaved) == 1024 + 1024 + 4
    assert graph.peak_memory(one_after_the_other) == 4 + 1024 + 4


def test_schedule_finishes_one_temporary_before_the_next() -> None:
    module = parse_module(TWO_BRANCHES)
    order = _names(schedule_module(module).sequence(module.entry))
    assert _Graph(module.entry).peak_memory(schedule_module(module).sequence(module.entry)) == 1032
    first_small = min(order.index("small_a"), order.index("small_b"))
    assert first_small < max(order.index("big_a"), order.index("big_b"))
    for scheduler in (list_schedule, dfs_schedule):
        assert _Graph(module.entry).peak_memory(scheduler(module.entry)) == 1032


CONTROL = """HloModule control

ENTRY main {
  p = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(p)
  b = f32[4]{0} negate(p), control-predecessors={a}
  c = f32[4]{0} sine(p)
  ROOT t = (f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(c, b, a)
}
"""


def _assert_respects_dependencies(module: HloModule) -> None:
    schedule = schedule_module(module)
    for computation, order in schedule:
        assert sorted(_names(order)) == sorted(i.name for i in computation.instructions)
        position = {id(instr): i for i, instr in enumerate(order)}
        for instr in order:
            for before in [*instr.operands, *instr.control_predecessors]:
                assert position[id(before)] < position[id(instr)], f"{before.name} after {instr.name}"


def test_control_dependencies_are_respected() -> None:
    module = parse_module(CONTROL)
    _assert_respects_dependencies(module)
    for scheduler in (list_schedule, dfs_schedule):
        order = _names(scheduler(module.entry))
        assert order.index("a") < order.index("b")


def test_control_flow_computations_are_scheduled_callees_first() -> None:
    module = parse_module(LOOP)
    schedule = schedule_module(module)
    assert [c.name for c in schedule.computations] == ["body", "cond", "main"] or \
        [c.name for c in schedule.computations] == ["cond", "body", "main"]
    assert [c.name for c in sequenced_computations(module)][-1] == "main"


def test_a_computation_run_by_two_loops_is_refused_until_flattened() -> None:
    text = LOOP.replace("ROOT r = f32[4] get-tuple-element(w), index=1",
                        "w2 = (s32[], f32[4]) while(w), condition=cond, body=body\n"
                        "  ROOT r = f32[4] get-tuple-element(w2), index=1")
    module = parse_module(text)
    with pytest.raises(UnimplementedError, match="flatten-call-graph"):
        schedule_module(module)
    FlattenCallGraph().run(module)
    _assert_respects_dependencies(module)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules(max_instructions=16))
def test_random_schedules_respect_dependencies(module: HloModule) -> None:
    FlattenCallGraph().run(module)
    _assert_respects_dependencies(module)
