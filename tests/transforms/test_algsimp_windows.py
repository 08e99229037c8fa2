"""The algebraic simplifier's ``reduce-window`` and ``sort`` rules against
XLA's behaviour (``HandleReduceWindow`` and ``HandleSort`` in
``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`` and its tests),
and against the interpreter on random programs of those ops."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tests.transforms import algsimp_cases
from tests.transforms.algsimp_cases import assert_simplifier_preserves_values

_COMPUTATIONS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_reversed {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT m = s32[] maximum(b, a)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
"""


def simplify(parameters: str, body: str) -> tuple[bool, str]:
    return algsimp_cases.simplify(parameters, body, computations=_COMPUTATIONS)


def test_window_of_one_element_is_an_elementwise_op_with_the_initial_value(tmp_path):
    changed, out = simplify("x = f32[3,4] parameter(0)\n  z = f32[] parameter(1)",
                            "ROOT r = f32[3,4] reduce-window(x, z), window={size=1x1}, to_apply=add")
    assert changed
    filecheck(out, """
CHECK: %[[B:.*]] = f32[3,4]{1,0} broadcast(%z), dimensions={}
CHECK: ROOT %{{.*}} = f32[3,4]{1,0} add(%[[B]], %x)
""", tmp_path)


def test_padded_window_of_one_element_is_padded_with_the_initial_value(tmp_path):
    # The reducer's operands are (element, init): the op keeps that order.
    changed, out = simplify("x = s32[3,4] parameter(0)\n  z = s32[] parameter(1)",
                            "ROOT r = s32[4,6] reduce-window(x, z), window={size=1x1 pad=1_0x0_2}, "
                            "to_apply=max_reversed")
    assert changed
    filecheck(out, """
CHECK: %[[B:.*]] = s32[3,4]{1,0} broadcast(%z), dimensions={}
CHECK: %[[M:.*]] = s32[3,4]{1,0} maximum(%x, %[[B]])
CHECK: ROOT %{{.*}} = s32[4,6]{1,0} pad(%[[M]], %z), padding=1_0x0_2
""", tmp_path)


def test_window_spanning_whole_dimensions_is_a_reduce(tmp_path):
    # XLA's enable_window_reduce_to_reduce_replacement (on by default).
    changed, out = simplify("x = f32[3,4] parameter(0)\n  z = f32[] constant(0)",
                            "ROOT r = f32[3,1] reduce-window(x, z), window={size=1x4}, to_apply=add")
    assert changed
    filecheck(out, """
CHECK: %[[R:.*]] = f32[3]{0} reduce(%x, %z), dimensions={1}, to_apply=%add
CHECK: ROOT %{{.*}} = f32[3,1]{1,0} reshape(%[[R]])
""", tmp_path)


def test_reduce_windows_without_elements_or_of_a_scalar(tmp_path):
    changed, out = simplify("x = f32[0,4] parameter(0)\n  z = f32[] parameter(1)",
                            "ROOT r = f32[0,2] reduce-window(x, z), window={size=1x3}, to_apply=add")
    assert changed
    filecheck(out, "CHECK: ROOT %{{.*}} = f32[0,2]{1,0} broadcast(%z), dimensions={}\n", tmp_path)
    changed, out = simplify("x = f32[] parameter(0)\n  z = f32[] constant(0)",
                            "ROOT r = f32[] reduce-window(x, z), to_apply=add")
    assert changed
    filecheck(out, "CHECK: ROOT %x = f32[] parameter(0)\n", tmp_path)


def test_reduce_windows_that_stay():
    # A real window, and a window of one element strided.
    assert not simplify("x = f32[3,4] parameter(0)\n  z = f32[] constant(0)",
                        "ROOT r = f32[3,3] reduce-window(x, z), window={size=1x2}, to_apply=add")[0]
    assert not simplify("x = f32[3,4] parameter(0)\n  z = f32[] constant(0)",
                        "ROOT r = f32[3,2] reduce-window(x, z), window={size=1x1 stride=1x2}, to_apply=add")[0]


def test_sort_along_a_dimension_of_one_element_is_its_operands(tmp_path):
    changed, out = simplify("k = f32[4,1] parameter(0)\n  v = s32[4,1] parameter(1)",
                            "ROOT r = (f32[4,1], s32[4,1]) sort(k, v), dimensions={1}, to_apply=less")
    assert changed
    filecheck(out, "CHECK: ROOT %{{.*}} = (f32[4,1]{1,0}, s32[4,1]{1,0}) tuple(%k, %v)\n", tmp_path)
    changed, _ = simplify("k = f32[4,2] parameter(0)\n  v = s32[4,2] parameter(1)",
                          "ROOT r = (f32[4,2], s32[4,2]) sort(k, v), dimensions={1}, to_apply=less")
    assert not changed


# -- random programs ------------------------------------------------------------------------------------------

_IDENTITIES = {"add": "0", "maximum": "-2147483648", "minimum": "2147483647"}


@st.composite
def window_programs(draw) -> str:
    """A reduce-window of an s32 parameter by add, maximum or minimum (in
    either operand order, from the reduction's identity) with windows of
    one element or of whole dimensions, padded or strided at times, and a
    sort along a dimension of at most one element."""
    dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    opcode = draw(st.sampled_from(tuple(_IDENTITIES)))
    operands = "b, a" if draw(st.booleans()) else "a, b"
    window, out = [], []
    for size in dims:
        kind = draw(st.sampled_from(("one", "whole", "padded", "strided")))
        if kind == "whole" and size > 0:
            window.append((size, 1, 0, 0))
        elif kind == "padded":
            window.append((1, 1, draw(st.integers(0, 2)), draw(st.integers(0, 2))))
        elif kind == "strided":
            window.append((1, 2, 0, 0))
        else:
            window.append((1, 1, 0, 0))
    for size, (w, stride, low, high) in zip(dims, window):
        padded = size + low + high
        out.append(0 if padded < w else (padded - w) // stride + 1)
    text = "x".join(str(w[0]) for w in window)
    strides = "x".join(str(w[1]) for w in window)
    pads = "x".join(f"{w[2]}_{w[3]}" for w in window)
    sort_dims = [draw(st.integers(0, 1)) for _ in range(2)]
    shape = lambda d: f"s32[{','.join(map(str, d))}]"  # noqa: E731
    return f"""HloModule windows
reducer {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] {opcode}({operands})
}}
less {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT
}}
ENTRY main {{
  x = {shape(dims)} parameter(0)
  z = s32[] constant({_IDENTITIES[opcode]})
  w = {shape(out)} reduce-window(x, z), window={{size={text} stride={strides} pad={pads}}}, to_apply=reducer
  y = {shape(sort_dims)} parameter(1)
  s = {shape(sort_dims)} sort(y), dimensions={{{draw(st.integers(0, 1))}}}, to_apply=less
  ROOT t = ({shape(out)}, {shape(sort_dims)}) tuple(w, s)
}}
"""


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(window_programs())
def test_preserves_values_of_random_window_programs(text: str) -> None:
    assert_simplifier_preserves_values(text)
