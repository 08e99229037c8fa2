"""bitcast-convert between element types of different widths compiled for the CPU, bit for bit against the
reference interpreter and XLA:CPU.

As XLA defines it, the narrower side has one more, minor, dimension of (wider width / narrower width) parts,
numbered from the least significant bits of the wider element up (``u32[n,2]`` <-> ``u64[n]``,
``f32[n]`` -> ``u8[n,4]``)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from tools.oracles import NO_JAX
from xlapy.errors import UnimplementedError
from xlapy.shapes import ELEMENT_TYPES

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


# (operand shape, result shape): to wider and narrower types, integers and floats (NaN payloads included),
# 8-bit floats, a scalar on either side, and one layout that is not row-major.
_CASES = [
    ("u32[5,2]", "u64[5]"),
    ("u64[5]", "u32[5,2]"),
    ("f32[7]", "u8[7,4]"),
    ("u8[7,4]", "f32[7]"),
    ("f64[3,2]", "u16[3,2,4]"),
    ("s16[3,4]", "f64[3]"),
    ("bf16[6,2]", "f32[6]"),
    ("f8e4m3fn[4,2]", "f16[4]"),
    ("f16[4]", "f8e5m2[4,2]"),
    ("u64[]", "u32[2]"),
    ("u8[4]", "s32[]"),
    ("u32[3,2]{0,1}", "u64[3]"),
    ("s8[9,8]", "f64[9]"),
]


def _module_text(operand: str, result: str) -> str:
    return f"HloModule bitcast_convert\nENTRY e {{ p = {operand} parameter(0)  ROOT r = {result} bitcast-convert(p) }}"


def _random_bytes(shape: xlapy.shapes.Shape, seed: int) -> np.ndarray:
    """An array of ``shape`` with random bits (any NaN payload, denormals, every integer)."""
    dtype = np.dtype(ELEMENT_TYPES[shape.element_type].dtype)
    count = int(np.prod(shape.dimensions, dtype=np.int64))
    raw = np.random.default_rng(seed).integers(0, 256, count * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape.dimensions)


def _bytes(value) -> np.ndarray:
    return np.ascontiguousarray(np.atleast_1d(np.asarray(value))).view(np.uint8)


@pytest.mark.parametrize(("operand", "result"), _CASES, ids=[f"{a}->{b}" for a, b in _CASES])
def test_bitcast_convert_between_widths_matches_the_interpreter_and_xla(operand: str, result: str):
    text = _module_text(operand, result)
    module = xlapy.parse_hlo(text)
    x = _random_bytes(module.entry.parameters[0].shape, seed=len(text))
    got = xlapy.compile(module, run_hlo_passes=False)(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True)
    if not NO_JAX:
        from tools.xla_cpu import run_on_xla_cpu

        np.testing.assert_array_equal(_bytes(got), _bytes(run_on_xla_cpu(text, x)))


def test_known_bits():
    # Little-endian: part 0 is the low half.
    module = xlapy.parse_hlo(_module_text("u32[2,2]", "u64[2]"))
    x = np.array([[0x89ABCDEF, 0x01234567], [1, 0]], np.uint32)
    np.testing.assert_array_equal(xlapy.compile(module, run_hlo_passes=False)(x),
                                  np.array([0x0123456789ABCDEF, 1], np.uint64))
    module = xlapy.parse_hlo(_module_text("f32[2]", "u8[2,4]"))
    got = xlapy.compile(module, run_hlo_passes=False)(np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(got, np.array([[0, 0, 0x80, 0x3F], [0, 0, 0, 0xC0]], np.uint8))


def test_bitcast_convert_between_widths_inside_a_loop_fusion():
    # Fused with the ops around it (as in XLA:CPU's dumps of rng-bit-generator's state handling).
    module = xlapy.parse_hlo("""HloModule fused
f {
  a = u32[4,2] parameter(0)
  one = u32[] constant(1)
  ones = u32[4,2] broadcast(one), dimensions={}
  b = u32[4,2] add(a, ones)
  w = u64[4] bitcast-convert(b)
  s = u64[] constant(3)
  ss = u64[4] broadcast(s), dimensions={}
  x = u64[4] shift-right-logical(w, ss)
  ROOT n = u16[4,4] bitcast-convert(x)
}
ENTRY e { p = u32[4,2] parameter(0)  ROOT r = u16[4,4] fusion(p), kind=kLoop, calls=f }""")
    x = _random_bytes(module.entry.parameters[0].shape, seed=3)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert executable.summary.kernels == 1
    assert_same(executable(x), xlapy.evaluate(module, x), exact_bits=True)


def test_sub_byte_types_between_widths_are_refused_at_compile_time():
    module = xlapy.parse_hlo(_module_text("s4[4,2]", "s8[4]"))
    with pytest.raises(UnimplementedError, match=r"bitcast-convert \(r\) from s4 to s8"):
        xlapy.compile(module, run_hlo_passes=False)
