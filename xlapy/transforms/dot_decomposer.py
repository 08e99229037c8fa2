"""Dot decomposition, as XLA's ``DotDecomposer``
(``xla/hlo/transforms/expanders/dot_decomposer.cc``).

A ``dot`` is canonical when each operand has exactly one contracting
dimension, at most one non-contracting dimension, and its batch dimensions
(if any) are its leading ones, in order. Any other dot becomes a canonical dot
on transposed and reshaped operands, followed by a reshape to the original
result shape:

- the lhs is transposed to ``[batch..., non-contracting..., contracting...]``
  and reshaped to ``[batch..., M, K]``,
- the rhs is transposed to ``[batch..., contracting..., non-contracting...]``
  and reshaped to ``[batch..., K, N]``,

where ``M``, ``N`` and ``K`` are the products of the merged dimensions and a
non-contracting product of 1 is left out. As the canonical check looks at
each operand alone, an operand in the other orientation (``[K, M]`` lhs,
``[N, K]`` rhs) is canonical too. Dots in fusion computations and sparse dots
are left alone, as XLA does.

The canonical dot takes the original's precision config, metadata and
frontend attributes; the final reshape takes its place (name aside), with its
sharding. Each new transpose and reshape takes the metadata of the operand it
rearranges. XLA would fail on a dot with control dependencies; here its
predecessors order the canonical dot and its successors the final reshape.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import replace_instruction

# Attributes of the original dot the canonical one keeps (XLA's
# ``precision_config`` and what ``SetupDerivedInstruction`` carries over).
_KEPT_ATTRIBUTES = ("operand_precision", "algorithm", "metadata", "frontend_attributes")


def _dims(dot: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(dot.attr(name, ()) or ())


def is_canonical_operand(shape: Shape, contracting: Sequence[int], batch: Sequence[int]) -> bool:
    """Whether one dot operand is in canonical form: one contracting
    dimension, at most one non-contracting one, batch dimensions leading."""
    if len(contracting) != 1:
        return False
    if len(batch) + 2 < shape.rank:
        return False
    return tuple(batch) == tuple(range(len(batch)))


def is_canonical_dot(dot: HloInstruction) -> bool:
    """Whether the pass leaves ``dot`` as it is."""
    if len(dot.operands) != 2 or dot.attr("sparsity") is not None:
        return True  # sparse dots: XLA does not decompose them
    lhs, rhs = dot.operands
    return (is_canonical_operand(lhs.shape, _dims(dot, "lhs_contracting_dims"), _dims(dot, "lhs_batch_dims"))
            and is_canonical_operand(rhs.shape, _dims(dot, "rhs_contracting_dims"), _dims(dot, "rhs_batch_dims")))


def _array_shape(like: Shape, element_type: str, dims: Sequence[int], dynamic: Sequence[bool]) -> Shape:
    """A new array shape, with the default layout when ``like`` has a layout
    (XLA's ``ShapeUtil::MakeShape``)."""
    shape = Shape(element_type, tuple(dims), dynamic_dimensions=tuple(dynamic))
    return shape if like.layout is None else shape.with_default_layout()


def _metadata_of(instruction: HloInstruction) -> dict[str, object]:
    metadata = instruction.attributes.get("metadata")
    return {} if metadata is None else {"metadata": metadata}


def _canonicalize_operand(dot: HloInstruction, operand: HloInstruction, batch: Sequence[int],
                          contracting: Sequence[int], contracting_last: bool) -> tuple[HloInstruction, int]:
    """Transposes and reshapes ``operand`` to ``[batch..., M, K]`` (with
    ``contracting_last``) or ``[batch..., K, N]``; returns it and the position
    of its contracting dimension."""
    computation = dot.parent
    assert computation is not None
    shape = operand.shape
    free = [d for d in range(shape.rank) if d not in contracting and d not in batch]
    contracting_size = non_contracting_size = 1
    for d in contracting:
        contracting_size *= shape.dimensions[d]
    for d in free:
        non_contracting_size *= shape.dimensions[d]
    contracting_dynamic = any(shape.dynamic_dimensions[d] for d in contracting)
    free_dynamic = any(shape.dynamic_dimensions[d] for d in free)

    middle = [*free, *contracting] if contracting_last else [*contracting, *free]
    permutation = (*batch, *middle)
    transposed = computation.add_instruction(HloInstruction(
        "transpose", "transpose",
        _array_shape(shape, shape.element_type, [shape.dimensions[d] for d in permutation],
                     [shape.dynamic_dimensions[d] for d in permutation]),
        [operand], {"dimensions": permutation, **_metadata_of(operand)}), before=dot)

    dims = [shape.dimensions[d] for d in batch]
    dynamic = [shape.dynamic_dimensions[d] for d in batch]
    keeps_free = non_contracting_size != 1  # a non-contracting product of 1 is left out
    parts = [(contracting_size, contracting_dynamic)]
    if keeps_free:
        free_part = (non_contracting_size, free_dynamic)
        parts = [free_part, *parts] if contracting_last else [*parts, free_part]
    for size, is_dynamic in parts:
        dims.append(size)
        dynamic.append(is_dynamic)
    reshaped = computation.add_instruction(HloInstruction(
        "reshape", "reshape", _array_shape(shape, shape.element_type, dims, dynamic),
        [transposed], _metadata_of(transposed)), before=dot)
    position = len(batch) + (1 if contracting_last and keeps_free else 0)
    return reshaped, position


def canonicalize_dot(dot: HloInstruction) -> HloInstruction:
    """Replaces ``dot`` by a canonical dot between transposes and reshapes;
    returns the reshape that took its place."""
    computation = dot.parent
    assert computation is not None
    lhs, rhs = dot.operands
    lhs_batch, rhs_batch = _dims(dot, "lhs_batch_dims"), _dims(dot, "rhs_batch_dims")
    new_lhs, lhs_contracting = _canonicalize_operand(dot, lhs, lhs_batch, _dims(dot, "lhs_contracting_dims"),
                                                     contracting_last=True)
    new_rhs, rhs_contracting = _canonicalize_operand(dot, rhs, rhs_batch, _dims(dot, "rhs_contracting_dims"),
                                                     contracting_last=False)
    batch = tuple(range(len(lhs_batch)))
    # The result: batch dimensions, then the lhs's and the rhs's free ones.
    result_dims: list[int] = []
    result_dynamic: list[bool] = []
    for operand, contracting in ((new_lhs, lhs_contracting), (new_rhs, rhs_contracting)):
        for d in range(operand.shape.rank):
            if d == contracting or (operand is new_rhs and d in batch):
                continue
            result_dims.append(operand.shape.dimensions[d])
            result_dynamic.append(operand.shape.dynamic_dimensions[d])
    attributes: dict[str, object] = {}
    if batch:
        attributes["lhs_batch_dims"] = batch
        attributes["rhs_batch_dims"] = batch
    attributes["lhs_contracting_dims"] = (lhs_contracting,)
    attributes["rhs_contracting_dims"] = (rhs_contracting,)
    attributes.update({name: dot.attributes[name] for name in _KEPT_ATTRIBUTES if name in dot.attributes})
    canonical = computation.add_instruction(HloInstruction(
        "dot", "dot", _array_shape(dot.shape, dot.shape.element_type, result_dims, result_dynamic),
        [new_lhs, new_rhs], attributes), before=dot)
    replacement = computation.add_instruction(HloInstruction(
        "reshape", "reshape", dot.shape, [canonical]), before=dot)
    # Control edges move to the new instructions, so the dot can go.
    for predecessor in list(dot.control_predecessors):
        predecessor.add_control_dependency_to(canonical)
    for successor in list(dot.control_successors):
        replacement.add_control_dependency_to(successor)
    for predecessor in list(dot.control_predecessors):
        predecessor.control_successors.remove(dot)
    for successor in list(dot.control_successors):
        successor.control_predecessors.remove(dot)
    dot.control_predecessors, dot.control_successors = [], []
    replaced = replace_instruction(dot, replacement)
    assert replaced, f"could not replace {dot.name}"
    return replacement


def _non_fusion_computations(module: HloModule) -> list[HloComputation]:
    return [c for c in module.computation_post_order() if c.fusion_instruction is None]


class DotDecomposer(HloPass):
    """Rewrites every non-canonical dot outside fusions into a canonical one."""

    name = "dot_decomposer"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in _non_fusion_computations(module):
            dots = [i for i in computation.instructions if i.opcode == "dot" and not is_canonical_dot(i)]
            for dot in dots:
                canonicalize_dot(dot)
                changed = True
        return changed
