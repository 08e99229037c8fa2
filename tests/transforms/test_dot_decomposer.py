"""DotDecomposer against the behaviour of XLA's
(``xla/hlo/transforms/expanders/dot_decomposer.cc`` and its test), and against
the interpreter on hand-written, random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.dot_decomposer import DotDecomposer, is_canonical_dot


def module_with_dot(lhs: str, rhs: str, result: str, dnums: str) -> str:
    return f"""HloModule m
ENTRY e {{
  p0 = {lhs} parameter(0)
  p1 = {rhs} parameter(1)
  ROOT dot = {result} dot(p0, p1), {dnums}
}}"""


def run(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = DotDecomposer().run(module)
    verify(module)
    return changed, module.to_text()


@pytest.mark.parametrize("lhs, rhs, result, dnums", [
    ("f32[2,3]", "f32[3,4]", "f32[2,4]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # Each operand is checked alone: [K, M] and [N, K] are canonical too.
    ("f32[3,2]", "f32[4,3]", "f32[2,4]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
    ("f32[5,2,3]", "f32[5,3,4]", "f32[5,2,4]",
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    ("f32[5,6,2,3]", "f32[5,6,3]", "f32[5,6,2]",
     "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}"),
    # Matrix-vector and vector-vector dots.
    ("f32[2,3]", "f32[3]", "f32[2]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32[3]", "f32[3]", "f32[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
])
def test_canonical_dots_stay(lhs, rhs, result, dnums):
    text = module_with_dot(lhs, rhs, result, dnums)
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_two_contracting_dimensions_merge(tmp_path):
    changed, out = run(module_with_dot(
        "f32[2,3,4]", "f32[4,3,5]", "f32[2,5]",
        'lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}, operand_precision={highest,default}, '
        'metadata={op_name="mm"}'))
    assert changed
    # The contracting dimensions are merged in the order the dimension
    # numbers list them, so the lhs's (1, 2) pair with the rhs's (1, 0).
    filecheck(out, """
CHECK: %p0 = f32[2,3,4]{2,1,0} parameter(0)
CHECK-NEXT: %[[LT:.*]] = f32[2,3,4]{2,1,0} transpose(%p0), dimensions={0,1,2}
CHECK-NEXT: %[[L:.*]] = f32[2,12]{1,0} reshape(%[[LT]])
CHECK-NEXT: %p1 = f32[4,3,5]{2,1,0} parameter(1)
CHECK-NEXT: %[[RT:.*]] = f32[3,4,5]{2,1,0} transpose(%p1), dimensions={1,0,2}
CHECK-NEXT: %[[R:.*]] = f32[12,5]{1,0} reshape(%[[RT]])
CHECK-NEXT: %[[D:.*]] = f32[2,5]{1,0} dot(%[[L]], %[[R]]), lhs_contracting_dims={1}, rhs_contracting_dims={0}, \
operand_precision={highest,default}, metadata={op_name="mm"}
CHECK-NEXT: ROOT %{{.*}} = f32[2,5]{1,0} reshape(%[[D]]), metadata={op_name="mm"}
""", tmp_path)


def test_batch_dimensions_move_to_the_front(tmp_path):
    changed, out = run(module_with_dot(
        "f32[2,7,3]", "f32[3,4,7]", "f32[7,2,4]",
        "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={2}, rhs_contracting_dims={0}"))
    assert changed
    filecheck(out, """
CHECK: %[[LT:.*]] = f32[7,2,3]{2,1,0} transpose(%p0), dimensions={1,0,2}
CHECK-NEXT: %[[L:.*]] = f32[7,2,3]{2,1,0} reshape(%[[LT]])
CHECK: %[[RT:.*]] = f32[7,3,4]{2,1,0} transpose(%p1), dimensions={2,0,1}
CHECK-NEXT: %[[R:.*]] = f32[7,3,4]{2,1,0} reshape(%[[RT]])
CHECK-NEXT: %[[D:.*]] = f32[7,2,4]{2,1,0} dot(%[[L]], %[[R]]), lhs_batch_dims={0}, lhs_contracting_dims={2}, \
rhs_batch_dims={0}, rhs_contracting_dims={1}
CHECK-NEXT: ROOT %{{.*}} = f32[7,2,4]{2,1,0} reshape(%[[D]])
""", tmp_path)


def test_non_contracting_dimensions_merge(tmp_path):
    changed, out = run(module_with_dot(
        "f32[3,2,4]", "f32[5,4,6]", "f32[3,2,5,6]", "lhs_contracting_dims={2}, rhs_contracting_dims={1}"))
    assert changed
    filecheck(out, """
CHECK: %[[LT:.*]] = f32[3,2,4]{2,1,0} transpose(%p0), dimensions={0,1,2}
CHECK-NEXT: %[[L:.*]] = f32[6,4]{1,0} reshape(%[[LT]])
CHECK: %[[RT:.*]] = f32[4,5,6]{2,1,0} transpose(%p1), dimensions={1,0,2}
CHECK-NEXT: %[[R:.*]] = f32[4,30]{1,0} reshape(%[[RT]])
CHECK-NEXT: %[[D:.*]] = f32[6,30]{1,0} dot(%[[L]], %[[R]]), lhs_contracting_dims={1}, rhs_contracting_dims={0}
CHECK-NEXT: ROOT %{{.*}} = f32[3,2,5,6]{3,2,1,0} reshape(%[[D]])
""", tmp_path)


def test_outer_product_gets_a_contracting_dimension_of_size_one(tmp_path):
    changed, out = run(module_with_dot("f32[3]", "f32[4]", "f32[3,4]", "lhs_contracting_dims={}, "
                                       "rhs_contracting_dims={}"))
    assert changed
    filecheck(out, """
CHECK: %[[L:.*]] = f32[3,1]{1,0} reshape(
CHECK: %[[R:.*]] = f32[1,4]{1,0} reshape(
CHECK-NEXT: %[[D:.*]] = f32[3,4]{1,0} dot(%[[L]], %[[R]]), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""", tmp_path)


def test_non_contracting_product_of_one_is_left_out(tmp_path):
    # A size-1 non-contracting dimension vanishes, so the lhs becomes [K]
    # with its contracting dimension first.
    changed, out = run(module_with_dot(
        "f32[1,2,3]", "f32[2,3,4]", "f32[1,4]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"))
    assert changed
    filecheck(out, """
CHECK: %[[L:.*]] = f32[6]{0} reshape(
CHECK: %[[R:.*]] = f32[6,4]{1,0} reshape(
CHECK-NEXT: %[[D:.*]] = f32[4]{0} dot(%[[L]], %[[R]]), lhs_contracting_dims={0}, rhs_contracting_dims={0}
CHECK-NEXT: ROOT %{{.*}} = f32[1,4]{1,0} reshape(%[[D]])
""", tmp_path)


def test_sharding_goes_to_the_final_reshape(tmp_path):
    changed, out = run(module_with_dot(
        "f32[2,3,4]", "f32[3,4,5]", "f32[2,5]",
        "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, sharding={replicated}"))
    assert changed
    filecheck(out, """
CHECK: %[[D:.*]] = f32[2,5]{1,0} dot(%{{.*}}), lhs_contracting_dims={1}, rhs_contracting_dims={0}{{$}}
CHECK-NEXT: ROOT %{{.*}} = f32[2,5]{1,0} reshape(%[[D]]), sharding={replicated}
""", tmp_path)


def test_control_dependencies_move_to_the_new_instructions(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[2,3,4] parameter(0)
  p1 = f32[3,4] parameter(1)
  before = f32[3,4] negate(p1)
  dot = f32[2] dot(p0, p1), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, control-predecessors={before}
  after = f32[2] negate(p0), control-predecessors={dot}
  ROOT t = (f32[2], f32[3,4]) tuple(dot, before)
}""".replace("negate(p0)", "negate(dot)"))
    assert changed
    filecheck(out, """
CHECK: %[[D:.*]] = f32[2]{0} dot({{.*}}), lhs_contracting_dims={1}, rhs_contracting_dims={0}, \
control-predecessors={%before}
CHECK-NEXT: %[[R:.*]] = f32[2]{0} reshape(%[[D]])
CHECK-NEXT: %after = f32[2]{0} negate(%[[R]]), control-predecessors={%[[R]]}
""", tmp_path)


def test_dots_in_fusions_stay():
    text = """HloModule m
fused {
  a = f32[2,3,4] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}
ENTRY e {
  p0 = f32[2,3,4] parameter(0)
  p1 = f32[3,4] parameter(1)
  ROOT f = f32[2] fusion(p0, p1), kind=kOutput, calls=fused
}"""
    changed, _ = run(text)
    assert not changed


# Dots of every kind of dimension numbers, in several element types, must
# compute the same values after decomposition.
DIFFERENTIAL_DOTS = [
    ("[2,3,4]", "[4,3,5]", "[2,5]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}"),
    ("[2,7,3]", "[3,4,7]", "[7,2,4]",
     "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={2}, rhs_contracting_dims={0}"),
    ("[3,2,4]", "[5,4,6]", "[3,2,5,6]", "lhs_contracting_dims={2}, rhs_contracting_dims={1}"),
    ("[3]", "[4]", "[3,4]", "lhs_contracting_dims={}, rhs_contracting_dims={}"),
    ("[1,2,3]", "[2,3,4]", "[1,4]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"),
    ("[2,3,5,4]", "[5,3,4,2]", "[3,2,2]",
     "lhs_batch_dims={1}, lhs_contracting_dims={3,2}, rhs_batch_dims={1}, rhs_contracting_dims={2,0}"),
    ("[2,0,3]", "[3,4]", "[2,0,4]", "lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    ("[2,3]", "[0,3]", "[2,0]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("[4,2,3]", "[4,3]", "[4,2]", "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={1}"),
]


@pytest.mark.parametrize("element_type", ["f32", "bf16", "s32", "f64"])
@pytest.mark.parametrize("lhs, rhs, result, dnums", DIFFERENTIAL_DOTS)
def test_decomposition_preserves_values(element_type, lhs, rhs, result, dnums):
    text = module_with_dot(element_type + lhs, element_type + rhs, element_type + result, dnums)
    module = parse_module(text)
    DotDecomposer().run(module)
    assert all(i.opcode != "dot" or i.attr("lhs_contracting_dims") is not None for i in module.entry.instructions)
    assert_pass_preserves_values(DotDecomposer(), text, seeds=(0, 1, 2), special_floats=element_type != "s32")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_random_programs_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(DotDecomposer(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(DotDecomposer(), text, seeds=(0,))
    else:
        DotDecomposer().run(module)
        verify(module)


@st.composite
def general_dots(draw: st.DrawFn) -> str:
    """A dot with random batch, contracting and free dimensions, each
    operand's dimensions in a random order (the random programs only make
    canonical dots)."""
    size = st.integers(0, 3)
    batch = draw(st.lists(size, max_size=2))
    contracting = draw(st.lists(size, max_size=2))
    lhs_free, rhs_free = draw(st.lists(size, max_size=2)), draw(st.lists(size, max_size=2))
    element_type = draw(st.sampled_from(["f32", "bf16", "s32"]))

    def operand(free: list[int]) -> tuple[list[int], list[int], list[int], list[int]]:
        roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contracting))] + \
            [("f", i) for i in range(len(free))]
        order = draw(st.permutations(roles))
        sizes = {"b": batch, "c": contracting, "f": free}
        dims = [sizes[kind][i] for kind, i in order]
        return dims, [order.index(("b", i)) for i in range(len(batch))], \
            [order.index(("c", i)) for i in range(len(contracting))], \
            [dims[p] for p, (kind, _) in enumerate(order) if kind == "f"]  # in the result's order

    lhs, lhs_batch, lhs_contracting, lhs_result = operand(lhs_free)
    rhs, rhs_batch, rhs_contracting, rhs_result = operand(rhs_free)

    def text(dims: list[int]) -> str:
        return f"{element_type}[{','.join(map(str, dims))}]"

    def numbers(dims: list[int]) -> str:
        return "{" + ",".join(map(str, dims)) + "}"

    dnums = (f"lhs_batch_dims={numbers(lhs_batch)}, lhs_contracting_dims={numbers(lhs_contracting)}, "
             f"rhs_batch_dims={numbers(rhs_batch)}, rhs_contracting_dims={numbers(rhs_contracting)}")
    return module_with_dot(text(lhs), text(rhs), text([*batch, *lhs_result, *rhs_result]), dnums)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(general_dots())
def test_random_dots_keep_their_values(text: str) -> None:
    module = assert_pass_preserves_values(DotDecomposer(), text, special_floats=True)
    assert all(is_canonical_dot(i) for i in module.entry.instructions if i.opcode == "dot")
