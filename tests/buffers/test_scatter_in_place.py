"""Scatters written over the arrays they update: buffer assignment gives a scatter's result (lone, or the root of
a loop fusion; result ``i`` of a variadic scatter) the slice of the operand it updates when that operand dies
there and nothing else reads it, as XLA's ``CanShareOperandBufferWithUser`` allows
(``xla/service/hlo_dataflow_analysis.cc``); the scatter emitter then skips its initial copy. Each assignment is
replayed against the reference interpreter (``tools/buffer_replay.py``) and the compiled module's results equal
the interpreter's bit for bit (every op here rounds once, in both)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.buffer_replay import assert_replay_matches_interpreter
from tools.compare import assert_same
from xlapy.buffers.assignment import assign_buffers
from xlapy.buffers.schedule import schedule_module
from xlapy.codegen.emitters.scatter import in_place_outputs, is_scatter_fusion
from xlapy.hlo import HloModule, parse_module
from xlapy.runtime.thunks.kernel import KernelThunk
from xlapy.shapes import ELEMENT_TYPES

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT total = f32[] add(a, b)
}
"""

# Rows 1, 3 and 1 again (combined in order) and 7 (out of bounds: dropped) of an 6x4 table get an update each.
SCATTER_ATTRS = ("update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                 "index_vector_dim=1, to_apply=add")

LONE = f"""HloModule lone
{ADD}
ENTRY main {{
  p = f32[6,4] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,4] parameter(2)
  base = f32[6,4] negate(p)
  s = f32[6,4] scatter(base, i, u), {SCATTER_ATTRS}
  ROOT r = f32[6,4] exponential(s)
}}
"""

FUSED = f"""HloModule fused
{ADD}
wrapped_scatter {{
  x = f32[6,4] parameter(0)
  j = s32[4,1] parameter(1)
  v = f32[4,4] parameter(2)
  ROOT scattered = f32[6,4] scatter(x, j, v), {SCATTER_ATTRS}
}}
ENTRY main {{
  p = f32[6,4] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,4] parameter(2)
  base = f32[6,4] negate(p)
  s = f32[6,4] fusion(base, i, u), kind=kLoop, calls=wrapped_scatter
  ROOT r = f32[6,4] exponential(s)
}}
"""

VARIADIC = f"""HloModule variadic
add2 {{
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  sum = f32[] add(a, c)
  m = s32[] maximum(b, d)
  ROOT t = (f32[], s32[]) tuple(sum, m)
}}
wrapped_scatter {{
  x = f32[6,4] parameter(0)
  y = s32[6,4] parameter(1)
  j = s32[4,1] parameter(2)
  v = f32[4,4] parameter(3)
  w = s32[4,4] parameter(4)
  ROOT scattered = (f32[6,4], s32[6,4]) scatter(x, y, j, v, w), {SCATTER_ATTRS.replace("=add", "=add2")}
}}
ENTRY main {{
  p = f32[6,4] parameter(0)
  q = s32[6,4] parameter(1)
  i = s32[4,1] parameter(2)
  u = f32[4,4] parameter(3)
  k = s32[4,4] parameter(4)
  base = f32[6,4] negate(p)
  other = s32[6,4] negate(q)
  s = (f32[6,4], s32[6,4]) fusion(base, other, i, u, k), kind=kLoop, calls=wrapped_scatter
  s0 = f32[6,4] get-tuple-element(s), index=0
  s1 = s32[6,4] get-tuple-element(s), index=1
  c = f32[6,4] convert(s1)
  ROOT r = f32[6,4] add(s0, c)
}}
"""

# The operand's old value is read after the scatter.
READ_LATER = FUSED.replace("ROOT r = f32[6,4] exponential(s)", "ROOT r = f32[6,4] subtract(s, base)")

# Inside the fusion the updated array is read again, for the updates: its elements could be read after the
# scatter wrote them.
READ_IN_FUSION = FUSED.replace(f"  ROOT scattered = f32[6,4] scatter(x, j, v), {SCATTER_ATTRS}",
                               f"""  top = f32[4,4] slice(x), slice={{[0:4], [0:4]}}
  w = f32[4,4] add(v, top)
  ROOT scattered = f32[6,4] scatter(x, j, w), {SCATTER_ATTRS}""")

# The same array is passed twice: as the operand and, through another parameter, as the updates' source.
PASSED_TWICE = FUSED.replace("fusion(base, i, u)", "fusion(base, i, base)").replace(
    "  v = f32[4,4] parameter(2)", "  y = f32[6,4] parameter(2)\n  v = f32[4,4] slice(y), slice={[0:4], [0:4]}")

# A variadic scatter updating one array twice: neither result may take its bytes.
SAME_ARRAY_TWICE = VARIADIC.replace("fusion(base, other, i, u, k)", "fusion(base, base, i, u, k)").replace(
    "y = s32[6,4] parameter(1)", "y = f32[6,4] parameter(1)").replace(
    "(f32[6,4], s32[6,4]) scatter", "(f32[6,4], f32[6,4]) scatter").replace(
    "s = (f32[6,4], s32[6,4]) fusion", "s = (f32[6,4], f32[6,4]) fusion").replace(
    "s1 = s32[6,4] get-tuple-element", "s1 = f32[6,4] get-tuple-element").replace(
    "w = s32[4,4] parameter(4)", "w = f32[4,4] parameter(4)").replace(
    "k = s32[4,4] parameter(4)", "k = f32[4,4] parameter(4)").replace(
    "b = s32[] parameter(1)", "b = f32[] parameter(1)").replace(
    "d = s32[] parameter(3)", "d = f32[] parameter(3)").replace(
    "m = s32[] maximum", "m = f32[] maximum").replace(
    "ROOT t = (f32[], s32[])", "ROOT t = (f32[], f32[])").replace(
    "c = f32[6,4] convert(s1)", "c = f32[6,4] negate(s1)")

# An entry parameter is never written over: the scatter's kernel copies it into the result first.
ON_PARAMETER = FUSED.replace("fusion(base, i, u)", "fusion(p, i, u)")

# The result may take the parameter's buffer (jax's donate_argnums): the scatter then updates it in place.
DONATED = FUSED.replace("HloModule fused", "HloModule donated, input_output_alias={ {}: (0, {}, may-alias) }").replace(
    "  base = f32[6,4] negate(p)\n  s = f32[6,4] fusion(base, i, u), kind=kLoop, calls=wrapped_scatter\n"
    "  ROOT r = f32[6,4] exponential(s)",
    "  ROOT s = f32[6,4] fusion(p, i, u), kind=kLoop, calls=wrapped_scatter")


def _arguments(module: HloModule) -> list[np.ndarray]:
    """Small multiples of 1/8 and small integers (exact everywhere); indices 1, 3, 1 and 7 (out of bounds)."""
    rng = np.random.default_rng(7)
    arguments = []
    for parameter in sorted(module.entry.parameters, key=lambda p: p.parameter_number):
        dims = parameter.shape.dimensions
        dtype = ELEMENT_TYPES[parameter.shape.element_type].dtype
        if parameter.name == "i":
            arguments.append(np.array([[1], [3], [1], [7]], dtype=dtype))
        elif np.issubdtype(dtype, np.integer):
            arguments.append(rng.integers(-20, 21, size=dims).astype(dtype))
        else:
            arguments.append((rng.integers(-16, 17, size=dims) / 8).astype(dtype))
    return arguments


def _assigned(text: str):
    module = parse_module(text)
    schedule = schedule_module(module)
    assignment = assign_buffers(module, schedule)
    assert_replay_matches_interpreter(schedule, assignment, _arguments(module), context=f"{module.name}\n{assignment}")
    return module, assignment


def _named(module: HloModule) -> dict[str, xlapy.HloInstruction]:
    return {i.name: i for i in module.entry.instructions}


def _compiled_in_place_outputs(text: str) -> list[set[int]]:
    """Compiles the module as given and checks its results against the interpreter's, and that the arguments
    were left alone; returns, for each scatter kernel, the outputs it updates in place."""
    module = parse_module(text)
    arguments = _arguments(module)
    before = [a.copy() for a in arguments]
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert_same(executable(*arguments), xlapy.evaluate(parse_module(text), *arguments), exact_bits=True)
    for argument, original in zip(arguments, before):
        assert argument.tobytes() == original.tobytes()
    return [in_place_outputs(t.fusion, t.slice_indices) for t in executable.thunks.walk()
            if isinstance(t, KernelThunk) and is_scatter_fusion(t.fusion)]


@pytest.mark.parametrize("text", [LONE, FUSED], ids=["lone", "fused"])
def test_a_scatter_takes_the_slice_of_the_operand_dying_there(text: str) -> None:
    module, assignment = _assigned(text)
    named = _named(module)
    assert assignment.slice(named["s"]) == assignment.slice(named["base"])
    assert _compiled_in_place_outputs(text) == [{0}]


def test_each_result_of_a_variadic_scatter_takes_its_operands_slice() -> None:
    module, assignment = _assigned(VARIADIC)
    named = _named(module)
    assert assignment.slice(named["s"], (0,)) == assignment.slice(named["base"])
    assert assignment.slice(named["s"], (1,)) == assignment.slice(named["other"])
    assert _compiled_in_place_outputs(VARIADIC) == [{0, 1}]


@pytest.mark.parametrize("text", [READ_LATER, READ_IN_FUSION, PASSED_TWICE],
                         ids=["read-later", "read-in-the-fusion", "passed-twice"])
def test_a_scatter_copies_an_operand_read_elsewhere(text: str) -> None:
    module, assignment = _assigned(text)
    named = _named(module)
    assert assignment.slice(named["s"]) != assignment.slice(named["base"])
    assert _compiled_in_place_outputs(text) == [set()]


def test_a_variadic_scatter_updating_one_array_twice_copies_it() -> None:
    module, assignment = _assigned(SAME_ARRAY_TWICE)
    named = _named(module)
    base = assignment.slice(named["base"])
    assert base not in (assignment.slice(named["s"], (0,)), assignment.slice(named["s"], (1,)))
    assert _compiled_in_place_outputs(SAME_ARRAY_TWICE) == [set()]


def test_a_scatter_on_an_entry_parameter_copies_it_in_its_kernel() -> None:
    module, assignment = _assigned(ON_PARAMETER)
    named = _named(module)
    assert assignment.allocations[assignment.slice(named["p"]).allocation].kind == "parameter"
    assert assignment.slice(named["s"]).allocation != assignment.slice(named["p"]).allocation
    assert _compiled_in_place_outputs(ON_PARAMETER) == [set()]


def test_a_scatter_updates_a_donated_parameter_in_place() -> None:
    module, assignment = _assigned(DONATED)
    named = _named(module)
    assert assignment.slice(named["s"]) == assignment.slice(named["p"])
    assert _compiled_in_place_outputs(DONATED) == [{0}]


def test_a_scatter_in_a_loop_updates_the_loop_state_in_place() -> None:
    """``x.at[i].add`` in a fori_loop, through the whole CPU pipeline: the scatter's kernel writes into the loop
    state's slice, and the results equal the interpreter's."""
    from jax import lax

    from xlapy.frontends.jax import from_jax

    def accumulate(table, rows):
        return lax.fori_loop(0, rows.shape[0], lambda k, acc: acc.at[k % 5].add(rows[k] * 2.0), table)

    table = (np.arange(5 * 8, dtype=np.float32).reshape(5, 8) % 7) / 8
    rows = (np.arange(12 * 8, dtype=np.float32).reshape(12, 8) % 5) / 4
    module = from_jax(accumulate, table, rows)
    executable = xlapy.compile(module)
    assert_same(executable(table, rows), xlapy.evaluate(module, table, rows), exact_bits=True)
    scatters = [t for t in executable.thunks.walk() if isinstance(t, KernelThunk) and is_scatter_fusion(t.fusion)]
    assert scatters and all(in_place_outputs(t.fusion, t.slice_indices) == {0} for t in scatters)
