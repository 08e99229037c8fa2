"""Op-by-op differential tests of the reference interpreter against XLA:CPU, on
the cases of ``tools/op_cases.py`` (see there for how they are built and compared).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tools.compare import assert_same
from tools.op_cases import CASE_BY_ID, CASES, GROUPS, Case, case_text, check_case, xla_group_text, xla_result
from tools.xla_cpu import cancel_compile_ahead, compile_ahead, run_on_xla_cpu
from xlapy.hlo import parse_module
from xlapy.interpreter.evaluator import evaluate


@pytest.fixture(scope="module", autouse=True)
def _compile_groups_ahead(request: pytest.FixtureRequest) -> Iterator[None]:
    """Compile the groups of the selected cases on background threads while the first ones run."""
    modules: dict[tuple[str, bool], None] = {}
    for item in request.session.items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if isinstance(case, Case):
            modules.setdefault((case.group, case.slow))
    compile_ahead(xla_group_text(name, slow) for name, slow in modules)
    yield
    cancel_compile_ahead()


# Where the interpreter knowingly differs from XLA:CPU: the complex functions it
# takes from numpy (C99 Annex G) at infinities, where XLA:CPU's formulas give
# other NaN/inf/zero combinations (logistic through its exponential).
_COMPLEX_AT_INFINITY = "c64 at infinities: numpy's C99 special values differ from XLA:CPU's formulas"
KNOWN_DIFFERENCES = {
    **{f"nonfinite-c64-{op}": _COMPLEX_AT_INFINITY for op in (
        "cosine", "exponential", "exponential-minus-one", "logistic", "sine", "tan", "tanh")},
}


# Fewer types in the default run than tools/op_cases.py keeps out of the slow one. Data movement moves bits: the
# default run takes each of its cases in types of distinct widths and kinds (pred, s8, bf16, f32, u64, c64,
# f8e4m3fn), and in these types only the group's core cases (those every type keeps in the default run).
_DATA_MOVEMENT_CORE_ONLY = {f"data-movement-{t}" for t in ("s32", "f16", "f64")}
# The elementwise ops of the 16-bit integers and conversions from them (each group a module for XLA:CPU to
# compile): those of 8, 32 and 64 bits, signed and unsigned, and conversions to 16-bit integers stay in the default
# run.
_SLOW_GROUPS = {f"{family}-{t}" for family in ("elementwise", "convert") for t in ("s16", "u16")}


def _slow(case: Case) -> bool:
    if case.group in _DATA_MOVEMENT_CORE_ONLY:
        return case.id.removeprefix(f"{case.group}-") not in GROUPS[case.group].core
    return case.slow or case.group in _SLOW_GROUPS


def _param(case: Case) -> Any:
    marks = [pytest.mark.slow] if _slow(case) else []
    if case.id in KNOWN_DIFFERENCES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[case.id]))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_op_matches_xla_cpu(case: Case) -> None:
    check_case(case)


# -- the case generators themselves ---------------------------------------------------------------


def test_every_elementwise_opcode_is_covered() -> None:
    from xlapy.hlo.opcodes import OPCODES, OpKind

    elementwise = {name for name, spec in OPCODES.items() if spec.kind is not OpKind.OTHER}
    tested = {case.opcode for case in CASES}
    untested = elementwise - tested
    assert not untested, f"elementwise opcodes without a differential test: {sorted(untested)}"


def test_single_case_module_is_the_case() -> None:
    case = CASE_BY_ID["elementwise-s32-add"]
    text = case_text(case.id)
    assert "ROOT c" in text and text.count("parameter(") == len(GROUPS[case.group].params)
    assert np.array_equal(run_on_xla_cpu(text, *GROUPS[case.group].args), xla_result(case))


def test_xla_cpu_returns_nested_tuples_and_64_bit_values() -> None:
    text = """HloModule nested
ENTRY main {
  p0 = s64[2] parameter(0)
  p1 = u64[] parameter(1)
  a = s64[2] add(p0, p0)
  inner = (u64[], s64[2]) tuple(p1, p0)
  ROOT r = (s64[2], (u64[], s64[2])) tuple(a, inner)
}
"""
    p0, p1 = np.array([2**40, -(2**62)], np.int64), np.uint64(2**64 - 1)
    result = run_on_xla_cpu(text, p0, p1)
    assert isinstance(result, tuple) and isinstance(result[1], tuple)
    assert result[0].dtype == np.int64 and result[0].tolist() == [2**41, -(2**63)]
    assert result[1][0].dtype == np.uint64 and int(result[1][0]) == 2**64 - 1
    assert np.array_equal(result[1][1], p0)
    assert_same(evaluate(parse_module(text), p0, p1), result)
