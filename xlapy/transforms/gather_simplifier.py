"""``gather_simplifier``: every gather rewritten into the canonical form the
fusion emitters take, with transposes and reshapes around it, as XLA's
``GatherSimplifier`` (``xla/hlo/transforms/simplifiers/gather_simplifier.cc``,
helpers in ``xla/service/gather_scatter_utils.cc``). XLA:CPU runs it in its
simplification pipelines when it compiles with the fusion emitters, right
after the gather expander.

The canonical gather (``is_simplified_gather``): indices ``[N, K]`` with the
index vector last (``index_vector_dim=1``), nothing collapsed, and the
result ``[N, slice_sizes...]`` (``offset_dims={1,...,rank}``);
``start_index_map`` stays as it was. The rewrite:

- the indices get their index vector dimension last (a trailing dimension of
  size 1 when it is implicit, a transpose when it is elsewhere), then the
  other dimensions are collapsed into one (a leading dimension of 1 when
  there are none);
- the canonical gather takes the same operand, ``start_index_map`` and
  ``slice_sizes``;
- a reshape drops the collapsed slice dimensions and splits the leading
  dimension back into the batch dimensions of the indices (dropping it when
  there are none), and a transpose puts the offset dimensions where
  ``offset_dims`` says.

A gather with a slice of size 0 becomes a broadcast zero and one from a
scalar operand a broadcast of it. Gathers with batching dimensions are left
to ``BatchedGatherScatterNormalizer``, which XLA:CPU runs first.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import Shape
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass
from xlapy.transforms.scatter_expander import InstructionBuilder


def dims_attr(instruction: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in instruction.attributes.get(name, ()) or ())


def is_simplified_gather(gather: HloInstruction) -> bool:
    """XLA's ``GatherSimplifier::IsSimplifiedGather``."""
    offset_dims = dims_attr(gather, "offset_dims")
    if not offset_dims and not dims_attr(gather, "collapsed_slice_dims"):
        return False  # a gather from a scalar: a broadcast
    return (gather.operands[1].shape.rank == 2 and gather.attr("index_vector_dim") == 1
            and not dims_attr(gather, "collapsed_slice_dims")
            and offset_dims == tuple(range(1, len(offset_dims) + 1)))


def canonical_start_indices(build: InstructionBuilder, indices: HloInstruction,
                            index_vector_dim: int) -> HloInstruction:
    """The indices as ``[N, K]``: index vectors as rows (XLA's ``TransformStartIndices``)."""
    dims = list(indices.shape.dimensions)
    if index_vector_dim == len(dims):
        dims.append(1)
        indices = build.reshape(indices, dims)
    elif index_vector_dim < len(dims) - 1:
        permutation = [d for d in range(len(dims)) if d != index_vector_dim] + [index_vector_dim]
        indices = build.transpose(indices, permutation)
        dims = list(indices.shape.dimensions)
    rows = 1
    for size in dims[:-1]:
        rows *= size
    return build.reshape(indices, (rows, dims[-1]))


class GatherSimplifier(OpExpanderPass):
    """Rewrites each gather outside the canonical form into a canonical one."""

    name = "gather_simplifier"

    def matches(self, instruction: HloInstruction) -> bool:
        return (instruction.opcode == "gather" and not dims_attr(instruction, "operand_batching_dims")
                and not is_simplified_gather(instruction))

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        build = InstructionBuilder(builder.computation, builder.before)
        operand, indices = instruction.operands
        result_shape = instruction.shape
        sizes = dims_attr(instruction, "slice_sizes")
        if 0 in sizes:
            zero = build.constant(0, result_shape.element_type)
            return build.add("broadcast", result_shape, [zero], {"dimensions": ()})
        if operand.shape.rank == 0:
            return build.add("broadcast", result_shape, [operand], {"dimensions": ()})
        index_vector_dim = int(instruction.attr("index_vector_dim"))
        starts = canonical_start_indices(build, indices, index_vector_dim)
        attributes = {
            "offset_dims": tuple(range(1, len(sizes) + 1)),
            "collapsed_slice_dims": (),
            "start_index_map": dims_attr(instruction, "start_index_map"),
            "index_vector_dim": 1,
            "slice_sizes": sizes,
        }
        if "indices_are_sorted" in instruction.attributes:
            attributes["indices_are_sorted"] = instruction.attributes["indices_are_sorted"]
        shape = Shape.array(result_shape.element_type, (starts.shape.dimensions[0], *sizes)).with_default_layout()
        result = build.add("gather", shape, [operand, starts], attributes)
        # Drop the collapsed slice dimensions and give the indices' batch dimensions back (one reshape where
        # XLA makes two, which its algebraic simplifier then merges).
        collapsed = dims_attr(instruction, "collapsed_slice_dims")
        batch = [size for d, size in enumerate(indices.shape.dimensions) if d != index_vector_dim]
        offsets = [size for d, size in enumerate(sizes) if d not in collapsed]
        result = build.reshape(result, (*batch, *offsets))
        # Put the offset dimensions where offset_dims says.
        offset_dims = dims_attr(instruction, "offset_dims")
        permutation, next_offset, next_batch = [], len(batch), 0
        for d in range(len(batch) + len(offsets)):
            if d in offset_dims:
                permutation.append(next_offset)
                next_offset += 1
            else:
                permutation.append(next_batch)
                next_batch += 1
        return build.transpose(result, permutation)
