"""Expansion of ``select-and-scatter`` into a reduce-window and a scatter, as
XLA's ``SelectAndScatterExpander`` (``xla/service/select_and_scatter_expander.cc``).

One ``s32`` iota per operand dimension rides along the operand through a
variadic ``reduce-window`` over the instruction's window; its reducer keeps,
of two (value, indices) candidates, the one the ``select`` computation
prefers, where a candidate from the padding (indices -1, the init value of
the iotas) never beats a real element. The window's winning indices, stacked
into ``s32[source dims..., rank]``, then say where each source element goes:
a ``scatter`` of the source into the init value broadcast to the operand's
shape, with the instruction's ``scatter`` computation, which the scatter
expander turns into a loop next. The ``select`` computation is inlined into
the reducer (XLA calls it, then inlines the call).
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type
from xlapy.transforms.scatter_expander import InstructionBuilder


def _scalar(element_type: str) -> Shape:
    return Shape.array(element_type, ()).with_default_layout()


def _parameter(computation: HloComputation, number: int, shape: Shape, name: str) -> HloInstruction:
    parameter = HloInstruction(name, "parameter", shape)
    parameter.parameter_number = number
    return computation.add_instruction(parameter)


def _reducer(select: HloComputation, element_type: str, rank: int, caller: HloComputation) -> HloComputation:
    """The reduce-window's computation over (value, iota_0..iota_{rank-1}) pairs."""
    module = caller.module
    assert module is not None
    reducer = module.add_computation(HloComputation(unique_computation_name(module, f"{select.name}.reduce_window")))
    reducer.execution_thread = caller.execution_thread
    module.computations.remove(reducer)
    module.computations.insert(module.computations.index(caller), reducer)
    build = InstructionBuilder(reducer)
    rhs_begin = rank + 1
    lhs_value = _parameter(reducer, 0, _scalar(element_type), "operand_lhs")
    lhs_iotas = [_parameter(reducer, 1 + i, _scalar("s32"), "iota_lhs") for i in range(rank)]
    rhs_value = _parameter(reducer, rhs_begin, _scalar(element_type), "operand_rhs")
    rhs_iotas = [_parameter(reducer, rhs_begin + 1 + i, _scalar("s32"), "iota_rhs") for i in range(rank)]
    # The select computation's ops, on the two values.
    values = {id(select.parameter(0)): lhs_value, id(select.parameter(1)): rhs_value}
    for instruction in select.instructions:
        if instruction.opcode != "parameter":
            clone = instruction.clone([values[id(o)] for o in instruction.operands])
            values[id(instruction)] = reducer.add_instruction(clone)
    assert select.root is not None
    selected = values[id(select.root)]
    pred = _scalar("pred")
    neg_one = build.constant(-1, "s32")
    lhs_real = build.compare(lhs_iotas[0], neg_one, "NE")
    rhs_padding = build.add("not", pred, [build.compare(rhs_iotas[0], neg_one, "NE")])
    selected = build.add("or", pred, [build.add("and", pred, [selected, lhs_real]), rhs_padding])
    results = [build.add("select", _scalar(element_type), [selected, lhs_value, rhs_value])]
    results += [build.add("select", _scalar("s32"), [selected, lhs, rhs]) for lhs, rhs in zip(lhs_iotas, rhs_iotas)]
    reducer.root = build.tuple(results)
    return reducer


class SelectAndScatterExpander(OpExpanderPass):
    """Replaces each select-and-scatter by a reduce-window and a scatter."""

    name = "select_and_scatter_expander"

    def matches(self, instruction: HloInstruction) -> bool:
        # A scalar operand has no window to select in; XLA does not expand it either.
        return instruction.opcode == "select-and-scatter" and instruction.operands[0].shape.rank > 0

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        build = InstructionBuilder(builder.computation, builder.before)
        operand, source, init_value = instruction.operands
        select, scatter = instruction.called_computations
        rank = operand.shape.rank
        iota_shape = with_element_type(operand.shape, "s32").with_default_layout()
        iotas = [build.add("iota", iota_shape, [], {"iota_dimension": i}) for i in range(rank)]
        reducer = _reducer(select, operand.shape.element_type, rank, builder.computation)
        neg_one = build.constant(-1, "s32")
        source_dims = tuple(source.shape.dimensions)
        reduced_iota = Shape.array("s32", source_dims).with_default_layout()
        shapes = [source.shape.with_default_layout(), *[reduced_iota] * rank]
        reduce_window = build.add("reduce-window", Shape.make_tuple(shapes), [operand, *iotas, init_value,
                                                                               *[neg_one] * rank],
                                  {"window": instruction.attr("window"), "to_apply": reducer.name}, [reducer])
        columns = [build.reshape(build.get_tuple_element(reduce_window, 1 + i), (*source_dims, 1))
                   for i in range(rank)]
        indices = build.add("concatenate", Shape.array("s32", (*source_dims, rank)).with_default_layout(), columns,
                            {"dimensions": (len(source_dims),)})
        base = build.add("broadcast", instruction.shape, [init_value], {"dimensions": ()})
        all_dims = tuple(range(rank))
        return build.add("scatter", instruction.shape, [base, indices, source], {
            "update_window_dims": (), "inserted_window_dims": all_dims, "scatter_dims_to_operand_dims": all_dims,
            "index_vector_dim": len(source_dims), "to_apply": scatter.name}, [scatter])
