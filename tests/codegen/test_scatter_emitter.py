"""The scatter emitter: loop fusions whose root is a scatter, of any dimension numbers, compiled for the CPU and
compared with the reference interpreter bit for bit (each element gets its updates in the interpreter's order,
each combination rounded once in both), serially or split into blocks (by operand rows, by unique index vectors,
by runs of sorted indices)."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import exact_values, kernel_thunks
from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.dialect import LoopOp, PureCallOp
from xlapy.codegen.emitters.scatter import (
    OPERAND_ROWS,
    SERIAL,
    SORTED_INDICES,
    UNIQUE_INDICES,
    emit_scatter_fusion,
    in_place_outputs,
    operand_row_blocks,
    scatter_plan,
)
from xlapy.codegen.fusion_checks import unsupported_fused_ops
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import emitter_name, lower_fusion
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import ELEMENT_TYPES

COMBINERS = {
    "add": "a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] add(a, b)",
    "max": "a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] maximum(a, b)",
    "min": "a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] minimum(a, b)",
    "multiply": "a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] multiply(a, b)",
    # Replace: the combiner returns the update (the last one wins where indices repeat).
    "set": "a = {t}[] parameter(0)  ROOT b = {t}[] parameter(1)",
}

SCATTER = """HloModule scatter
comb {{ {combiner} }}
f {{ x = {operand} parameter(0)  i = {indices} parameter(1)  u = {updates} parameter(2)
     ROOT s = {operand} scatter(x, i, u), {dims}, to_apply=comb }}
ENTRY e {{ x = {operand} parameter(0)  i = {indices} parameter(1)  u = {updates} parameter(2)
          ROOT r = {operand} fusion(x, i, u), kind=kLoop, calls=f }}
"""

# (operand, indices, updates, dimension numbers, index values): repeated indices, and windows partly or wholly
# out of bounds (skipped whole).
CASES = {
    "1d_elements": ("[8]", "[6,1]", "[6]",
                    "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                    "index_vector_dim=1", [[3], [0], [3], [-1], [8], [7]]),
    "1d_implicit_index_vector": ("[8]", "[6]", "[6]",
                                 "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                                 "index_vector_dim=1", [3, 0, 3, -1, 8, 7]),
    "1d_windows": ("[10]", "[4,1]", "[4,3]",
                   "update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, "
                   "index_vector_dim=1", [[2], [7], [8], [2]]),
    "2d_rows": ("[6,3]", "[5,1]", "[5,3]",
                "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                "index_vector_dim=1", [[1], [5], [1], [6], [-2]]),
    "2d_windows": ("[6,5]", "[5,2]", "[5,2,3]",
                   "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, "
                   "index_vector_dim=1", [[0, 0], [4, 2], [5, 0], [2, 3], [4, 2]]),
    "2d_elements_transposed_map": ("[4,5]", "[6,2]", "[6]",
                                   "update_window_dims={}, inserted_window_dims={0,1}, "
                                   "scatter_dims_to_operand_dims={1,0}, index_vector_dim=1",
                                   [[4, 3], [0, 0], [4, 3], [5, 0], [1, 2], [3, 4]]),
    "index_vector_dim_0": ("[4,5]", "[2,6]", "[6]",
                           "update_window_dims={}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, "
                           "index_vector_dim=0", [[3, 0, 3, 4, 1, 2], [4, 0, 4, 0, 5, 1]]),
    "window_before_scatter_dim": ("[5,4]", "[3,1]", "[4,3]",
                                  "update_window_dims={0}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                                  "index_vector_dim=1", [[4], [0], [4]]),
    "two_scatter_dims": ("[7]", "[2,3,1]", "[2,3]",
                         "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                         "index_vector_dim=2", [[[1], [6], [1]], [[7], [0], [6]]]),
    "batching_dims": ("[2,5]", "[2,3,1]", "[2,3]",
                      "update_window_dims={}, inserted_window_dims={1}, input_batching_dims={0}, "
                      "scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1}, index_vector_dim=2",
                      [[[1], [4], [1]], [[0], [5], [3]]]),
}


def _values(shape: str, seed: int) -> np.ndarray:
    """Small multiples of 1/4 (small integers, booleans) of few significant bits."""
    return exact_values(shape, seed, integer_bound=9, steps=12, denominator=4)


def _module(case: str, combiner: str = "add", element_type: str = "f32", index_type: str = "s32") -> xlapy.HloModule:
    operand, indices, updates, dims, _ = CASES[case]
    return xlapy.parse_hlo(SCATTER.format(
        combiner=COMBINERS[combiner].format(t=element_type), operand=element_type + operand,
        indices=index_type + indices, updates=element_type + updates, dims=dims))


def _arguments(case: str, element_type: str = "f32", index_type: str = "s32") -> tuple:
    operand, _, updates, _, index_values = CASES[case]
    index_dtype = ELEMENT_TYPES[index_type].dtype
    return (_values(element_type + operand, 1), np.asarray(index_values).astype(index_dtype),
            _values(element_type + updates, 2))


def _assert_matches_interpreter(module: xlapy.HloModule, args: tuple) -> xlapy.Executable:
    executable = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = [t for t in kernel_thunks(executable) if emitter_name(t.fusion, t.slice_indices) == "scatter"]
    assert thunk.blocks == 1 and thunk.elements == 1  # one thread applies the updates in order
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)
    return executable


@pytest.mark.parametrize("case", sorted(CASES))
def test_dimension_numbers(case: str) -> None:
    _assert_matches_interpreter(_module(case), _arguments(case))


@pytest.mark.parametrize("combiner", sorted(COMBINERS))
@pytest.mark.parametrize("case", ["1d_elements", "2d_windows"])
def test_combiners(case: str, combiner: str) -> None:
    _assert_matches_interpreter(_module(case, combiner), _arguments(case))


@pytest.mark.parametrize(("element_type", "combiner"), [("s32", "add"), ("s32", "min"), ("bf16", "add"),
                                                        ("bf16", "multiply"), ("bf16", "set"), ("f16", "max"),
                                                        ("pred", "set"), ("u8", "max")])
def test_element_types(element_type: str, combiner: str) -> None:
    for case in ("2d_rows", "2d_windows"):
        _assert_matches_interpreter(_module(case, combiner, element_type), _arguments(case, element_type))


@pytest.mark.parametrize(("index_type", "index_values"), [
    ("u8", [[200], [3], [255], [3], [0]]),  # unsigned: zero-extended, never negative
    ("u32", [[4294967295], [5], [1], [2147483648], [5]]),
    ("s8", [[-128], [5], [-1], [127], [0]]),
    ("s64", [[-(1 << 40)], [1], [1 << 40], [5], [4]]),
])
def test_index_types(index_type: str, index_values: list) -> None:
    module = _module("2d_rows", index_type=index_type)
    x, _, u = _arguments("2d_rows")
    _assert_matches_interpreter(module, (x, np.asarray(index_values).astype(ELEMENT_TYPES[index_type].dtype), u))


# Two arrays scattered together; the combiner keeps the larger value with its tag, the later one on ties.
VARIADIC = """HloModule variadic
comb { av = f32[] parameter(0)  at = s32[] parameter(1)  bv = f32[] parameter(2)  bt = s32[] parameter(3)
       ge = pred[] compare(bv, av), direction=GE  v = f32[] select(ge, bv, av)  t = s32[] select(ge, bt, at)
       ROOT r = (f32[], s32[]) tuple(v, t) }
f { x = f32[6,2] parameter(0)  y = s32[6,2] parameter(1)  i = s32[7,1] parameter(2)  u = f32[7,2] parameter(3)
    w = s32[7,2] parameter(4)
    ROOT s = (f32[6,2], s32[6,2]) scatter(x, y, i, u, w), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb }
ENTRY e { x = f32[6,2] parameter(0)  y = s32[6,2] parameter(1)  i = s32[7,1] parameter(2)  u = f32[7,2] parameter(3)
          w = s32[7,2] parameter(4)
          ROOT r = (f32[6,2], s32[6,2]) fusion(x, y, i, u, w), kind=kLoop, calls=f }
"""


def test_variadic_scatter() -> None:
    module = xlapy.parse_hlo(VARIADIC)
    args = (_values("f32[6,2]", 3), _values("s32[6,2]", 4), np.array([[2], [0], [2], [6], [5], [2], [-1]], np.int32),
            _values("f32[7,2]", 5), _values("s32[7,2]", 6))
    _assert_matches_interpreter(module, args)


# The operand, indices and updates computed inside the fusion (as XLA's segment_max: negative indices wrapped,
# the operand a broadcast constant).
COMPUTED = """HloModule computed
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] maximum(a, b) }
f { v = f32[9] parameter(0)  k = s32[9] parameter(1)  low = f32[] constant(-inf)
    init = f32[5,2] broadcast(low), dimensions={}
    zero = s32[] constant(0)  zeros = s32[9] broadcast(zero), dimensions={}  n = s32[] constant(5)
    ns = s32[9] broadcast(n), dimensions={}  lt = pred[9] compare(k, zeros), direction=LT  wrapped = s32[9] add(k, ns)
    kw = s32[9] select(lt, wrapped, k)  idx = s32[9,1] reshape(kw)
    sq = f32[9] multiply(v, v)  row = f32[9,2] broadcast(sq), dimensions={0}  iota = f32[9,2] iota(), iota_dimension=1
    upd = f32[9,2] add(row, iota)
    ROOT s = f32[5,2] scatter(init, idx, upd), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb }
ENTRY e { v = f32[9] parameter(0)  k = s32[9] parameter(1)  ROOT r = f32[5,2] fusion(v, k), kind=kLoop, calls=f }
"""


def test_operand_indices_and_updates_computed_in_the_fusion() -> None:
    module = xlapy.parse_hlo(COMPUTED)
    args = (_values("f32[9]", 7), np.array([0, -1, 3, 4, 9, -5, 3, -6, 1], np.int32))
    _assert_matches_interpreter(module, args)


def test_a_scatter_outside_any_fusion_runs_as_a_kernel_of_its_own() -> None:
    module = xlapy.parse_hlo("""HloModule lone
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e { x = f32[6,3] parameter(0)  i = s32[5,1] parameter(1)  u = f32[5,3] parameter(2)
          ROOT s = f32[6,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb }
""")
    _assert_matches_interpreter(module, _arguments("2d_rows"))


def _fusion(module: xlapy.HloModule) -> HloInstruction:
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


def _entry_loops(fusion: HloInstruction, slice_indices: tuple[int, ...] | None) -> list[LoopOp]:
    module_op, launch = emit_scatter_fusion(fusion, Device.host(), slice_indices)
    assert (launch.blocks, launch.threads_per_block, launch.vector_size) == (1, 1, 1)
    main = next(op for op in module_op.ops if op.sym_name.data == "main")
    return [op for op in main.body.block.ops if isinstance(op, LoopOp)]


def test_an_operand_passed_in_the_output_slice_is_not_copied() -> None:
    module = _module("2d_windows")
    fusion = _fusion(module)
    # Without shared slices the output is first set to the operand (a loop over it), then the updates loop.
    copy, updates = _entry_loops(fusion, None)
    assert copy.indexing_map.touched_elements() == {(r, c) for r in range(6) for c in range(5)}
    assert len(updates.indexing_map.range_vars) == 1
    shared = (0, 1, 2, 0)
    assert in_place_outputs(fusion, shared) == {0}
    (updates,) = _entry_loops(fusion, shared)
    x, i, u = _arguments("2d_windows")
    expected = xlapy.evaluate(module, x, i, u)
    buffer = x.copy()  # the operand and the output: one buffer
    lowered = lower_fusion(fusion, Device.host(), slice_indices=shared)
    kernel = CpuKernel.compile(lowered.module)
    kernel([buffer, i, u], 0, lowered.launch.blocks)
    assert_same(buffer, expected, exact_bits=True)


def test_an_output_sharing_a_slice_with_what_the_scatter_still_reads_is_refused() -> None:
    fusion = _fusion(_module("2d_rows"))  # operand f32[6,3], updates f32[5,3]: sharing only in a forged pattern
    with pytest.raises(UnimplementedError, match="shares a buffer slice"):
        in_place_outputs(fusion, (0, 1, 2, 2))


def test_scatter_is_refused_inside_a_fusion_unless_it_is_the_root() -> None:
    module = xlapy.parse_hlo("""HloModule inner
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
f { x = f32[8] parameter(0)  i = s32[2,1] parameter(1)  u = f32[2] parameter(2)
    s = f32[8] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, to_apply=comb
    ROOT n = f32[8] negate(s) }
ENTRY e { x = f32[8] parameter(0)  i = s32[2,1] parameter(1)  u = f32[2] parameter(2)
          ROOT r = f32[8] fusion(x, i, u), kind=kLoop, calls=f }
""")
    assert unsupported_fused_ops(_fusion(module)) == ["scatter (s) in fusion r"]
    assert unsupported_fused_ops(_fusion(_module("2d_rows"))) == []


@pytest.mark.parametrize("program", ["maxpool_grad", "scatters", "segment_sum"])
def test_xla_optimized_corpus_programs(program: str) -> None:
    from tools.oracles import require_jax

    require_jax()
    from tools.jax_corpus import PROGRAMS, flat_arguments
    from xlapy.frontends.jax import optimized_from_jax

    fn, args = PROGRAMS[program]
    module = optimized_from_jax(fn, *args)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert any(emitter_name(t.fusion, t.slice_indices) == "scatter" for t in kernel_thunks(executable))
    arguments = flat_arguments(program)
    assert_same(executable(*arguments), xlapy.evaluate(module, *arguments), exact_bits=True)


# Updates computed from one another: the second reads the first through a value that has a function of its own
# (read at two different indices), so the first is returned by a copy rather than computed in the root function
# that function would call back.
UPDATES_FROM_UPDATES = """HloModule chained
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  c = f32[] parameter(2)  d = f32[] parameter(3)
       s = f32[] add(a, c)  m = f32[] maximum(b, d)  ROOT r = (f32[], f32[]) tuple(s, m) }
f { x = f32[6,2] parameter(0)  y = f32[6,2] parameter(1)  i = s32[7,1] parameter(2)  w = f32[7,2] parameter(3)
    u0 = f32[7,2] negate(w)  r = f32[7,2] reverse(u0), dimensions={0}  rr = f32[7,2] reverse(r), dimensions={1}
    u1 = f32[7,2] add(r, rr)
    ROOT s = (f32[6,2], f32[6,2]) scatter(x, y, i, u0, u1), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb }
ENTRY e { x = f32[6,2] parameter(0)  y = f32[6,2] parameter(1)  i = s32[7,1] parameter(2)  w = f32[7,2] parameter(3)
          ROOT r = (f32[6,2], f32[6,2]) fusion(x, y, i, w), kind=kLoop, calls=f }
"""


def test_updates_computed_from_one_another() -> None:
    module = xlapy.parse_hlo(UPDATES_FROM_UPDATES)
    module_op, _ = emit_scatter_fusion(_fusion(module), Device.host())
    calls = {(f.sym_name.data, op.callee.string_value()) for f in module_op.ops for op in f.walk()
             if isinstance(op, PureCallOp)}
    assert ("main", "f.updates") in calls
    assert not [caller for caller, callee in calls if callee == "f.updates" and caller != "main"]
    args = (_values("f32[6,2]", 8), _values("f32[6,2]", 9), np.array([[2], [0], [2], [6], [5], [2], [-1]], np.int32),
            _values("f32[7,2]", 10))
    _assert_matches_interpreter(module, args)


# -- splitting the work into blocks ------------------------------------------------------------------------------

# A scatter of {n} index vectors of {index_components} components into an operand of {operand}, windows of
# {window}; with ``copy``, the operand is a copy's buffer, which the kernel updates in place.
SPLIT = """HloModule split
comb {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] add(a, b) }}
f {{ x = {t}{operand} parameter(0)  i = s32{indices} parameter(1)  u = {t}{updates} parameter(2)
     ROOT s = {t}{operand} scatter(x, i, u), {dims}, {flags}to_apply=comb }}
ENTRY e {{ p = {t}{operand} parameter(0)  i = s32{indices} parameter(1)  u = {t}{updates} parameter(2)
          {copy}ROOT fusion = {t}{operand} fusion({x}, i, u), kind=kLoop, calls=f }}
"""
ROWS = "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"


def _split_module(operand: str, indices: str, updates: str, dims: str = ROWS, flags: str = "", in_place: bool = False,
                  element_type: str = "f32") -> str:
    copy = f"x = {element_type}{operand} copy(p)  " if in_place else ""
    return SPLIT.format(t=element_type, operand=operand, indices=indices, updates=updates, dims=dims,
                        flags=flags + ", " if flags else "", copy=copy, x="x" if in_place else "p")


def _check_split(text: str, index_values: np.ndarray, strategy: str, blocks: int | None = None) -> None:
    """Compiles ``text``, checks the scatter kernel's plan, and compares it with the interpreter bit for bit."""
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (thunk,) = [t for t in kernel_thunks(executable) if t.fusion.name == "fusion"]
    plan = scatter_plan(thunk.fusion, thunk.slice_indices)
    assert plan.strategy == strategy
    assert thunk.blocks == plan.blocks and (blocks is None or plan.blocks == blocks)
    params = {i.parameter_number: i.shape for i in module.entry.instructions if i.opcode == "parameter"}
    operand, updates = params[0], params[2]

    def spec(shape) -> str:
        return f"{shape.element_type}[{','.join(map(str, shape.dimensions))}]"

    args = (_values(spec(operand), 11), index_values.astype(np.int32), _values(spec(updates), 12))
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_a_small_scatter_stays_serial():
    _check_split(_split_module("[64,8]", "[20,1]", "[20,8]"), np.arange(20).reshape(20, 1) % 7, SERIAL, 1)


@pytest.mark.parametrize("operand, count, window", [("[65536,4]", 4000, 4), ("[4096,16]", 16000, 16)],
                         ids=["windows of 16 bytes", "more update elements than output elements"])
def test_narrow_windows_without_flags_stay_serial(operand: str, count: int, window: int):
    # A pass over the indices per block would cost more than the updates it shares out.
    rows = int(operand[1:].split(",")[0])
    _check_split(_split_module(operand, f"[{count},1]", f"[{count},{window}]"),
                 np.random.default_rng(1).integers(0, rows, (count, 1)), SERIAL, 1)


def test_narrow_windows_of_few_updates_split_the_operand_rows():
    # Windows of 64 bytes, 64,000 update elements into 262,144: each core copies and updates its own rows.
    _check_split(_split_module("[16384,16]", "[4000,1]", "[4000,16]"), _repeating_indices(4000, 16384), OPERAND_ROWS,
                 min(operand_row_blocks(), 4))


@pytest.mark.parametrize("rows", [2048, 2051])
def test_a_large_scatter_of_wide_windows_splits_the_operand_rows(rows: int):
    rng = np.random.default_rng(rows)
    indices = rng.integers(-3, rows + 3, (700, 1))
    indices[::7] = indices[3]  # repeated rows combine in order
    _check_split(_split_module(f"[{rows},64]", "[700,1]", "[700,64]"), indices, OPERAND_ROWS, 2)


def test_windows_across_the_split_are_cut_per_element():
    # Windows of 3 rows: those starting in one block's last rows end in the next block's.
    dims = "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
    text = _split_module("[16000,32]", "[400,1]", "[400,3,32]", dims)
    indices = np.concatenate([np.array([[3998], [3999], [7999], [11998], [-1], [15998], [15997]]),
                              np.random.default_rng(3).integers(0, 16000, (393, 1))])
    _check_split(text, indices, OPERAND_ROWS, min(operand_row_blocks(), 8))


def test_a_column_major_operand_splits_its_major_dimension():
    # {0,1}: dimension 1 is major; the windows are columns, one element wide along it.
    dims = "update_window_dims={0}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, index_vector_dim=1"
    text = _split_module("[64,4000]{0,1}", "[300,1]", "[64,300]", dims)
    module = xlapy.parse_hlo(text)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert scatter_plan(fusion, None).split_dim == 1
    _check_split(text, np.random.default_rng(4).integers(-2, 4002, (300, 1)), OPERAND_ROWS)


def test_unique_indices_in_place_split_the_index_vectors():
    indices = np.random.default_rng(5).permutation(1200)[:1000].reshape(1000, 1) - 100  # some out of bounds
    text = _split_module("[1000,16]", "[1000,1]", "[1000,16]", flags="unique_indices=true", in_place=True)
    _check_split(text, indices, UNIQUE_INDICES, 4)


@pytest.mark.parametrize("runs", ["crossing", "one_run", "singletons"])
def test_sorted_indices_in_place_split_at_index_changes(runs: str):
    n = 1001
    indices = {"crossing": np.sort(np.random.default_rng(6).integers(-5, 205, n)),
               "one_run": np.full(n, 7),
               "singletons": np.arange(n) - 3}[runs].reshape(n, 1)
    text = _split_module("[200,16]", f"[{n},1]", f"[{n},16]", flags="indices_are_sorted=true", in_place=True)
    _check_split(text, indices, SORTED_INDICES, 4)


def test_sorted_index_vectors_of_two_scatter_dimensions():
    # Updates [40,25] of index vectors of two components (row, column): runs of equal vectors in row-major order
    # of the two scatter dimensions.
    dims = ("update_window_dims={2}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, "
            "index_vector_dim=2")
    pairs = np.stack(np.divmod(np.arange(1000) // 3, 20), axis=-1).reshape(40, 25, 2)
    text = _split_module("[20,20,8]", "[40,25,2]", "[40,25,8]", dims, flags="indices_are_sorted=true", in_place=True)
    _check_split(text, pairs, SORTED_INDICES, 2)


def test_sorted_indices_with_overlapping_windows_do_not_split_index_vectors():
    # Windows 2 rows high starting one row apart overlap: a run of equal indices is not all that meets an element.
    dims = "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
    text = _split_module("[600,8]", "[600,1]", "[600,2,8]", dims, flags="indices_are_sorted=true", in_place=True)
    _check_split(text, np.arange(600).reshape(600, 1), SERIAL)


def test_flags_without_the_operand_in_place_split_the_operand_rows():
    text = _split_module("[2048,64]", "[1000,1]", "[1000,64]", flags="unique_indices=true")
    _check_split(text, np.arange(1000).reshape(1000, 1) * 2, OPERAND_ROWS)


def test_split_scatters_in_other_element_types():
    indices = np.random.default_rng(7).integers(0, 2048, (500, 1))
    for element_type in ("s32", "bf16", "f64", "u8"):
        _check_split(_split_module("[2048,64]", "[500,1]", "[500,64]", element_type=element_type), indices,
                     OPERAND_ROWS)


# -- a large operand copied on the pool first ----------------------------------------------------------------------

LONE = """HloModule lone
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e { x = f32[65536,4] parameter(0)  i = s32[4000,1] parameter(1)  u = f32[4000,4] parameter(2)
          ROOT s = f32[65536,4] scatter(x, i, u), """ + ROWS + """, to_apply=comb }
"""
# The fusion's operand also feeds the updates: it cannot be updated in place while they still read it.
OPERAND_READ_TWICE = """HloModule twice
comb { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
f { x = f32[16384,16] parameter(0)  i = s32[4000,1] parameter(1)
    u = f32[4000,16] slice(x), slice={[0:4000], [0:16]}
    ROOT s = f32[16384,16] scatter(x, i, u), """ + ROWS + """, to_apply=comb }
ENTRY e { p = f32[16384,16] parameter(0)  i = s32[4000,1] parameter(1)  u = f32[4000,16] parameter(2)
          ROOT fusion = f32[16384,16] fusion(p, i), kind=kLoop, calls=f }
"""


def _repeating_indices(count: int, rows: int) -> np.ndarray:
    """Indices with repeats (whose order of updates shows in float sums), and some out of bounds either way."""
    indices = np.random.default_rng(5).integers(-rows // 8, rows + rows // 8, (count, 1))
    indices[::7] = indices[0]
    return indices.astype(np.int32)


@pytest.mark.parametrize("text", [_split_module("[65536,4]", "[4000,1]", "[4000,4]"), LONE],
                         ids=["fusion", "lone scatter"])
def test_a_serial_scatter_of_a_large_operand_updates_a_copy_made_on_the_pool(text: str):
    # f32[65536,4] is 1 MiB (in windows of 16 bytes, too narrow to split): a copy kernel (many blocks, on the pool)
    # puts the operand in the output's slice, and the scatter, on one thread, updates it in place.
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    copy, scatter = kernel_thunks(executable)
    assert copy.fusion.fused_computation.root.opcode == "copy" and copy.blocks > 1
    assert scatter.slice_indices == (0, 1, 2, 0) and in_place_outputs(scatter.fusion, scatter.slice_indices) == {0}
    assert scatter_plan(scatter.fusion, scatter.slice_indices).strategy == SERIAL
    args = (_values("f32[65536,4]", 3), _repeating_indices(4000, 65536), _values("f32[4000,4]", 4))
    for _ in range(2):  # the second call reuses the prepared launches
        assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


@pytest.mark.parametrize("text", [_split_module("[1024,16]", "[400,1]", "[400,16]"), OPERAND_READ_TWICE],
                         ids=["small operand", "operand read twice"])
def test_scatters_that_keep_their_own_copy(text: str):
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (scatter,) = kernel_thunks(executable)
    assert scatter.slice_indices is None
    rows = module.entry.parameters[0].shape.dimensions[0]
    count = module.entry.parameters[1].shape.dimensions[0]
    args = [_values(f"f32[{rows},16]", 3), _repeating_indices(count, rows)]
    if len(module.entry.parameters) == 3:
        args.append(_values(f"f32[{count},16]", 4))
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)
