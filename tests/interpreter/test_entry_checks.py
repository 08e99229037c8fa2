"""What every entry point checks before running: ``evaluate`` verifies the
module (unless told not to) and checks its arguments; compiled executables
check arguments with the same rules; the StableHLO import verifies what it reads."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlapy
from xlapy.errors import VerifyError, XlapyError
from xlapy.frontends.stablehlo import parse_module as parse_stablehlo
from xlapy.shapes import ELEMENT_TYPES, parse_shape

# The fused computation returns (f32[40], f32[40]), the fusion declares (f32[40], f32[4]):
# running it unverified would write 40 values into a buffer of 4.
_FUSION_LIES = """HloModule m
f { a = f32[40] parameter(0)  n = f32[40] negate(a)  ROOT t = (f32[40], f32[40]) tuple(a, n) }
ENTRY e { p = f32[40] parameter(0)  ROOT fusion = (f32[40], f32[4]) fusion(p), kind=kLoop, calls=f }
"""

_COMPLEX_TO_REAL = """HloModule m
ENTRY e { a = c64[2] parameter(0)  ROOT c = f32[2] convert(a) }
"""

_NEGATE = """HloModule m
ENTRY e { a = f32[3] parameter(0)  b = s8[3] parameter(1)  ROOT n = f32[3] negate(a) }
"""


def test_evaluate_verifies_the_module_first():
    module = xlapy.parse_hlo(_FUSION_LIES)
    with pytest.raises(VerifyError, match=r"computation e, instruction fusion: fusion produces \(f32\[40\], "
                                          r"f32\[40\]\), but the instruction declares \(f32\[40\], f32\[4\]\)"):
        xlapy.evaluate(module, np.zeros(40, np.float32))


def test_evaluate_without_verification_runs_what_the_verifier_refuses():
    # HLO's convert may not drop an imaginary part; the interpreter's rule keeps the real part.
    module = xlapy.parse_hlo(_COMPLEX_TO_REAL)
    x = np.array([1.5 + 2j, -3 - 1j], np.complex64)
    with pytest.raises(VerifyError, match="convert cannot turn complex c64 into non-complex f32"):
        xlapy.evaluate(module, x)
    np.testing.assert_array_equal(xlapy.evaluate(module, x, verify=False), np.array([1.5, -3], np.float32))


@pytest.mark.parametrize("callee_of_f", ["f", "g"])
def test_evaluate_refuses_a_computation_that_calls_itself(callee_of_f):
    # f calls itself directly, or through g.
    module = xlapy.parse_hlo(f"""HloModule m
g {{ p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }}
f {{ p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply={callee_of_f} }}
ENTRY e {{ p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }}
""")
    with pytest.raises(VerifyError, match="calls itself"):
        xlapy.evaluate(module, np.zeros(2, np.float32))


def test_evaluate_checks_its_arguments():
    module = xlapy.parse_hlo(_NEGATE)
    a, b = np.array([1, 2, 3], np.float32), np.array([1, 2, 3], np.int64)
    np.testing.assert_array_equal(xlapy.evaluate(module, a, b), -a)
    with pytest.raises(XlapyError, match="argument for parameter a is complex"):
        xlapy.evaluate(module, a + 1j, b)
    with pytest.raises(XlapyError, match=r"argument for parameter b holds 300, which is out of range for s8"):
        xlapy.evaluate(module, a, np.array([1, 300, 3]))
    with pytest.raises(XlapyError, match=r"argument for parameter b holds 0\.5, which s8 cannot hold"):
        xlapy.evaluate(module, a, np.array([1, 0.5, 3]))
    with pytest.raises(XlapyError, match="e takes 2 arguments, got 1"):
        xlapy.evaluate(module, a)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_evaluate_refuses_a_bad_seed(seed):
    module = xlapy.parse_hlo(_NEGATE)
    with pytest.raises(XlapyError, match="seed must be a non-negative integer"):
        xlapy.evaluate(module, np.zeros(3), np.zeros(3), seed=seed)


_COUNT_TO = """HloModule m
cond { s = s32[] parameter(0)  n = s32[] constant(LIMIT)  ROOT lt = pred[] compare(s, n), direction=LT }
body { s = s32[] parameter(0)  one = s32[] constant(1)  ROOT next = s32[] add(s, one) }
ENTRY e { z = s32[] parameter(0)  ROOT w = s32[] while(z), condition=cond, body=body }
"""


def test_evaluate_passes_the_while_limit_on():
    module = xlapy.parse_hlo(_COUNT_TO.replace("LIMIT", "5"))
    assert xlapy.evaluate(module, 0, max_while_iterations=5) == 5
    with pytest.raises(XlapyError):
        xlapy.evaluate(module, 0, max_while_iterations=4)


def test_executables_check_arguments_as_evaluate_does():
    module = xlapy.parse_hlo("""HloModule m
f { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }
ENTRY e { p = f32[4] parameter(0)  ROOT fusion = f32[4] fusion(p), kind=kLoop, calls=f }
""")
    executable = xlapy.compile(module)
    np.testing.assert_array_equal(executable(np.arange(4.0)), -np.arange(4.0, dtype=np.float32))
    for bad, message in [(np.arange(4) + 1j, "argument for parameter p is complex"),
                         (np.zeros(5), r"argument for parameter p has shape \(5,\), expected f32\[4\]"),
                         (np.array(["a"] * 4), "argument for parameter p must be numeric"),
                         (None, "argument for parameter p must be an array or a number")]:
        with pytest.raises(XlapyError, match=message):
            executable(bad)
        with pytest.raises(XlapyError, match=message):
            xlapy.evaluate(module, bad)


_MISMATCHED_ADD = """func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<3xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %arg0, %arg1 : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


def test_the_stablehlo_import_verifies_the_module():
    with pytest.raises(VerifyError, match=r"computation main, instruction add: operands of add must have the same "
                                          r"shape, got f32\[2\] and f32\[3\]"):
        parse_stablehlo(_MISMATCHED_ADD)
    module = parse_stablehlo(_MISMATCHED_ADD, verify=False)
    assert module.entry.root.opcode == "add"


def _modules() -> list[str]:
    tests = Path(__file__).parent.parent
    paths = sorted((tests / "hlo" / "data").rglob("*.hlo")) + sorted((tests / "codegen" / "data").rglob("*.hlo"))
    return [path.read_text() for path in paths if "large" not in path.name][::2]


_MODULES = _modules()
_JUNK = st.sampled_from([None, 0, -1, 3, "", "x", "{1,2}", [], [0], [-1], [5, 5], 1.5, True, "kLoop", "FFT", "EQ"])
_SHAPES = st.sampled_from(["f32[]", "f32[2]", "c64[4]", "s32[]", "pred[]", "(f32[], s32[])", "f32[0]", "f64[2,3]"])


def _fake(shape):
    if shape.is_tuple:
        return tuple(_fake(s) for s in shape.tuple_shapes)
    if shape.element_type == "token":
        return ()
    return np.ones(shape.dimensions, np.float64).astype(ELEMENT_TYPES[shape.element_type].dtype)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edited_modules_run_or_give_xlapy_errors(data):
    """Whatever the edit, evaluate verifies first: the interpreter only ever
    runs a valid module, and bad input ends in an XlapyError."""
    module = xlapy.parse_hlo(data.draw(st.sampled_from(_MODULES)))
    instr = data.draw(st.sampled_from([i for c in module.computations for i in c.instructions]))
    edit = data.draw(st.sampled_from(["attribute", "shape", "callees"]))
    if edit == "attribute" and instr.attributes:
        instr.attributes[data.draw(st.sampled_from(sorted(instr.attributes)))] = data.draw(_JUNK)
    elif edit == "shape":
        instr.shape = parse_shape(data.draw(_SHAPES))
    else:
        instr.called_computations = data.draw(st.sampled_from([[], [module.computations[0]], [module.entry]]))
    args = [_fake(p.shape) for p in module.entry.parameters]
    with contextlib.suppress(XlapyError):
        xlapy.evaluate(module, *args, max_while_iterations=1000)


@pytest.mark.parametrize("value", ["HloModule m\nENTRY e { ROOT c = f32[] constant(1) }", None, 3])
def test_evaluate_and_compile_refuse_what_is_not_a_module(value):
    for entry_point, call in (("evaluate", xlapy.evaluate), ("compile", xlapy.compile)):
        with pytest.raises(XlapyError, match=f"{entry_point} takes an HloModule, not {type(value).__name__}"):
            call(value)
