"""A computation finds where its instructions are without searching the
whole list (for adding before one, removing one); whatever the edits, and
also when the list is edited directly, the instructions stay in exactly the
order plain list operations give."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.shapes.shape import Shape

SCALAR = Shape.array("f32", ())
EDITS = st.lists(st.tuples(st.sampled_from(["append", "insert", "remove", "move", "replace_list"]),
                           st.integers(0, 10**6), st.integers(0, 10**6)), max_size=120)


def _computation(size: int) -> HloComputation:
    module = HloModule("m")
    computation = module.add_computation(HloComputation("main"), entry=True)
    for i in range(size):
        computation.add_instruction(HloInstruction(f"c{i}", "constant", SCALAR))
    return computation


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 40), edits=EDITS)
def test_edits_keep_the_order_plain_list_operations_give(size: int, edits: list) -> None:
    computation = _computation(size)
    expected = list(computation.instructions)
    for step, (kind, a, b) in enumerate(edits):
        new = HloInstruction(f"n{step}", "constant", SCALAR)
        if kind == "append" or not expected:
            computation.add_instruction(new)
            expected.append(new)
        elif kind == "insert":
            before = expected[a % len(expected)]
            computation.add_instruction(new, before=before)
            expected.insert(expected.index(before), new)
        elif kind == "remove":
            gone = expected[a % len(expected)]
            computation.remove_instruction(gone)
            expected.remove(gone)
            assert gone.parent is None
        elif kind == "move":
            # As passes do: straight on the list.
            moved = expected.pop(a % len(expected))
            expected.insert(b % (len(expected) + 1), moved)
            computation.instructions.remove(moved)
            computation.instructions.insert(expected.index(moved), moved)
        else:
            expected = expected[::-1]
            computation.instructions = list(expected)
        assert computation.instructions == expected


def test_many_edits_in_program_order_and_back() -> None:
    # The edits propagation's pipeline makes: a copy before each constant,
    # then the originals removed last to first, then every other one first to last.
    computation = _computation(3000)
    originals = list(computation.instructions)
    expected = []
    for i, original in enumerate(originals):
        copy = computation.add_instruction(HloInstruction(f"copy{i}", "constant", SCALAR), before=original)
        expected += [copy, original]
    assert computation.instructions == expected
    for original in reversed(originals):
        computation.remove_instruction(original)
    copies = expected[::2]
    assert computation.instructions == copies
    for copy in copies[::2]:
        computation.remove_instruction(copy)
    assert computation.instructions == copies[1::2]


def test_adding_before_or_removing_what_is_not_there_fails_as_before() -> None:
    computation = _computation(3)
    stranger = HloInstruction("stranger", "constant", SCALAR)
    with pytest.raises(ValueError):
        computation.add_instruction(HloInstruction("n", "constant", SCALAR), before=stranger)
    with pytest.raises(ValueError):
        computation.remove_instruction(stranger)
