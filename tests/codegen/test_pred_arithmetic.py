"""Arithmetic on pred: XLA:CPU adds as or and multiplies as and (a pred is a byte holding 0 or 1), and StableHLO
has no subtract of booleans. Compiled kernels, the interpreter and XLA:CPU agree; subtract is refused by both
xlapy paths with an ``UnimplementedError``."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.xla_cpu import run_on_xla_cpu

A = np.array([True, True, False, False] * 5)
B = np.array([True, False, True, False] * 5)


def _module(opcode: str) -> str:
    return f"""HloModule m
ENTRY e {{ a = pred[20] parameter(0)  b = pred[20] parameter(1)  ROOT r = pred[20] {opcode}(a, b) }}"""


@pytest.mark.parametrize("opcode", ["add", "multiply", "maximum", "minimum", "and", "or", "xor"])
def test_pred_arithmetic_equals_xla_cpu(opcode):
    text = _module(opcode)
    expected = run_on_xla_cpu(text, A, B)
    np.testing.assert_array_equal(xlapy.evaluate(xlapy.parse_hlo(text), A, B), expected)
    np.testing.assert_array_equal(xlapy.compile(xlapy.parse_hlo(text))(A, B), expected)


def test_pred_subtract_is_refused():
    module = xlapy.parse_hlo(_module("subtract"))
    with pytest.raises(xlapy.UnimplementedError, match="subtract"):
        xlapy.evaluate(module, A, B)
    with pytest.raises(xlapy.UnimplementedError, match="subtract"):
        xlapy.compile(module)
