"""stochastic-convert scales the fraction by the random bits' own width, also for u4 bits stored in bytes:
0.5 rounds up exactly when the bits are below 0.5 * 2^4 = 8 (values worked by hand)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import xlapy


def test_four_random_bits_scale_the_fraction_by_sixteen() -> None:
    module = xlapy.parse_hlo("""HloModule m
ENTRY e { x = f4e2m1fn[5] parameter(0)  r = u4[5] parameter(1)  ROOT c = s8[5] stochastic-convert(x, r) }""")
    x = np.array([0.5, 0.5, 1.5, -0.5, -1.5], dtype=ml_dtypes.float4_e2m1fn)
    bits = np.array([7, 8, 0, 15, 7], dtype=ml_dtypes.uint4)
    assert xlapy.evaluate(module, x, bits).tolist() == [1, 0, 2, 0, -2]
