"""The computation partitioner: the rules and examples of the partitioning section of XLA's
docs/emitters.md (see docs/emitters.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.codegen.partitioner import partition


def _fused(body: str, params: str, root_shape: str):
    operands = ", ".join(line.split("=")[0].strip() for line in params.splitlines())
    text = f"""HloModule m
f {{
{body}
}}
ENTRY e {{
{params}
  ROOT r = {root_shape} fusion({operands}), kind=kLoop, calls=f
}}"""
    return xlapy.parse_hlo(text).computation("f")


TWO_PARAMS = "  p0 = f32[6] parameter(0)\n  p1 = f32[6] parameter(1)"


def _groups(computation) -> list[tuple[str, list[str]]]:
    return [(s.name, [i.name for i in s.instructions]) for s in partition(computation).subgraphs]


def test_log_transpose_add_splits_into_three_functions():
    """The document's first example: `add` and `transpose` read `log` at different indices."""
    computation = _fused("""  p = f32[20,20] parameter(0)
  log = f32[20,20] log(p)
  transpose = f32[20,20] transpose(log), dimensions={1,0}
  ROOT add = f32[20,20] add(log, transpose)""", "  p = f32[20,20] parameter(0)", "f32[20,20]")
    assert _groups(computation) == [("f", ["add"]), ("f_transpose", ["transpose"]), ("f_log", ["log"])]


def test_slice_and_pad_of_add():
    """The document's second example: `slice` and `pad` read `add` at different indices."""
    computation = _fused("""  p0 = f32[16] parameter(0)
  p1 = f32[16] parameter(1)
  add = f32[16] add(p0, p1)
  slice = f32[8] slice(add), slice={[1:9]}
  zero = f32[] constant(0)
  pad = f32[8] pad(add, zero), padding=2_-10
  ROOT multiply = f32[8] multiply(slice, pad)""", TWO_PARAMS.replace("6", "16"), "f32[8]")
    groups = _groups(computation)
    assert groups == [("f", ["multiply"]), ("f_pad", ["zero", "pad"]), ("f_slice", ["slice"]), ("f_add", ["add"])]


def test_single_user_chains_and_shared_indexing_stay_together():
    """gelu (the document's loop emitter example): one function, because every value is read at the output's indices."""
    module = xlapy.parse_hlo((Path(__file__).parents[2] / "examples" / "gelu.hlo").read_text())
    groups = _groups(module.computation("gelu"))
    assert len(groups) == 1 and groups[0][0] == "gelu" and len(groups[0][1]) == 17


def test_multi_user_read_at_the_same_indices_joins_its_users():
    computation = _fused("""  p = f32[8,8] parameter(0)
  e = f32[8,8] exponential(p)
  n = f32[8,8] negate(e)
  ROOT m = f32[8,8] multiply(e, n)""", "  p = f32[8,8] parameter(0)", "f32[8,8]")
    assert _groups(computation) == [("f", ["e", "n", "m"])]


def test_tuple_root_outputs_share_the_root_function():
    computation = _fused("""  p0 = f32[6] parameter(0)
  p1 = f32[6] parameter(1)
  add = f32[6] add(p0, p1)
  sub = f32[6] subtract(p0, p1)
  ROOT t = (f32[6], f32[6]) tuple(add, sub)""", TWO_PARAMS, "(f32[6], f32[6])")
    partitioned = partition(computation)
    assert [[r.name for r in s.roots] for s in partitioned.subgraphs] == [["add", "sub"]]


@pytest.mark.parametrize("levels, expected", [
    (1, [["a0", "b0", "add0"]]),
    (3, [["a2", "add2"], ["b2"], ["a1", "add1"], ["b1"], ["a0", "b0", "add0"]]),
])
def test_diamonds_of_slices(levels, expected):
    """Each add is read by two slices at different offsets, so it roots a function; the slice
    that shifts the indices reads another function and roots its own (the identity slice does not)."""
    lines, size, previous = [], 2 + levels, "param"
    lines.append(f"  param = f32[{size}] parameter(0)")
    for level in range(levels):
        size -= 1
        lines.append(f"  a{level} = f32[{size}] slice({previous}), slice={{[0:{size}]}}")
        lines.append(f"  b{level} = f32[{size}] slice({previous}), slice={{[1:{size + 1}]}}")
        lines.append(f"  {'ROOT ' if level == levels - 1 else ''}add{level} = f32[{size}] add(a{level}, b{level})")
        previous = f"add{level}"
    computation = _fused("\n".join(lines), f"  param = f32[{2 + levels}] parameter(0)", f"f32[{size}]")
    assert [names for _, names in _groups(computation)] == expected


def test_dead_instructions_get_no_function_and_do_not_split_their_operands():
    computation = _fused("""  p0 = f32[6] parameter(0)
  p1 = f32[6] parameter(1)
  e = f32[6] exponential(p0)
  dead = f32[6] reverse(e), dimensions={0}
  also_dead = f32[6] cosine(dead)
  ROOT add = f32[6] add(e, p1)""", TWO_PARAMS, "f32[6]")
    assert _groups(computation) == [("f", ["e", "add"])]


# Multi-output fusions whose output ``a`` is also read by an instruction computed by a function of its own
# (``r``, read at two different indices). Were ``a`` computed by the first function, which returns it, ``r``'s
# function would call the first one, which calls ``r``'s back for ``b``: a recursion without end.
OUTPUT_READ_BY_ANOTHER_FUNCTION = {
    "reverse": """  p = f32[2,3] parameter(0)
  a = f32[2,3] exponential(p)
  r = f32[2,3] reverse(a), dimensions={0,1}
  s = f32[2,3] reverse(r), dimensions={1}
  c = f32[2,3] add(r, s)
  b = f32[2,3] add(c, p)
  ROOT t = (f32[2,3], f32[2,3]) tuple(a, b)""",
    "transpose": """  p = f32[3,3] parameter(0)
  a = f32[3,3] negate(p)
  r = f32[3,3] transpose(a), dimensions={1,0}
  s = f32[3,3] transpose(r), dimensions={1,0}
  c = f32[3,3] multiply(r, s)
  b = f32[3,3] subtract(c, a)
  ROOT t = (f32[3,3], f32[3,3], f32[3,3]) tuple(a, b, c)""",
    "slices": """  p = f32[8] parameter(0)
  a = f32[8] sine(p)
  a0 = f32[] constant(0.5)
  r = f32[9] pad(a, a0), padding=1_0
  lo = f32[8] slice(r), slice={[0:8]}
  hi = f32[8] slice(r), slice={[1:9]}
  b = f32[8] add(lo, hi)
  ROOT t = (f32[8], f32[8]) tuple(b, a)""",
}


def _module(body: str) -> xlapy.HloModule:
    params = [line for line in body.splitlines() if "parameter(" in line]
    root_shape = body.splitlines()[-1].split("=")[1].split(" tuple")[0].strip()
    operands = ", ".join(line.split("=")[0].strip() for line in params)
    return xlapy.parse_hlo(f"HloModule m\nf {{\n{body}\n}}\nENTRY e {{\n" + "\n".join(params)
                           + f"\n  ROOT fusion = {root_shape} fusion({operands}), kind=kLoop, calls=f\n}}")


def test_an_output_read_by_another_function_is_computed_by_its_own():
    partitioned = partition(_module(OUTPUT_READ_BY_ANOTHER_FUNCTION["reverse"]).computation("f"))
    assert [([r.name for r in s.roots], [i.name for i in s.instructions]) for s in partitioned.subgraphs] == [
        (["a", "b"], ["c", "b"]), (["s"], ["s"]), (["r"], ["r"]), (["a"], ["a"])]
    # No function reads an instruction of the first one: only the kernel calls it.
    first = partitioned.root_subgraph
    for subgraph in partitioned.subgraphs[1:]:
        for instr in subgraph.instructions:
            assert all(partitioned.subgraph_of.get(op) is not first for op in instr.operands), instr.name


@pytest.mark.usefixtures("fresh_kernel_cache")
@pytest.mark.parametrize("name", sorted(OUTPUT_READ_BY_ANOTHER_FUNCTION))
def test_an_output_read_by_another_function_compiles_to_the_interpreters_values(name):
    module = _module(OUTPUT_READ_BY_ANOTHER_FUNCTION[name])
    (param,) = module.entry.parameters
    args = [np.linspace(-2, 3, num=int(np.prod(param.shape.dimensions)), dtype=np.float32)
            .reshape(param.shape.dimensions)]
    got = xlapy.compile(module, run_hlo_passes=False)(*args)
    assert_same(got, xlapy.evaluate(module, *args), exact_bits=True, context=name)


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_a_pad_that_reads_none_of_its_operand():
    # Low padding -1 with interior padding 1 on a dimension of one element leaves none of the operand in the
    # result: the pad's map to it is known empty, and partitioning must not try to compose through it.
    module = xlapy.parse_hlo("""HloModule m
f {
  p = f32[1,7,8] parameter(0)
  c = f32[] constant(-3)
  b = f32[1,7,8] broadcast(c), dimensions={}
  m = f32[1,7,8] maximum(p, b)
  ROOT pad = f32[1,12,9] pad(m, c), padding=-1_1_1x-1_0_1x0_1_0
}
ENTRY e {
  p = f32[1,7,8] parameter(0)
  ROOT r = f32[1,12,9] fusion(p), kind=kLoop, calls=f
}""")
    args = [np.linspace(-5, 5, num=56, dtype=np.float32).reshape(1, 7, 8)]
    got = xlapy.compile(module, run_hlo_passes=False)(*args)
    assert_same(got, xlapy.evaluate(module, *args), exact_bits=True)
    assert np.all(got == -3)


@pytest.mark.usefixtures("fresh_kernel_cache")
def test_functions_of_a_fusion_without_parameters_are_called():
    # Two subgraph functions and no tensor to pass them: lower-tensors still makes their calls plain calls.
    module = xlapy.parse_hlo("""HloModule m
f {
  c = pred[] constant(true)
  b = pred[2] broadcast(c), dimensions={}
  b2 = pred[7] broadcast(c), dimensions={}
  ROOT r = pred[9] concatenate(b, b2), dimensions={0}
}
ENTRY e {
  ROOT r = pred[9] fusion(), kind=kLoop, calls=f
}""")
    assert_same(xlapy.compile(module, run_hlo_passes=False)(), xlapy.evaluate(module), exact_bits=True)
