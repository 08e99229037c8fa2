"""BatchNormExpander: the expansions XLA's ``BatchNormExpander``
(``xla/service/batchnorm_expander.cc``) makes of ``batch-norm-training``,
``batch-norm-inference`` and ``batch-norm-grad``, and their values against the
ops' definitions (XLA's operation semantics; the interpreter does not run the
batch-norm ops) computed in float64, and against XLA:CPU running the ops."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.codegen.filecheck import filecheck
from tools.xla_cpu import run_on_xla_cpu
from xlapy.hlo import parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.batchnorm_expander import BatchNormExpander

# Errors are measured against the largest magnitude of each result, in
# epsilons of the type: the one-pass variance, x - mean and inference's
# x * t + (offset - mean * t) cancel, so results near zero have no small error
# in their own ulps. Measured over the shapes and seeds of the value test,
# (f32, bf16), from the float64 definition: training 1.42, 1.57; inference
# 5.33, 9.67; grad 2.34, 2.64. From XLA:CPU running the op (it runs this same
# expansion, fused, reducing in its own order and bf16 in f32): training 1.67,
# 1.61; inference 7.16, 9.67; grad 1.62, 2.87.
DEFINITION_EPS = {"training": 2, "inference": 10, "grad": 3}
XLA_CPU_EPS = {"training": 2, "inference": 10, "grad": 3}

EPSILON = 0.001


def expand(text: str, **options: bool) -> tuple[bool, str]:
    module = parse_module(text)
    changed = BatchNormExpander(**options).run(module)
    verify(module)
    return changed, module.to_text()


def training_text(type_name: str, shape: tuple[int, ...], feature_index: int, annotations: str = "") -> str:
    array, feature = f"{type_name}[{','.join(map(str, shape))}]", f"{type_name}[{shape[feature_index]}]"
    return (f"HloModule m\nENTRY main {{\n  x = {array} parameter(0)\n  s = {feature} parameter(1)\n"
            f"  o = {feature} parameter(2)\n  ROOT b = ({array}, {feature}, {feature}) batch-norm-training(x, s, o), "
            f"epsilon={EPSILON}, feature_index={feature_index}{annotations}\n}}")


def inference_text(type_name: str, shape: tuple[int, ...], feature_index: int, annotations: str = "") -> str:
    array, feature = f"{type_name}[{','.join(map(str, shape))}]", f"{type_name}[{shape[feature_index]}]"
    return (f"HloModule m\nENTRY main {{\n  x = {array} parameter(0)\n  s = {feature} parameter(1)\n"
            f"  o = {feature} parameter(2)\n  m = {feature} parameter(3)\n  v = {feature} parameter(4)\n"
            f"  ROOT b = {array} batch-norm-inference(x, s, o, m, v), epsilon={EPSILON}, "
            f"feature_index={feature_index}{annotations}\n}}")


def grad_text(type_name: str, shape: tuple[int, ...], feature_index: int, annotations: str = "") -> str:
    array, feature = f"{type_name}[{','.join(map(str, shape))}]", f"{type_name}[{shape[feature_index]}]"
    return (f"HloModule m\nENTRY main {{\n  x = {array} parameter(0)\n  s = {feature} parameter(1)\n"
            f"  m = {feature} parameter(2)\n  v = {feature} parameter(3)\n  g = {array} parameter(4)\n"
            f"  ROOT b = ({array}, {feature}, {feature}) batch-norm-grad(x, s, m, v, g), epsilon={EPSILON}, "
            f"feature_index={feature_index}{annotations}\n}}")


def test_training_is_one_pass_mean_and_variance(tmp_path: Path) -> None:
    changed, out = expand(training_text("f32", (2, 3, 4), 1))
    assert changed
    filecheck(out, """
CHECK: %[[ADD:scalar_add_computation]] (scalar_lhs: f32[], scalar_rhs: f32[]) -> f32[] {
CHECK: ROOT %{{[a-z.0-9]+}} = f32[] add(%scalar_lhs, %scalar_rhs)
CHECK: %[[SQADD:scalar_add_computation.1]] (
CHECK: ENTRY
CHECK-DAG: %[[ZERO:constant[.0-9]*]] = f32[] constant(0)
CHECK-DAG: %[[SUM:reduce[.0-9]*]] = f32[3]{0} reduce(%x, %[[ZERO]]), dimensions={0,2}, to_apply=%[[ADD]]
CHECK-DAG: %[[D0:get-dimension-size[.0-9]*]] = s32[] get-dimension-size(%x), dimensions={0}
CHECK-DAG: %[[D2:get-dimension-size[.0-9]*]] = s32[] get-dimension-size(%x), dimensions={2}
CHECK-DAG: %[[ONE:constant[.0-9]*]] = s32[] constant(1)
CHECK-DAG: %[[P0:multiply[.0-9]*]] = s32[] multiply(%[[D0]], %[[ONE]])
CHECK-DAG: %[[P2:multiply[.0-9]*]] = s32[] multiply(%[[D2]], %[[P0]])
CHECK-DAG: %[[N:convert[.0-9]*]] = f32[] convert(%[[P2]])
CHECK-DAG: %[[NB:broadcast[.0-9]*]] = f32[3]{0} broadcast(%[[N]]), dimensions={}
CHECK-DAG: %[[MEAN:divide[.0-9]*]] = f32[3]{0} divide(%[[SUM]], %[[NB]])
CHECK-DAG: %[[SQ:multiply[.0-9]*]] = f32[2,3,4]{2,1,0} multiply(%x, %x)
CHECK-DAG: %[[SQSUM:reduce[.0-9]*]] = f32[3]{0} reduce(%[[SQ]], %[[ZERO]]), dimensions={0,2}, to_apply=%[[SQADD]]
CHECK-DAG: %[[NB2:broadcast[.0-9]*]] = f32[3]{0} broadcast(%[[N]]), dimensions={}
CHECK-DAG: %[[SQMEAN:divide[.0-9]*]] = f32[3]{0} divide(%[[SQSUM]], %[[NB2]])
CHECK-DAG: %[[MEANSQ:multiply[.0-9]*]] = f32[3]{0} multiply(%[[MEAN]], %[[MEAN]])
CHECK-DAG: %[[VAR:subtract[.0-9]*]] = f32[3]{0} subtract(%[[SQMEAN]], %[[MEANSQ]])
CHECK-DAG: %[[VARB:broadcast[.0-9]*]] = f32[2,3,4]{2,1,0} broadcast(%[[VAR]]), dimensions={1}
CHECK-DAG: %[[EPS:constant[.0-9]*]] = f32[] constant(0.001)
CHECK-DAG: %[[EPSB:broadcast[.0-9]*]] = f32[2,3,4]{2,1,0} broadcast(%[[EPS]]), dimensions={}
CHECK-DAG: %[[VE:add[.0-9]*]] = f32[2,3,4]{2,1,0} add(%[[VARB]], %[[EPSB]])
CHECK-DAG: %[[RS:rsqrt[.0-9]*]] = f32[2,3,4]{2,1,0} rsqrt(%[[VE]])
CHECK-DAG: %[[MEANB:broadcast[.0-9]*]] = f32[2,3,4]{2,1,0} broadcast(%[[MEAN]]), dimensions={1}
CHECK-DAG: %[[CEN:subtract[.0-9]*]] = f32[2,3,4]{2,1,0} subtract(%x, %[[MEANB]])
CHECK-DAG: %[[NORM:multiply[.0-9]*]] = f32[2,3,4]{2,1,0} multiply(%[[CEN]], %[[RS]])
CHECK-DAG: %[[SB:broadcast[.0-9]*]] = f32[2,3,4]{2,1,0} broadcast(%s), dimensions={1}
CHECK-DAG: %[[SCALED:multiply[.0-9]*]] = f32[2,3,4]{2,1,0} multiply(%[[NORM]], %[[SB]])
CHECK-DAG: %[[OB:broadcast[.0-9]*]] = f32[2,3,4]{2,1,0} broadcast(%o), dimensions={1}
CHECK-DAG: %[[Y:add[.0-9]*]] = f32[2,3,4]{2,1,0} add(%[[SCALED]], %[[OB]])
CHECK: ROOT %{{[a-z.0-9]+}} = (f32[2,3,4]{2,1,0}, f32[3]{0}, f32[3]{0}) tuple(%[[Y]], %[[MEAN]], %[[VAR]])
CHECK-NOT: batch-norm
""", tmp_path)


def test_inference_folds_scale_and_shift_per_feature(tmp_path: Path) -> None:
    # epsilon is converted to the operand type: 0.001 is 0.0009995 in bf16.
    changed, out = expand(inference_text("bf16", (5, 2), 1))
    assert changed
    filecheck(out, """
CHECK-NOT: reduce
CHECK-DAG: %[[EPS:constant[.0-9]*]] = bf16[] constant(0.0009995)
CHECK-DAG: %[[EPSB:broadcast[.0-9]*]] = bf16[2]{0} broadcast(%[[EPS]]), dimensions={}
CHECK-DAG: %[[VE:add[.0-9]*]] = bf16[2]{0} add(%v, %[[EPSB]])
CHECK-DAG: %[[RS:rsqrt[.0-9]*]] = bf16[2]{0} rsqrt(%[[VE]])
CHECK-DAG: %[[T:multiply[.0-9]*]] = bf16[2]{0} multiply(%s, %[[RS]])
CHECK-DAG: %[[MT:multiply[.0-9]*]] = bf16[2]{0} multiply(%m, %[[T]])
CHECK-DAG: %[[SHIFT:subtract[.0-9]*]] = bf16[2]{0} subtract(%o, %[[MT]])
CHECK-DAG: %[[TB:broadcast[.0-9]*]] = bf16[5,2]{1,0} broadcast(%[[T]]), dimensions={1}
CHECK-DAG: %[[XT:multiply[.0-9]*]] = bf16[5,2]{1,0} multiply(%x, %[[TB]])
CHECK-DAG: %[[SB:broadcast[.0-9]*]] = bf16[5,2]{1,0} broadcast(%[[SHIFT]]), dimensions={1}
CHECK: ROOT %{{[a-z.0-9]+}} = bf16[5,2]{1,0} add(%[[XT]], %[[SB]])
CHECK-NOT: batch-norm
""", tmp_path)


def test_grad_follows_xla_formulas(tmp_path: Path) -> None:
    changed, out = expand(grad_text("f32", (4, 3), 0))
    assert changed
    filecheck(out, """
CHECK-DAG: %[[ZERO:constant[.0-9]*]] = f32[] constant(0)
CHECK-DAG: %[[D1:get-dimension-size[.0-9]*]] = s32[] get-dimension-size(%x), dimensions={1}
CHECK-DAG: %[[N:convert[.0-9]*]] = f32[] convert(%{{multiply[.0-9]*}})
CHECK-DAG: %[[EPS:constant[.0-9]*]] = f32[] constant(0.001)
CHECK-DAG: %[[EPSA:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%[[EPS]]), dimensions={}
CHECK-DAG: %[[EPSF:broadcast[.0-9]*]] = f32[4]{0} broadcast(%[[EPS]]), dimensions={}
CHECK-DAG: %[[SB:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%s), dimensions={0}
CHECK-DAG: %[[VB:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%v), dimensions={0}
CHECK-DAG: %[[MB:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%m), dimensions={0}
CHECK-DAG: %[[VEA:add[.0-9]*]] = f32[4,3]{1,0} add(%[[VB]], %[[EPSA]])
CHECK-DAG: %[[RSA:rsqrt[.0-9]*]] = f32[4,3]{1,0} rsqrt(%[[VEA]])
CHECK-DAG: %[[VEF:add[.0-9]*]] = f32[4]{0} add(%v, %[[EPSF]])
CHECK-DAG: %[[RSF:rsqrt[.0-9]*]] = f32[4]{0} rsqrt(%[[VEF]])
CHECK-DAG: %[[CEN:subtract[.0-9]*]] = f32[4,3]{1,0} subtract(%x, %[[MB]])
CHECK-DAG: %[[GC:multiply[.0-9]*]] = f32[4,3]{1,0} multiply(%g, %[[CEN]])
CHECK-DAG: %[[SGC:reduce[.0-9]*]] = f32[4]{0} reduce(%[[GC]], %[[ZERO]]), dimensions={1}
CHECK-DAG: %[[GB:reduce[.0-9]*]] = f32[4]{0} reduce(%g, %[[ZERO]]), dimensions={1}
CHECK-DAG: %[[GS:multiply[.0-9]*]] = f32[4]{0} multiply(%[[SGC]], %[[RSF]])
CHECK-DAG: %[[I2:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%[[GB]]), dimensions={0}
CHECK-DAG: %[[I3:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%[[SGC]]), dimensions={0}
CHECK-DAG: %[[I4:multiply[.0-9]*]] = f32[4,3]{1,0} multiply(%[[I3]], %[[CEN]])
CHECK-DAG: %[[VEA2:add[.0-9]*]] = f32[4,3]{1,0} add(%[[VB]], %[[EPSA]])
CHECK-DAG: %[[I5:divide[.0-9]*]] = f32[4,3]{1,0} divide(%[[I4]], %[[VEA2]])
CHECK-DAG: %[[SR:multiply[.0-9]*]] = f32[4,3]{1,0} multiply(%[[SB]], %[[RSA]])
CHECK-DAG: %[[NB:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%[[N]]), dimensions={}
CHECK-DAG: %[[SRN:divide[.0-9]*]] = f32[4,3]{1,0} divide(%[[SR]], %[[NB]])
CHECK-DAG: %[[NB2:broadcast[.0-9]*]] = f32[4,3]{1,0} broadcast(%[[N]]), dimensions={}
CHECK-DAG: %[[I1:multiply[.0-9]*]] = f32[4,3]{1,0} multiply(%g, %[[NB2]])
CHECK-DAG: %[[I12:subtract[.0-9]*]] = f32[4,3]{1,0} subtract(%[[I1]], %[[I2]])
CHECK-DAG: %[[I6:subtract[.0-9]*]] = f32[4,3]{1,0} subtract(%[[I12]], %[[I5]])
CHECK-DAG: %[[GX:multiply[.0-9]*]] = f32[4,3]{1,0} multiply(%[[SRN]], %[[I6]])
CHECK: ROOT %{{[a-z.0-9]+}} = (f32[4,3]{1,0}, f32[4]{0}, f32[4]{0}) tuple(%[[GX]], %[[GS]], %[[GB]])
CHECK-NOT: batch-norm
""", tmp_path)
    assert "get-dimension-size(%x), dimensions={0}" not in out


def test_options_select_the_ops_rewritten() -> None:
    text = """HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  t = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  y = f32[2,3] get-tuple-element(t), index=0
  m = f32[3] get-tuple-element(t), index=1
  v = f32[3] get-tuple-element(t), index=2
  i = f32[2,3] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
  ROOT g = (f32[2,3], f32[3], f32[3]) batch-norm-grad(x, s, m, v, y), epsilon=0.001, feature_index=1
}"""
    changed, out = expand(text, rewrite_training_op=False, rewrite_grad_op=False)
    assert changed
    assert "batch-norm-training(" in out and "batch-norm-grad(" in out and "batch-norm-inference(" not in out
    changed, out = expand(text, rewrite_training_op=False, rewrite_inference_op=False, rewrite_grad_op=False)
    assert not changed and out == parse_module(text).to_text()
    changed, out = expand(text)
    assert changed and "batch-norm" not in out


def test_called_computation_is_expanded_fused_one_is_not() -> None:
    changed, out = expand("""HloModule m
fused {
  fx = f32[2,3] parameter(0)
  fs = f32[3] parameter(1)
  ROOT fi = f32[2,3] batch-norm-inference(fx, fs, fs, fs, fs), epsilon=0.5, feature_index=1
}
callee {
  cx = f32[2,3] parameter(0)
  cs = f32[3] parameter(1)
  ROOT ci = f32[2,3] batch-norm-inference(cx, cs, cs, cs, cs), epsilon=0.5, feature_index=1
}
ENTRY main {
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  c = f32[2,3] call(x, s), to_apply=callee
  ROOT f = f32[2,3] fusion(c, s), kind=kLoop, calls=fused
}""")
    assert changed
    assert out.count("batch-norm-inference(") == 1 and "batch-norm-inference(%fx" in out


def test_op_with_control_dependency_stays() -> None:
    changed, out = expand("""HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  n = f32[2,3] negate(x)
  ROOT i = f32[2,3] batch-norm-inference(x, s, s, s, s), epsilon=0.5, feature_index=1, control-predecessors={n}
}""")
    assert not changed and "batch-norm-inference(" in out and "rsqrt" not in out


def _by_name(text: str) -> dict[str, str]:
    module = parse_module(text)
    return {i.name: str(i.attributes.get("sharding")) for i in module.entry.instructions}


def test_training_shardings_and_metadata_follow_xla() -> None:
    annotations = (", sharding={{devices=[2,1,1]0,1}, {replicated}, {replicated}}, "
                   'metadata={op_type="bn" op_name="norm"}')
    module = parse_module(training_text("f32", (2, 3, 4), 1, annotations))
    assert BatchNormExpander().run(module)
    verify(module)
    array_shape = module.entry.parameter(0).shape
    added = [i for i in module.entry.instructions if i.opcode != "parameter"]
    root = module.entry.root
    assert root.opcode == "tuple"
    assert str(root.attributes["sharding"]) == "{{devices=[2,1,1]0,1}, {replicated}, {replicated}}"
    for instruction in added:
        assert 'op_name="norm"' in str(instruction.attributes["metadata"]), instruction.name
        if instruction is root:
            continue
        expected = "{devices=[2,1,1]0,1}" if instruction.shape == array_shape else "{replicated}"
        assert instruction.attributes["sharding"] == expected, instruction.name
    assert any(i.shape == array_shape for i in added) and any(i.shape.rank == 0 for i in added)


def test_inference_on_one_device_puts_everything_there_but_epsilon() -> None:
    module = parse_module(inference_text("f32", (2, 3), 1, ", sharding={maximal device=1}"))
    assert BatchNormExpander().run(module)
    verify(module)
    for instruction in module.entry.instructions:
        if instruction.opcode == "parameter":
            continue
        # XLA adds the epsilon constant and its broadcast outside the annotated instructions.
        is_epsilon = instruction.opcode == "constant" or (
            instruction.opcode == "broadcast" and instruction.operands[0].opcode == "constant")
        sharding = instruction.attributes.get("sharding")
        assert sharding == (None if is_epsilon else "{maximal device=1}"), instruction.name


# -- values -------------------------------------------------------------------

def _definition(opcode: str, arguments: list[np.ndarray], feature_index: int) -> tuple[np.ndarray, ...]:
    """The op's results by its definition (XLA's operation semantics), in float64."""
    values = [np.asarray(a, np.float64) for a in arguments]
    x = values[0]
    others = tuple(d for d in range(x.ndim) if d != feature_index)

    def per_feature(v: np.ndarray) -> np.ndarray:
        return np.expand_dims(v, others)

    epsilon = float(np.float32(EPSILON))
    if opcode == "training":
        _, scale, offset = values
        mean, variance = x.mean(others), x.var(others)
        y = (x - per_feature(mean)) / np.sqrt(per_feature(variance) + epsilon) * per_feature(scale)
        return y + per_feature(offset), mean, variance
    if opcode == "inference":
        _, scale, offset, mean, variance = values
        y = (x - per_feature(mean)) / np.sqrt(per_feature(variance) + epsilon) * per_feature(scale)
        return (y + per_feature(offset),)
    _, scale, mean, variance, grad_output = values
    count = x.size // x.shape[feature_index]
    centered = x - per_feature(mean)
    sum_grad_centered = (grad_output * centered).sum(others)
    grad_offset = grad_output.sum(others)
    grad_scale = sum_grad_centered / np.sqrt(variance + epsilon)
    grad_x = per_feature(scale / np.sqrt(variance + epsilon)) / count * (
        count * grad_output - per_feature(grad_offset)
        - centered * per_feature(sum_grad_centered) / per_feature(variance + epsilon))
    return grad_x, grad_scale, grad_offset


_TEXTS = {"training": training_text, "inference": inference_text, "grad": grad_text}
_DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def _arguments(opcode: str, dtype: type, shape: tuple[int, ...], feature_index: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    features = (shape[feature_index],)
    x = rng.standard_normal(shape).astype(dtype)
    if opcode == "training":
        return [x, rng.standard_normal(features).astype(dtype), rng.standard_normal(features).astype(dtype)]
    others = tuple(d for d in range(len(shape)) if d != feature_index)
    # Mean and variance as training would give them.
    mean, variance = (x.astype(np.float64).mean(others).astype(dtype), x.astype(np.float64).var(others).astype(dtype))
    scale = rng.standard_normal(features).astype(dtype)
    if opcode == "inference":
        return [x, scale, rng.standard_normal(features).astype(dtype), mean, variance]
    return [x, scale, mean, variance, rng.standard_normal(shape).astype(dtype)]


def _eps_of_largest(got: np.ndarray, expected: np.ndarray, dtype: type) -> float:
    """The largest error in epsilons of the type, scaled by the largest magnitude of ``expected``."""
    expected = np.asarray(expected, np.float64)
    largest = np.abs(expected).max()
    error = np.abs(np.asarray(got, np.float64) - expected).max()
    return 0.0 if error == 0 else float(error / largest / float(ml_dtypes.finfo(dtype).eps))


_CASES = [((4, 5, 6), 1), ((8, 3), 1), ((2, 3, 4, 5), 3), ((3, 4), 0), ((7,), 0)]


@pytest.mark.parametrize("type_name", ["f32", "bf16"])
@pytest.mark.parametrize("opcode", ["training", "inference", "grad"])
def test_expansion_matches_definition_and_xla_cpu(opcode: str, type_name: str) -> None:
    dtype = _DTYPES[type_name]
    for case, (shape, feature_index) in enumerate(_CASES):
        text = _TEXTS[opcode](type_name, shape, feature_index)
        expanded = parse_module(text)
        assert BatchNormExpander().run(expanded)
        for seed in (case, case + 100):
            arguments = _arguments(opcode, dtype, shape, feature_index, seed)
            got = evaluate(expanded, *arguments)
            got = got if isinstance(got, tuple) else (got,)
            on_xla_cpu = run_on_xla_cpu(text, *arguments)
            on_xla_cpu = on_xla_cpu if isinstance(on_xla_cpu, tuple) else (on_xla_cpu,)
            definition = _definition(opcode, arguments, feature_index)
            assert len(got) == len(definition) == len(on_xla_cpu)
            for index, (value, exact, xla_value) in enumerate(zip(got, definition, on_xla_cpu)):
                assert value.dtype == dtype and value.shape == exact.shape
                where = f"{opcode} {shape} feature {feature_index} seed {seed} result {index}"
                assert _eps_of_largest(value, exact, dtype) <= DEFINITION_EPS[opcode], where
                assert _eps_of_largest(value, xla_value, dtype) <= XLA_CPU_EPS[opcode], where
