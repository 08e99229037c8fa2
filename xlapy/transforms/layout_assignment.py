"""Layout assignment ("layout-assignment", after XLA's
``xla/service/layout_assignment.cc`` with XLA:CPU's constraints,
``xla/service/cpu/cpu_layout_assignment.cc``).

The entry's parameters and result keep the layouts the module promises
(``entry_computation_layout``, else the layouts the entry's shapes carry);
every other value gets the default, major-to-minor layout, so dots read
row-major operands and write a row-major result, as XLA:CPU's library dots
want. (XLA:CPU makes the constant right-hand side of a matrix-vector product
column-major; xlapy keeps it row-major.) Where a value's layout is not the
one its reader needs, a ``copy`` converts it (copies keep the layouts they
have, which are their purpose): after an entry parameter laid
out otherwise, before an entry result that must be, and before the operand
of an instruction whose meaning depends on the bytes (a ``bitcast``), or
that was built for given operand layouts (a fusion, a custom call) and keeps
them.
"""

from __future__ import annotations

from dataclasses import replace

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.shapes.layout import default_layout
from xlapy.shapes.parser import ShapeParser
from xlapy.transforms.hlo_pass import HloPass

# Instructions whose own and operand layouts are part of what they mean or how they were built.
LAYOUT_FIXED_OPCODES = frozenset({"bitcast", "fusion", "custom-call"})


def default_layouts(shape: Shape) -> Shape:
    """``shape`` with the default layout on every array inside it."""
    if shape.is_tuple:
        return Shape.make_tuple([default_layouts(s) for s in shape.tuple_shapes])
    if not shape.is_array:
        return shape
    layout = default_layout(shape.rank)
    if shape.layout is not None and shape.layout.element_size_in_bits:
        layout = replace(layout, element_size_in_bits=shape.layout.element_size_in_bits)
    return shape.with_layout(layout)


def same_layouts(a: Shape, b: Shape) -> bool:
    """Whether two shapes of the same dimensions lay every array out alike."""
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            same_layouts(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    if not a.is_array:
        return True
    return a.layout_or_default == b.layout_or_default


def read_entry_layout(text: str) -> tuple[list[Shape], Shape]:
    """The parameter and result shapes, with their layouts, of an ``entry_computation_layout``."""
    parser = ShapeParser(text)
    parser.expect("{", "to start the program shape")
    parser.expect("(", "to start the parameter shapes")
    parameters: list[Shape] = []
    if not parser.eat(")"):
        while True:
            parameters.append(parser.parse_shape())
            if parser.eat(")"):
                break
            parser.expect(",", "or ')' between parameter shapes")
    parser.expect("->", "before the result shape")
    result = parser.parse_shape()
    parser.expect("}", "to end the program shape")
    return parameters, result


def conform(value: HloInstruction, wanted: Shape, before: HloInstruction | None = None) -> HloInstruction:
    """``value``, or copies of the arrays in it, laid out as ``wanted``; new
    instructions are added to ``value``'s computation (before ``before``)."""
    if same_layouts(value.shape, wanted):
        return value
    computation = value.parent
    if not value.shape.is_tuple:
        return computation.add_instruction(HloInstruction(f"{value.name}.copy", "copy", wanted, [value]), before)
    elements = []
    for i, element_shape in enumerate(wanted.tuple_shapes):
        element = computation.add_instruction(
            HloInstruction(f"{value.name}.element", "get-tuple-element", value.shape.tuple_shapes[i], [value],
                           {"index": i}), before)
        elements.append(conform(element, element_shape, before))
    return computation.add_instruction(HloInstruction(f"{value.name}.copy", "tuple", wanted, elements), before)


# Ops whose value is their operands' values, and so their operands' layouts.
_FORWARDING = frozenset({"tuple", "get-tuple-element", "opt-barrier", "add-dependency", "domain"})
# Ops that need their operands in the default layout: dots (XLA:CPU's row-major library dots) and control
# flow (whose computations are laid out by default).
_DEFAULT_OPERANDS = frozenset({"dot", "while", "conditional", "call"})


class LayoutAssignment(HloPass):
    name = "layout-assignment"

    def run(self, module: HloModule) -> bool:
        entry = module.entry
        if entry is None or entry.root is None:
            return False
        required_parameters = [p.shape for p in entry.parameters]
        required_result = entry.root.shape
        text = module.attributes.get("entry_computation_layout")
        if text is not None:
            required_parameters, required_result = read_entry_layout(str(text))
        laid_out = [c for c in module.computations if c is entry or _runs_on_memory(module, c)]
        # The operand layouts instructions of fixed layout were written against, before anything changes.
        expected = {id(i): [o.shape for o in i.operands]
                    for c in laid_out for i in c.instructions if i.opcode in LAYOUT_FIXED_OPCODES}
        before = _fingerprint(module)
        for computation in laid_out:
            if computation is entry:
                for parameter in entry.parameters:
                    parameter.shape = required_parameters[parameter.parameter_number]
                _read_parameters_in_default_layout(entry)
            for instr in computation.post_order():
                self._assign(instr, computation is entry, required_parameters, expected)
            wanted = required_result if computation is entry else default_layouts(computation.root.shape)
            computation.root = conform(computation.root, wanted)
        return _fingerprint(module) != before

    @staticmethod
    def _assign(instr: HloInstruction, in_entry: bool, required_parameters: list[Shape],
                expected: dict[int, list[Shape]]) -> None:
        opcode = instr.opcode
        if opcode == "parameter":
            instr.shape = required_parameters[instr.parameter_number] if in_entry else default_layouts(instr.shape)
            return
        if opcode in LAYOUT_FIXED_OPCODES:
            _convert_operands(instr, expected[id(instr)])
            return
        if opcode == "copy":
            return  # a copy is there to lay its operand out as it says
        if opcode in _DEFAULT_OPERANDS:
            _convert_operands(instr, [default_layouts(o.shape) for o in instr.operands])
        if opcode == "tuple":
            instr.shape = Shape.make_tuple([o.shape for o in instr.operands])
        elif opcode == "get-tuple-element":
            instr.shape = instr.operands[0].shape.tuple_shapes[int(instr.attributes["index"])]
        elif opcode in _FORWARDING:
            instr.shape = instr.operands[0].shape
        else:
            instr.shape = default_layouts(instr.shape)


def _fingerprint(module: HloModule) -> list:
    return [(c.root and id(c.root), [(id(i), str(i.shape), [id(o) for o in i.operands]) for i in c.instructions])
            for c in module.computations]


def _runs_on_memory(module: HloModule, computation: HloComputation) -> bool:
    """Whether control flow runs ``computation`` on values in memory (rather
    than an op applying it inside a kernel: fused computations, reducers,
    comparators, whose layouts do not meet memory)."""
    callers = [i for i in module.instructions if any(c is computation for c in i.called_computations)]
    return bool(callers) and all(i.opcode in ("while", "conditional", "call") for i in callers)


def _read_parameters_in_default_layout(entry: HloComputation) -> None:
    """An entry parameter laid out otherwise is read through one copy in the default layout."""
    for parameter in entry.parameters:
        wanted = default_layouts(parameter.shape)
        users = [u for u in parameter.users if not (u.opcode == "copy" and same_layouts(u.shape, wanted))]
        if same_layouts(parameter.shape, wanted) or not users:
            continue
        copy = conform(parameter, wanted)
        for user in users:
            user.replace_operand_with(parameter, copy)
        _refresh_forwarded_shapes(users)


def _refresh_forwarded_shapes(users: list[HloInstruction]) -> None:
    """Views of a value whose layout changed show the new layout."""
    pending = list(users)
    while pending:
        instr = pending.pop()
        if instr.opcode == "tuple":
            instr.shape = Shape.make_tuple([o.shape for o in instr.operands])
        elif instr.opcode == "get-tuple-element":
            instr.shape = instr.operands[0].shape.tuple_shapes[int(instr.attributes["index"])]
        else:
            continue
        pending.extend(instr.users)


def _convert_operands(instr: HloInstruction, wanted: list[Shape]) -> None:
    """Copy ``instr``'s operands into the layouts of ``wanted`` where they differ."""
    for number, (operand, shape) in enumerate(zip(list(instr.operands), wanted)):
        converted = conform(operand, shape, before=instr)
        if converted is not operand:
            instr.replace_operand(number, converted)
