"""The verifier on what it must refuse without failing itself: malformed
attributes, computations that call themselves, custom calls the interpreter
runs, and modules with very many edges (it is linear in them)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlapy
from tests.interpreter.test_topk_custom_call import TOPK_TEMPLATE
from xlapy.errors import VerifyError, XlapyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule, parse_module, verify
from xlapy.hlo.attributes import ATTRIBUTES, print_attribute
from xlapy.shapes import Shape, parse_shape

TESTS = Path(__file__).parent.parent


def _verify_error(text: str) -> str:
    with pytest.raises(VerifyError) as error:
        verify(parse_module(text))
    return str(error.value)


_HLO_FILES = sorted(TESTS.rglob("*.hlo")) + sorted((TESTS.parent / "examples").glob("*.hlo"))


@pytest.mark.parametrize("path", _HLO_FILES, ids=lambda p: str(p.relative_to(TESTS.parent)))
def test_every_hlo_file_of_the_suite_and_the_examples_verifies(path):
    verify(parse_module(path.read_text()))


# -- many users, many operands -----------------------------------------------------------------

# 4,000 users in the default run; 40,000, where a search of the lists once took minutes, with the slow tests.
@pytest.mark.parametrize("n", [4_000, pytest.param(40_000, marks=pytest.mark.slow)])
def test_a_value_with_many_users_verifies(n: int):
    # One parameter used by n adds (each using it twice), all of them
    # operands of the root tuple: checking each edge by a search of the other
    # side's list took minutes for 40,000; sets make it about a second.
    module = HloModule("wide")
    entry = HloComputation("main", is_entry=True)
    param = HloInstruction("p", "parameter", Shape("f32", (2,)))
    param.parameter_number = 0
    entry.add_instruction(param)
    adds = [entry.add_instruction(HloInstruction(f"add.{i}", "add", Shape("f32", (2,)), [param, param]))
            for i in range(n)]
    entry.root = entry.add_instruction(HloInstruction("t", "tuple", Shape.make_tuple([Shape("f32", (2,))] * n), adds))
    module.add_computation(entry, entry=True)
    assert len(param.users) == n
    verify(module)
    # The edges are still checked: a user missing from the list is found.
    param.users.remove(adds[n // 2])
    with pytest.raises(VerifyError, match=f"instruction add.{n // 2}: uses p, but is missing from its users"):
        verify(module)


def test_a_user_listed_twice_is_refused():
    module = parse_module("HloModule m\nENTRY e { p = f32[2] parameter(0)  ROOT n = f32[2] negate(p) }")
    param = module.entry.parameters[0]
    param.users.append(param.users[0])
    with pytest.raises(VerifyError, match="computation e, instruction p: lists n as a user twice"):
        verify(module)


# -- computations that call themselves ----------------------------------------------------------

@pytest.mark.parametrize("text, path", [
    ("""HloModule m
f { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }
ENTRY e { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }""", "f -> f"),
    ("""HloModule m
g { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }
f { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=g }
ENTRY e { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=f }""", "g -> f -> g"),
    # A fusion whose fused computation is the computation containing it.
    ("""HloModule m
ENTRY e { p = f32[2] parameter(0)  ROOT c = f32[2] fusion(p), kind=kLoop, calls=e }""", "e -> e"),
    # A fusion that reaches its own computation through a call.
    ("""HloModule m
f { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=g }
g { p = f32[2] parameter(0)  ROOT c = f32[2] fusion(p), kind=kLoop, calls=f }
ENTRY e { p = f32[2] parameter(0)  ROOT c = f32[2] call(p), to_apply=g }""", "f -> g -> f"),
], ids=["call-direct", "call-indirect", "fusion-direct", "fusion-indirect"])
def test_a_computation_that_calls_itself_is_refused(text, path):
    message = _verify_error(text)
    assert message.endswith(f"calls itself: {path}")


# -- malformed attributes -------------------------------------------------------------------------

_BASE = """HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  a = f32[2,3] parameter(0)
  z = s32[] parameter(1)
  d = f32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  t = (f32[2,3], s32[]) tuple(a, z)
  g = f32[2,3] get-tuple-element(t), index=0
  sl = f32[1,3] slice(a), slice={[0:1], [0:3]}
  zero = f32[] constant(0)
  pd = f32[4,3] pad(a, zero), padding=1_1x0_0
  r = f32[2] reduce(a, zero), dimensions={1}, to_apply=add
  tr = f32[3,2] transpose(a), dimensions={1,0}
  c = f32[4,3] concatenate(a, a), dimensions={0}
  ROOT out = (f32[2,2], f32[2,3], f32[1,3], f32[4,3], f32[2], f32[3,2], f32[4,3]) tuple(d, g, sl, pd, r, tr, c)
}"""


@pytest.mark.parametrize("name, attribute, value, message", [
    ("d", "lhs_contracting_dims", 1.5, "instruction d: attribute lhs_contracting_dims of dot must be a list of "
                                       "integers, got 1.5"),
    ("d", "lhs_contracting_dims", [7], "instruction d: lhs batch and contracting dims={7} of dot: dimension 7 is out "
                                       "of range for lhs f32[2,3] of rank 2"),
    ("d", "lhs_batch_dims", {"a": 1}, "attribute lhs_batch_dims of dot must be a list of integers, got {'a': 1}"),
    ("g", "index", [0], "instruction g: attribute index of get-tuple-element must be an integer, got [0]"),
    ("g", "index", True, "attribute index of get-tuple-element must be an integer, got True"),
    ("g", "index", "9" * 5000, "attribute index of get-tuple-element must be an integer"),
    ("g", "index", "1", "attribute index of get-tuple-element must be an integer, got 1"),  # text, not the parser's
    ("g", "index", None, "instruction g: get-tuple-element needs attribute index"),
    ("sl", "slice", True, "instruction sl: attribute slice of slice must be [start:limit:stride] per dimension, "
                          "got True"),
    ("sl", "slice", [1, 2], "attribute slice of slice must be [start:limit:stride] per dimension, got [1, 2]"),
    ("pd", "padding", "x", "instruction pd: attribute padding of pad must be low_high_interior per dimension"),
    ("r", "dimensions", [5], "instruction r: dimensions={5} of reduce: dimension 5 is out of range for f32[2,3] "
                             "of rank 2"),
    ("r", "dimensions", "{a}", "attribute dimensions of reduce must be a list of integers, got {a}"),
    # the text of a good list is refused too: the interpreter and the emitters read the attribute as it is
    ("r", "dimensions", "{1}", "attribute dimensions of reduce must be a list of integers, got {1}"),
    ("tr", "dimensions", [], "dimensions={} of transpose must be a permutation of the 2 dimensions of f32[2,3]"),
    ("c", "dimensions", [], "concatenate needs exactly one dimension, got dimensions={}"),
    ("c", "dimensions", [-1], "concatenate dimension -1 is out of range for f32[2,3]"),
])
def test_malformed_attributes_are_verify_errors(name, attribute, value, message):
    module = parse_module(_BASE)
    verify(module)
    instr = next(i for i in module.entry.instructions if i.name == name)
    if value is None:
        del instr.attributes[attribute]
    else:
        instr.attributes[attribute] = value
    with pytest.raises(VerifyError) as error:
        verify(module)
    assert message in str(error.value)


@pytest.mark.parametrize("kind, operand, result", [
    ("FFT", "f32[8]", "c64[8]"), ("IFFT", "f64[8]", "c128[8]"), ("IRFFT", "f32[5]", "f32[8]"),
])
def test_fft_of_a_real_operand_is_refused(kind, operand, result):
    message = _verify_error(f"""HloModule m
ENTRY e {{ p = {operand} parameter(0)  ROOT c = {result} fft(p), fft_type={kind}, fft_length={{8}} }}""")
    assert message == f"computation e, instruction c: fft needs complex operands for {kind}, got {operand}"


def _modules() -> list[str]:
    paths = sorted((TESTS / "hlo" / "data").rglob("*.hlo")) + sorted((TESTS / "codegen" / "data").rglob("*.hlo"))
    return [path.read_text() for path in paths][::3]


_MODULES = _modules()
_JUNK = st.sampled_from([None, 0, -1, 3, 2**40, "", "x", "{", "{1,2}", "{-1}", [], [0], [-1], [5, 5], [2**40],
                         (1, "a"), {}, 1.5, True, [[1]], "true", "kLoop", "FFT", "IRFFT", "EQ", ("a",)])
_NAMES = st.sampled_from(["dimensions", "slice", "padding", "window", "index", "fft_length", "fft_type", "direction",
                          "custom_call_target", "lhs_contracting_dims", "rhs_batch_dims", "kind", "k", "largest",
                          "feature_group_count", "offset_dims", "exponent_bits", "dynamic_slice_sizes", "type"])
_SHAPES = st.sampled_from(["f32[]", "f32[2]", "c64[4]", "s32[]", "pred[]", "(f32[], s32[])", "()", "token[]",
                           "f32[0]", "u8[3,0]", "f64[2,3]"])


def _check_edited_module(data: st.DataObject) -> None:
    """Attributes set to junk, shapes swapped, callees changed: the verifier
    accepts the module or raises an XlapyError, never another exception."""
    module = parse_module(data.draw(st.sampled_from(_MODULES)))
    instructions = [i for c in module.computations for i in c.instructions]
    for _ in range(data.draw(st.integers(1, 3))):
        instr = data.draw(st.sampled_from(instructions))
        edit = data.draw(st.sampled_from(["attribute", "new attribute", "drop attribute", "shape", "operand shape",
                                          "callees"]))
        if edit == "attribute" and instr.attributes:
            instr.attributes[data.draw(st.sampled_from(sorted(instr.attributes)))] = data.draw(_JUNK)
        elif edit == "new attribute":
            instr.attributes[data.draw(_NAMES)] = data.draw(_JUNK)
        elif edit == "drop attribute" and instr.attributes:
            del instr.attributes[data.draw(st.sampled_from(sorted(instr.attributes)))]
        elif edit == "shape":
            instr.shape = parse_shape(data.draw(_SHAPES))
        elif edit == "operand shape" and instr.operands:
            data.draw(st.sampled_from(instr.operands)).shape = parse_shape(data.draw(_SHAPES))
        elif edit == "callees":
            instr.called_computations = data.draw(st.sampled_from(
                [[], instr.called_computations * 2, [module.computations[0]], [module.entry]]))
    with contextlib.suppress(XlapyError):
        verify(module)


# A bounded budget in the default run, a larger one with the slow tests.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edited_modules_give_verify_errors_only(data):
    _check_edited_module(data)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edited_modules_give_verify_errors_only_many(data):
    _check_edited_module(data)


# -- custom calls the interpreter runs -------------------------------------------------------------

def test_a_top_k_custom_call_the_verifier_accepts_runs():
    module = parse_module(TOPK_TEMPLATE.replace("RESULT", "(f32[2,3], s32[2,3])")
                          .replace("CALLED", ", called_computations={greater}"))
    x = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]], np.float32)
    values, indices = xlapy.evaluate(module, x)
    np.testing.assert_array_equal(values, [[9, 5, 4], [8, 6, 5]])
    np.testing.assert_array_equal(indices, [[5, 4, 2], [5, 1, 2]])


@pytest.mark.parametrize("result, called, message", [
    ("(f32[2,3], s32[2,3])", "", "custom-call TopK needs one comparator computation (called_computations={...}), "
                                 "got 0"),
    ("(f32[2,3], s32[2,3])", ", called_computations={less}", "parameter 2 of comparator less must be s32[] to match "
                                                             "custom-call, got f32[]"),
    ("(f32[2,3], s32[2,3])", ", called_computations={sum}", "comparator sum of custom-call must return pred[], "
                                                            "returns f32[]"),
    ("(f32[2,7], s32[2,7])", ", called_computations={greater}", "custom-call TopK of f32[2,6] returns (values, s32 "
                                                                "indices) of its leading dimensions and k <= 6"),
    ("(f32[2,3], s32[2,2])", ", called_computations={greater}", "but the instruction declares (f32[2,3], s32[2,2])"),
    ("(f32[2,3], f32[2,3])", ", called_computations={greater}", "but the instruction declares (f32[2,3], f32[2,3])"),
    ("f32[2,3]", ", called_computations={greater}", "custom-call produces a tuple of at least 2 elements, but the "
                                                    "instruction declares f32[2,3]"),
])
def test_a_top_k_custom_call_the_interpreter_cannot_run_is_refused(result, called, message):
    text = TOPK_TEMPLATE.replace("RESULT", result).replace("CALLED", called).replace("ENTRY", """less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = f32[] parameter(2)
  j = f32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT s = f32[] add(a, b)
}
ENTRY""")
    assert message in _verify_error(text)


@pytest.mark.parametrize("target", ["Sharding", "MoveToHost", "LayoutConstraint", "xla.sdy.FuncResultSharding"])
def test_an_annotation_custom_call_must_pass_its_operand_through(target):
    valid = f"""HloModule m
ENTRY e {{ x = f32[2,6] parameter(0)  ROOT t = f32[2,6] custom-call(x), custom_call_target="{target}" }}"""
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(xlapy.evaluate(parse_module(valid), x), x)
    message = _verify_error(valid.replace("ROOT t = f32[2,6]", "ROOT t = s32[2,6]"))
    assert message == ("computation e, instruction t: custom-call produces f32[2,6], but the instruction declares "
                       "s32[2,6]")


def test_a_shard_shape_custom_call_keeps_element_type_and_rank():
    text = """HloModule m
ENTRY e { x = f32[8,6] parameter(0)  ROOT t = RESULT custom-call(x), custom_call_target="SPMDFullToShardShape" }"""
    verify(parse_module(text.replace("RESULT", "f32[2,6]")))
    assert "custom-call SPMDFullToShardShape keeps the element type and rank of operand 0: f32[8,6] cannot become " \
           "f32[48]" in _verify_error(text.replace("RESULT", "f32[48]"))


@pytest.mark.parametrize("value", ["false", "true", 1, 0.0, None])
def test_boolean_attributes_hold_booleans(value):
    # The emitters read the scatter's flags as truth values: the string "false" would pick the parallel path.
    module = parse_module("""HloModule flags
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e { x = f32[64,8] parameter(0)  i = s32[20,1] parameter(1)  u = f32[20,8] parameter(2)
  ROOT s = f32[64,8] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=comb }""")
    verify(module)
    module.entry.root.attributes["unique_indices"] = value
    shown = value if isinstance(value, str) else repr(value)
    with pytest.raises(VerifyError, match=f"attribute unique_indices of scatter must be true or false, got {shown}$"):
        verify(module)


def _modelled_attributes() -> list[tuple[Path, str, str]]:
    """For each attribute name xlapy models, the first file of the suite and instruction that has it."""
    found: dict[str, tuple[Path, str, str]] = {}
    for path in _HLO_FILES:
        with contextlib.suppress(XlapyError):
            for computation in parse_module(path.read_text()).computations:
                for instr in computation.instructions:
                    for name in instr.attributes:
                        if name in ATTRIBUTES:
                            found.setdefault(name, (path, instr.name, name))
    return [found[name] for name in sorted(found)]


_MODELLED = _modelled_attributes()


def test_the_suite_has_every_kind_of_attribute():
    assert {id(ATTRIBUTES[name]) for _, _, name in _MODELLED} == {id(kind) for kind in ATTRIBUTES.values()}


@pytest.mark.parametrize("path, instruction, name", _MODELLED, ids=lambda v: v if isinstance(v, str) else v.name)
def test_an_attribute_of_another_form_is_refused(path, instruction, name):
    # Its printed text in place of the value (or a number in place of a text): what an edit or a pass could set.
    # The interpreter and the emitters read the attribute as it is, so verification must not accept it.
    module = parse_module(path.read_text())
    verify(module)
    instr = next(i for c in module.computations for i in c.instructions if i.name == instruction)
    kind = ATTRIBUTES[name]
    wrong = 7 if kind.holds("text") else print_attribute(name, instr.attributes[name])
    instr.attributes[name] = wrong
    with pytest.raises(VerifyError) as error:
        verify(module)
    assert f"instruction {instruction}: attribute {name} of {instr.opcode} must be {kind.spelling}, got {wrong}" \
        in str(error.value)
