"""Buffer assignment: the values computed in the assigned buffers, in the
schedule's order, are the reference interpreter's; values needed at the same
time never share bytes; buffers are reused and updated in place where XLA
would."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.buffers.loop_programs import LOOP, SWAP
from tests.corpus_cases import text_has_large_arrays, verifying_corpus
from tools.buffer_replay import assert_replay_matches_interpreter
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import hlo_modules, random_arguments
from xlapy.buffers.assignment import ALIGNMENT, alignment_of, assign_buffers, best_fit_heap
from xlapy.buffers.liveness import FORWARDING_OPCODES, array_leaves
from xlapy.buffers.schedule import schedule_module
from xlapy.buffers.sharing import BufferGroup
from xlapy.errors import VerifyError
from xlapy.hlo import HloModule, parse_module
from xlapy.hlo.opcodes import OPCODES
from xlapy.transforms.flatten_call_graph import FlattenCallGraph


def _assigned(module: HloModule):
    FlattenCallGraph().run(module)  # one place in memory per computation's values: each run by one caller
    schedule = schedule_module(module)
    return schedule, assign_buffers(module, schedule)


def _assert_replay_matches(module: HloModule, seeds: tuple[int, ...] = (0,)) -> None:
    schedule, assignment = _assigned(module)
    for seed in seeds:
        assert_replay_matches_interpreter(schedule, assignment, random_arguments(module, seed),
                                          context=f"{module.name}\n{assignment}")


def _straight_line_overlaps(module: HloModule) -> list[str]:
    """Pairs of values of an entry without control flow that share bytes while both are needed, by a liveness
    worked out here from the schedule alone: a value is needed from its definer's position to its last
    reader's (a view's readers read its source), parameters and results throughout; an instruction may
    write over an operand it reads last only if it reads each element before writing that element."""
    schedule, assignment = _assigned(module)
    order = schedule.sequence(module.entry)
    position = {id(instr): step for step, instr in enumerate(order)}
    end = len(order)

    def sources(instr, index=()):
        if instr.opcode in ("bitcast", "add-dependency", "domain", "opt-barrier"):
            return sources(instr.operands[0], index)
        if instr.opcode == "get-tuple-element":
            return sources(instr.operands[0], (instr.attributes["index"], *index))
        if instr.opcode == "tuple":
            if index:
                return sources(instr.operands[index[0]], index[1:])
            return [s for i, o in enumerate(instr.operands) for s in sources(o)]
        return [(instr, leaf) for leaf, _ in array_leaves(instr.shape) if leaf[:len(index)] == tuple(index)]

    span: dict[tuple[int, tuple], list] = {}
    for instr in order:
        if instr.opcode in FORWARDING_OPCODES:
            continue
        for leaf, _ in array_leaves(instr.shape):
            start = 0 if instr.opcode == "parameter" else position[id(instr)]
            span[(id(instr), leaf)] = [start, start, instr, leaf]
        for operand in instr.operands:
            for source, leaf in sources(operand):
                span[(id(source), leaf)][1] = max(span[(id(source), leaf)][1], position[id(instr)])
    for source, leaf in sources(module.entry.root):
        span[(id(source), leaf)][1] = end
    for instr in module.entry.parameters:
        for leaf, _ in array_leaves(instr.shape):
            span[(id(instr), leaf)][1] = end
    problems = []
    values = list(span.values())
    for i, (start_a, end_a, a, leaf_a) in enumerate(values):
        slice_a = assignment.slice(a, leaf_a)
        for start_b, end_b, b, leaf_b in values[i + 1:]:
            slice_b = assignment.slice(b, leaf_b)
            if (slice_a.allocation != slice_b.allocation or not slice_a.size or not slice_b.size
                    or slice_a.offset + slice_a.size <= slice_b.offset
                    or slice_b.offset + slice_b.size <= slice_a.offset):
                continue
            (first_end, later_start, later) = (end_a, start_b, b) if start_a <= start_b else (end_b, start_a, a)
            in_place = first_end == later_start and (OPCODES[later.opcode].is_elementwise
                                                     or later.opcode in ("dynamic-update-slice", "fusion"))
            if first_end > later_start or (first_end == later_start and not in_place):
                problems.append(f"{a.name}{list(leaf_a)} and {b.name}{list(leaf_b)} share bytes")
    return problems


# -- hand-made modules with exact expectations ----------------------------------------------------------

REVERSES = """HloModule reverses, entry_computation_layout={(f32[64]{0})->f32[64]{0}}

ENTRY main {
  p = f32[64]{0} parameter(0)
  x1 = f32[64]{0} exponential(p)
  x2 = f32[64]{0} reverse(x1), dimensions={0}
  x3 = f32[64]{0} reverse(x2), dimensions={0}
  ROOT x4 = f32[64]{0} reverse(x3), dimensions={0}
}
"""


def test_dead_temporaries_are_reused() -> None:
    module = parse_module(REVERSES)
    _, assignment = _assigned(module)
    kinds = [a.kind for a in assignment.allocations]
    assert sorted(kinds) == ["output", "parameter", "temp"]
    # x1 and x3 never live together: two 256-byte slices, not three.
    temp = next(a for a in assignment.allocations if a.kind == "temp")
    assert temp.size == 512
    by_name = {i.name: assignment.slice(i) for i in module.entry.instructions}
    assert by_name["x1"] == by_name["x3"] != by_name["x2"]
    assert by_name["x1"].allocation == by_name["x2"].allocation == temp.index
    assert assignment.total_bytes == 3 * 256 + 256
    assert all(s.offset % ALIGNMENT == 0 for s in by_name.values())
    _assert_replay_matches(module)


DUS = """HloModule dus

ENTRY main {
  p = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  i = s32[] parameter(2)
  base = f32[8]{0} negate(p)
  updated = f32[8]{0} dynamic-update-slice(base, u, i)
  ROOT r = f32[8]{0} reverse(updated), dimensions={0}
}
"""

# The same update, but the updated buffer's old value is read afterwards.
DUS_BASE_READ_LATER = DUS.replace("ROOT r = f32[8]{0} reverse(updated), dimensions={0}",
                                  "ROOT r = f32[8]{0} subtract(updated, base)")


def test_dynamic_update_slice_in_place_when_its_operand_dies() -> None:
    module = parse_module(DUS)
    _, assignment = _assigned(module)
    named = {i.name: i for i in module.entry.instructions}
    assert assignment.slice(named["updated"]) == assignment.slice(named["base"])
    _assert_replay_matches(module, seeds=(0, 1))


def test_dynamic_update_slice_copies_when_its_operand_is_read_later() -> None:
    module = parse_module(DUS_BASE_READ_LATER)
    _, assignment = _assigned(module)
    named = {i.name: i for i in module.entry.instructions}
    assert assignment.slice(named["updated"]) != assignment.slice(named["base"])
    # r may take the bytes of either of its operands, both dying there; they are elementwise to it.
    assert assignment.slice(named["r"]).allocation != assignment.slice(named["base"]).allocation
    _assert_replay_matches(module, seeds=(0, 1))


def test_parameters_and_constants_are_never_written_over() -> None:
    module = parse_module("""HloModule m

ENTRY main {
  p = f32[4]{0} parameter(0)
  c = f32[4]{0} constant({1, 2, 3, 4})
  s = f32[4]{0} add(p, c)
  ROOT n = f32[4]{0} negate(s)
}
""")
    _, assignment = _assigned(module)
    named = {i.name: i for i in module.entry.instructions}
    kinds = {name: assignment.allocations[assignment.slice(named[name]).allocation].kind for name in named}
    assert kinds == {"p": "parameter", "c": "constant", "s": "output", "n": "output"}
    assert assignment.slice(named["s"]) == assignment.slice(named["n"])
    assert assignment.allocations[assignment.slice(named["c"]).allocation].constant is named["c"]
    assert assignment.allocations[assignment.slice(named["p"]).allocation].parameter_number == 0


def test_loop_state_stays_in_place() -> None:
    module = parse_module(LOOP)
    _, assignment = _assigned(module)
    body = module.computation("body")
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    # The body's results are written straight into the loop state: no copy after each iteration.
    assert assignment.leaf_slices(body.root) == assignment.leaf_slices(loop)
    # The initial state dies at the loop and becomes it.
    negated = next(i for i in module.entry.instructions if i.opcode == "negate")
    assert assignment.slice(negated) == assignment.slice(loop, (1,))
    # Inside the body, views are the loop state's slices.
    parameter = body.parameters[0]
    assert assignment.leaf_slices(parameter) == assignment.leaf_slices(loop)
    _assert_replay_matches(module, seeds=(0, 1))


def test_loop_results_read_from_other_state_elements_are_copied() -> None:
    module = parse_module(SWAP)
    _, assignment = _assigned(module)
    body = module.computation("body")
    loop = module.entry.root
    # Element 1's old value becomes element 0 after the body ran, so the new element 1 (ra) cannot be
    # computed into element 1's bytes; the counter can.
    assert assignment.slice(body.root, (1,)) != assignment.slice(loop, (1,))
    assert assignment.slice(body.root, (2,)) == assignment.slice(loop, (2,))
    _assert_replay_matches(module, seeds=(0, 1))


def test_slice_of_a_value_outside_the_sequenced_computations_is_an_error() -> None:
    module = parse_module(LOOP)
    _, assignment = _assigned(module)
    with pytest.raises(VerifyError):
        assignment.slice(module.entry.root, (0,))


# -- random programs and the corpus ------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules(max_instructions=14))
def test_random_programs_compute_the_same_in_their_buffers(module: HloModule) -> None:
    _assert_replay_matches(module)
    assert not _straight_line_overlaps(module) or any(
        i.opcode in ("while", "conditional", "call") for i in module.entry.instructions)


# The corpus programs the interpreter runs (the others hold ops it has no rule for, collectives say). Those with
# large arrays run with the slow tests, and are taken without asking: asking runs them, for seconds each.
CORPUS = {path: text for path, text in verifying_corpus()
          if text_has_large_arrays(text) or interpreter_runs(parse_module(text))}


@pytest.mark.parametrize("path", [pytest.param(path, marks=[pytest.mark.slow] if text_has_large_arrays(CORPUS[path])
                                               else []) for path in sorted(CORPUS)])
def test_corpus_programs_compute_the_same_in_their_buffers(path: str) -> None:
    _assert_replay_matches(parse_module(CORPUS[path]))


# -- the heap simulation on its own ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10), st.integers(0, 300)), max_size=25))
def test_heap_never_overlaps_groups_live_together(spans: list[tuple[int, int, int]]) -> None:
    groups = [BufferGroup([], start, start + length, size) for start, length, size in spans]
    offsets, heap = best_fit_heap(groups)
    for i, (a, offset_a) in enumerate(zip(groups, offsets)):
        assert offset_a % alignment_of(a.size) == 0
        assert offset_a + a.size <= heap
        for b, offset_b in zip(groups[i + 1:], offsets[i + 1:]):
            if a.size and b.size and a.start <= b.end and b.start <= a.end:
                assert offset_a + a.size <= offset_b or offset_b + b.size <= offset_a, (a, b, offset_a, offset_b)
    # No better than the most bytes live at one time, once rounded to alignment.
    busiest = max((sum(-(-g.size // alignment_of(g.size)) * alignment_of(g.size) for g in groups
                       if g.start <= t <= g.end) for t in range(45)), default=0)
    assert heap >= busiest


def test_best_fit_takes_the_smallest_gap_that_fits() -> None:
    # Placed largest first: 512 (live 0-10), then 256 (0-2) above it, 128 (0-10) above that; a 64-byte group
    # live 5-10 fits in the 256 bytes the second group frees after step 2, not at the top.
    groups = [BufferGroup([], 0, 10, 512), BufferGroup([], 0, 2, 256), BufferGroup([], 0, 10, 128),
              BufferGroup([], 5, 10, 64)]
    offsets, heap = best_fit_heap(groups)
    assert offsets == [0, 512, 768, 512]
    assert heap == 896
