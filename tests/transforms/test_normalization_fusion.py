"""Normalization fusion (``xlapy/transforms/normalization_fusion.py``): which chains of normalization diamonds it
wraps in one fusion and which it leaves alone. The cases marked ``XLA:`` are those of XLA's
``softmax_rewriter_triton_test.cc`` (same HLO, same decision: fused into one fusion of the parameters, or left as
it is); the others are xlapy's own, each stating what it expects.

XLA's GPU rewriter refuses a few diamonds for reasons of Triton's that do not hold here, and the pass fuses them: a
reduce over several minor dimensions (``DoesNotFuseReductionOnMultipleReductionAxes``: the emitter walks a row of
several dimensions as well), a broadcast back read by two consumers
(``CanNotFuseSoftmaxDiamondWithExtraBroadcastUsage``), reducers Triton cannot emit
(``CanNotFuseSoftmaxDiamondWithTritonIncompatibleReducer``) and products of splats."""

from __future__ import annotations

import pytest

from xlapy.hlo import parse_module
from xlapy.hlo.ir import HloModule
from xlapy.transforms.cpu_pipeline import cpu_hlo_pipeline
from xlapy.transforms.fusion_hero import fusion_kind_of
from xlapy.transforms.normalization_fusion import MAX_ROW_BYTES, NormalizationFusion, normalization_computation

MAX = """
max_computation {
  arg_0 = f32[] parameter(0)
  arg_1 = f32[] parameter(1)
  ROOT maximum = f32[] maximum(arg_0, arg_1)
}
"""
ADD = """
add_computation {
  arg_0 = f32[] parameter(0)
  arg_1 = f32[] parameter(1)
  ROOT add = f32[] add(arg_0, arg_1)
}
"""


def _module(entry: str, *computations: str) -> HloModule:
    return parse_module("HloModule m\n" + "".join(computations) + entry)


def _fused_opcodes(module: HloModule) -> list[str]:
    """The opcodes of the entry's one fusion's computation (asserting that there is exactly one fusion)."""
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return sorted(i.opcode for i in fusion.fused_computation.instructions)


def _fuses_everything(module: HloModule) -> None:
    """XLA's expectation ``m::Fusion(m::Parameter())``: the root is a fusion of the entry's parameters, the only
    other instructions; ``fusion_kind_of`` calls it a normalization."""
    assert NormalizationFusion().run(module)
    root = module.entry.root
    assert root.opcode == "fusion" and all(o.opcode == "parameter" for o in root.operands)
    assert {i.opcode for i in module.entry.instructions} == {"fusion", "parameter"}
    assert fusion_kind_of(root) == "normalization"
    assert normalization_computation(root.fused_computation) is not None


def test_xla_single_normalization_f32():  # XLA: CanFuseSingleNormalizationF32
    module = _module("""ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""", MAX)
    _fuses_everything(module)
    assert _fused_opcodes(module) == ["broadcast", "constant", "parameter", "reduce", "subtract"]


def test_xla_unary_elementwise_prefix():  # XLA: CanFuseDiamondWithUnaryElementwisePrefix
    module = _module("""ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  abs = f32[127,125]{1,0} abs(param_0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{0} reduce(abs, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""", MAX)
    _fuses_everything(module)
    assert "abs" in _fused_opcodes(module)


def test_xla_rms_norm():  # XLA: CanFuseRMSNormDiamond
    module = _module("""ENTRY main.30 {
  param_0 = f32[10,10,10,128]{3,2,1,0} parameter(0)
  multiply_param = f32[10,10,10,128]{3,2,1,0} multiply(param_0, param_0)
  constant_0 = f32[] constant(0)
  reduce = f32[10,10,10]{2,1,0} reduce(multiply_param, constant_0), dimensions={3}, to_apply=add_computation
  constant_1 = f32[] constant(0.333333343)
  splat = f32[10,10,10]{2,1,0} broadcast(constant_1), dimensions={}
  multiply_splat = f32[10,10,10]{2,1,0} multiply(reduce, splat)
  epsilon = f32[] constant(1e-06)
  splat_epsilon = f32[10,10,10]{2,1,0} broadcast(epsilon), dimensions={}
  add = f32[10,10,10]{2,1,0} add(multiply_splat, splat_epsilon)
  rsqrt = f32[10,10,10]{2,1,0} rsqrt(add)
  broadcast = f32[10,10,10,128]{3,2,1,0} broadcast(rsqrt), dimensions={0,1,2}
  ROOT multiply = f32[10,10,10,128]{3,2,1,0} multiply(param_0, broadcast)
}""", ADD)
    _fuses_everything(module)
    assert normalization_computation(module.entry.root.fused_computation).shape.kept == 3


@pytest.mark.parametrize("row_values", [
    "multiply = f32[127]{0} multiply(reduce, reduce)",  # XLA: ...WhenBothOperandsAreTheSame
    "constant = f32[] constant(0.333333343)\n  broadcast_splat = f32[127]{0} broadcast(constant), dimensions={}\n"
    "  multiply = f32[127]{0} multiply(broadcast_splat, reduce)",  # XLA: ...FirstOperandIsASplatConstantWithinDiamond
])
def test_xla_row_values_between_reduce_and_broadcast(row_values: str):
    module = _module(f"""ENTRY main {{
  param_0 = f32[127,125]{{1,0}} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{{0}} reduce(param_0, constant_neg_inf), dimensions={{1}}, to_apply=max_computation
  {row_values}
  broadcast = f32[127,125]{{1,0}} broadcast(multiply), dimensions={{0}}
  ROOT subtract = f32[127,125]{{1,0}} subtract(param_0, broadcast)
}}""", MAX)
    _fuses_everything(module)


def test_xla_shared_splat_producer():  # XLA: CanFuseBinaryElementwiseOperationWhereOneOperandIsASharedSplatProducer
    module = _module("""ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  constant_2 = f32[] constant(0.333333343)
  broadcast_splat = f32[127,125]{1,0} broadcast(constant_2), dimensions={}
  param_1 = f32[127,125]{1,0} parameter(1)
  multiply_splat = f32[127,125]{1,0} multiply(broadcast_splat, param_1)
  multiply = f32[127,125]{1,0} multiply(param_0, broadcast_splat)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{0} reduce(multiply, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""", MAX)
    assert NormalizationFusion().run(module)
    root = module.entry.root
    # The splat is copied into the fusion; multiply_splat (dead in XLA's module as well) keeps the original.
    assert root.opcode == "fusion" and [o.name for o in root.operands] == ["param_0"]
    assert "broadcast_splat" in {i.name for i in module.entry.instructions}


@pytest.mark.parametrize("entry", [
    # XLA: CanNotFuseSoftmaxDiamondWithWrongLayout
    """ENTRY main {
  param_0 = f32[127,125]{0,1} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""",
    # XLA: CanNotFuseSoftmaxDiamondWithWrongReduceDimension
    """ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[125]{0} reduce(param_0, constant_neg_inf), dimensions={0}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={1}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""",
    # XLA: CanNotFuseSoftmaxDiamondWithWrongBroadcastDimension
    """ENTRY main {
  param_0 = f32[125,125]{1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[125]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[125,125]{1,0} broadcast(reduce), dimensions={1}
  ROOT subtract = f32[125,125]{1,0} subtract(param_0, broadcast)
}""",
    # XLA: DoesNotFuseReductionOnNonMinorAxis
    """ENTRY main {
  param_0 = f32[8,16,16]{2,1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[8,16]{1,0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[8,16,16]{2,1,0} broadcast(reduce), dimensions={0,1}
  ROOT subtract = f32[8,16,16]{2,1,0} subtract(param_0, broadcast)
}""",
    # XLA: CanNotFuseSoftmaxDiamondWithParameterReducerIdentity
    """ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  identity = f32[] parameter(1)
  reduce = f32[127]{0} reduce(param_0, identity), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
}""",
    # The reduced values are also an output: the reduce cannot be fused without a second output, and the rest holds
    # no diamond.
    """ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[127]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f32[127,125]{1,0} broadcast(reduce), dimensions={0}
  subtract = f32[127,125]{1,0} subtract(param_0, broadcast)
  ROOT outputs = (f32[127,125], f32[127]) tuple(subtract, reduce)
}""",
    # A plain row reduction: no broadcast back (the reduction emitter's).
    """ENTRY main {
  param_0 = f32[127,125]{1,0} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  ROOT reduce = f32[127]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
}""",
    # Complex numbers are left to the other emitters.
    """ENTRY main {
  param_0 = c64[127,125]{1,0} parameter(0)
  constant_zero = c64[] constant((0, 0))
  reduce = c64[127]{0} reduce(param_0, constant_zero), dimensions={1}, to_apply=add_complex
  broadcast = c64[127,125]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = c64[127,125]{1,0} subtract(param_0, broadcast)
}""",
])
def test_leaves_alone(entry: str):
    complex_add = """
add_complex {
  arg_0 = c64[] parameter(0)
  arg_1 = c64[] parameter(1)
  ROOT add = c64[] add(arg_0, arg_1)
}
"""
    module = _module(entry, MAX, complex_add)
    before = module.to_text()
    assert not NormalizationFusion().run(module)
    assert module.to_text() == before


def _row_module(columns: int) -> HloModule:
    return _module(f"""ENTRY main {{
  param_0 = f32[4,{columns}]{{1,0}} parameter(0)
  constant_neg_inf = f32[] constant(-inf)
  reduce = f32[4]{{0}} reduce(param_0, constant_neg_inf), dimensions={{1}}, to_apply=max_computation
  broadcast = f32[4,{columns}]{{1,0}} broadcast(reduce), dimensions={{0}}
  ROOT subtract = f32[4,{columns}]{{1,0}} subtract(param_0, broadcast)
}}""", MAX)


def test_rows_up_to_the_limit_are_fused():
    assert MAX_ROW_BYTES == 64 * 1024
    assert NormalizationFusion().run(_row_module(MAX_ROW_BYTES // 4))
    assert not NormalizationFusion().run(_row_module(MAX_ROW_BYTES // 4 + 1))


SOFTMAX_LAYERNORM = """ENTRY main {
  x = f32[16,256]{1,0} parameter(0)
  gamma = f32[256]{0} parameter(1)
  beta = f32[256]{0} parameter(2)
  lowest = f32[] constant(-inf)
  max = f32[16]{0} reduce(x, lowest), dimensions={1}, to_apply=max_computation
  max_row = f32[16,256]{1,0} broadcast(max), dimensions={0}
  shifted = f32[16,256]{1,0} subtract(x, max_row)
  exp = f32[16,256]{1,0} exponential(shifted)
  zero = f32[] constant(0)
  sum = f32[16]{0} reduce(exp, zero), dimensions={1}, to_apply=add_computation
  sum_row = f32[16,256]{1,0} broadcast(sum), dimensions={0}
  softmax = f32[16,256]{1,0} divide(exp, sum_row)
  tanh = f32[16,256]{1,0} tanh(softmax)
  total = f32[16]{0} reduce(tanh, zero), dimensions={1}, to_apply=add_computation
  n = f32[] constant(256)
  n_rows = f32[16]{0} broadcast(n), dimensions={}
  mean = f32[16]{0} divide(total, n_rows)
  mean_row = f32[16,256]{1,0} broadcast(mean), dimensions={0}
  centered = f32[16,256]{1,0} subtract(tanh, mean_row)
  gamma_row = f32[16,256]{1,0} broadcast(gamma), dimensions={1}
  scaled = f32[16,256]{1,0} multiply(centered, gamma_row)
  beta_row = f32[16,256]{1,0} broadcast(beta), dimensions={1}
  ROOT out = f32[16,256]{1,0} add(scaled, beta_row)
}"""


def test_a_chain_of_diamonds_is_one_fusion_with_the_row_vectors_read_as_inputs():
    module = _module(SOFTMAX_LAYERNORM, MAX, ADD)
    _fuses_everything(module)
    root = module.entry.root
    assert sorted(o.name for o in root.operands) == ["beta", "gamma", "x"]
    info = normalization_computation(root.fused_computation)
    # Fused copies are named after their originals (with a numeric suffix).
    assert [r.name.split(".")[0] for r in info.reduces] == ["max", "sum", "total"]
    assert sorted(v.name.split(".")[0] for v in info.broadcast_back) == ["max", "mean", "sum"]


def test_an_expensive_value_read_outside_cuts_the_chain():
    # exp is also an output of its own: it becomes an input of the second fusion, which holds the sum's diamond;
    # the max's diamond (rooted at exp) is fused apart.
    text = SOFTMAX_LAYERNORM.split("  tanh =")[0] + "  ROOT out = (f32[16,256], f32[16,256]) tuple(softmax, exp)\n}"
    module = _module(text, MAX, ADD)
    assert NormalizationFusion().run(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2
    first, second = fusions
    assert first.fused_computation.root.opcode == "exponential"
    assert [o.name for o in second.operands] == [first.name]
    assert all(fusion_kind_of(f) == "normalization" for f in fusions)


def test_a_widening_convert_read_elsewhere_is_copied_into_the_fusion():
    module = _module("""ENTRY main {
  x = bf16[8,512]{1,0} parameter(0)
  wide = f32[8,512]{1,0} convert(x)
  square = f32[8,512]{1,0} multiply(wide, wide)
  zero = f32[] constant(0)
  sum = f32[8]{0} reduce(square, zero), dimensions={1}, to_apply=add_computation
  scale = f32[8]{0} rsqrt(sum)
  scale_row = f32[8,512]{1,0} broadcast(scale), dimensions={0}
  normalized = f32[8,512]{1,0} multiply(wide, scale_row)
  other = f32[8,512]{1,0} negate(wide)
  ROOT out = (f32[8,512], f32[8,512]) tuple(normalized, other)
}""", ADD)
    assert NormalizationFusion().run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [o.name for o in fusion.operands] == ["x"]
    assert {i.name for i in module.entry.instructions} >= {"wide", "other"}


def test_the_cpu_pipeline_runs_it_before_instruction_fusion():
    names = [p.name for p in cpu_hlo_pipeline().passes[-1].passes]
    assert names.index("normalization-fusion") == names.index("fusion") - 1
