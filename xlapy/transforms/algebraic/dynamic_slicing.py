"""Rules for ``dynamic-slice`` and ``dynamic-update-slice``, as XLA's
``HandleDynamicSlice`` and ``HandleDynamicUpdateSlice``.

Both clamp their start indices so that the slice fits in the operand; the
rules lean on that:

- a slice (an update) as large as the operand starts at 0 whatever its
  indices: it is the operand (the update); along a dimension it spans
  wholly, its start index is 0;
- a dynamic slice at constant indices is a ``slice`` (at the clamped start;
  XLA leaves negative constant indices alone);
- a dynamic slice of a broadcast (a transpose) is a broadcast (a transpose)
  of a dynamic slice of its operand;
- an update without elements changes nothing.

XLA's merging of nested dynamic slices (and of a dynamic update of a
dynamic slice) adds the start indices without clamping the outer ones
first, which changes the result when they are out of bounds; it is not made.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, is_all, rule


def _is_zero_constant(index: HloInstruction) -> bool:
    return index.opcode == "constant" and is_all(index, 0)


def _zero_spanned_indices(instr: HloInstruction, s: Simplifier, first_index: int, other: tuple[int, ...]) -> bool:
    """Start indices (from operand ``first_index`` on) of the dimensions where
    ``instr``'s result and ``other`` (the sliced operand, the update) have the
    same size become 0: the slice (update) spans them wholly, so they are
    clamped to 0."""
    operands = list(instr.operands)
    spanned = [d for d, size in enumerate(other)
               if size == instr.shape.dimensions[d] and not _is_zero_constant(operands[first_index + d])]
    if not spanned or instr.control_predecessors or instr.control_successors:
        return False
    for d in spanned:
        index = operands[first_index + d]
        operands[first_index + d] = building.scalar(s, 0, index.shape.element_type, instr)
    new = s.computation.add_instruction(instr.clone(operands), before=instr)
    return s.replace(instr, new)


def _has_scalar_indices(instr: HloInstruction, first_index: int) -> bool:
    indices = instr.operands[first_index:]
    return len(indices) == instr.operands[0].shape.rank and all(i.shape.rank == 0 for i in indices)


@rule("dynamic-slice")
def _dynamic_slice(ds: HloInstruction, s: Simplifier) -> bool:
    operand = ds.operands[0]
    if not _has_scalar_indices(ds, 1):
        return False
    # A slice of a scalar, or of the whole operand, is the operand.
    if ds.shape.rank == 0 or s.same_shape(operand.shape, ds.shape):
        return s.replace(ds, operand)
    sizes = tuple(ds.attr("dynamic_slice_sizes", ds.shape.dimensions))
    if _zero_spanned_indices(ds, s, 1, tuple(operand.shape.dimensions)):
        return True
    indices = ds.operands[1:]
    # dynamic-slice(broadcast(A)) => broadcast(dynamic-slice(A)) on A's dimensions.
    if operand.opcode == "broadcast":
        return _sink_broadcast(ds, s, operand, indices, sizes)
    # dynamic-slice(transpose(A)) => transpose(dynamic-slice(A)).
    if operand.opcode == "transpose" and not s.options.is_layout_sensitive:
        permutation = tuple(operand.attr("dimensions", ()))
        source = operand.operands[0]
        new_indices: list[HloInstruction] = [indices[0]] * len(permutation)
        new_sizes = [0] * len(permutation)
        for i, p in enumerate(permutation):
            new_indices[p], new_sizes[p] = indices[i], sizes[i]
        new_slice = s.add("dynamic-slice", building.array_shape(ds.shape, ds.shape.element_type, new_sizes),
                          [source, *new_indices], {"dynamic_slice_sizes": tuple(new_sizes)}, before=ds)
        return s.replace_with_new(ds, "transpose", ds.shape, [new_slice], {"dimensions": permutation})
    # Constant start indices: a slice, from the clamped start.
    if operand.opcode != "constant" and all(
            i.opcode == "constant" and i.shape.type.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED) for i in indices):
        starts = [int(np.asarray(i.literal).reshape(-1)[0]) for i in indices]
        if any(start < 0 for start in starts):
            return False
        dims = []
        for start, size, dim in zip(starts, ds.shape.dimensions, operand.shape.dimensions):
            start = min(start, dim - size)
            dims.append(SliceDimension(start, start + size, 1))
        return s.replace_with_new(ds, "slice", ds.shape, [operand], {"slice": tuple(dims)})
    return False


def _sink_broadcast(ds: HloInstruction, s: Simplifier, broadcast: HloInstruction, indices: list[HloInstruction],
                    sizes: tuple[int, ...]) -> bool:
    source = broadcast.operands[0]
    mapping = tuple(broadcast.attr("dimensions", ()))
    new_slice = source
    if mapping:
        new_sizes = tuple(sizes[d] for d in mapping)
        new_slice = s.add("dynamic-slice", building.array_shape(ds.shape, source.shape.element_type, new_sizes),
                          [source, *(indices[d] for d in mapping)], {"dynamic_slice_sizes": new_sizes}, before=ds)
    new_broadcast = building.broadcast(s, new_slice, ds.shape, mapping, ds)
    return s.replace(ds, new_broadcast)


@rule("dynamic-update-slice")
def _dynamic_update_slice(dus: HloInstruction, s: Simplifier) -> bool:
    operand, update = dus.operands[0], dus.operands[1]
    if not _has_scalar_indices(dus, 2):
        return False
    # An update of the whole operand is the update.
    if s.same_shape(dus.shape, update.shape):
        return s.replace(dus, update)
    if _zero_spanned_indices(dus, s, 2, tuple(update.shape.dimensions)):
        return True
    # An update without elements changes nothing.
    if update.shape.element_count == 0:
        return s.replace(dus, operand)
    return False
