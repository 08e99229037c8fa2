"""The random HLO programs the pass tests draw: every one verifies and runs
on the interpreter, they cover the ops the clean-up passes rewrite, and the
value check catches a pass that changes a result."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tools.random_hlo import assert_pass_preserves_values, hlo_modules, hlo_texts, random_arguments
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.hlo.ir import HloInstruction
from xlapy.interpreter import evaluate
from xlapy.transforms.comparison_expander import ComparisonExpander
from xlapy.transforms.dot_decomposer import DotDecomposer
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.transpose_folding import TransposeFolding


def _check_verifies_and_runs(text: str) -> None:
    module = parse_module(text)
    verify(module)
    for seed in (0, 1):
        evaluate(module, *random_arguments(module, seed), verify=False)


# A bounded budget in the default run, a larger one with the slow tests.
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts(power=True))
def test_random_modules_verify_and_run(text: str) -> None:
    _check_verifies_and_runs(text)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts(power=True))
def test_random_modules_verify_and_run_many(text: str) -> None:
    _check_verifies_and_runs(text)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_modules(special_floats=True, zero_sized=False, bf16=False, max_parameters=1, max_call_depth=0,
                   power=True))
def test_random_modules_with_special_values_run(module: HloModule) -> None:
    verify(module)
    evaluate(module, *random_arguments(module, 0, special_floats=True), verify=False)


# A property of the generator (tools/random_hlo.py) over 600 draws, not of xlapy: with the slow tests.
@pytest.mark.slow
def test_the_drawn_modules_cover_the_ops_passes_rewrite() -> None:
    seen: set[str] = set()
    features: set[str] = set()
    changed_by: set[str] = set()
    passes = (DotDecomposer(), TransposeFolding(), ComparisonExpander())

    # Derandomized: the same draws every run, so the coverage claim is stable.
    @settings(max_examples=600, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(hlo_texts(power=True))
    def collect(text: str) -> None:
        seen.update(re.findall(r"= \S+ ([a-z-]+)\(", text))
        names = re.findall(r"^\s*(?:ROOT )?(\S+) = (\S+) (.*)$", text, re.MULTILINE)
        bodies = [(shape, body) for _, shape, body in names if not body.startswith("parameter")]
        if len(set(bodies)) < len(bodies):
            features.add("duplicate")
        if re.search(r"\[(\d+,)*0[,\]]", text):
            features.add("zero-sized")
        if re.search(r"ROOT \S+ = \(", text.split("ENTRY")[1]):
            features.add("tuple root")
        if any(text.count(f"to_apply={c}") > 1 for c in re.findall(r"^(callee\.\d+) \{", text, re.MULTILINE)):
            features.add("callee called twice")
        module = parse_module(text)
        if any(not i.users and i is not c.root for c in module.computations for i in c.instructions):
            features.add("dead value")
        if any(c is not module.entry and any(i.opcode == "call" for i in c.instructions)
               for c in module.computations):
            features.add("nested call")
        instructions = [i for c in module.computations for i in c.instructions]
        features.update(_dot_features(instructions))
        for i in instructions:
            if i.opcode == "compare" and i.attributes.get("type") == "TOTALORDER":
                features.add("total-order compare")
            if i.opcode == "power":
                exponent = i.operands[1]
                if exponent.opcode == "broadcast":
                    exponent = exponent.operands[0]
                if exponent.opcode == "constant" and exponent.shape.rank == 0:
                    value = float(exponent.literal)
                    features.add(f"power {value:g}" if value in (0, 1, 2, 3, -1) else "power, other constant exponent")
                else:
                    features.add("power, drawn exponent")
            if i.opcode in ("and", "or") and i.shape.element_type == "pred" \
                    and any(o.opcode in ("constant", "broadcast") for o in i.operands):
                features.add("and/or with a constant")
            if i.opcode in ("maximum", "minimum") and i.operands[0] is i.operands[1]:
                features.add("max/min of a value with itself")
            if i.opcode in _ELEMENTWISE_BINARY and i.shape.rank > 0 and any(
                    o.opcode == "broadcast" and o.operands[0].opcode == "constant" and o.operands[0].shape.rank == 0
                    for o in i.operands):
                features.add("broadcast scalar constant operand")
        for hlo_pass in passes:
            if hlo_pass.run(parse_module(text)):
                changed_by.add(hlo_pass.name)

    collect()
    wanted = {"parameter", "constant", "broadcast", "reshape", "transpose", "slice", "concatenate", "pad", "reverse",
              "iota", "reduce", "dot", "tuple", "get-tuple-element", "call", "compare", "select", "convert", "add",
              "power", "logistic", "maximum", "minimum", "and", "or"}
    assert wanted <= seen, wanted - seen
    assert features == {
        "duplicate", "zero-sized", "tuple root", "callee called twice", "dead value", "nested call",
        "several contracting dims", "outer product", "batch dims not leading", "several non-contracting dims",
        "row-column transposed dot operand", "total-order compare", "and/or with a constant",
        "max/min of a value with itself", "broadcast scalar constant operand",
        "power, other constant exponent", "power, drawn exponent", *(f"power {e:g}" for e in (0, 1, 2, 3, -1)),
    }
    assert changed_by == {p.name for p in passes}, {p.name for p in passes} - changed_by


_ELEMENTWISE_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder", "and", "or", "xor",
                       "power")


def _dot_features(instructions: list[HloInstruction]) -> set[str]:
    """The non-canonical forms among the dots of ``instructions``."""
    found = set()
    for dot in instructions:
        if dot.opcode != "dot":
            continue
        for side, operand in zip(("lhs", "rhs"), dot.operands, strict=True):
            contracting = tuple(dot.attr(f"{side}_contracting_dims", ()) or ())
            batch = tuple(dot.attr(f"{side}_batch_dims", ()) or ())
            if len(contracting) > 1:
                found.add("several contracting dims")
            if not contracting:
                found.add("outer product")
            if batch != tuple(range(len(batch))):
                found.add("batch dims not leading")
            if operand.shape.rank - len(contracting) - len(batch) > 1:
                found.add("several non-contracting dims")
            if operand.opcode == "transpose" and len(contracting) == 1 and operand.shape.rank == len(batch) + 2 \
                    and all(operand.attr("dimensions")[d] == d for d in batch) \
                    and tuple(operand.attr("dimensions")) != tuple(range(operand.shape.rank)):
                found.add("row-column transposed dot operand")
    return found


def test_random_arguments_follow_the_parameters() -> None:
    module = parse_module("""HloModule m

ENTRY main {
  a = f32[2,3] parameter(0)
  b = s32[4] parameter(1)
  c = pred[] parameter(2)
  ROOT t = (f32[2,3], s32[4], pred[]) tuple(a, b, c)
}
""")
    plain = random_arguments(module, 7)
    assert [np.asarray(a).dtype for a in plain] == [np.float32, np.int32, np.bool_]
    assert [np.shape(a) for a in plain] == [(2, 3), (4,), ()]
    assert np.isfinite(plain[0]).all()
    np.testing.assert_array_equal(random_arguments(module, 7)[1], plain[1])
    special = random_arguments(parse_module("""HloModule m

ENTRY main {
  ROOT a = f32[200] parameter(0)
}
"""), 3, special_floats=True)[0]
    assert np.isnan(special).any() and np.isinf(special).any()


class _Identity(HloPass):
    name = "identity"

    def run(self, module: HloModule) -> bool:
        return False


class _NegateRoot(HloPass):
    """Changes the entry's result: the value check must catch it."""

    name = "negate-root"

    def run(self, module: HloModule) -> bool:
        from xlapy.hlo.ir import HloInstruction

        root = module.entry.root
        negated = module.entry.add_instruction(HloInstruction("negated", "negate", root.shape, [root]))
        module.entry.root = negated
        return True


_PROGRAM = """HloModule m

ENTRY main {
  p = f32[3] parameter(0)
  ROOT e = f32[3] exponential(p)
}
"""


def test_value_check_accepts_a_pass_that_keeps_values() -> None:
    rewritten = assert_pass_preserves_values(_Identity(), parse_module(_PROGRAM))
    assert rewritten.to_text() == parse_module(_PROGRAM).to_text()


def test_value_check_catches_a_pass_that_changes_values() -> None:
    with pytest.raises(AssertionError, match="first mismatch"):
        assert_pass_preserves_values(_NegateRoot(), _PROGRAM)
