"""HLO text: parse -> print -> parse -> print is a fixed point, and xlapy
prints a module exactly as XLA's printer does (checked through jaxlib)."""

from pathlib import Path

import pytest

import xlapy
from tests.hlo.jax_programs import PROGRAMS, hlo_texts
from tests.hlo.xla import without_stack_frames, xla_reprint
from xlapy.hlo import parse_module


@pytest.mark.parametrize("stage", ["lowered", "optimized"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jax_programs(name, stage):
    text = hlo_texts(name)[stage == "optimized"]
    printed = parse_module(text).to_text()
    assert parse_module(printed).to_text() == printed
    xla = xla_reprint(printed)
    if stage == "lowered":
        assert printed == xla
    else:
        assert without_stack_frames(printed) == without_stack_frames(xla)


DATA = sorted((Path(__file__).parent / "data").glob("*.hlo"))


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.stem)
def test_hand_written_modules_print_as_xla_does(path):
    # Names without `%`, operand shapes inline, tiles, constants of every kind,
    # metadata, sharding, frontend attributes, backend configs, collectives,
    # windows, slices, paddings, control predecessors, duplicate names.
    text = path.read_text()
    printed = parse_module(text).to_text()
    assert printed == xla_reprint(text)
    assert parse_module(printed).to_text() == printed


def test_parse_hlo_is_exported():
    module = xlapy.parse_hlo(DATA[0].read_text())
    assert module.entry.name == "main"
    assert [c.name for c in module.computations][:2] == ["add_f32", "fused_exp"]
    fusion = next(i for i in module.entry.instructions if i.opcode == "fusion")
    assert fusion.fused_computation.fusion_instruction is fusion
    assert fusion.attributes["kind"] == "kLoop"


def test_missing_layouts_get_the_default_as_in_xla():
    text = """HloModule no_layouts

ENTRY main {
  p = f32[2,3] parameter(0)
  t = (f32[3,2], s32[]) parameter(1)
  c = f32[] constant(1)
  b = f32[2,3] broadcast(c), dimensions={}
  ROOT a = f32[2,3] add(p, b)
}
"""
    assert without_stack_frames(parse_module(text).to_text()) == without_stack_frames(xla_reprint(text))


def test_slice_sizes_of_gather_and_of_in_place_collective_permute():
    text = """HloModule slice_sizes

ENTRY main {
  p = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{1,0} parameter(1)
  i = (s32[], s32[]) parameter(2)
  o = (s32[], s32[]) parameter(3)
  idx = s32[3,1]{1,0} parameter(4)
  g = f32[3,8]{1,0} gather(p, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, \
index_vector_dim=1, slice_sizes={1,8}
  cp = f32[4,8]{1,0} collective-permute(p, b, i, o), source_target_pairs={{0,1},{1,0}}, slice_sizes={{2,8}}
  ROOT t = (f32[3,8]{1,0}, f32[4,8]{1,0}) tuple(g, cp)
}
"""
    assert without_stack_frames(parse_module(text).to_text()) == without_stack_frames(xla_reprint(text))


def test_computation_of_another_execution_thread():
    text = """HloModule threads

wrapped {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} negate(x)
  ROOT n = f32[4]{0} negate(y)
}, execution_thread="parallel"

ENTRY main {
  p = f32[4]{0} parameter(0)
  st = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(p), async_execution_thread="parallel", calls=wrapped
  ROOT dn = f32[4]{0} async-done(st)
}
"""
    module = parse_module(text)
    assert module.computation("wrapped").execution_thread == "parallel"
    assert without_stack_frames(module.to_text()) == without_stack_frames(xla_reprint(text))


def test_custom_call_to_apply_prints_as_called_computations():
    text = """HloModule cc

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} custom-call(p), custom_call_target="foo", to_apply=add_f
}
"""
    printed = parse_module(text).to_text()
    assert without_stack_frames(printed) == without_stack_frames(xla_reprint(text))
    assert parse_module(printed).to_text() == printed
