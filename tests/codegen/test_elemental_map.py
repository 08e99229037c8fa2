"""``map`` of any computation compiled for the CPU (XLA's ``EmitElementalMap``: the mapped computation is a function
of scalars called per element), against the reference interpreter: integers, pred and exact float ops bit for
bit, transcendental ops within the ulps ``tools.loop_fusion_compare.ulp_tolerance`` allows.

Hand-written maps cover several operands of different element types, ranks 0 to 4, layouts other than the
default, complex numbers, narrow types, nested maps, a map fused with the ops around it and a whole program
through the HLO passes; a hypothesis strategy draws small random mapped computations over random shapes and
layouts. Computations the emitter cannot make a function of scalars of are refused at compile time.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlapy
from tools.loop_fusion_compare import assert_within_ulps, random_arguments, ulp_tolerance
from xlapy.errors import UnimplementedError
from xlapy.transforms.fusible_ops import can_be_loop_fused

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _check(text: str, *, seeds: tuple[int, ...] = (0, 1), run_hlo_passes: bool = False, kernels: int | None = 1):
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(module, run_hlo_passes=run_hlo_passes)
    if kernels is not None:
        assert executable.summary.kernels == kernels
    for seed in seeds:
        args = random_arguments(module, seed)
        assert_within_ulps(executable(*args), xlapy.evaluate(module, *args), module, ulp_tolerance(module),
                           context=f"seed {seed}")
    return executable


def test_map_of_several_ops_and_a_constant():
    _check("""HloModule m
f { a = f32[] parameter(0)  b = f32[] parameter(1)  m = f32[] multiply(a, b)  c = f32[] constant(2.5)
    s = f32[] subtract(m, c)  ROOT x = f32[] maximum(s, a) }
ENTRY e { p = f32[5,7] parameter(0)  q = f32[5,7] parameter(1)
          ROOT r = f32[5,7] map(p, q), dimensions={0,1}, to_apply=f }""")


def test_operands_of_different_types_with_compare_select_and_converts():
    # s32 and f32 operands, a pred and a u8 operand; the result is f16.
    _check("""HloModule m
f { i = s32[] parameter(0)  x = f32[] parameter(1)  b = pred[] parameter(2)  u = u8[] parameter(3)
    fi = f32[] convert(i)  lt = pred[] compare(fi, x), direction=LT  both = pred[] and(lt, b)
    fu = f32[] convert(u)  sum = f32[] add(x, fu)  pick = f32[] select(both, fi, sum)
    ROOT h = f16[] convert(pick) }
ENTRY e { p0 = s32[33] parameter(0)  p1 = f32[33] parameter(1)  p2 = pred[33] parameter(2)  p3 = u8[33] parameter(3)
          ROOT r = f16[33] map(p0, p1, p2, p3), dimensions={0}, to_apply=f }""")


@pytest.mark.parametrize(("dims", "layouts"), [
    ((), ("", "", "")),
    ((9,), ("{0}", "{0}", "{0}")),
    ((4, 6), ("{0,1}", "{1,0}", "{0,1}")),
    ((3, 4, 5), ("{0,2,1}", "{1,0,2}", "{2,1,0}")),
    ((2, 3, 4, 5), ("{0,1,2,3}", "{2,0,3,1}", "{3,1,0,2}")),
])  # fmt: skip
def test_ranks_and_layouts(dims: tuple[int, ...], layouts: tuple[str, str, str]):
    shape = ",".join(map(str, dims))
    dimensions = ",".join(map(str, range(len(dims))))
    p_layout, q_layout, r_layout = layouts
    _check(f"""HloModule m
f {{ a = s32[] parameter(0)  b = s32[] parameter(1)  m = s32[] multiply(a, b)  s = s32[] shift-right-logical(m, b)
    ROOT x = s32[] xor(s, a) }}
ENTRY e {{ p = s32[{shape}]{p_layout} parameter(0)  q = s32[{shape}]{q_layout} parameter(1)
          ROOT r = s32[{shape}]{r_layout} map(p, q), dimensions={{{dimensions}}}, to_apply=f }}""")


@pytest.mark.parametrize("type_name", ["bf16", "f16", "f64", "f8e4m3fn", "f8e5m2", "s4", "u16", "s64"])
def test_narrow_and_wide_types(type_name: str):
    t = type_name
    body = (f"m = {t}[] multiply(a, b)  s = {t}[] add(m, a)  ROOT x = {t}[] minimum(s, b)" if t[0] in "bf"
            else f"m = {t}[] multiply(a, b)  s = {t}[] subtract(m, a)  ROOT x = {t}[] maximum(s, b)")
    _check(f"""HloModule m
f {{ a = {type_name}[] parameter(0)  b = {type_name}[] parameter(1)  {body} }}
ENTRY e {{ p = {type_name}[6,5] parameter(0)  q = {type_name}[6,5] parameter(1)
          ROOT r = {type_name}[6,5] map(p, q), dimensions={{0,1}}, to_apply=f }}""")


def test_transcendental_ops_within_their_ulps():
    _check("""HloModule m
f { a = f32[] parameter(0)  b = f64[] parameter(1)  e = f32[] exponential(a)  t = f32[] tanh(e)
    w = f64[] convert(t)  s = f64[] add(w, b)  ROOT l = f64[] log-plus-one(s) }
ENTRY e { p = f32[64] parameter(0)  q = f64[64] parameter(1)
          ROOT r = f64[64] map(p, q), dimensions={0}, to_apply=f }""")


def test_complex_operands_and_a_real_result():
    _check("""HloModule m
f { z = c64[] parameter(0)  w = c64[] parameter(1)  m = c64[] multiply(z, w)  a = c64[] add(m, z)
    ROOT r = f32[] real(a) }
g { z = c64[] parameter(0)  one = c64[] constant((1, -2))  ROOT s = c64[] subtract(z, one) }
ENTRY e { p = c64[4,4] parameter(0)  q = c64[4,4] parameter(1)
          m1 = f32[4,4] map(p, q), dimensions={0,1}, to_apply=f
          m2 = c64[4,4] map(p), dimensions={0,1}, to_apply=g
          ROOT t = (f32[4,4], c64[4,4]) tuple(m1, m2) }""", kernels=2)


def test_nested_maps_and_a_computation_of_constants():
    # The outer computation maps the inner one over its scalars; the third ignores its parameter.
    _check("""HloModule m
inner { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT d = f32[] divide(a, b) }
outer { x = f32[] parameter(0)  y = f32[] parameter(1)  n = f32[] map(x, y), to_apply=inner
        s = f32[] sqrt(n)  ROOT m = f32[] map(s, x), to_apply=inner }
constants { x = s32[] parameter(0)  ROOT c = s32[] constant(-7) }
ENTRY e { p = f32[17] parameter(0)  q = f32[17] parameter(1)  i = s32[17] parameter(2)
          m1 = f32[17] map(p, q), dimensions={0}, to_apply=outer
          m2 = s32[17] map(i), dimensions={0}, to_apply=constants
          ROOT t = (f32[17], s32[17]) tuple(m1, m2) }""", kernels=2)


def test_map_fuses_with_the_ops_around_it():
    # XLA:CPU fuses a map like any elementwise op: one kernel for exp, the map, and the add.
    text = """HloModule m
f { a = f32[] parameter(0)  b = f32[] parameter(1)  m = f32[] multiply(a, b)  ROOT s = f32[] add(m, b) }
ENTRY e { p = f32[8,16] parameter(0)  q = f32[8,16] parameter(1)  x = f32[8,16] exponential(p)
          m = f32[8,16] map(x, q), dimensions={0,1}, to_apply=f
          ROOT r = f32[8,16] add(m, p) }"""
    module = xlapy.parse_hlo(text)
    assert can_be_loop_fused(module.entry.root.operands[0])
    _check(text, run_hlo_passes=True)


def test_whole_program_with_maps_in_a_loop_and_a_reduction():
    # A while loop whose body maps a computation of several ops, and a reduce of a map after it: compiled through
    # the HLO passes (the map inliner leaves these maps, the fusion pass fuses them).
    executable = _check("""HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
step { x = f32[] parameter(0)  h = f32[] constant(0.5)  m = f32[] multiply(x, h)  c = f32[] cosine(x)
       ROOT s = f32[] add(m, c) }
clip { x = f32[] parameter(0)  lo = f32[] constant(-1)  hi = f32[] constant(1)  ROOT c = f32[] clamp(lo, x, hi) }
body { t = (s32[], f32[16]) parameter(0)  i = s32[] get-tuple-element(t), index=0
       v = f32[16] get-tuple-element(t), index=1  one = s32[] constant(1)  j = s32[] add(i, one)
       w = f32[16] map(v), dimensions={0}, to_apply=step  ROOT n = (s32[], f32[16]) tuple(j, w) }
cond { t = (s32[], f32[16]) parameter(0)  i = s32[] get-tuple-element(t), index=0  k = s32[] constant(5)
       ROOT lt = pred[] compare(i, k), direction=LT }
ENTRY e { p = f32[16] parameter(0)  zero = s32[] constant(0)  init = (s32[], f32[16]) tuple(zero, p)
          loop = (s32[], f32[16]) while(init), condition=cond, body=body
          v = f32[16] get-tuple-element(loop), index=1
          c = f32[16] map(v), dimensions={0}, to_apply=clip
          z = f32[] constant(0)
          ROOT r = f32[] reduce(c, z), dimensions={0}, to_apply=add }""", run_hlo_passes=True, kernels=None)
    maps = [i for c in executable.module.computations for i in c.instructions if i.opcode == "map"]
    assert {m.called_computations[0].name for m in maps} == {"step", "clip"}


@pytest.mark.parametrize(("computation", "message"), [
    # An array inside the computation: not a function of scalars.
    ("""f { a = f32[] parameter(0)  b = f32[2] broadcast(a), dimensions={}  z = f32[] constant(0)
            ROOT s = f32[] reduce(b, z), dimensions={0}, to_apply=add }""", r"computes scalars"),
    # An op with no elemental rule (left by run_hlo_passes=False: the call inliner would inline it).
    ("""f { a = f32[] parameter(0)  ROOT c = f32[] call(a), to_apply=g }""", r"cannot run m: map \(r\)"),
])  # fmt: skip
def test_computations_the_emitter_cannot_call_are_refused_at_compile_time(computation: str, message: str):
    module = xlapy.parse_hlo(f"""HloModule m
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
g {{ a = f32[] parameter(0)  ROOT n = f32[] negate(a) }}
{computation}
ENTRY e {{ p = f32[4] parameter(0)  ROOT r = f32[4] map(p), dimensions={{0}}, to_apply=f }}""")
    with pytest.raises(UnimplementedError, match=message):
        xlapy.compile(module, run_hlo_passes=False)


# -- random mapped computations ---------------------------------------------------------------------------------

_TYPES = ("f32", "f64", "bf16", "f16", "s32", "s8", "u32", "pred")
# Ops whose results IEEE or the integer semantics fix (bit for bit), by the kind of their operands; transcendental
# ops only on f32, where the compiled functions round as the interpreter does (``ulp_tolerance``: 0 ulp), so that a
# chain of them stays comparable bit for bit.
_UNARY = {"float": ("abs", "negate", "floor", "ceil", "sqrt", "sign", "round-nearest-even", "round-nearest-afz"),
          "int": ("abs", "negate", "not", "popcnt", "sign", "count-leading-zeros"), "pred": ("not",)}
_TRANSCENDENTAL = ("exponential", "tanh", "sine", "log", "logistic")
_BINARY = {"float": ("add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder", "power"),
           "int": ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor",
                   "shift-left", "shift-right-arithmetic", "shift-right-logical"),
           "pred": ("and", "or", "xor")}
_CONSTANTS = {"float": ("0", "-0", "1", "-2.5", "0.5", "inf", "-inf", "nan"), "int": ("0", "1", "-3", "7", "100"),
              "pred": ("true", "false")}
_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def _kind(type_name: str) -> str:
    return "pred" if type_name == "pred" else "float" if type_name[0] in "bf" else "int"


def _helper(type_name: str) -> str:
    """A computation of two scalars a nested map applies (``x * y - x``, or ``x xor y`` on pred)."""
    if type_name == "pred":
        return f"helper_{type_name} {{ x = pred[] parameter(0)  y = pred[] parameter(1)  ROOT z = pred[] xor(x, y) }}"
    t = type_name
    return (f"helper_{t} {{ x = {t}[] parameter(0)  y = {t}[] parameter(1)  m = {t}[] multiply(x, y)\n"
            f"  ROOT z = {t}[] subtract(m, x) }}")


@st.composite
def _mapped_computations(draw) -> tuple[str, list[str]]:
    """The text of a mapped computation ``mapped`` (with the helpers its nested maps call) and its parameter
    types: 1 to 3 parameters of random types, then 1 to 7 ops on earlier values, the last one the root."""
    parameter_types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3))
    values = [(f"a{k}", t) for k, t in enumerate(parameter_types)]
    lines = [f"a{k} = {t}[] parameter({k})" for k, t in enumerate(parameter_types)]
    helpers: set[str] = set()
    for k in range(draw(st.integers(1, 7))):
        name, (x, t) = f"v{k}", draw(st.sampled_from(values))
        kind = _kind(t)
        same = [v for v, vt in values if vt == t]
        choice = draw(st.sampled_from(("unary", "binary", "binary", "convert", "compare", "select", "constant",
                                       "map")))
        if choice == "unary":
            ops = _UNARY[kind] + (_TRANSCENDENTAL if t == "f32" else ())
            if t.startswith("u"):
                ops = tuple(op for op in ops if op not in ("abs", "negate", "sign"))  # signed numbers only
            lines.append(f"{name} = {t}[] {draw(st.sampled_from(ops))}({x})")
        elif choice == "binary":
            lines.append(f"{name} = {t}[] {draw(st.sampled_from(_BINARY[kind]))}({x}, {draw(st.sampled_from(same))})")
        elif choice == "convert":
            t = draw(st.sampled_from(_TYPES))
            lines.append(f"{name} = {t}[] convert({x})")
        elif choice == "compare":
            direction = draw(st.sampled_from(_DIRECTIONS))
            lines.append(f"{name} = pred[] compare({x}, {draw(st.sampled_from(same))}), direction={direction}")
            t = "pred"
        elif choice == "select":
            predicates = [v for v, vt in values if vt == "pred"]
            if not predicates:
                lines.append(f"{name} = pred[] compare({x}, {x}), direction=EQ")  # false for NaN
                predicates, values = [name], [*values, (name, "pred")]
                name = f"s{k}"
            lines.append(f"{name} = {t}[] select({draw(st.sampled_from(predicates))}, {x}, "
                         f"{draw(st.sampled_from(same))})")
        elif choice == "constant":
            c = f"c{k}"
            constants = [v for v in _CONSTANTS[kind] if not (t.startswith("u") and v.startswith("-"))]
            lines.append(f"{c} = {t}[] constant({draw(st.sampled_from(constants))})")
            lines.append(f"{name} = {t}[] {draw(st.sampled_from(_BINARY[kind]))}({x}, {c})")
        else:
            helpers.add(t)
            lines.append(f"{name} = {t}[] map({x}, {draw(st.sampled_from(same))}), to_apply=helper_{t}")
        values.append((name, t))
    lines[-1] = "ROOT " + lines[-1]
    text = "\n".join([*(_helper(t) for t in sorted(helpers)), "mapped {\n  " + "\n  ".join(lines) + "\n}"])
    return text, parameter_types


def _layout(draw, rank: int) -> str:
    return "{" + ",".join(map(str, draw(st.permutations(range(rank))))) + "}"


@st.composite
def _map_modules(draw) -> str:
    computation, parameter_types = draw(_mapped_computations())
    dims = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    shape = ",".join(map(str, dims))
    result_type = computation.rsplit("ROOT ", 1)[1].split()[2].split("[")[0]
    parameters = [f"p{k} = {t}[{shape}]{_layout(draw, len(dims))} parameter({k})"
                  for k, t in enumerate(parameter_types)]
    operands = ", ".join(f"p{k}" for k in range(len(parameter_types)))
    dimensions = ",".join(map(str, range(len(dims))))
    return (f"HloModule random_map\n{computation}\nENTRY e {{\n  " + "\n  ".join(parameters) +
            f"\n  ROOT r = {result_type}[{shape}]{_layout(draw, len(dims))} map({operands}), "
            f"dimensions={{{dimensions}}}, to_apply=mapped\n}}")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_map_modules())
def test_random_mapped_computations_match_the_interpreter(text: str):
    _check(text, seeds=(0,))


def test_map_converting_f16_to_wide_integers():
    # Found by the random maps: the saturation bounds of a 32- or 64-bit integer are past f16's range (±inf).
    _check("""HloModule m
f { h = f16[] parameter(0)  u = u32[] convert(h)  s = s64[] convert(h)  us = s64[] convert(u)
    ROOT d = s64[] subtract(s, us) }
ENTRY e { p = f16[40] parameter(0)  ROOT r = s64[40] map(p), dimensions={0}, to_apply=f }""")
