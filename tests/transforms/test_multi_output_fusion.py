"""Multi-output loop fusion: sibling and producer-consumer fusion on small
modules, values preserved on random programs, and the resulting fusions
satisfy the code generator's checks and compile."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import xlapy
from tools.compare import assert_same
from tools.random_hlo import assert_pass_preserves_values, hlo_texts, random_arguments
from xlapy.codegen.fusion_checks import check_fusion
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter import evaluate
from xlapy.transforms.hlo_pass import HloPassPipeline
from xlapy.transforms.instruction_fusion import InstructionFusion
from xlapy.transforms.multi_output_fusion import MultiOutputFusion


def fusion_passes() -> HloPassPipeline:
    return HloPassPipeline("fusion", [InstructionFusion(), MultiOutputFusion()])


def test_siblings_reading_one_operand_become_one_fusion() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p0 = f32[16,8] parameter(0)
  p1 = f32[16,8] parameter(1)
  a = f32[16,8] add(p0, p1)
  s = f32[16,8] subtract(p0, p1)
  r = f32[8] parameter(2)
  b = f32[16,8] broadcast(r), dimensions={1}
  m = f32[16,8] multiply(p0, b)
  ROOT t = (f32[16,8], f32[16,8], f32[16,8]) tuple(a, s, m)
}""")
    fusion_passes().run(module)
    verify(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1
    fusion = fusions[0]
    check_fusion(fusion)
    assert sorted(o.name for o in fusion.operands) == ["p0", "p1", "r"]
    roots = fusion.fused_computation.root.operands
    assert sorted(r.opcode for r in roots) == ["add", "multiply", "subtract"]
    assert all(o.opcode == "get-tuple-element" for o in module.entry.root.operands)


def test_siblings_of_different_dimensions_stay_apart() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p0 = f32[16,8] parameter(0)
  a = f32[16,8] negate(p0)
  t = f32[8,16] transpose(p0), dimensions={1,0}
  ROOT r = (f32[16,8], f32[8,16]) tuple(a, t)
}""")
    assert not MultiOutputFusion().run(module)


def test_expensive_producer_becomes_an_extra_output_of_its_consumer() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p0 = f32[16,8] parameter(0)
  p1 = f32[16,8] parameter(1)
  e = f32[16,8] exponential(p0)
  m = f32[16,8] multiply(e, p1)
  d = f32[16,16] dot(e, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT t = (f32[16,8], f32[16,16]) tuple(m, d)
}""")
    arguments = random_arguments(module, 0)
    expected = evaluate(module, *arguments)
    fusion_passes().run(module)
    verify(module)
    fusion = next(i for i in module.entry.instructions if i.opcode == "fusion")
    check_fusion(fusion)
    assert sorted(r.opcode for r in fusion.fused_computation.root.operands) == ["exponential", "multiply"]
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    assert dot.operands[0].opcode == "get-tuple-element" and dot.operands[0].operands[0] is fusion
    assert_same(evaluate(module, *arguments), expected)


def test_producer_read_transposed_is_not_made_an_output() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p0 = f32[8,8] parameter(0)
  e = f32[8,8] exponential(p0)
  t = f32[8,8] transpose(e), dimensions={1,0}
  ROOT r = (f32[8,8], f32[8,8]) tuple(e, t)
}""")
    fusion_passes().run(module)
    assert not any(i.shape.is_tuple for i in module.entry.instructions if i.opcode == "fusion")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_multi_output_fusion_preserves_values(text: str) -> None:
    module = assert_pass_preserves_values(fusion_passes(), text)
    for instr in module.instructions:
        if instr.opcode == "fusion":
            check_fusion(instr)


def test_multi_output_fusions_compile_and_match_the_interpreter() -> None:
    module = parse_module("""HloModule m
ENTRY main {
  p0 = f32[16,8] parameter(0)
  p1 = f32[16,8] parameter(1)
  a = f32[16,8] add(p0, p1)
  n = f32[16,8] negate(a)
  s = f32[16,8] subtract(p0, p1)
  m = f32[16,8] maximum(s, p1)
  ROOT t = (f32[16,8], f32[16,8]) tuple(n, m)
}""")
    arguments = random_arguments(module, 2)
    expected = evaluate(module, *arguments)
    fusion_passes().run(module)
    assert [i.shape.is_tuple for i in module.entry.instructions if i.opcode == "fusion"] == [True]
    assert_same(xlapy.compile(module)(*arguments), expected)
