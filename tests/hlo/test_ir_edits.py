"""Editing the IR as passes do: clone, add, replace uses, remove; the edited
module verifies, prints as XLA would print the same program, and computes
what the interpreter says the unedited one does."""

import numpy as np

import xlapy
from tests.hlo.xla import without_stack_frames, xla_reprint

TEXT = """HloModule edits

ENTRY main {
  x = f32[4]{0} parameter(0)
  e = f32[4]{0} exponential(x)
  ROOT s = f32[4]{0} add(e, e)
}
"""


def test_clone_replace_and_remove_keep_edges_and_names_in_sync():
    module = xlapy.parse_hlo(TEXT)
    entry = module.entry
    x, e, s = entry.instructions
    twin = entry.add_instruction(e.clone(), before=s)
    assert twin.name == "e.clone" and twin.users == [] and x.users == [e, twin]
    s.replace_operand(1, twin)
    assert e.users == [s] and twin.users == [s]
    # s = e + e.clone; now make it e.clone + e.clone and drop e.
    e.replace_all_uses_with(twin)
    entry.remove_instruction(e)
    assert x.users == [twin] and [o.name for o in s.operands] == ["e.clone", "e.clone"]
    assert "e" not in module.names and entry.add_instruction(x.clone(suffix="x")).name == "x.x"
    entry.remove_instruction(entry.instructions[-1])
    xlapy.verify(module)
    expected = TEXT.replace("  e = f32[4]{0} exponential(x)\n", "  e.clone = f32[4]{0} exponential(x)\n") \
        .replace("add(e, e)", "add(e.clone, e.clone)")
    assert without_stack_frames(module.to_text()) == without_stack_frames(xla_reprint(expected))
    args = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_array_equal(xlapy.evaluate(module, args), xlapy.evaluate(xlapy.parse_hlo(TEXT), args))
