"""RngExpander: the call XLA's ``RngExpander`` (``xla/hlo/transforms/expanders/rng_expander.cc``) puts in place
of ``rng`` (a compile-time key, ``rng-get-and-update-state`` with the result's 32-bit word count as delta, one
computation per distribution and shapes), the Mersenne Twister its keys come from (against the value the C++
standard requires), and the statistics of the values the interpreter computes from the expansion. The values
against XLA:CPU's are in ``tests/runtime/test_rng.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.codegen.filecheck import filecheck
from xlapy.hlo import parse_module, verify
from xlapy.hlo.ir import HloModule
from xlapy.interpreter import evaluate
from xlapy.transforms.rng_expander import MersenneTwister64, RngExpander


def rng(shape: str, distribution: str, low: str, high: str) -> str:
    element_type = shape.split("[")[0]
    return f"""HloModule m
ENTRY main {{
  a = {element_type}[] constant({low})
  b = {element_type}[] constant({high})
  ROOT r = {shape} rng(a, b), distribution={distribution}
}}"""


def expand(text: str) -> tuple[bool, HloModule]:
    module = parse_module(text)
    changed = RngExpander(MersenneTwister64(8)).run(module)
    verify(module)
    return changed, module


def test_mersenne_twister_gives_the_value_the_cpp_standard_requires() -> None:
    # [rand.predef]: the 10000th value of a default-constructed mt19937_64 (seed 5489).
    generator = MersenneTwister64(5489)
    for _ in range(9999):
        generator.next()
    assert generator.next() == 9981545732273789042


def test_uniform_becomes_a_call_on_a_key_and_the_state(tmp_path: Path) -> None:
    changed, module = expand(rng("f32[2,3]", "rng_uniform", "0", "1"))
    assert changed
    filecheck(module.to_text(), """
CHECK: %[[GEN:rng_uniform_f32_2_3[a-z0-9_.]*]] (key: u64[], state: u64[2], a_or_mean: f32[], b_or_sigma: f32[])
CHECK-SAME: -> f32[2,3] {
CHECK-DAG: constant(3528531795)
CHECK-DAG: constant(3449720151)
CHECK-DAG: shift-right-logical
CHECK-DAG: constant(1.1920929e-07)
CHECK-DAG: subtract(%b_or_sigma, %a_or_mean)
CHECK: ENTRY %main
CHECK-DAG: %[[KEY:[a-z0-9.]+]] = u64[] constant({{[0-9]+}})
CHECK-DAG: %[[STATE:[a-z0-9.-]+]] = u64[2]{0} rng-get-and-update-state(), delta=6
CHECK: ROOT %{{[a-z0-9.]+}} = f32[2,3]{1,0} call(%[[KEY]], %[[STATE]], %a, %b), to_apply=%[[GEN]]
CHECK-NOT: rng(
""", tmp_path)
    generator = module.entry.root.called_computations[0]
    assert sum(i.opcode == "multiply" and i.shape.element_type == "u64" for i in generator.instructions) == 20


def test_keys_mix_the_module_and_the_process_generators() -> None:
    # Two rngs in one module: the module's generator (seed 42) and the process's (here a fresh one, seed 8)
    # each give their next value to each key, in the order the pass meets the instructions.
    module = parse_module("""HloModule m
ENTRY main {
  a = f32[] constant(0)
  b = f32[] constant(1)
  r = f32[4] rng(a, b), distribution=rng_uniform
  s = f32[4] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[4], f32[4]) tuple(r, s)
}""")
    assert RngExpander(MersenneTwister64(8)).run(module)
    module_values, process_values = MersenneTwister64(42), MersenneTwister64(8)
    expected = [module_values.next() ^ process_values.next() for _ in range(2)]
    calls = [i for i in module.entry.instructions if i.opcode == "call"]
    assert [int(call.operands[0].literal) for call in calls] == expected
    # Same distribution and shapes: one computation for both.
    assert calls[0].called_computations[0] is calls[1].called_computations[0]


@pytest.mark.parametrize(("shape", "distribution", "delta", "drawn_as"), [
    ("f32[3,5]", "rng_uniform", 15, "f32"), ("f64[4]", "rng_uniform", 8, "f64"), ("s32[7]", "rng_uniform", 7, "s32"),
    ("u64[2,2]", "rng_uniform", 8, "u64"), ("f32[]", "rng_normal", 1, "f32"), ("f64[3]", "rng_normal", 6, "f64"),
    ("f16[6]", "rng_uniform", 6, "f32"), ("bf16[5]", "rng_normal", 5, "f32"),
])
def test_delta_is_the_32_bit_words_of_the_values(shape: str, distribution: str, delta: int, drawn_as: str) -> None:
    changed, module = expand(rng(shape, distribution, "0", "1"))
    assert changed
    state = next(i for i in module.entry.instructions if i.opcode == "rng-get-and-update-state")
    assert int(state.attr("delta")) == delta
    call = next(i for i in module.entry.instructions if i.opcode == "call")
    assert call.shape.element_type == drawn_as
    if drawn_as != shape.split("[")[0]:  # f16 and bf16 are drawn in f32 and converted
        assert module.entry.root.opcode == "convert" and module.entry.root.operands[0] is call


@pytest.mark.parametrize("shape", ["s16[4]", "u8[3]", "s8[2]", "pred[3]"])
def test_types_xla_does_not_expand_are_left_alone(shape: str) -> None:
    low, high = ("false", "true") if shape.startswith("pred") else ("0", "3")
    changed, module = expand(rng(shape, "rng_uniform", low, high))
    assert not changed
    assert module.entry.root.opcode == "rng"


def test_callees_come_before_callers() -> None:
    changed, module = expand("""HloModule m
callee {
  p = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT r = f32[3] rng(p, one), distribution=rng_normal
}
ENTRY main {
  x = f32[] parameter(0)
  ROOT c = f32[3] call(x), to_apply=callee
}""")
    assert changed
    names = [c.name for c in module.computations]
    generator = module.computation("callee").root.called_computations[0]
    assert names.index(generator.name) < names.index("callee") < names.index(module.entry.name)


def values(text: str) -> np.ndarray:
    _, module = expand(text)
    return np.asarray(evaluate(module))


def test_uniform_floats_fill_their_interval() -> None:
    n = 20000
    x = values(rng(f"f32[{n}]", "rng_uniform", "-2", "3")).astype(np.float64)
    assert x.min() >= -2 and x.max() < 3
    # Mean and variance of U(-2, 3): 0.5 and 25/12; these bounds are several standard errors wide.
    assert abs(x.mean() - 0.5) < 0.05
    assert abs(x.var() - 25 / 12) < 0.06
    counts, _ = np.histogram(x, bins=10, range=(-2, 3))
    assert np.all(np.abs(counts - n / 10) < 5 * np.sqrt(n / 10))


def test_uniform_doubles_use_52_bits() -> None:
    x = values(rng("f64[4096]", "rng_uniform", "0", "1"))
    assert x.min() >= 0 and x.max() < 1
    # Multiples of 2^-52 with low bits set, which 23 bits could not give.
    scaled = x * 2.0**52
    assert np.array_equal(scaled, np.floor(scaled))
    assert np.any(scaled % 2**29 != 0)


@pytest.mark.parametrize("shape", ["s32[12000]", "s64[12000]"])
def test_uniform_integers_cover_their_range(shape: str) -> None:
    n = 12000
    x = values(rng(shape, "rng_uniform", "-5", "7"))
    assert x.min() == -5 and x.max() == 6
    counts = np.bincount(x + 5, minlength=12)
    assert np.all(np.abs(counts - n / 12) < 5 * np.sqrt(n / 12))


def test_uniform_unsigned_integers_keep_the_modulo_bias() -> None:
    # bits mod (b - a) over 32-bit words: offsets below 2^32 - (b - a) come twice as often, as in XLA.
    low, span, n = 10, 4000000000 - 10, 4000
    x = values(rng(f"u32[{n}]", "rng_uniform", str(low), str(low + span))).astype(np.float64)
    assert x.min() >= low and x.max() < low + span
    wrapped = 2**32 - span
    mean = low + (span * (span - 1) / 2 + wrapped * (wrapped - 1) / 2) / 2**32
    assert abs(x.mean() - mean) < 5 * x.std() / np.sqrt(n)


@pytest.mark.parametrize("shape", ["f32[100,101]", "f64[9999]"])
def test_normal_has_its_mean_and_deviation(shape: str) -> None:
    x = values(rng(shape, "rng_normal", "1.5", "2")).astype(np.float64)
    n = x.size
    assert abs(x.mean() - 1.5) < 5 * 2 / np.sqrt(n)
    assert abs(x.std() - 2) < 0.05
    # About 68% and 95% within one and two deviations.
    assert abs(np.mean(np.abs(x - 1.5) < 2) - 0.6827) < 0.02
    assert abs(np.mean(np.abs(x - 1.5) < 4) - 0.9545) < 0.01


def test_normal_halves_are_sine_and_cosine_of_one_pair() -> None:
    # f32[2,3] splits on its first (even) dimension: row 0 holds the sines, row 1 the cosines of the same
    # radii, so each column's squares sum to the squared radius, and the two rows are distinct.
    x = values(rng("f32[2,3]", "rng_normal", "0", "1")).astype(np.float64)
    radii = np.sqrt(x[0] ** 2 + x[1] ** 2)
    assert np.all(radii > 0) and not np.array_equal(x[0], x[1])
