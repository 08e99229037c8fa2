"""Producer-consumer loop fusion (XLA:CPU's ``CpuInstructionFusion``): the
decisions on small modules are those XLA:CPU makes on the same modules
(each case was compiled by XLA:CPU: same fusions, same unfused ops), values
are preserved on random programs, and the fusions compile and run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import xlapy
from tests.codegen.filecheck import filecheck
from tests.corpus_cases import text_has_large_arrays, verifying_corpus
from tools.compare import assert_same
from tools.random_hlo import assert_pass_preserves_values, hlo_texts, random_arguments
from xlapy.codegen.elemental_rules import COMPLEX_ELEMENTAL, ELEMENTAL
from xlapy.codegen.fusion_checks import check_fusion, unsupported_fused_ops
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter import evaluate
from xlapy.transforms.fusible_ops import ELEMENTAL_OPCODES, LOOP_EMITTER_OPCODES, LOOP_OPCODES
from xlapy.transforms.fusion_hero import fusion_kind_of
from xlapy.transforms.instruction_fusion import InstructionFusion, is_expensive, op_reuses_operand

ADD = """HloModule m
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def fused(body: str) -> str:
    module = parse_module(ADD + body)
    InstructionFusion().run(module)
    verify(module)
    return module.to_text()


def test_fusible_opcodes_are_the_code_generators() -> None:
    code_generator = set(ELEMENTAL) | set(COMPLEX_ELEMENTAL)
    assert LOOP_EMITTER_OPCODES == ELEMENTAL_OPCODES | LOOP_OPCODES
    # The emitter also computes dots and convolutions element by element, but XLA:CPU never fuses either: a dot
    # is a library call, a convolution the library's or a kernel of its own.
    assert code_generator - {"dot", "convolution"} == LOOP_EMITTER_OPCODES


def test_elementwise_chain_is_one_fusion(tmp_path) -> None:
    text = fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  p1 = f32[8,16] parameter(1)
  a = f32[8,16] add(p0, p1)
  n = f32[8,16] negate(a)
  ROOT m = f32[8,16] multiply(n, p1)
}""")
    filecheck(text, """
CHECK: %fused_computation ([[P1:param_[0-9.]+]]: f32[8,16], [[P0:param_[0-9.]+]]: f32[8,16]) -> f32[8,16] {
CHECK-DAG: %[[A:.*]] = f32[8,16]{1,0} add(%[[P0]], %[[P1]])
CHECK-DAG: %[[N:.*]] = f32[8,16]{1,0} negate(%[[A]])
CHECK: ROOT %{{.*}} = f32[8,16]{1,0} multiply(%[[N]], %[[P1]])
CHECK: ENTRY
CHECK-DAG: %p0 = {{.*}} parameter(0)
CHECK-DAG: %p1 = {{.*}} parameter(1)
CHECK: ROOT %fusion = f32[8,16]{1,0} fusion(%p1, %p0), kind=kLoop, calls=%fused_computation
CHECK-NEXT: }
""", tmp_path)


def test_scalar_constant_and_its_broadcast_are_fused(tmp_path) -> None:
    text = fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  c = f32[] constant(2)
  b = f32[8,16] broadcast(c), dimensions={}
  ROOT m = f32[8,16] multiply(p0, b)
}""")
    filecheck(text, """
CHECK: %fused_computation
CHECK-DAG: constant(2)
CHECK-DAG: broadcast(
CHECK: ROOT {{.*}} multiply(
CHECK: ENTRY
CHECK-NOT: constant
CHECK: ROOT %fusion = f32[8,16]{1,0} fusion(%p0), kind=kLoop
""", tmp_path)


def test_array_constant_is_not_fused() -> None:
    text = fused("""ENTRY main {
  p0 = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  a = f32[4] add(p0, c)
  ROOT n = f32[4] negate(a)
}""")
    module = parse_module(text)
    assert [i.opcode for i in module.entry.post_order()] == ["parameter", "constant", "fusion"]


def test_expensive_producer_with_two_users_is_not_duplicated() -> None:
    module = parse_module(fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  e = f32[8,16] exponential(p0)
  a = f32[8,16] add(e, p0)
  m = f32[8,16] multiply(e, p0)
  ROOT t = (f32[8,16], f32[8,16]) tuple(a, m)
}"""))
    # XLA:CPU fuses nothing here (each op is wrapped into a fusion of its own later).
    assert sorted(i.opcode for i in module.entry.instructions) == [
        "add", "exponential", "multiply", "parameter", "tuple"]


def test_cheap_producer_is_duplicated_into_each_user(tmp_path) -> None:
    text = fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  n = f32[8,16] negate(p0)
  a = f32[8,16] add(n, p0)
  m = f32[8,16] multiply(n, p0)
  ROOT t = (f32[8,16], f32[8,16]) tuple(a, m)
}""")
    filecheck(text, """
CHECK: %fused_computation.1
CHECK: negate
CHECK: ROOT {{.*}} add(
CHECK: %fused_computation
CHECK: negate
CHECK: ROOT {{.*}} multiply(
CHECK: ENTRY
CHECK-NOT: negate
CHECK: ROOT %t = {{.*}} tuple(%fusion.1, %fusion)
""", tmp_path)


def test_reduce_takes_its_elementwise_producer(tmp_path) -> None:
    text = fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  p1 = f32[8,16] parameter(1)
  m = f32[8,16] multiply(p0, p1)
  c = f32[] constant(0)
  ROOT r = f32[8] reduce(m, c), dimensions={1}, to_apply=add_f32
}""")
    filecheck(text, """
CHECK: %fused_computation
CHECK: multiply(
CHECK: constant(0)
CHECK: ROOT {{.*}} reduce({{.*}}), dimensions={1}, to_apply=%add_f32
CHECK: ENTRY
CHECK: ROOT %fusion = f32[8]{0} fusion(%p0, %p1), kind=kLoop
""", tmp_path)


def test_a_variadic_reduce_takes_its_iota(tmp_path) -> None:
    # XLA:CPU makes argmax one fusion (its iota_reduce_fusion): the index operand is computed in the kernel.
    text = fused("""argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  v = f32[] select(gt, v0, v1)
  i = s32[] select(gt, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}

ENTRY main {
  p0 = f32[8,16] parameter(0)
  iota = s32[8,16] iota(), iota_dimension=1
  lowest = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[8], s32[8]) reduce(p0, iota, lowest, zero), dimensions={1}, to_apply=argmax
  ROOT index = s32[8] get-tuple-element(r), index=1
}""")
    filecheck(text, """
CHECK: %fused_computation
CHECK: iota()
CHECK: ROOT {{.*}} = (f32[8]{0}, s32[8]{0}) reduce(
CHECK: ENTRY
CHECK: %fusion = (f32[8]{0}, s32[8]{0}) fusion(%p0), kind=kLoop
CHECK: ROOT %index = s32[8]{0} get-tuple-element(%fusion), index=1
""", tmp_path)


def test_expensive_producer_is_not_fused_into_a_broadcast() -> None:
    module = parse_module(fused("""ENTRY main {
  p0 = f32[8] parameter(0)
  e = f32[8] exponential(p0)
  b = f32[8,16] broadcast(e), dimensions={0}
  ROOT n = f32[8,16] negate(b)
}"""))
    fusion = module.entry.root
    assert fusion.opcode == "fusion" and fusion.operands[0].opcode == "exponential"
    assert sorted(i.opcode for i in fusion.fused_computation.instructions) == ["broadcast", "negate", "parameter"]


def test_transposed_read_is_fused_as_xla_cpu_does() -> None:
    module = parse_module(fused("""ENTRY main {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32,64] parameter(1)
  t = f32[32,64] transpose(p0), dimensions={1,0}
  ROOT a = f32[32,64] add(t, p1)
}"""))
    assert [i.opcode for i in module.entry.post_order()] == ["parameter", "parameter", "fusion"]


def test_wide_minor_dimension_concatenate_of_many_operands_stays_unfused() -> None:
    # XLA:CPU's rule, where the concatenate emitter (at most four operands) would not take the concatenate.
    module = parse_module(fused("""ENTRY main {
  p0 = f32[32,64] parameter(0)
  p1 = f32[32,16] parameter(1)
  n = f32[32,64] negate(p0)
  c = f32[32,128] concatenate(n, p1, p1, p1, p1), dimensions={1}
  ROOT a = f32[32,128] abs(c)
}"""))
    assert sorted(i.opcode for i in module.entry.instructions) == [
        "abs", "concatenate", "negate", "parameter", "parameter"]


def test_wide_minor_dimension_concatenate_fuses_for_the_concatenate_emitter() -> None:
    # The concatenate emitter writes each operand in a loop of its own, as XLA:GPU's: producers and the epilogue
    # fuse into one concatenate fusion.
    module = parse_module(fused("""ENTRY main {
  p0 = f32[32,64] parameter(0)
  p1 = f32[32,64] parameter(1)
  n = f32[32,64] negate(p0)
  c = f32[32,128] concatenate(n, p1), dimensions={1}
  ROOT a = f32[32,128] abs(c)
}"""))
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert sorted(i.opcode for i in fusion.fused_computation.instructions) == [
        "abs", "concatenate", "negate", "parameter", "parameter"]
    assert fusion_kind_of(fusion) == "concatenate"


def test_dot_is_left_alone() -> None:
    module = parse_module(fused("""ENTRY main {
  p0 = f32[8,16] parameter(0)
  p1 = f32[16,4] parameter(1)
  n = f32[8,16] negate(p0)
  d = f32[8,4] dot(n, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT a = f32[8,4] abs(d)
}"""))
    assert sorted(i.opcode for i in module.entry.instructions) == ["abs", "dot", "negate", "parameter", "parameter"]


def test_fusion_runs_inside_while_bodies_but_not_reducers() -> None:
    module = parse_module(ADD + """cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] negate(x)
  z = f32[4] multiply(y, x)
  ROOT t = (s32[], f32[4]) tuple(j, z)
}
ENTRY main {
  p = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, p)
  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
}""")
    InstructionFusion().run(module)
    verify(module)
    body = module.computation("body")
    assert sorted(i.opcode for i in body.instructions).count("fusion") == 1
    assert [i.opcode for i in module.computation("add_f32").instructions].count("fusion") == 0


def test_cost_model_facts() -> None:
    module = parse_module(ADD + """ENTRY main {
  p0 = f32[8] parameter(0)
  i0 = s32[8] parameter(1)
  c = s32[] constant(3)
  b = s32[8] broadcast(c), dimensions={}
  d = s32[8] divide(i0, b)
  f = f32[8] divide(p0, p0)
  bc = f32[8,2] broadcast(p0), dimensions={0}
  zero = f32[] constant(0)
  r = f32[8] reduce(bc, zero), dimensions={1}, to_apply=add_f32
  ROOT t = (s32[8], f32[8], f32[8]) tuple(d, f, r)
}""")
    by_name = {i.name: i for i in module.entry.instructions}
    assert not is_expensive(by_name["d"]) and is_expensive(by_name["f"])
    assert op_reuses_operand(by_name["bc"], 0)
    assert not op_reuses_operand(by_name["r"], 0) and op_reuses_operand(by_name["r"], 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_fusion_preserves_values(text: str) -> None:
    module = assert_pass_preserves_values(InstructionFusion(), text)
    for instr in module.instructions:
        if instr.opcode == "fusion":
            check_fusion(instr)


def _assert_fusion_preserves_values_of(corpus: list[tuple[str, str]]) -> int:
    """Fuses each program of ``corpus`` the interpreter runs, checks its values; returns how many it checked."""
    checked = 0
    for path, text in corpus:
        module = parse_module(text)
        try:
            arguments = random_arguments(module, 0)
            expected = evaluate(module, *arguments)
        except xlapy.XlapyError:
            continue
        InstructionFusion().run(module)
        verify(module)
        got = evaluate(module, *arguments)
        assert_same(got, expected, context=path)
        checked += 1
    return checked


def test_fusion_preserves_values_of_the_corpus() -> None:
    corpus = [(path, text) for path, text in verifying_corpus() if not text_has_large_arrays(text)]
    assert _assert_fusion_preserves_values_of(corpus) > 10


@pytest.mark.slow
def test_fusion_preserves_values_of_the_corpus_programs_with_large_arrays() -> None:
    corpus = [(path, text) for path, text in verifying_corpus() if text_has_large_arrays(text)]
    assert _assert_fusion_preserves_values_of(corpus) == len(corpus) > 0


COMPILED = {
    "softplus_chain": """HloModule softplus
ENTRY main {
  p0 = f32[16,32] parameter(0)
  p1 = f32[32] parameter(1)
  b = f32[16,32] broadcast(p1), dimensions={1}
  a = f32[16,32] add(p0, b)
  e = f32[16,32] exponential(a)
  one = f32[] constant(1)
  ones = f32[16,32] broadcast(one), dimensions={}
  s = f32[16,32] add(e, ones)
  l = f32[16,32] log(s)
  t = f32[32,16] transpose(l), dimensions={1,0}
  ROOT n = f32[32,16] negate(t)
}""",
    "shared_cheap_producer": """HloModule shared
ENTRY main {
  p0 = f32[8,8] parameter(0)
  p1 = s32[8,8] parameter(1)
  n = f32[8,8] negate(p0)
  r = f32[8,8] reverse(n), dimensions={0}
  m = f32[8,8] multiply(n, r)
  s = f32[4,8] slice(n), slice={[0:8:2], [0:8]}
  c = f32[8,8] convert(p1)
  d = f32[8,8] divide(m, c)
  ROOT t = (f32[8,8], f32[4,8]) tuple(d, s)
}""",
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_fused_modules_compile_and_match_the_interpreter(name: str) -> None:
    module = parse_module(COMPILED[name])
    arguments = random_arguments(module, 1)
    expected = evaluate(module, *arguments)
    InstructionFusion().run(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert fusions and not any(unsupported_fused_ops(f) for f in fusions)
    assert {i.opcode for i in module.entry.instructions} <= {"fusion", "parameter", "tuple"}
    got = xlapy.compile(module)(*arguments)
    assert_same(got, expected)
