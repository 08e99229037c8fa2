"""The algebraic simplifier's rules for unary ops, complex parts, bitcasts,
``clamp``, ``remainder``, ``reverse`` and ``iota`` against XLA's behaviour
(``HandleAbs``, ``HandleExp``, ``HandleReal``, ``HandleImag``,
``HandleComplex``, ``HandleBitcast``, ``HandleBitcastConvert``,
``HandleClamp``, ``HandleRemainder``, ``HandleReverse`` and ``HandleIota`` in
``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`` and its tests),
and against the interpreter on random programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tests.transforms.algsimp_cases import assert_simplifier_preserves_values, root_is, simplify
from tools.random_hlo import hlo_texts, reduce_relies_on_its_initial_value
from xlapy.hlo import parse_module

_F = "x = f32[2,3] parameter(0)"


@pytest.mark.parametrize("body, expected", [
    # abs of a value known not to be negative (XLA's IsNonNegative).
    ("e = f32[2,3] exponential(x)\n  ROOT r = f32[2,3] abs(e)", "%e = f32[2,3]{1,0} exponential(%x)"),
    ("m = f32[2,3] multiply(x, x)\n  ROOT r = f32[2,3] abs(m)", "%m = f32[2,3]{1,0} multiply(%x, %x)"),
    ("a = f32[2,3] abs(x)\n  ROOT r = f32[2,3] abs(a)", "%r = f32[2,3]{1,0} abs(%x)"),
    ("c = f32[] constant(2)\n  b = f32[2,3] broadcast(c), dimensions={}\n  e = f32[2,3] exponential(x)\n"
     "  m = f32[2,3] minimum(e, b)\n  ROOT r = f32[2,3] abs(m)", "%m = f32[2,3]{1,0} minimum(%e, %b)"),
    # exp(0) is 1.
    ("z = f32[] constant(0)\n  b = f32[2,3] broadcast(z), dimensions={}\n  ROOT r = f32[2,3] exponential(b)",
     "%{{.*}} = f32[2,3]{1,0} broadcast(%{{.*}}), dimensions={}"),
    # The real part of a real value is the value, its imaginary part 0.
    ("ROOT r = f32[2,3] real(x)", "%x = f32[2,3]{1,0} parameter(0)"),
    ("ROOT r = f32[2,3] imag(x)", "%{{.*}} = f32[2,3]{1,0} broadcast(%{{.*}}), dimensions={}"),
    ("c = c64[2,3] complex(x, x)\n  ROOT r = f32[2,3] real(c)", "%x = f32[2,3]{1,0} parameter(0)"),
    # clamp(a, clamp(a, x, b), b) is the inner clamp.
    ("l = f32[] constant(-1)\n  lo = f32[2,3] broadcast(l), dimensions={}\n  h = f32[] constant(1)\n"
     "  hi = f32[2,3] broadcast(h), dimensions={}\n  c = f32[2,3] clamp(lo, x, hi)\n"
     "  ROOT r = f32[2,3] clamp(lo, c, hi)", "%r = f32[2,3]{1,0} clamp(%lo, %x, %hi)"),
    # (A % B) % B is A % B.
    ("m = f32[2,3] remainder(x, y)\n  ROOT r = f32[2,3] remainder(m, y)",
     "%r = f32[2,3]{1,0} remainder(%x, %y)"),
    # Reversing dimensions of size 1, or reversing twice, does nothing.
    ("t = f32[1,2,3] reshape(x)\n  v = f32[1,2,3] reverse(t), dimensions={0}\n  ROOT r = f32[2,3] reshape(v)",
     "%x = f32[2,3]{1,0} parameter(0)"),
    ("v = f32[2,3] reverse(x), dimensions={0,1}\n  ROOT r = f32[2,3] reverse(v), dimensions={1,0}",
     "%x = f32[2,3]{1,0} parameter(0)"),
    # A bitcast to the same shape, and a bitcast-convert to the same type, do nothing.
    ("ROOT r = f32[2,3] bitcast(x)", "%x = f32[2,3]{1,0} parameter(0)"),
    ("ROOT r = f32[2,3] bitcast-convert(x)", "%x = f32[2,3]{1,0} parameter(0)"),
    ("b = s32[2,3] bitcast-convert(x)\n  ROOT r = f32[2,3] bitcast-convert(b)", "%x = f32[2,3]{1,0} parameter(0)"),
])
def test_rewrites_to_a_simpler_value(body, expected, tmp_path):
    changed, out = simplify(f"{_F}\n  y = f32[2,3] parameter(1)", body)
    assert changed
    root_is(out, expected, tmp_path)


def test_complex_of_the_parts_of_a_value_is_the_value(tmp_path):
    changed, out = simplify("c = c64[4] parameter(0)",
                            "r = f32[4] real(c)\n  i = f32[4] imag(c)\n  ROOT z = c64[4] complex(r, i)")
    assert changed
    root_is(out, "%c = c64[4]{0} parameter(0)", tmp_path)


@pytest.mark.parametrize("parameters, body", [
    # A signed abs may be negative (abs of the lowest value), so abs(abs(A)) stays.
    ("q = s32[4] parameter(0)", "a = s32[4] abs(q)\n  ROOT r = s32[4] abs(a)"),
    # XLA knows nothing of a parameter's sign.
    ("q = f32[4] parameter(0)", "ROOT r = f32[4] abs(q)"),
    # -0.0 is negative for IsNonNegative.
    ("q = f32[4] parameter(0)", "z = f32[] constant(-0.0)\n  b = f32[4] broadcast(z), dimensions={}\n"
     "  m = f32[4] maximum(q, b)\n  ROOT r = f32[4] abs(m)"),
    # A remainder of floats by a power of two stays.
    ("q = f32[4] parameter(0)", "c = f32[] constant(4)\n  b = f32[4] broadcast(c), dimensions={}\n"
     "  ROOT r = f32[4] remainder(q, b)"),
    # A bitcast that changes the layout reorders bytes.
    ("q = f32[2,3]{1,0} parameter(0)", "ROOT r = f32[2,3]{0,1} bitcast(q)"),
])
def test_rewrites_that_would_change_values_are_not_made(parameters, body):
    changed, _ = simplify(parameters, body)
    assert not changed


def test_unsigned_remainder_by_a_power_of_two_is_an_and(tmp_path):
    changed, out = simplify("q = u32[4] parameter(0)",
                            "c = u32[] constant(8)\n  b = u32[4] broadcast(c), dimensions={}\n"
                            "  ROOT r = u32[4] remainder(q, b)")
    assert changed
    filecheck(out, """
CHECK: %[[M:.*]] = u32[] constant(7)
CHECK: %[[B:.*]] = u32[4]{0} broadcast(%[[M]]), dimensions={}
CHECK: ROOT %{{.*}} = u32[4]{0} and(%q, %[[B]])
""", tmp_path)


def test_signed_remainder_by_a_power_of_two_masks_the_magnitude(tmp_path):
    changed, out = simplify("q = s32[4] parameter(0)",
                            "c = s32[] constant(4)\n  b = s32[4] broadcast(c), dimensions={}\n"
                            "  ROOT r = s32[4] remainder(q, b)")
    assert changed
    filecheck(out, """
CHECK-DAG: %[[N:.*]] = pred[4]{0} compare(%q, %{{.*}}), direction=LT
CHECK-DAG: %[[NEG:.*]] = s32[4]{0} negate(%q)
CHECK-DAG: %[[ABS:.*]] = s32[4]{0} select(%[[N]], %[[NEG]], %q)
CHECK-DAG: %[[AND:.*]] = s32[4]{0} and(%[[ABS]], %{{.*}})
CHECK-DAG: %[[BACK:.*]] = s32[4]{0} negate(%[[AND]])
CHECK: ROOT %{{.*}} = s32[4]{0} select(%[[N]], %[[BACK]], %[[AND]])
""", tmp_path)


def test_remainder_of_an_iota_below_the_divisor_is_the_iota(tmp_path):
    changed, out = simplify("q = s32[4] parameter(0)",
                            "i = s32[5] iota(), iota_dimension=0\n  c = s32[] constant(5)\n"
                            "  b = s32[5] broadcast(c), dimensions={}\n  ROOT r = s32[5] remainder(i, b)")
    assert changed
    root_is(out, "%i = s32[5]{0} iota(), iota_dimension=0", tmp_path)
    changed, out = simplify("q = s32[4] parameter(0)",
                            "i = s32[5] iota(), iota_dimension=0\n  c = s32[] constant(3)\n"
                            "  b = s32[5] broadcast(c), dimensions={}\n  a = s32[5] add(i, b)\n"
                            "  ROOT r = s32[5] remainder(a, b)")
    assert changed
    root_is(out, "%{{.*}} = s32[5]{0} remainder(%i, %b)", tmp_path)


def test_reverse_moves_below_a_binary_op_with_a_broadcast_scalar(tmp_path):
    changed, out = simplify(_F, "c = f32[] constant(2)\n  b = f32[2,3] broadcast(c), dimensions={}\n"
                                "  m = f32[2,3] multiply(x, b)\n  ROOT r = f32[2,3] reverse(m), dimensions={1}")
    assert changed
    filecheck(out, """
CHECK: %[[R:.*]] = f32[2,3]{1,0} reverse(%x), dimensions={1}
CHECK: ROOT %{{.*}} = f32[2,3]{1,0} multiply(%[[R]], %b)
""", tmp_path)


def test_reverses_cancel_on_common_dimensions(tmp_path):
    changed, out = simplify(_F, "v = f32[2,3] reverse(x), dimensions={0,1}\n"
                                "  ROOT r = f32[2,3] reverse(v), dimensions={0}")
    assert changed
    root_is(out, "%{{.*}} = f32[2,3]{1,0} reverse(%x), dimensions={1}", tmp_path)


def test_reverse_moves_above_a_reshape_inserting_unit_dimensions(tmp_path):
    changed, out = simplify(_F, "t = f32[2,1,3] reshape(x)\n  ROOT r = f32[2,1,3] reverse(t), dimensions={0,1,2}")
    assert changed
    filecheck(out, """
CHECK: %[[R:.*]] = f32[2,3]{1,0} reverse(%x), dimensions={0,1}
CHECK: ROOT %{{.*}} = f32[2,1,3]{2,1,0} reshape(%[[R]])
""", tmp_path)


def test_iota_along_a_dimension_of_one_element_is_zero(tmp_path):
    changed, out = simplify(_F, "ROOT r = s32[1,4] iota(), iota_dimension=0")
    assert changed
    filecheck(out, "CHECK: %[[Z:.*]] = s32[] constant(0)\n"
                   "CHECK: ROOT %{{.*}} = s32[1,4]{1,0} broadcast(%[[Z]]), dimensions={}\n", tmp_path)


def test_bitcast_chains_become_one(tmp_path):
    changed, out = simplify(_F, "a = f32[6] bitcast(x)\n  ROOT r = f32[3,2] bitcast(a)")
    assert changed
    root_is(out, "%{{.*}} = f32[3,2]{1,0} bitcast(%x)", tmp_path)
    changed, out = simplify(_F, "a = s32[2,3] bitcast-convert(x)\n  ROOT r = u32[2,3] bitcast-convert(a)")
    assert changed
    root_is(out, "%{{.*}} = u32[2,3]{1,0} bitcast-convert(%x)", tmp_path)


# -- random programs ------------------------------------------------------------------------------------------

_CHAINS = {
    "f32": ("abs", "exponential", "reverse", "clamp", "real", "imag", "remainder", "bitcast-convert", "multiply"),
    "s32": ("abs", "reverse", "clamp", "remainder", "bitcast-convert", "iota-remainder"),
    "u32": ("reverse", "clamp", "remainder", "bitcast-convert"),
}
_REINTERPRETED = {"f32": "s32", "s32": "u32", "u32": "f32"}


@st.composite
def unary_programs(draw) -> str:
    """A chain of the ops these rules rewrite, on parameters of one shape:
    abs, exponential, reverses, clamps, complex parts, remainders (by powers
    of two, by themselves, of iotas) and bitcast-converts."""
    element_type = draw(st.sampled_from(tuple(_CHAINS)))
    dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
    shape = lambda t: f"{t}[{','.join(map(str, dims))}]"  # noqa: E731
    lines = [f"x = {shape(element_type)} parameter(0)", f"y = {shape(element_type)} parameter(1)"]
    value, count = "x", 0

    def add(text: str, t: str) -> str:
        nonlocal count
        count += 1
        name = f"v{count}"
        lines.append(f"{name} = {shape(t)} {text}")
        return name

    def scalar(t: str, v: int) -> str:
        nonlocal count
        count += 1
        lines.append(f"c{count} = {t}[] constant({v})")
        return add(f"broadcast(c{count}), dimensions={{}}", t)

    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(_CHAINS[element_type]))
        if op == "abs":
            value = add(f"abs({value})", element_type)
        elif op == "exponential":
            value = add(f"exponential({value})", element_type)
        elif op == "multiply":
            value = add(f"multiply({value}, {value})", element_type)
        elif op == "reverse":
            axes = draw(st.lists(st.integers(0, len(dims) - 1), unique=True))
            value = add(f"reverse({value}), dimensions={{{','.join(map(str, axes))}}}", element_type)
        elif op == "clamp":
            low = scalar(element_type, draw(st.integers(0, 2)))
            high = scalar(element_type, draw(st.integers(3, 9)))
            inner = add(f"clamp({low}, {value}, {high})", element_type)
            value = add(f"clamp({low}, {inner}, {high})", element_type)
        elif op in ("real", "imag"):
            value = add(f"{op}({value})", element_type)
        elif op == "remainder":
            divisors = (1, 2, 4, 8, 3) if element_type == "u32" else (1, 2, 4, 8, 3, -4)
            divisor = scalar(element_type, draw(st.sampled_from(divisors))) if draw(st.booleans()) else "y"
            inner = add(f"remainder({value}, {divisor})", element_type)
            value = add(f"remainder({inner}, {divisor})", element_type) if draw(st.booleans()) else inner
        elif op == "iota-remainder":
            iota = add(f"iota(), iota_dimension={draw(st.integers(0, len(dims) - 1))}", element_type)
            n = scalar(element_type, draw(st.integers(1, 6)))
            shifted = add(f"add({iota}, {n})", element_type) if draw(st.booleans()) else iota
            value = add(f"add({value}, {add(f'remainder({shifted}, {n})', element_type)})", element_type)
        else:  # bitcast-convert there and back
            other = _REINTERPRETED[element_type]
            there = add(f"bitcast-convert({value})", other)
            value = add(f"bitcast-convert({there})", element_type)
    lines[-1] = "ROOT " + lines[-1]
    return "HloModule unary\nENTRY main {\n  " + "\n  ".join(lines) + "\n}\n"


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(unary_programs())
def test_preserves_values_of_random_unary_programs(text: str) -> None:
    assert_simplifier_preserves_values(text, special_floats=True)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hlo_texts(max_instructions=8))
def test_preserves_values_of_random_programs(text: str) -> None:
    # The random programs have abs, exponentials, float remainders, reverses and iotas.
    module = parse_module(text)
    assume(any(i.opcode in ("abs", "exponential", "remainder", "reverse", "iota") for i in module.instructions))
    assume(not reduce_relies_on_its_initial_value(module))
    assert_simplifier_preserves_values(text)
