"""Layout assignment: entry layouts honoured, the default layout elsewhere,
copies where a layout must change, values kept (the reference interpreter
reads bitcasts through the layouts, so a bitcast whose operand's layout
changed without a copy would compute something else)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.compare import assert_same
from tools.random_hlo import hlo_modules, random_arguments
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.hlo.ir import HloInstruction
from xlapy.interpreter import evaluate
from xlapy.shapes import Shape
from xlapy.shapes.layout import Layout
from xlapy.transforms.layout_assignment import LAYOUT_FIXED_OPCODES, LayoutAssignment, default_layouts

DOT = """HloModule dot, entry_computation_layout={(f32[2,3]{0,1}, f32[3,4]{1,0})->(f32[2,4]{0,1}, f32[3,2]{1,0})}

ENTRY main {
  a = f32[2,3]{0,1} parameter(0)
  b = f32[3,4]{1,0} parameter(1)
  d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[3,2]{0,1} transpose(a), dimensions={1,0}
  ROOT r = (f32[2,4]{1,0}, f32[3,2]{0,1}) tuple(d, t)
}
"""


def _by_name(module: HloModule) -> dict[str, HloInstruction]:
    return {i.name: i for i in module.instructions}


def _assert_keeps_values(module: HloModule, text: str, seeds: tuple[int, ...] = (0, 1)) -> None:
    original = parse_module(text)
    for seed in seeds:
        arguments = random_arguments(original, seed)
        assert_same(evaluate(module, *arguments), evaluate(original, *arguments), context=module.to_text())


def test_entry_layouts_kept_dot_operands_row_major_copies_at_the_edges() -> None:
    module = parse_module(DOT)
    assert LayoutAssignment().run(module)
    verify(module)
    named = _by_name(module)
    entry = module.entry
    assert str(named["a"].shape) == "f32[2,3]{0,1}" and str(named["b"].shape) == "f32[3,4]{1,0}"
    # The column-major parameter is read through one row-major copy, by the dot and the transpose alike.
    dot, transpose = named["d"], named["t"]
    assert dot.operands[0] is transpose.operands[0]
    assert dot.operands[0].opcode == "copy" and str(dot.operands[0].shape) == "f32[2,3]{1,0}"
    assert str(dot.shape) == "f32[2,4]{1,0}" and str(transpose.shape) == "f32[3,2]{1,0}"
    # The result: element 0 copied into the column-major layout promised, element 1 already as promised.
    assert str(entry.root.shape) == "(f32[2,4]{0,1}, f32[3,2]{1,0})"
    first, second = entry.root.operands
    assert first.opcode == "copy" and first.operands[0].operands[0].operands[0] is dot
    assert second.opcode == "get-tuple-element"
    _assert_keeps_values(module, DOT)
    assert not LayoutAssignment().run(module)


BITCAST = """HloModule bitcast

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  x = f32[2,3]{0,1} exponential(p)
  ROOT b = f32[2,3]{1,0} bitcast(x)
}
"""


def test_bitcast_reads_its_operand_in_the_layout_it_was_written_for() -> None:
    module = parse_module(BITCAST)
    assert LayoutAssignment().run(module)
    verify(module)
    named = _by_name(module)
    assert str(named["x"].shape) == "f32[2,3]{1,0}"
    operand = named["b"].operands[0]
    assert operand.opcode == "copy" and str(operand.shape) == "f32[2,3]{0,1}" and operand.operands[0] is named["x"]
    _assert_keeps_values(module, BITCAST)


LOOP = """HloModule loop

body {
  p = (s32[], f32[2,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[2,3]{0,1} get-tuple-element(p), index=1
  y = f32[2,3]{0,1} sine(x)
  ROOT t = (s32[], f32[2,3]{0,1}) tuple(i1, y)
}

cond {
  p = (s32[], f32[2,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  a = f32[2,3]{0,1} parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[2,3]{0,1}) tuple(z, a)
  w = (s32[], f32[2,3]{0,1}) while(init), condition=cond, body=body
  ROOT r = f32[2,3]{0,1} get-tuple-element(w), index=1
}
"""


def test_loops_get_default_layouts_throughout() -> None:
    module = parse_module(LOOP)
    assert LayoutAssignment().run(module)
    verify(module)
    for computation in ("body", "cond"):
        for instr in module.computation(computation).instructions:
            assert instr.shape == default_layouts(instr.shape), instr
    entry = module.entry
    loop = next(i for i in entry.instructions if i.opcode == "while")
    assert str(loop.shape) == "(s32[], f32[2,3]{1,0})"
    # The entry keeps its column-major parameter and result: copies on the way in and out.
    assert str(entry.parameters[0].shape) == "f32[2,3]{0,1}" and str(entry.root.shape) == "f32[2,3]{0,1}"
    assert entry.root.opcode == "copy"
    _assert_keeps_values(module, LOOP)


def _permuted(shape: Shape, draw) -> Shape:
    if shape.is_tuple:
        return Shape.make_tuple([_permuted(s, draw) for s in shape.tuple_shapes])
    if not shape.is_array:
        return shape
    order = draw(st.permutations(list(range(shape.rank))))
    return shape.with_layout(Layout(minor_to_major=tuple(order)))


@st.composite
def _laid_out_modules(draw) -> str:
    """Random modules whose entry parameters, result and values have random layouts, and with bitcasts that
    read some values in their random layouts."""
    module = draw(hlo_modules(max_instructions=10, zero_sized=False))
    entry = module.entry
    for instr in entry.post_order():
        if instr.opcode in ("tuple", "get-tuple-element"):
            instr.shape = (Shape.make_tuple([o.shape for o in instr.operands]) if instr.opcode == "tuple"
                           else instr.operands[0].shape.tuple_shapes[int(instr.attributes["index"])])
        elif not instr.called_computations:
            instr.shape = _permuted(instr.shape, draw)
    arrays = [i for i in entry.instructions if i.shape.is_array and i.shape.rank >= 2]
    extra = []
    for instr in arrays[:2]:
        shape = _permuted(instr.shape, draw)
        extra.append(entry.add_instruction(HloInstruction(f"{instr.name}.bits", "bitcast", shape, [instr])))
    if extra:
        old = entry.root
        leaves = [old, *extra]
        entry.root = entry.add_instruction(
            HloInstruction("with_bitcasts", "tuple", Shape.make_tuple([v.shape for v in leaves]), leaves))
    module.attributes.pop("entry_computation_layout", None)
    return module.to_text()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_laid_out_modules())
def test_random_layouts_values_kept(text: str) -> None:
    module = parse_module(text)
    verify(module)
    wanted_parameters = [p.shape for p in module.entry.parameters]
    wanted_result = module.entry.root.shape
    LayoutAssignment().run(module)
    verify(module)
    entry = module.entry
    assert [p.shape for p in entry.parameters] == wanted_parameters
    assert str(entry.root.shape) == str(wanted_result)
    for instr in entry.instructions:
        if instr.opcode in LAYOUT_FIXED_OPCODES or instr.opcode in ("parameter", "tuple", "get-tuple-element", "copy"):
            continue
        assert instr.shape == default_layouts(instr.shape), instr
    _assert_keeps_values(module, text, seeds=(0,))
    assert not LayoutAssignment().run(module)
