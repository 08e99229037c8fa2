"""Copy insertion: the copies XLA's copy insertion adds (its test cases in
``xla/service/copy_insertion_test.cc``: a parameter, constant or bitcast of
one returned by the entry, loop state), values kept, and the effect on buffer
assignment (the result owns its buffers; the loop state stays in place)."""

from __future__ import annotations

import pytest

from tests.buffers.loop_programs import SWAP
from tests.corpus_cases import verifying_corpus
from tools.buffer_replay import assert_replay_matches_interpreter, replay
from tools.compare import assert_same
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, random_arguments
from xlapy.buffers.assignment import assign_buffers
from xlapy.buffers.schedule import schedule_module
from xlapy.hlo import parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.copy_insertion import CopyInsertion
from xlapy.transforms.flatten_call_graph import FlattenCallGraph


def _inserted(text: str):
    module = parse_module(text)
    assert CopyInsertion().run(module)
    verify(module)
    assert not CopyInsertion().run(module)  # nothing left to copy
    return module


def test_returned_parameter_is_copied() -> None:
    module = _inserted("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  ROOT t = (f32[4]) tuple(p)
}
""")
    root = module.entry.root
    assert root.opcode == "tuple" and root.operands[0].opcode == "copy"
    assert root.operands[0].operands[0].opcode == "parameter"


def test_returned_constant_is_copied() -> None:
    module = _inserted("""HloModule m

ENTRY main {
  c = f32[3] constant({1, 2, 3})
  ROOT t = (f32[3]) tuple(c)
}
""")
    copy = module.entry.root.operands[0]
    assert copy.opcode == "copy" and copy.operands[0].opcode == "constant"


def test_returned_bitcast_of_a_parameter_is_copied() -> None:
    module = _inserted("""HloModule m

ENTRY main {
  p = f32[2,2]{1,0} parameter(0)
  ROOT b = f32[4]{0} bitcast(p)
}
""")
    root = module.entry.root
    assert root.opcode == "copy" and root.operands[0].opcode == "bitcast"
    assert root.operands[0].operands[0].opcode == "parameter"


def test_array_returned_twice_is_copied_once() -> None:
    module = _inserted("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4]) tuple(n, n)
}
""")
    first, second = module.entry.root.operands
    assert first.opcode == "negate" and second.opcode == "copy" and second.operands[0] is first


def test_new_values_are_not_copied() -> None:
    module = parse_module("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")
    assert not CopyInsertion().run(module)


def test_loop_copies_initial_parameters_and_moved_elements() -> None:
    module = _inserted(SWAP)
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    # Parameters and the constant become copies the loop may own.
    assert [o.opcode for o in loop.operands[0].operands] == ["copy", "copy", "copy"]
    # Element 1 moves to place 0: copied; the reversed value is new; the counter is new.
    body = module.computation("body")
    assert [o.opcode for o in body.root.operands] == ["copy", "reverse", "add"]
    # The entry returns the loop's own buffers: no copy.
    assert module.entry.root.opcode == "while"


ACCUMULATE = """HloModule accumulate

body {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  acc = f32[8] get-tuple-element(p), index=1
  x = f32[8] get-tuple-element(p), index=2
  acc1 = f32[8] add(acc, x)
  ROOT t = (s32[], f32[8], f32[8]) tuple(i1, acc1, x)
}

cond {
  p = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[8] parameter(0)
  zero = f32[] constant(0)
  acc = f32[8] broadcast(zero), dimensions={}
  z = s32[] constant(0)
  init = (s32[], f32[8], f32[8]) tuple(z, acc, x)
  w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def test_after_copy_insertion_the_loop_state_stays_in_place() -> None:
    module = _inserted(ACCUMULATE)
    body = module.computation("body")
    # The unchanged element x stays where it is: no copy.
    assert body.root.operands[2].opcode == "get-tuple-element"
    schedule = schedule_module(module)
    assignment = assign_buffers(module, schedule)
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    # Every result of the body is computed into (or already is) the loop state: the loop copies nothing.
    assert assignment.leaf_slices(body.root) == assignment.leaf_slices(loop)
    # ... and so is its initial state, copied once before the loop from the parameter and constant.
    assert assignment.leaf_slices(loop.operands[0]) == assignment.leaf_slices(loop)
    original = parse_module(ACCUMULATE)
    arguments = random_arguments(original, 0)
    assert_same(replay(schedule, assignment, *arguments), evaluate(original, *arguments))


def test_returned_parameter_gets_an_output_buffer_of_its_own() -> None:
    module = _inserted("""HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4]) tuple(p, n)
}
""")
    assignment = assign_buffers(module, schedule_module(module))
    kinds = [assignment.allocations[s.allocation].kind for _, s in assignment.leaf_slices(module.entry.root)]
    assert kinds == ["output", "output"]


@pytest.mark.parametrize("text", [SWAP, ACCUMULATE])
def test_loops_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(CopyInsertion(), text)


# The corpus programs with control flow that the interpreter runs.
CORPUS = {path: text for path, text in verifying_corpus()
          if ("while" in text or "conditional" in text) and interpreter_runs(parse_module(text))}


@pytest.mark.parametrize("path", sorted(CORPUS))
def test_corpus_control_flow_keeps_its_values(path: str) -> None:
    module = parse_module(CORPUS[path])
    FlattenCallGraph().run(module)
    rewritten = assert_pass_preserves_values(CopyInsertion(), module.to_text(), seeds=(0,))
    schedule = schedule_module(rewritten)
    assert_replay_matches_interpreter(schedule, assign_buffers(rewritten, schedule), random_arguments(rewritten, 0),
                                      context=path)
