"""RngBitGeneratorExpander: the call XLA's ``RngBitGeneratorExpander``
(``xla/hlo/transforms/expanders/rng_bit_generator_expander.cc``) puts in place
of a Philox or ThreeFry ``rng-bit-generator``, and its bits against the
interpreter's ``rng-bit-generator`` (bit-exact with XLA's
``PhiloxBitGenerator`` and ``ThreeFryBitGenerator``) and against XLA:CPU,
which runs the same expansion; integer ops only, so the bits must be
identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.oracles import require_jax
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.transforms.rng_bit_generator_expander import RngBitGeneratorExpander


def generator(state: str, bits: str, algorithm: str = "rng_default") -> str:
    return f"""HloModule m
ENTRY main {{
  s = {state} parameter(0)
  ROOT r = ({state}, {bits}) rng-bit-generator(s), algorithm={algorithm}
}}"""


def expand(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = RngBitGeneratorExpander().run(module)
    verify(module)
    return changed, module.to_text()


def test_philox_becomes_a_call_of_a_generator_computation(tmp_path: Path) -> None:
    changed, out = expand(generator("u64[2]", "u32[2,3]", "rng_philox"))
    assert changed
    filecheck(out, """
CHECK: %[[GEN:rng_philox[a-z0-9_]*]] (state: u64[2]) -> (u64[2], u32[2,3]) {
CHECK: %state = u64[2]{0} parameter(0)
CHECK-DAG: iota(), iota_dimension=0
CHECK-DAG: constant(3528531795)
CHECK-DAG: constant(3449720151)
CHECK-DAG: constant(2654435769)
CHECK-DAG: constant(3144134277)
CHECK-NOT: rng-bit-generator
CHECK: ROOT %{{[a-z.0-9]+}} = (u64[2]{0}, u32[2,3]{1,0}) tuple(
CHECK: ENTRY %main
CHECK: ROOT %{{[a-z.0-9]+}} = (u64[2]{0}, u32[2,3]{1,0}) call(%s), to_apply=%[[GEN]]
""", tmp_path)


def test_philox_does_ten_rounds_of_two_multiplications() -> None:
    module = parse_module(generator("u64[3]", "u32[8]"))
    RngBitGeneratorExpander().run(module)
    generator_computation = module.entry.root.called_computations[0]
    multiplies = [i for i in generator_computation.instructions if i.opcode == "multiply"]
    assert len(multiplies) == 20


def test_three_fry_becomes_a_call_of_twenty_rounds(tmp_path: Path) -> None:
    # Split on the first even dimension (4) into two halves of u32[3,2,1] blocks, put back side by side.
    changed, out = expand(generator("u64[2]", "u32[3,4]", "rng_three_fry"))
    assert changed
    filecheck(out, """
CHECK: %[[GEN:rng_threefry[a-z0-9_]*]] (state: u64[2]) -> (u64[2], u32[3,4]) {
CHECK-DAG: constant(466688986)
CHECK-DAG: u64[3,2,1]{2,1,0} iota(), iota_dimension=0
CHECK-DAG: u64[3,2,1]{2,1,0} iota(), iota_dimension=1
CHECK-DAG: u32[3,2,2]{2,1,0} concatenate({{.*}}), dimensions={2}
CHECK-NOT: rng-bit-generator
CHECK: ENTRY %main
CHECK: ROOT %{{[a-z.0-9]+}} = (u64[2]{0}, u32[3,4]{1,0}) call(%s), to_apply=%[[GEN]]
""", tmp_path)
    module = parse_module(out)
    rounds = module.entry.root.called_computations[0]
    # Two word additions per round, and the key schedule's three additions after each of five blocks.
    additions = [i for i in rounds.instructions if i.opcode == "add" and i.shape.element_type == "u32"]
    assert len(additions) == 20 + 2 + 5 * 3


def test_three_fry_on_a_philox_sized_state_is_left_alone() -> None:
    # The verifier refuses a u64[3] ThreeFry state; a module built without it keeps the instruction.
    module = parse_module(generator("u64[2]", "u32[4]", "rng_three_fry"))
    parameter = module.entry.parameters[0]
    parameter.shape = parse_module(generator("u64[3]", "u32[4]")).entry.parameters[0].shape
    assert not RngBitGeneratorExpander().run(module)


@pytest.mark.parametrize("bits", ["u32[0]", "u32[2,0]", "u4[4]", "s4[3]"])
def test_empty_and_sub_byte_bits_are_left_alone(bits: str) -> None:
    changed, _ = expand(generator("u64[2]", bits))
    assert not changed


def test_states_of_other_shapes_are_left_alone() -> None:
    changed, _ = expand(generator("u32[4]", "u32[4]"))
    assert not changed


def test_one_computation_per_shape_and_callees_before_callers() -> None:
    changed, out = expand("""HloModule m
callee {
  cs = u64[2] parameter(0)
  ROOT cr = (u64[2], s64[3]) rng-bit-generator(cs), algorithm=rng_philox
}
ENTRY main {
  s = u64[2] parameter(0)
  a = (u64[2], s64[3]) rng-bit-generator(s), algorithm=rng_default
  b = (u64[2], s64[3]) call(s), to_apply=callee
  c = (u64[2], u8[5]) rng-bit-generator(s), algorithm=rng_philox
  ROOT t = ((u64[2], s64[3]), (u64[2], s64[3]), (u64[2], u8[5])) tuple(a, b, c)
}""")
    assert changed
    module = parse_module(out)
    generators = [c.name for c in module.computations if c.name.startswith("rng_philox")]
    assert len(generators) == 2  # default and Philox share one for s64[3]
    names = [c.name for c in module.computations]
    callee_index = names.index("callee")
    for instruction in module.instructions:
        if instruction.opcode == "call" and instruction.called_computations[0].name in generators:
            caller_index = names.index(instruction.parent.name)
            assert names.index(instruction.called_computations[0].name) < caller_index
    assert names.index(module.computation("callee").root.called_computations[0].name) < callee_index


# (state shape, bits shape): every width, signed and unsigned, both state
# sizes, bit counts not a multiple of the block, a declared non-default layout.
CASES = [
    ("u64[2]", "u32[3,4]"), ("u64[3]", "u32[9]"), ("u64[2]", "s32[1]"), ("u64[3]", "u64[]"),
    ("u64[2]", "s64[5]"), ("u64[3]", "u64[2,2]"), ("u64[2]", "u8[7,1]"), ("u64[3]", "s8[13]"),
    ("u64[2]", "s16[2,3,3]"), ("u64[3]", "u16[6]"), ("u64[2]", "u32[2,3]{0,1}"), ("u64[2]{0}", "s64[3,1]{0,1}"),
]
# States that carry the counter's low word into its high word, or wrap it.
STATES = [
    [0x123456789ABCDEF0, 2**64 - 3, 2**64 - 1],
    [0, 0, 0],
    [2**64 - 1, 2**64 - 1, 7],
]


# ThreeFry: u64[2] states only; shapes split on their first even dimension, on their largest (odd) one, with
# dimensions of size 1 around, scalars.
THREE_FRY_CASES = [
    ("u64[2]", "u32[]"), ("u64[2]", "u32[1]"), ("u64[2]", "u32[5]"), ("u64[2]", "u32[3,4]"),
    ("u64[2]", "s32[3,1,5]"), ("u64[2]", "u32[5,7]"), ("u64[2]", "u32[7,5,1]"), ("u64[2]", "u64[]"),
    ("u64[2]", "s64[3,2]"), ("u64[2]", "u8[7]"), ("u64[2]", "s16[3,3]"), ("u64[2]", "u16[2,3]{0,1}"),
]
ALGORITHM_CASES = ([(a, s, b) for a in ("rng_default", "rng_philox") for s, b in CASES]
                   + [("rng_three_fry", s, b) for s, b in THREE_FRY_CASES])


@pytest.mark.parametrize(("algorithm", "state", "bits"), ALGORITHM_CASES, ids=lambda v: v)
def test_bits_and_next_state_match_the_interpreter(algorithm: str, state: str, bits: str) -> None:
    text = generator(state, bits, algorithm)
    original = parse_module(text)
    expanded = parse_module(text)
    assert RngBitGeneratorExpander().run(expanded)
    verify(expanded)
    size = original.entry.parameters[0].shape.dimensions[0]
    random_states = np.random.default_rng(0).integers(0, 2**64, (3, size), dtype=np.uint64, endpoint=False)
    for values in [*(s[:size] for s in STATES), *random_states]:
        argument = np.array(values, np.uint64)
        want = evaluate(original, argument)
        got = evaluate(expanded, argument)
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype and w.shape == g.shape
            np.testing.assert_array_equal(g, w)


def test_expansion_in_a_while_body_keeps_values() -> None:
    assert_pass_preserves_values(RngBitGeneratorExpander(), """HloModule m
cond {
  cp = (s32[], u64[3], u32[5]) parameter(0)
  i = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  bp = (s32[], u64[3], u32[5]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  st = u64[3] get-tuple-element(bp), index=1
  acc = u32[5] get-tuple-element(bp), index=2
  r = (u64[3], u32[5]) rng-bit-generator(st), algorithm=rng_philox
  ns = u64[3] get-tuple-element(r), index=0
  bits = u32[5] get-tuple-element(r), index=1
  x = u32[5] xor(acc, bits)
  ROOT t = (s32[], u64[3], u32[5]) tuple(next, ns, x)
}
ENTRY main {
  s = u64[3] parameter(0)
  zero = s32[] constant(0)
  z = u32[] constant(0)
  acc = u32[5] broadcast(z), dimensions={}
  init = (s32[], u64[3], u32[5]) tuple(zero, s, acc)
  ROOT w = (s32[], u64[3], u32[5]) while(init), condition=cond, body=body
}""", seeds=(0, 1, 2))


@pytest.mark.parametrize(("name", "text"), [c for c in verifying_corpus() if "rng-bit-generator(" in c[1]],
                         ids=lambda v: v)
def test_corpus_modules_with_rng_bit_generator(name: str, text: str) -> None:
    if interpreter_runs(parse_module(text)):
        module = assert_pass_preserves_values(RngBitGeneratorExpander(), text, seeds=(0,))
    else:  # an op the interpreter lacks: the structure is still checked
        module = parse_module(text)
        RngBitGeneratorExpander().run(module)
        verify(module)
    assert not any(i.opcode == "rng-bit-generator" for i in module.instructions)


@pytest.mark.parametrize(("algorithm", "bits"), [
    ("rng_three_fry", "u32[3,5]"), ("rng_three_fry", "s32[7,1,3]"), ("rng_three_fry", "u64[4]"),
    ("rng_three_fry", "s16[5]"), ("rng_three_fry", "u32[]"), ("rng_philox", "u32[9]"), ("rng_default", "s64[3]"),
])
def test_expansion_matches_xla_cpu(algorithm: str, bits: str) -> None:
    """XLA:CPU expands rng-bit-generator with the same generators: the compiled module's bits and next state
    must be XLA:CPU's, bit for bit."""
    require_jax()
    from tools.xla_cpu import run_on_xla_cpu

    text = generator("u64[2]", bits, algorithm)
    expanded = parse_module(text)
    assert RngBitGeneratorExpander().run(expanded)
    for values in ([0x123456789ABCDEF0, 2**64 - 2], [0, 0], [7, 2**64 - 1]):
        state = np.array(values, np.uint64)
        want = run_on_xla_cpu(text, state)
        got = evaluate(expanded, state)
        for w, g in zip(want, got, strict=True):
            w = np.asarray(w)
            # XLA:CPU hands signed bits back in the unsigned type of their width: compare the bits.
            np.testing.assert_array_equal(w.view(g.dtype) if w.dtype.itemsize == g.dtype.itemsize else w, g)


def test_jax_three_fry_bits_are_xla_cpu_bits() -> None:
    """``jax.lax.rng_bit_generator`` with ThreeFry: jax's run on XLA:CPU against the module jax lowers, expanded
    and evaluated."""
    require_jax()
    import jax

    from xlapy.frontends.jax import from_jax

    def bits(key):
        return jax.lax.rng_bit_generator(key, (4, 3), dtype=np.uint32,
                                         algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY)

    key = np.array([0xDEADBEEF, 41, 7, 0x12345678], np.uint32)  # jax bitcasts u32[4] keys to the u64[2] state
    module = from_jax(bits, key)
    assert any(i.opcode == "rng-bit-generator" and i.attr("algorithm") == "rng_three_fry" for i in module.instructions)
    assert RngBitGeneratorExpander().run(module)
    want = jax.jit(bits)(key)
    got = evaluate(module, key)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
