"""Loop fusions compiled for the CPU against the reference interpreter.

Every module of ``data/loop_fusions`` (an entry computation around one kLoop
fusion) and GELU (examples/gelu.hlo, in bf16 and in f32) is compiled with
``xlapy.compile(module, backend="cpu")``, run on seeded random arguments rich
in special values (see ``tools.loop_fusion_compare.random_arguments``), and
compared with ``xlapy.evaluate``: bit for bit for integers and pred, to 0 ulp
(sign of zero included) for floats, unless the fused computation has a
transcendental op on f64 or on a float narrower than f32, where floats may be
1 ulp off (``ulp_tolerance``).

Ops and element types a loop fusion cannot have must raise UnimplementedError
naming them; elemental ops outside the fusion run as kernels of their own.
"""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.loop_fusion_compare import assert_within_ulps, random_arguments
from tools.loop_fusion_corpus import (
    CORPUS,
    GELU_SHAPE,
    GELU_SMALL_SHAPE,
    KNOWN_GAPS,
    Case,
    check_against_interpreter,
    corpus_cases,
    gelu_cases,
    single_fusion,
)
from xlapy.errors import UnimplementedError
from xlapy.runtime.kernel_cache import clear_memory_cache

# The tolerance applies to results, not to each op: in GELU, 1 + tanh(...) cancels for negative inputs and
# rounds again for positive ones, so an f32 tanh 1 ulp off the interpreter's (correctly rounded) value on every
# element would put a quarter of the f32 results more than 1 ulp off, the worst by about 600000 ulp; the math
# library's f32 tanh is the f64 value rounded once (~1e-16 relative error), like the interpreter's.


# The arithmetic of the 8-bit float types whose encodings others of the default run share (IEEE-like as f8e5m2,
# no negative zero as f8e4m3fnuz) runs with the slow tests.
_SLOW = {"f8e3m4_arithmetic", "f8e4m3_arithmetic", "f8e4m3b11fnuz_arithmetic", "f8e5m2fnuz_arithmetic"}


def _marked(cases: list[Case]) -> list:
    return [pytest.param(c, marks=pytest.mark.xfail(reason=reason, strict=True))
            if (reason := next((r for k, r in KNOWN_GAPS.items() if c.name.startswith(k)), None))
            else pytest.param(c, marks=pytest.mark.slow) if c.name in _SLOW else c
            for c in cases]


CASES = _marked(corpus_cases() + gelu_cases(GELU_SMALL_SHAPE))
SLOW_CASES = _marked(gelu_cases(GELU_SHAPE))


def compile_cpu(module: xlapy.HloModule):
    return xlapy.compile(module, backend="cpu")


# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def test_corpus_size():
    """The corpus covers at least 20 single-fusion modules besides GELU."""
    assert len(corpus_cases()) >= 24


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_loop_fusion_matches_interpreter(case: Case):
    check_against_interpreter(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=lambda c: c.name)
def test_gelu_full_size_matches_interpreter(case: Case):
    check_against_interpreter(case, seeds=(0,))


def test_arguments_in_any_memory_order():
    """Arguments are logical arrays: a Fortran-ordered or strided view gives
    the same result as a C-ordered copy, whatever the parameter's layout."""
    case = Case("layout", (CORPUS / "layout_parameter_column_major.hlo").read_text())
    module = case.module()
    executable = compile_cpu(case.module())
    args = random_arguments(module, 0)
    expected = xlapy.evaluate(module, *args)
    fortran = [np.asfortranarray(a) for a in args]
    strided = [np.repeat(a, 2, axis=0)[::2] for a in args]
    for variant, name in ((fortran, "Fortran order"), (strided, "strided views")):
        assert_within_ulps(executable(*variant), expected, module, 0, context=name)


def test_kernels_from_the_disk_cache():
    """A second compile with the in-memory cache cleared loads the kernels
    the first one stored on disk, and they compute the same results."""
    case = Case("multi_output_entry_tuple", (CORPUS / "multi_output_entry_tuple.hlo").read_text())
    module = case.module()
    args = random_arguments(module, 0)
    first = compile_cpu(case.module())(*args)
    clear_memory_cache()
    second = compile_cpu(case.module())(*args)
    assert_within_ulps(second, first, module, 0, context="from disk")
    assert_within_ulps(second, xlapy.evaluate(module, *args), module, 0, context="from disk")


# -- what compile rejects ---------------------------------------------------------------------------

_LESS = """
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""


UNSUPPORTED = {
    "sort": (single_fusion(["f32[16]"], ["ROOT sorted = f32[16] sort(p0), dimensions={0}, to_apply=less"],
                            "f32[16]", _LESS), "sort"),
    # Complex numbers have no order.
    "complex": (single_fusion(["c64[8]", "c64[8]"], ["ROOT m = c64[8] maximum(p0, p1)"], "c64[8]"), "maximum.*c64"),
    "complex128": (single_fusion(["c128[8]", "c128[8]"], ["ROOT lt = pred[8] compare(p0, p1), direction=LT"],
                                  "pred[8]"), "LT on c128"),
    # Sub-byte integers are supported one per byte; packed (E(4)) layouts are not.
    "packed_s4": (single_fusion(["s4[16]{0:E(4)}"], ["ROOT n = s4[16]{0:E(4)} negate(p0)"], "s4[16]{0:E(4)}"),
                  r"E\(4\)"),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_inside_fusion(name: str):
    text, named = UNSUPPORTED[name]
    module = xlapy.parse_hlo(text)
    with pytest.raises(UnimplementedError, match=named):
        compile_cpu(module)


# Elemental ops outside any fusion, each compiled as a fusion of its own.
ENTRY_OPS = {
    # An op after the fusion.
    "add": """HloModule entry_add

fused {
  p0 = f32[8] parameter(0)
  ROOT n = f32[8] negate(p0)
}

ENTRY main {
  p0 = f32[8] parameter(0)
  fusion = f32[8] fusion(p0), kind=kLoop, calls=fused
  ROOT sum = f32[8] add(fusion, p0)
}
""",
    # An op before the fusion.
    "exponential": """HloModule entry_exponential

fused {
  p0 = f32[8] parameter(0)
  ROOT n = f32[8] negate(p0)
}

ENTRY main {
  p0 = f32[8] parameter(0)
  e = f32[8] exponential(p0)
  ROOT fusion = f32[8] fusion(e), kind=kLoop, calls=fused
}
""",
}


@pytest.mark.parametrize("opcode", sorted(ENTRY_OPS))
def test_entry_op_beside_a_fusion(opcode: str):
    module = xlapy.parse_hlo(ENTRY_OPS[opcode])
    args = random_arguments(module, 0)
    executable = xlapy.compile(module, backend="cpu", run_hlo_passes=False)
    assert sorted(executable.kernels) == sorted(["fusion", "sum" if opcode == "add" else "e"])
    assert_within_ulps(executable(*args), xlapy.evaluate(module, *args), module, 0)
