"""The custom-call targets the verifier accepts are the ones the interpreter runs."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.hlo.shape_rules.custom_call import PASS_THROUGH_TARGETS
from xlapy.hlo.shape_rules.registry import CUSTOM_CALL_RULES
from xlapy.interpreter.custom_call import CUSTOM_CALL_TARGETS


def test_the_verifier_and_the_interpreter_know_the_same_targets() -> None:
    assert set(CUSTOM_CALL_TARGETS) == set(CUSTOM_CALL_RULES)


@pytest.mark.parametrize("target", PASS_THROUGH_TARGETS)
def test_annotating_targets_return_their_operand(target: str) -> None:
    module = xlapy.parse_hlo(f"""HloModule m
ENTRY e {{
  p = f32[3] parameter(0)
  ROOT c = f32[3] custom-call(p), custom_call_target="{target}"
}}
""")
    xlapy.verify(module)
    x = np.array([1.5, -0.0, np.inf], np.float32)
    np.testing.assert_array_equal(xlapy.evaluate(module, x).view(np.uint32), x.view(np.uint32))
