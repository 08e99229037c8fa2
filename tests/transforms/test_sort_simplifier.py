"""The sort simplifier (XLA's ``SortSimplifier``,
``xla/hlo/transforms/simplifiers/sort_simplifier.cc``): cases after XLA's
``sort_simplifier_test.cc``, and values kept on JAX's sorts."""

from __future__ import annotations

import numpy as np
import pytest

from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.transforms.sort_simplifier import SortSimplifier


def _sort_module(users: str, compare: str = "ROOT lt = pred[] compare(p.0.lhs, p.0.rhs), direction=LT") -> str:
    return f"""
HloModule m

compare {{
  p.0.lhs = f32[] parameter(0)
  p.0.rhs = f32[] parameter(1)
  p.1.lhs = s32[] parameter(2)
  p.1.rhs = s32[] parameter(3)
  {compare}
}}

ENTRY main {{
  keys = f32[16,8] parameter(0)
  values = s32[16,8] parameter(1)
  sort = (f32[16,8], s32[16,8]) sort(keys, values), dimensions={{1}}, to_apply=compare
{users}
}}
"""


KEYS_ONLY = _sort_module("  ROOT gte = f32[16,8] get-tuple-element(sort), index=0")


def _simplified(text: str) -> tuple[bool, object]:
    module = parse_module(text)
    changed = SortSimplifier().run(module)
    verify(module)
    return changed, module


def test_an_unused_value_operand_goes():
    changed, module = _simplified(KEYS_ONLY)
    assert changed
    root = module.entry.root
    assert (root.opcode, str(root.shape), [o.name for o in root.operands]) == ("sort", "f32[16,8]{1,0}", ["keys"])
    comparator = root.called_computations[0]
    assert [p.name for p in comparator.parameters] == ["p.0.lhs.1", "p.0.rhs.1"]
    assert root.attr("to_apply") == comparator.name


def test_an_unused_key_the_comparator_reads_stays():
    # Only the values are read, but the comparator compares the keys.
    text = _sort_module("  ROOT gte = s32[16,8] get-tuple-element(sort), index=1")
    assert not _simplified(text)[0]


def test_an_unused_operand_the_comparator_reads_goes_only_if_unread():
    text = _sort_module("  ROOT gte = f32[16,8] get-tuple-element(sort), index=0",
                        compare="ROOT lt = pred[] compare(p.1.lhs, p.1.rhs), direction=LT")
    assert not _simplified(text)[0]


def test_a_sort_that_is_the_root_or_used_whole_stays():
    assert not _simplified(_sort_module("  ROOT t = (f32[16,8], s32[16,8]) tuple(sort)".replace(
        "(f32[16,8], s32[16,8]) tuple(sort)", "((f32[16,8], s32[16,8])) tuple(sort)")))[0]
    root_sort = KEYS_ONLY.replace("  sort = (", "  ROOT sort = (").replace(
        "  ROOT gte = f32[16,8] get-tuple-element(sort), index=0", "")
    assert not _simplified(root_sort)[0]


def test_three_operands_keep_the_used_two_in_order():
    text = """
HloModule m

compare {
  p.0.lhs = f32[] parameter(0)
  p.0.rhs = f32[] parameter(1)
  p.1.lhs = s32[] parameter(2)
  p.1.rhs = s32[] parameter(3)
  p.2.lhs = u32[] parameter(4)
  p.2.rhs = u32[] parameter(5)
  ROOT lt = pred[] compare(p.0.lhs, p.0.rhs), direction=LT
}

ENTRY main {
  keys = f32[8] parameter(0)
  values = s32[8] parameter(1)
  more = u32[8] parameter(2)
  sort = (f32[8], s32[8], u32[8]) sort(keys, values, more), dimensions={0}, to_apply=compare
  v = s32[8] get-tuple-element(sort), index=1
  ROOT n = s32[8] negate(v)
}
"""
    changed, module = _simplified(text)
    assert changed
    sort = module.entry.root.operands[0].operands[0]
    assert (sort.opcode, str(sort.shape), [o.name for o in sort.operands]) == (
        "sort", "(f32[8]{0}, s32[8]{0})", ["keys", "values"])
    assert module.entry.root.operands[0].attr("index") == 1
    assert_pass_preserves_values(SortSimplifier(), text, seeds=(0, 1))


def test_jax_sorts_keep_their_values():
    jnp = pytest.importorskip("jax.numpy")
    from xlapy.frontends.jax import from_jax

    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
    module = from_jax(lambda x: (jnp.argsort(x, axis=1), jnp.sort(x, axis=0)), x)
    rewritten = assert_pass_preserves_values(SortSimplifier(), module, seeds=(0, 1))
    assert len([i for i in rewritten.instructions if i.opcode == "sort"]) == 2
