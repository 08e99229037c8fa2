"""``batched_gather_scatter_normalizer``: gathers and scatters with batching
dimensions rewritten without them, as XLA's
``BatchedGatherScatterNormalizer``
(``xla/service/batched_gather_scatter_normalizer.cc``), which XLA:CPU runs
first among its passes through layout assignment, so that the other passes
and the emitters see only gathers and scatters without batching dimensions.

An operand batching dimension is read at the position of the index vector
along its indices batching dimension. The rewrite makes that position an
explicit start index: an ``iota`` along each indices batching dimension
(of the indices' shape with the index vector dimension of size 1; the
indices first get a trailing dimension of size 1 when their index vector is
implicit) is concatenated in front of the index vectors, the operand
batching dimensions go in front of ``start_index_map``
(``scatter_dims_to_operand_dims``) and join the collapsed slice (inserted
window) dimensions. The slice there has size 1 and the start is in bounds,
so clamping leaves it as it was. The indices are converted to s32 (s64 when
that is too narrow) first if a batching dimension's size does not fit their
type. ``indices_are_sorted`` stays only if the new start index map is sorted.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass
from xlapy.transforms.scatter_expander import InstructionBuilder

_BATCHING = {"gather": ("operand_batching_dims", "start_indices_batching_dims", "start_index_map",
                        "collapsed_slice_dims"),
             "scatter": ("input_batching_dims", "scatter_indices_batching_dims", "scatter_dims_to_operand_dims",
                         "inserted_window_dims")}


def _dims(instruction: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in instruction.attributes.get(name, ()) or ())


def _fits(size: int, element_type: str) -> bool:
    return int(np.iinfo(ELEMENT_TYPES[element_type].dtype).max) >= size


def _index_type_for(element_type: str, sizes: list[int]) -> str:
    """XLA's ``PromoteTypeForSize``: the indices' type if every size fits in it,
    else s32 or s64."""
    largest = max(sizes, default=0)
    if _fits(largest, element_type):
        return element_type
    return "s32" if _fits(largest, "s32") else "s64"


def _array(element_type: str, dims: list[int] | tuple[int, ...]) -> Shape:
    return Shape.array(element_type, tuple(dims)).with_default_layout()


def indices_with_batch_positions(build: InstructionBuilder, indices: HloInstruction, index_vector_dim: int,
                                 batching_dims: tuple[int, ...]) -> HloInstruction:
    """The indices with, in front of each index vector, its position along
    each of ``batching_dims`` (XLA's ``CreateConcatIndices``)."""
    dims = list(indices.shape.dimensions)
    element_type = _index_type_for(indices.shape.element_type, [dims[d] for d in batching_dims])
    if element_type != indices.shape.element_type:
        indices = build.add("convert", _array(element_type, dims), [indices])
    implicit = index_vector_dim == len(dims)
    if implicit:
        dims.append(1)
        indices = build.add("reshape", _array(element_type, dims), [indices])
    iota_dims = list(dims)
    iota_dims[index_vector_dim] = 1
    pieces = [build.add("iota", _array(element_type, iota_dims), [], {"iota_dimension": d}) for d in batching_dims]
    concatenated = list(dims)
    concatenated[index_vector_dim] = len(batching_dims) + dims[index_vector_dim]
    return build.add("concatenate", _array(element_type, concatenated), [*pieces, indices],
                     {"dimensions": (index_vector_dim,)})


class BatchedGatherScatterNormalizer(OpExpanderPass):
    """Rewrites each gather or scatter with batching dimensions into one without."""

    name = "batched_gather_scatter_normalizer"

    def matches(self, instruction: HloInstruction) -> bool:
        names = _BATCHING.get(instruction.opcode)
        return names is not None and bool(_dims(instruction, names[0]))

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        build = InstructionBuilder(builder.computation, builder.before)
        operand_batching, indices_batching, index_map, dropped = _BATCHING[instruction.opcode]
        batching = _dims(instruction, operand_batching)
        position = 1 if instruction.opcode == "gather" else len(instruction.operands) // 2
        index_vector_dim = int(instruction.attr("index_vector_dim"))
        indices = indices_with_batch_positions(build, instruction.operands[position], index_vector_dim,
                                               _dims(instruction, indices_batching))
        new_map = (*batching, *_dims(instruction, index_map))
        attributes = dict(instruction.attributes)
        del attributes[operand_batching], attributes[indices_batching]
        attributes[index_map] = new_map
        attributes[dropped] = tuple(sorted((*_dims(instruction, dropped), *batching)))
        if "indices_are_sorted" in attributes:
            sorted_before = str(attributes["indices_are_sorted"]).strip().lower() == "true"
            attributes["indices_are_sorted"] = sorted_before and list(new_map) == sorted(new_map)
        operands = list(instruction.operands)
        operands[position] = indices
        return build.add(instruction.opcode, instruction.shape, operands, attributes,
                         list(instruction.called_computations))
