"""The algebraic simplifier's ``dynamic-slice``, ``dynamic-update-slice`` and
``gather`` rules against XLA's behaviour (``HandleDynamicSlice``,
``HandleDynamicUpdateSlice`` and ``HandleGather`` in
``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`` and its tests),
and against the interpreter on random programs of those ops."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tests.transforms.algsimp_cases import assert_simplifier_preserves_values, root_is, simplify
from xlapy.hlo import parse_module

_INDICES = "i = s32[] parameter(1)\n  j = s32[] parameter(2)"


@pytest.mark.parametrize("body, expected", [
    # A slice as large as the operand (XLA's TrivialDynamicSlice).
    ("ROOT r = f32[4,5] dynamic-slice(p, i, j), dynamic_slice_sizes={4,5}", "%p = f32[4,5]{1,0} parameter(0)"),
    # An update as large as the operand is the update (TrivialDynamicUpdateSlice).
    ("ROOT r = f32[4,5] dynamic-update-slice(q, p, i, j)", "%p = f32[4,5]{1,0} parameter(0)"),
    # An update without elements changes nothing.
    ("d = f32[4,5] dynamic-update-slice(p, u, i, j)\n  ROOT r = f32[4,5] add(d, q)",
     "%r = f32[4,5]{1,0} add(%p, %q)"),
])
def test_slices_and_updates_that_change_nothing(body, expected, tmp_path):
    changed, out = simplify(f"p = f32[4,5] parameter(0)\n  {_INDICES}\n  q = f32[4,5] parameter(3)\n"
                            "  u = f32[0,5] parameter(4)", body)
    assert changed
    root_is(out, expected, tmp_path)


def test_index_of_a_wholly_spanned_dimension_becomes_zero(tmp_path):
    changed, out = simplify(f"p = f32[4,5] parameter(0)\n  {_INDICES}",
                            "ROOT r = f32[2,5] dynamic-slice(p, i, j), dynamic_slice_sizes={2,5}")
    assert changed
    filecheck(out, """
CHECK: %[[Z:.*]] = s32[] constant(0)
CHECK: ROOT %r = f32[2,5]{1,0} dynamic-slice(%p, %i, %[[Z]]), dynamic_slice_sizes={2,5}
""", tmp_path)
    changed, out = simplify(f"p = f32[4,5] parameter(0)\n  {_INDICES}\n  u = f32[4,2] parameter(3)",
                            "ROOT r = f32[4,5] dynamic-update-slice(p, u, i, j)")
    assert changed
    filecheck(out, """
CHECK: %[[Z:.*]] = s32[] constant(0)
CHECK: ROOT %r = f32[4,5]{1,0} dynamic-update-slice(%p, %u, %[[Z]], %j)
""", tmp_path)


def test_dynamic_slice_at_constant_indices_is_a_clamped_slice(tmp_path):
    # XLA's ConstantDynamicSliceToSlice; a start past the end is clamped.
    changed, out = simplify("p = f32[4,5] parameter(0)",
                            "a = s32[] constant(1)\n  b = s32[] constant(7)\n"
                            "  ROOT r = f32[2,3] dynamic-slice(p, a, b), dynamic_slice_sizes={2,3}")
    assert changed
    root_is(out, "%{{.*}} = f32[2,3]{1,0} slice(%p), slice={[1:3], [2:5]}", tmp_path)
    # A negative constant index is left alone, as XLA does.
    changed, _ = simplify("p = f32[4,5] parameter(0)",
                          "a = s32[] constant(-1)\n  b = s32[] constant(1)\n"
                          "  ROOT r = f32[2,3] dynamic-slice(p, a, b), dynamic_slice_sizes={2,3}")
    assert not changed


def test_dynamic_slice_of_a_broadcast_slices_the_broadcast_operand(tmp_path):
    changed, out = simplify("p = f32[5] parameter(0)\n  i = s32[] parameter(1)\n  j = s32[] parameter(2)",
                            "b = f32[4,5] broadcast(p), dimensions={1}\n"
                            "  ROOT r = f32[2,3] dynamic-slice(b, i, j), dynamic_slice_sizes={2,3}")
    assert changed
    filecheck(out, """
CHECK: %[[S:.*]] = f32[3]{0} dynamic-slice(%p, %j), dynamic_slice_sizes={3}
CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%[[S]]), dimensions={1}
""", tmp_path)


def test_dynamic_slice_of_a_transpose_transposes_a_dynamic_slice(tmp_path):
    changed, out = simplify("p = f32[5,4] parameter(0)\n  i = s32[] parameter(1)\n  j = s32[] parameter(2)",
                            "t = f32[4,5] transpose(p), dimensions={1,0}\n"
                            "  ROOT r = f32[2,3] dynamic-slice(t, i, j), dynamic_slice_sizes={2,3}")
    assert changed
    filecheck(out, """
CHECK: %[[S:.*]] = f32[3,2]{1,0} dynamic-slice(%p, %j, %i), dynamic_slice_sizes={3,2}
CHECK: ROOT %{{.*}} = f32[2,3]{1,0} transpose(%[[S]]), dimensions={1,0}
""", tmp_path)


def test_gather_from_one_element_is_a_broadcast(tmp_path):
    changed, out = simplify("p = f32[1,1] parameter(0)\n  k = s32[3,2] parameter(1)",
                            "ROOT g = f32[3] gather(p, k), offset_dims={}, collapsed_slice_dims={0,1}, "
                            "start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}")
    assert changed
    filecheck(out, """
CHECK: %[[S:.*]] = f32[]{{.*}} reshape(%p)
CHECK: ROOT %{{.*}} = f32[3]{0} broadcast(%[[S]]), dimensions={}
""", tmp_path)


def test_gather_from_no_elements_is_zero(tmp_path):
    changed, out = simplify("p = f32[3,0] parameter(0)\n  k = s32[2] parameter(1)",
                            "ROOT g = f32[2,0] gather(p, k), offset_dims={1}, collapsed_slice_dims={0}, "
                            "start_index_map={0}, index_vector_dim=1, slice_sizes={1,0}")
    assert changed
    root_is(out, "%{{.*}} = f32[2,0]{1,0} broadcast(%{{.*}}), dimensions={}", tmp_path)


def test_very_small_gather_is_a_chain_of_selects():
    # XLA's SimplifyVerySmallGather: select(index >= i, element i, ...) for
    # i = 2, 1, 0 from the root down, element 0 at the bottom.
    changed, out = simplify("p = f32[3] parameter(0)\n  k = s32[5] parameter(1)",
                            "ROOT g = f32[5] gather(p, k), offset_dims={}, collapsed_slice_dims={0}, "
                            "start_index_map={0}, index_vector_dim=1, slice_sizes={1}")
    assert changed
    node = parse_module(out).entry.root

    def element_of(value) -> int:
        assert value.opcode == "broadcast" and value.operands[0].opcode == "reshape"
        piece = value.operands[0].operands[0]
        assert piece.opcode == "slice" and piece.operands[0].name == "p"
        return piece.attr("slice")[0].start

    for i in (2, 1, 0):
        assert node.opcode == "select"
        compare, chosen, node = node.operands
        assert compare.opcode == "compare" and str(compare.attr("direction")) == "GE"
        assert compare.operands[0].name == "k" and int(compare.operands[1].operands[0].literal) == i
        assert element_of(chosen) == i
    assert element_of(node) == 0


# -- random programs ------------------------------------------------------------------------------------------


@st.composite
def slicing_programs(draw) -> str:
    """A module of dynamic slices, dynamic updates and small gathers of a
    parameter (or of a broadcast or transpose of it), at parameter indices
    (sometimes offset out of bounds) or constant ones."""
    element_type = draw(st.sampled_from(("f32", "s32", "bf16")))
    dims = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    rank = len(dims)
    lines = [f"p = {element_type}[{','.join(map(str, dims))}] parameter(0)"]
    parameters = 1
    operand = "p"
    if draw(st.booleans()):
        permutation = draw(st.permutations(range(rank)))
        dims = [dims[d] for d in permutation]
        lines.append(f"t = {element_type}[{','.join(map(str, dims))}] transpose(p), "
                     f"dimensions={{{','.join(map(str, permutation))}}}")
        operand = "t"
    elif rank < 3 and draw(st.booleans()):
        size = draw(st.integers(1, 4))
        lines.append(f"b = {element_type}[{size},{','.join(map(str, dims))}] broadcast(p), "
                     f"dimensions={{{','.join(str(d + 1) for d in range(rank))}}}")
        dims, rank, operand = [size, *dims], rank + 1, "b"
    indices = []
    for d in range(rank):
        way = draw(st.integers(0, 2))
        name = f"i{d}"
        if way == 0:
            lines.append(f"{name} = s32[] constant({draw(st.integers(-2, 7))})")
        else:
            lines.append(f"{name}.p = s32[] parameter({parameters})")
            parameters += 1
            if way == 2:  # out of bounds: not an index parameter drawn in range
                lines.append(f"{name}.c = s32[] constant({draw(st.integers(-3, 6))})")
                lines.append(f"{name} = s32[] add({name}.p, {name}.c)")
            else:
                lines.append(f"{name} = s32[] copy({name}.p)")
        indices.append(name)
    sizes = [draw(st.integers(0 if d else 1, d)) for d in dims]
    shape = f"{element_type}[{','.join(map(str, sizes))}]"
    lines.append(f"s = {shape} dynamic-slice({operand}, {', '.join(indices)}), "
                 f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}}")
    update_sizes = [draw(st.integers(0, d)) for d in dims]
    lines.append(f"u = {element_type}[{','.join(map(str, update_sizes))}] parameter({parameters})")
    full = f"{element_type}[{','.join(map(str, dims))}]"
    lines.append(f"d = {full} dynamic-update-slice({operand}, u, {', '.join(indices)})")
    vector = draw(st.integers(1, 5))
    lines.append(f"v = {element_type}[{vector}] parameter({parameters + 1})")
    lines.append(f"k = s32[3] parameter({parameters + 2})")
    lines.append(f"g = {element_type}[3] gather(v, k), offset_dims={{}}, collapsed_slice_dims={{0}}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1}")
    lines.append(f"ROOT r = ({shape}, {full}, {element_type}[3]) tuple(s, d, g)")
    return "HloModule slicing\nENTRY main {\n  " + "\n  ".join(lines) + "\n}\n"


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(slicing_programs())
def test_preserves_values_of_random_slicing_programs(text: str) -> None:
    assert_simplifier_preserves_values(text)
