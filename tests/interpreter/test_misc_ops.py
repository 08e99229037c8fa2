"""FFT, pass-through custom calls, async wrappers and single-participant
collectives, compared with XLA:CPU."""

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from tools.xla_cpu import run_on_xla_cpu


def _both(text: str, *args):
    module = xlapy.parse_hlo(text)
    return xlapy.evaluate(module, *args), run_on_xla_cpu(text, *args)


FFTS = [
    ("FFT", "c64[3,8]", "c64[3,8]", "{8}"),
    ("IFFT", "c64[3,8]", "c64[3,8]", "{8}"),
    ("FFT", "c64[4,6]", "c64[4,6]", "{4,6}"),
    ("RFFT", "f32[3,8]", "c64[3,5]", "{8}"),
    ("RFFT", "f32[4,6]", "c64[4,4]", "{4,6}"),
    ("IRFFT", "c64[3,5]", "f32[3,8]", "{8}"),
    ("IRFFT", "c64[3,4]", "f32[3,7]", "{7}"),
]


@pytest.mark.parametrize(("kind", "operand", "result", "lengths"), FFTS)
def test_fft(kind, operand, result, lengths):
    text = f"""HloModule fft
ENTRY main {{
  x = {operand} parameter(0)
  ROOT f = {result} fft(x), fft_type={kind}, fft_length={lengths}
}}
"""
    rng = np.random.default_rng(0)
    shape = tuple(int(d) for d in operand[4:-1].split(","))
    x = rng.standard_normal(shape).astype(np.float32)
    if operand.startswith("c64"):
        x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
    got, want = _both(text, x)
    if kind in ("IFFT", "IRFFT"):
        assert_same(got, want)  # measured: bit for bit (21 seeds)
        return
    # Each output sums the transformed elements times twiddle factors of modulus 1: measured within 0.89 eps
    # of the sum of their moduli (21 seeds), which is up to 322 ulps of outputs near zero.
    axes = tuple(range(-lengths.count(",") - 1, 0))
    magnitudes = np.abs(x.astype(np.complex128)).sum(axis=axes, keepdims=True)
    assert_within_sum_of_magnitudes(got, want, np.broadcast_to(magnitudes, np.shape(want)), epsilons=1.5)



COLLECTIVES = """HloModule collectives

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[4] parameter(0)
  ar = f32[4] all-reduce(p), replica_groups={{0}}, to_apply=add_f
  ag = f32[4] all-gather(ar), replica_groups={{0}}, dimensions={0}
  rs = f32[4] reduce-scatter(ag), replica_groups={{0}}, dimensions={0}, to_apply=add_f
  a2a = f32[4] all-to-all(rs), replica_groups={{0}}, dimensions={0}
  cp = f32[4] collective-permute(a2a), source_target_pairs={{0,0}}
  none = f32[4] collective-permute(a2a), source_target_pairs={}
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  ROOT t = (f32[4], f32[4], u32[], u32[]) tuple(cp, none, pid, rid)
}
"""


def test_single_participant_collectives():
    x = np.arange(4, dtype=np.float32) - 1.5
    got, want = _both(COLLECTIVES, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_async_forms_equal_their_synchronous_ops():
    text = """HloModule async

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

wrapped {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}

ENTRY main {
  p = f32[4] parameter(0)
  ars = f32[4] all-reduce-start(p), replica_groups={{0}}, to_apply=add_f
  ard = f32[4] all-reduce-done(ars)
  ags = (f32[4], f32[4]) all-gather-start(ard), replica_groups={{0}}, dimensions={0}
  agd = f32[4] all-gather-done(ags)
  cps = (f32[4], f32[4], u32[], u32[]) collective-permute-start(agd), source_target_pairs={{0,0}}
  cpd = f32[4] collective-permute-done(cps)
  st = ((f32[4]), f32[4], s32[]) async-start(cpd), calls=wrapped
  ROOT dn = f32[4] async-done(st)
}
"""
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(xlapy.evaluate(xlapy.parse_hlo(text), x), -x)


def test_pass_through_custom_calls_and_unknown_targets():
    text = """HloModule cc
ENTRY main {
  p = f32[3] parameter(0)
  s = f32[3] custom-call(p), custom_call_target="Sharding", sharding={replicated}
  ROOT q = f32[3] custom-call(s), custom_call_target="MoveToHost"
}
"""
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(xlapy.evaluate(xlapy.parse_hlo(text), x), x)
    unknown = text.replace('"MoveToHost"', '"my_kernel"')
    with pytest.raises(xlapy.UnimplementedError, match="custom-call target 'my_kernel'"):
        xlapy.evaluate(xlapy.parse_hlo(unknown), x)
