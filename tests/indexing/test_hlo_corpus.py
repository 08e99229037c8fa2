"""Every instruction of the repository's HLO modules (JAX-lowered and
XLA-optimised programs, hand-written ones) gets maps in both directions,
one set per operand or output; fusions with multi-output roots included."""

from pathlib import Path

import pytest

from xlapy import parse_hlo
from xlapy.indexing import input_to_output_indexing, output_to_input_indexing

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in [*ROOT.glob("tests/**/*.hlo"), *ROOT.glob("examples/*.hlo")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_maps_of_every_instruction(path):
    module = parse_hlo(path.read_text())
    for computation in module.computations:
        for instr in computation.instructions:
            outputs = max(1, len(instr.shape.tuple_shapes))
            for k in range(outputs):
                maps = output_to_input_indexing(instr, k)
                assert len(maps) == len(instr.operands)
                for operand, operand_maps in zip(instr.operands, maps):
                    if operand.shape.tuple_shapes:
                        continue  # get-tuple-element indexes the element it reads
                    for m in operand_maps:
                        assert m.is_undefined() or len(m.results) == len(operand.shape.dimensions), (instr.name, m)
            for j in range(len(instr.operands)):
                maps = input_to_output_indexing(instr, j)
                assert len(maps) == outputs, instr.name


def test_fusion_whose_root_is_a_variadic_reduce():
    text = """HloModule m
argmax {
  a = f32[] parameter(0)  i = s32[] parameter(1)  b = f32[] parameter(2)  j = s32[] parameter(3)
  ge = pred[] compare(a, b), direction=GE
  v = f32[] select(ge, a, b)
  k = s32[] select(ge, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
fused {
  p0 = f32[8,16] parameter(0)
  iota = s32[8,16] iota(), iota_dimension=1
  c = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[8], s32[8]) reduce(p0, iota, c, z), dimensions={1}, to_apply=argmax
}
ENTRY e {
  p = f32[8,16] parameter(0)
  ROOT f = (f32[8], s32[8]) fusion(p), kind=kInput, calls=fused
}"""
    fusion = parse_hlo(text).entry.root
    for k in (0, 1):
        ((m,),) = output_to_input_indexing(fusion, k)
        assert m.to_string(multiline=False) == "(d0)[s0] -> (d0, s0), domain: d0 in [0, 7], s0 in [0, 15]"
    (values, indices) = input_to_output_indexing(fusion, 0)
    assert {m.to_string(multiline=False) for m in values | indices} == {
        "(d0, d1) -> (d0), domain: d0 in [0, 7], d1 in [0, 15]"
    }
