"""Expansion of ``scatter`` into a loop, as XLA's ``ScatterExpander``
(``xla/service/scatter_expander.cc``).

The indices are made a matrix with one index vector per row (``[N, K]``, or
``[N]`` when each vector has one component): the index vector dimension moved
last, the other dimensions collapsed. The updates get their scatter
dimensions first, collapsed to one of size ``N`` (a leading dimension of 1
when there are none). A counted ``while`` loop (XLA's
``WhileUtil::MakeCountedLoop``: state ``(s32[] i, operands..., indices,
updates...)``, condition ``i < N``) then does, for row ``i``: slice out the
index vector and spread it over the operand's dimensions (0 for the others),
slice out the update window and give it the inserted window dimensions back,
``dynamic-slice`` the operand window there, combine both with the scatter's
computation, and ``dynamic-update-slice`` the result back, but only if the
whole window is in bounds (otherwise the operand window is written back
unchanged, since both ops clamp their starts alike).

XLA combines with a ``map`` of the scatter's computation (one per result of a
variadic scatter); here the computation's scalar ops are applied to the
window arrays directly, as XLA's ``MapInliner`` does to such maps, when they
are all elementwise ops, constants, and a tuple root; another combiner keeps
XLA's ``map`` (single-result scatters only). The validity test is the
conjunction of one scalar comparison per dimension where XLA reduces a vector
of them. Scatters with batching dimensions (which XLA's
``BatchedGatherScatterNormalizer`` rewrites first) are left alone.

Modes: ``ELIMINATE_ALL_SCATTERS`` (what XLA:CPU runs) and
``ELIMINATE_SIMPLE_SCATTERS`` (only scatters of one index vector).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type


def _array(element_type: str, dimensions: tuple[int, ...] | list[int]) -> Shape:
    return Shape.array(element_type, tuple(dimensions)).with_default_layout()


class InstructionBuilder:
    """Adds instructions to a computation, each before ``before`` (or at the
    end), with the helpers the expanders share."""

    def __init__(self, computation: HloComputation, before: HloInstruction | None = None) -> None:
        self.computation = computation
        self.before = before

    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction],
            attributes: dict[str, Any] | None = None,
            called_computations: list[HloComputation] | None = None) -> HloInstruction:
        instruction = HloInstruction(opcode, opcode, shape, operands, attributes, called_computations)
        return self.computation.add_instruction(instruction, before=self.before)

    def constant(self, value: Any, element_type: str, dimensions: tuple[int, ...] = ()) -> HloInstruction:
        constant = HloInstruction("constant", "constant", _array(element_type, dimensions))
        constant.literal = np.asarray(value, dtype=constant.shape.dtype).reshape(dimensions)
        return self.computation.add_instruction(constant, before=self.before)

    def reshape(self, operand: HloInstruction, dimensions: tuple[int, ...] | list[int]) -> HloInstruction:
        if tuple(operand.shape.dimensions) == tuple(dimensions):
            return operand
        return self.add("reshape", _array(operand.shape.element_type, dimensions), [operand])

    def transpose(self, operand: HloInstruction, permutation: list[int]) -> HloInstruction:
        if permutation == sorted(permutation):
            return operand
        dims = [operand.shape.dimensions[p] for p in permutation]
        return self.add("transpose", _array(operand.shape.element_type, dims), [operand],
                        {"dimensions": tuple(permutation)})

    def slice1(self, vector: HloInstruction, index: int) -> HloInstruction:
        """Element ``index`` of a rank-1 array, as a scalar."""
        piece = self.add("slice", _array(vector.shape.element_type, (1,)), [vector],
                         {"slice": (SliceDimension(index, index + 1, 1),)})
        return self.reshape(piece, ())

    def dynamic_slice(self, operand: HloInstruction, starts: list[HloInstruction],
                      sizes: tuple[int, ...] | list[int]) -> HloInstruction:
        return self.add("dynamic-slice", _array(operand.shape.element_type, sizes), [operand, *starts],
                        {"dynamic_slice_sizes": tuple(sizes)})

    def compare(self, lhs: HloInstruction, rhs: HloInstruction, direction: str) -> HloInstruction:
        return self.add("compare", with_element_type(lhs.shape, "pred"), [lhs, rhs], {"direction": direction})

    def get_tuple_element(self, tuple_: HloInstruction, index: int) -> HloInstruction:
        return self.add("get-tuple-element", tuple_.shape.tuple_shapes[index], [tuple_], {"index": index})

    def tuple(self, elements: list[HloInstruction]) -> HloInstruction:
        return self.add("tuple", Shape.make_tuple([e.shape for e in elements]), elements)


def is_elementwise_computation(computation: HloComputation) -> bool:
    """Whether ``computation`` is made of elementwise ops on its scalar
    parameters and constants (with a tuple root for several results)."""
    for instruction in computation.instructions:
        if instruction.opcode in ("parameter", "constant"):
            if instruction.shape.is_tuple or instruction.shape.rank != 0:
                return False
        elif instruction.opcode == "tuple":
            if instruction is not computation.root:
                return False
        elif instruction.opcode not in OPCODES or not OPCODES[instruction.opcode].is_elementwise:
            return False
    return True


def apply_elementwise(builder: InstructionBuilder, computation: HloComputation,
                      operands: list[HloInstruction]) -> list[HloInstruction]:
    """The results of ``computation`` (elementwise, see above) applied to
    arrays of one shape, element by element: each scalar op becomes the same
    op on the arrays, each constant a broadcast of it."""
    dims = tuple(operands[0].shape.dimensions)
    values: dict[int, HloInstruction] = {}
    for instruction in computation.instructions:
        if instruction.opcode == "parameter":
            values[id(instruction)] = operands[instruction.parameter_number]
        elif instruction.opcode == "constant":
            scalar = builder.constant(instruction.literal, instruction.shape.element_type)
            values[id(instruction)] = scalar if not dims else builder.add(
                "broadcast", _array(instruction.shape.element_type, dims), [scalar], {"dimensions": ()})
        elif instruction.opcode != "tuple":
            values[id(instruction)] = builder.add(
                instruction.opcode, _array(instruction.shape.element_type, dims),
                [values[id(o)] for o in instruction.operands], dict(instruction.attributes))
    root = computation.root
    assert root is not None
    if root.opcode == "tuple":
        return [values[id(o)] for o in root.operands]
    return [values[id(root)]]


def make_counted_loop(builder: InstructionBuilder, trip_count: int, state: list[HloInstruction],
                      body: Any, results: int, name: str = "while") -> list[HloInstruction]:
    """XLA's ``WhileUtil::MakeCountedLoop``: a ``while`` over ``(s32[] i,
    state...)`` running ``i`` from 0 to ``trip_count - 1``. ``body(builder,
    i, state) -> new state`` builds the body; returns the first ``results``
    values of the final state."""
    module = builder.computation.module
    assert module is not None
    tuple_shape = Shape.make_tuple([_array("s32", ()), *[s.shape for s in state]])

    condition = module.add_computation(HloComputation(unique_computation_name(module, f"{name}_cond")))
    condition.execution_thread = builder.computation.execution_thread
    cond = InstructionBuilder(condition)
    parameter = HloInstruction("param", "parameter", tuple_shape)
    parameter.parameter_number = 0
    parameter = condition.add_instruction(parameter)
    condition.root = cond.compare(cond.get_tuple_element(parameter, 0), cond.constant(trip_count, "s32"), "LT")

    body_computation = module.add_computation(HloComputation(unique_computation_name(module, f"{name}_body")))
    body_computation.execution_thread = builder.computation.execution_thread
    inner = InstructionBuilder(body_computation)
    parameter = HloInstruction("param", "parameter", tuple_shape)
    parameter.parameter_number = 0
    parameter = body_computation.add_instruction(parameter)
    induction = inner.get_tuple_element(parameter, 0)
    values = [inner.get_tuple_element(parameter, k + 1) for k in range(len(state))]
    new_values = body(inner, induction, values)
    next_induction = inner.add("add", induction.shape, [induction, inner.constant(1, "s32")])
    body_computation.root = inner.tuple([next_induction, *new_values])

    # Callees come before their callers in the module.
    for callee in (condition, body_computation):
        module.computations.remove(callee)
        module.computations.insert(module.computations.index(builder.computation), callee)
    init = builder.tuple([builder.constant(0, "s32"), *state])
    loop = builder.add("while", tuple_shape, [init], {"condition": condition.name, "body": body_computation.name},
                       [body_computation, condition])
    return [builder.get_tuple_element(loop, k + 1) for k in range(results)]


def _dims(instruction: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in instruction.attributes.get(name, ()) or ())


def scatter_trip_count(scatter: HloInstruction) -> int:
    """The number of index vectors (XLA's ``ScatterTripCount``)."""
    count = len(scatter.operands) // 2
    indices = scatter.operands[count].shape
    index_vector_dim = int(scatter.attr("index_vector_dim", indices.rank))
    return int(np.prod([d for i, d in enumerate(indices.dimensions) if i != index_vector_dim], dtype=np.int64))


def _canonical_indices(builder: InstructionBuilder, indices: HloInstruction, index_vector_dim: int) -> HloInstruction:
    dims = list(indices.shape.dimensions)
    rank = len(dims)
    if index_vector_dim < rank - 1:
        indices = builder.transpose(indices, [d for d in range(rank) if d != index_vector_dim] + [index_vector_dim])
    scalar_indices = index_vector_dim == rank or (index_vector_dim == rank - 1 and dims[index_vector_dim] == 1)
    components = 1 if index_vector_dim == rank else dims[index_vector_dim]
    count = int(np.prod([d for i, d in enumerate(dims) if i != index_vector_dim], dtype=np.int64))
    return builder.reshape(indices, (count,) if scalar_indices else (count, components))


def _canonical_updates(builder: InstructionBuilder, updates: HloInstruction, window_dims: tuple[int, ...],
                       count: int) -> HloInstruction:
    rank = updates.shape.rank
    scatter_dims = [d for d in range(rank) if d not in window_dims]
    updates = builder.transpose(updates, scatter_dims + list(window_dims))
    window = [updates.shape.dimensions[len(scatter_dims) + k] for k in range(len(window_dims))]
    return builder.reshape(updates, (count, *window))


class _LoopBody:
    """Builds the body of a scatter loop."""

    def __init__(self, scatter: HloInstruction) -> None:
        self.scatter = scatter
        self.count = len(scatter.operands) // 2
        self.inserted = _dims(scatter, "inserted_window_dims")
        self.to_operand = _dims(scatter, "scatter_dims_to_operand_dims")

    def __call__(self, builder: InstructionBuilder, induction: HloInstruction,
                 state: list[HloInstruction]) -> list[HloInstruction]:
        operands, indices, updates = state[:self.count], state[self.count], state[self.count + 1:]
        rank = operands[0].shape.rank
        index_type = indices.shape.element_type
        zero_s32 = builder.constant(0, "s32")
        if indices.shape.rank == 1:
            vector = builder.dynamic_slice(indices, [induction], (1,))
        else:
            row = builder.dynamic_slice(indices, [induction, zero_s32], (1, indices.shape.dimensions[1]))
            vector = builder.reshape(row, (indices.shape.dimensions[1],))
        zero = builder.constant(0, index_type)
        starts = [builder.slice1(vector, self.to_operand.index(d)) if d in self.to_operand else zero
                  for d in range(rank)]

        window_dims = list(updates[0].shape.dimensions[1:])
        slice_dims: list[int] = []
        window = iter(window_dims)
        for d in range(rank):
            slice_dims.append(1 if d in self.inserted else next(window))
        update_slices = []
        for update in updates:
            piece = builder.dynamic_slice(update, [induction] + [zero_s32] * len(window_dims), [1, *window_dims])
            update_slices.append(builder.reshape(piece, slice_dims))
        operand_slices = [builder.dynamic_slice(o, starts, slice_dims) for o in operands]

        valid = None
        for d in range(rank):
            if starts[d] is zero:  # the window fits at 0 (it is no larger than the operand)
                continue
            in_bounds = builder.add("and", _array("pred", ()), [
                builder.compare(zero, starts[d], "LE"),
                builder.compare(starts[d], builder.constant(operands[0].shape.dimensions[d] - slice_dims[d],
                                                            index_type), "LE")])
            valid = in_bounds if valid is None else builder.add("and", _array("pred", ()), [valid, in_bounds])
        combined = self._combine(builder, operand_slices, update_slices)
        results = []
        for operand, old, new in zip(operands, operand_slices, combined):
            if valid is not None:
                mask = valid if not slice_dims else builder.add("broadcast", _array("pred", slice_dims), [valid],
                                                                 {"dimensions": ()})
                new = builder.add("select", old.shape, [mask, new, old])
            results.append(builder.add("dynamic-update-slice", operand.shape, [operand, new, *starts]))
        return [*results, indices, *updates]

    def _combine(self, builder: InstructionBuilder, operand_slices: list[HloInstruction],
                 update_slices: list[HloInstruction]) -> list[HloInstruction]:
        combiner = self.scatter.called_computations[0]
        if is_elementwise_computation(combiner):
            return apply_elementwise(builder, combiner, [*operand_slices, *update_slices])
        return [builder.add("map", operand_slices[0].shape, [*operand_slices, *update_slices],
                            {"dimensions": tuple(range(operand_slices[0].shape.rank)), "to_apply": combiner.name},
                            [combiner])]


class ScatterExpander(OpExpanderPass):
    """Replaces scatters by counted loops of dynamic slices and updates."""

    name = "scatter_expander"
    ELIMINATE_ALL_SCATTERS = "eliminate-all-scatters"
    ELIMINATE_SIMPLE_SCATTERS = "eliminate-simple-scatters"

    def __init__(self, mode: str = ELIMINATE_ALL_SCATTERS) -> None:
        if mode not in (self.ELIMINATE_ALL_SCATTERS, self.ELIMINATE_SIMPLE_SCATTERS):
            raise ValueError(f"unknown scatter expansion mode {mode!r}")
        self.mode = mode

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "scatter" or _dims(instruction, "input_batching_dims"):
            return False
        count = len(instruction.operands) // 2
        if count > 1 and not is_elementwise_computation(instruction.called_computations[0]):
            return False
        return self.mode == self.ELIMINATE_ALL_SCATTERS or scatter_trip_count(instruction) == 1

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        build = InstructionBuilder(builder.computation, builder.before)
        count = len(instruction.operands) // 2
        operands, indices, updates = (instruction.operands[:count], instruction.operands[count],
                                      instruction.operands[count + 1:])
        if updates[0].shape.element_count == 0:
            return operands[0] if count == 1 else build.tuple(list(operands))
        index_vector_dim = int(instruction.attr("index_vector_dim", indices.shape.rank))
        trip_count = scatter_trip_count(instruction)
        canonical_indices = _canonical_indices(build, indices, index_vector_dim)
        window_dims = _dims(instruction, "update_window_dims")
        canonical_updates = [_canonical_updates(build, u, window_dims, trip_count) for u in updates]
        results = make_counted_loop(build, trip_count, [*operands, canonical_indices, *canonical_updates],
                                    _LoopBody(instruction), count)
        return results[0] if count == 1 else build.tuple(results)
