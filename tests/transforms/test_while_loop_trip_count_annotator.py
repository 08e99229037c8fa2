"""Trip counts written into while loops' backend_config, as XLA's ``WhileLoopTripCountAnnotator`` does (cases and
expected counts from its ``while_loop_trip_count_annotator_test.cc``); the runtime runs a counted loop's body
without its condition, with the interpreter's values, and refuses a count the loop contradicts."""

from __future__ import annotations

import json

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import VerifyError
from xlapy.hlo import parse_module
from xlapy.runtime.thunks.control_flow import WhileThunk
from xlapy.transforms.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _loop(start: str, limit: str, direction: str = "LT", step: int = 1, element: str = "s32", config: str = "",
          index: int = 0) -> str:
    state = f"({element}[], {element}[], f32[4])"
    return f"""
HloModule test

body {{
  p = {state} parameter(0)
  i = {element}[] get-tuple-element(p), index={index}
  other = {element}[] get-tuple-element(p), index={1 - index}
  x = f32[4] get-tuple-element(p), index=2
  step = {element}[] constant({step})
  next = {element}[] add(i, step)
  y = f32[4] sine(x)
  ROOT t = {state} tuple({"next, other" if index == 0 else "other, next"}, y)
}}

cond {{
  p = {state} parameter(0)
  i = {element}[] get-tuple-element(p), index={index}
  n = {element}[] constant({limit})
  ROOT c = pred[] compare(i, n), direction={direction}
}}

ENTRY main {{
  x = f32[4] parameter(0)
  first = {element}[] {start}
  zero = {element}[] constant(0)
  init = {state} tuple({"first, zero" if index == 0 else "zero, first"}, x)
  w = {state} while(init), condition=cond, body=body{config}
  ROOT r = f32[4] get-tuple-element(w), index=2
}}
"""


def _config(text: str) -> dict:
    module = parse_module(text)
    WhileLoopTripCountAnnotator().run(module)
    (loop,) = [i for i in module.entry.instructions if i.opcode == "while"]
    return json.loads(loop.attr("backend_config"))


@pytest.mark.parametrize(("start", "limit", "direction", "step", "expected"), [
    (0, 10, "LT", 1, {"known_trip_count": {"n": "10"}, "known_init_step": {"init": "0", "step": "1"},
                      "known_induction_variable": {"tuple_index": "0"}}),
    (0, 1000000, "LT", 1, {"known_trip_count": {"n": "1000000"}, "known_init_step": {"init": "0", "step": "1"},
                           "known_induction_variable": {"tuple_index": "0"}}),
    (10, 1000000, "LT", 2, {"known_trip_count": {"n": "499995"}, "known_init_step": {"init": "10", "step": "2"},
                            "known_induction_variable": {"tuple_index": "0"}}),
    (10, 1000000, "LE", 1, {"known_trip_count": {"n": "999991"}, "known_init_step": {"init": "10", "step": "1"},
                            "known_induction_variable": {"tuple_index": "0"}}),
])
def test_known_trip_counts(start: int, limit: int, direction: str, step: int, expected: dict) -> None:
    assert _config(_loop(f"constant({start})", str(limit), direction, step)) == expected


def test_the_config_prints_as_xla_prints_it() -> None:
    module = parse_module(_loop("constant(0)", "10"))
    WhileLoopTripCountAnnotator().run(module)
    assert ('backend_config={"known_trip_count":{"n":"10"},"known_init_step":{"init":"0","step":"1"},'
            '"known_induction_variable":{"tuple_index":"0"}}') in module.to_text()


def test_an_induction_variable_at_another_index() -> None:
    assert _config(_loop("constant(0)", "10", index=1))["known_induction_variable"] == {"tuple_index": "1"}


def test_int64_overflow_leaves_only_the_induction_variable() -> None:
    # for (i = INT64_MIN; i <= INT64_MAX; ++i): the count does not fit an int64.
    text = _loop("constant(-9223372036854775808)", "9223372036854775807", "LE", element="s64")
    assert _config(text) == {"known_induction_variable": {"tuple_index": "0"}}


def test_a_start_that_is_not_a_constant_leaves_only_the_induction_variable() -> None:
    text = _loop("constant(0)", "10").replace("first = s32[] constant(0)", "first = s32[] parameter(1)")
    assert _config(text) == {"known_induction_variable": {"tuple_index": "0"}}


def test_a_wrapping_last_step_is_not_counted() -> None:
    # From 0 by 2 while i < 127 in s8: 126 + 2 wraps to -128, which passes the test again.
    text = _loop("constant(0)", "127", step=2, element="s8")
    assert "known_trip_count" not in _config(text)


def test_the_final_value_read_from_the_loop_becomes_a_constant() -> None:
    # for (i = 5; i < 15; i += 2): 5 trips, i ends at 15.
    text = _loop("constant(5)", "15", step=2).replace(
        "ROOT r = f32[4] get-tuple-element(w), index=2",
        "r = f32[4] get-tuple-element(w), index=2  final = s32[] get-tuple-element(w), index=0\n"
        "  ROOT out = (f32[4], s32[]) tuple(r, final)")
    module = parse_module(text)
    assert WhileLoopTripCountAnnotator().run(module)
    final = module.entry.root.operands[1]
    assert final.opcode == "constant" and int(final.literal) == 15
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    assert_same(xlapy.evaluate(module, x), xlapy.evaluate(parse_module(text), x), exact_bits=True)


def _while_thunks(executable: xlapy.Executable) -> list[WhileThunk]:
    return [t for t in executable.thunks.walk() if isinstance(t, WhileThunk)]


@pytest.mark.parametrize(("start", "limit", "direction", "step", "trips"),
                         [("constant(0)", "7", "LT", 1, 7), ("constant(3)", "20", "LE", 4, 5),
                          ("constant(9)", "2", "LT", 1, 0)])
def test_a_counted_loop_runs_without_its_condition(start: str, limit: str, direction: str, step: int,
                                                     trips: int) -> None:
    module = parse_module(_loop(start, limit, direction, step))
    executable = xlapy.compile(module, run_hlo_passes=False)
    (loop,) = _while_thunks(executable)
    assert loop.trips == trips
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    assert_same(executable(x), xlapy.evaluate(module, x), ulps=0)


def test_a_claimed_count_the_loop_contradicts_is_refused() -> None:
    text = _loop("constant(0)", "7", config=', backend_config={"known_trip_count":{"n":"3"}}')
    with pytest.raises(VerifyError, match=r"known_trip_count n=3, but its induction variable runs it 7 times"):
        xlapy.compile(parse_module(text), run_hlo_passes=False)


def test_a_claimed_count_that_cannot_be_checked_is_not_used() -> None:
    # The start is a parameter: the loop runs its condition, whatever the config claims.
    text = _loop("constant(0)", "7", config=', backend_config={"known_trip_count":{"n":"3"}}').replace(
        "first = s32[] constant(0)", "first = s32[] parameter(1)")
    module = parse_module(text)
    executable = xlapy.compile(module, run_hlo_passes=False)
    (loop,) = _while_thunks(executable)
    assert loop.trips is None
    args = (np.linspace(-2, 2, 4, dtype=np.float32), np.int32(1))
    assert_same(executable(*args), xlapy.evaluate(module, *args), ulps=0)
