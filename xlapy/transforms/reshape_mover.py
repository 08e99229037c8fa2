"""Reshapes and transposes moved below elementwise ops, as XLA's
``ReshapeMover`` (``xla/service/reshape_mover.cc``) with its default options.

``add(reshape(a), reshape(b))`` becomes ``reshape(add(a, b))`` (likewise
with transposes), so that the rearranging ops gather after the arithmetic,
where later passes can cancel or fuse them. An elementwise instruction is a
candidate when one operand is a "non-trivial" rearrange (a reshape or
transpose that is not a no-op and whose operand cannot take the inverse
rearrange for free), every other rearrange operand is an equivalent one
(same opcode, same shapes, same permutation), and every other operand can
be rearranged for free: a constant, an ``rng`` with one user, a broadcast
(with sorted dimensions) of a scalar under a reshape, or one whose
broadcast dimensions keep their order under a transpose. All operands must
have the candidate's dimensions.

Candidates are dropped while some rearrange operand of theirs has a user
outside the candidates (so that no rearrange is left to compute twice);
each remaining one gets its operands wrapped in the inverse rearrange and
is rebuilt on their shape, followed by the rearrange. The inverse of an
existing rearrange, of a constant or of a broadcast is left for the
algebraic simplifier and constant folding to fold, as in XLA.
"""

from __future__ import annotations

from dataclasses import replace

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.fusible_ops import is_elementwise
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import non_fusion_non_composite_computations, replace_instruction, without_layout


def _is_rearrange(instruction: HloInstruction) -> bool:
    return instruction.opcode in ("reshape", "transpose")


def _permutation(instruction: HloInstruction) -> tuple[int, ...]:
    return tuple(int(d) for d in instruction.attr("dimensions", ()) or ())


def _inverse(permutation: tuple[int, ...]) -> tuple[int, ...]:
    inverse = [0] * len(permutation)
    for position, dimension in enumerate(permutation):
        inverse[dimension] = position
    return tuple(inverse)


def _is_identity(permutation: tuple[int, ...]) -> bool:
    return permutation == tuple(range(len(permutation)))


def _equivalent(a: HloInstruction, b: HloInstruction) -> bool:
    if a.opcode != b.opcode or a.shape.dimensions != b.shape.dimensions:
        return False
    if a.opcode == "transpose":
        return _permutation(a) == _permutation(b)
    return a.operands[0].shape.dimensions == b.operands[0].shape.dimensions


def can_trivially_rearrange(instruction: HloInstruction, rearrange: HloInstruction) -> bool:
    """Whether ``instruction`` can take the inverse of ``rearrange`` for free
    (XLA's ``CanTriviallyRearrange``)."""
    if rearrange.opcode == "reshape" and without_layout(rearrange.shape) == without_layout(
            rearrange.operands[0].shape):
        return True
    if rearrange.opcode == "transpose" and _is_identity(_permutation(rearrange)):
        return True
    if instruction.opcode == "constant":
        return True
    if instruction.opcode == "rng" and len(instruction.users) == 1:
        return True
    if instruction.opcode == "broadcast":
        dimensions = _permutation(instruction)
        if list(dimensions) != sorted(dimensions):
            return False
        if rearrange.opcode == "reshape":
            return instruction.operands[0].shape.is_scalar
        # Where each broadcast dimension lands under the inverse transpose must keep their order.
        moved = [_permutation(rearrange)[d] for d in dimensions]
        return moved == sorted(moved)
    return False


def _first_nontrivial_rearrange(operands: list[HloInstruction]) -> HloInstruction | None:
    return next((o for o in operands if _is_rearrange(o) and not can_trivially_rearrange(o.operands[0], o)), None)


def is_reshape_move_candidate(instruction: HloInstruction) -> bool:
    if not is_elementwise(instruction) or instruction.shape.is_tuple:
        return False
    rearrange = _first_nontrivial_rearrange(instruction.operands)
    if rearrange is None:
        return False
    for operand in instruction.operands:
        # Operands of another shape (a clamp's scalar bounds) would need more than the inverse rearrange.
        if operand.shape.is_tuple or operand.shape.dimensions != instruction.shape.dimensions:
            return False
        if _is_rearrange(operand):
            if not _equivalent(operand, rearrange):
                return False
        elif not can_trivially_rearrange(operand, rearrange):
            return False
    return True


def _like(shape: Shape, reference: HloInstruction) -> Shape:
    """``shape`` with the default layout when ``reference``'s has a layout (parsed modules have them)."""
    return shape.with_default_layout() if reference.shape.layout is not None else shape


def _inverse_rearrange(rearrange: HloInstruction, operand: HloInstruction,
                       before: HloInstruction) -> HloInstruction:
    """``operand`` under the inverse of ``rearrange``, added before ``before``."""
    computation = before.parent
    if rearrange.opcode == "reshape":
        shape = replace(rearrange.operands[0].shape, element_type=operand.shape.element_type)
        if operand.shape == shape:
            return operand  # no reshape that does nothing
        return computation.add_instruction(HloInstruction("reshape", "reshape", shape, [operand]), before=before)
    permutation = _permutation(rearrange)
    if _is_identity(permutation):
        return operand
    inverse = _inverse(permutation)
    shape = _like(Shape(operand.shape.element_type, tuple(operand.shape.dimensions[d] for d in inverse)), operand)
    return computation.add_instruction(HloInstruction("transpose", "transpose", shape, [operand],
                                                      {"dimensions": inverse}), before=before)


def _sink(instruction: HloInstruction) -> None:
    computation = instruction.parent
    rearrange = _first_nontrivial_rearrange(instruction.operands)
    assert rearrange is not None
    operands = [_inverse_rearrange(rearrange, o, instruction) for o in instruction.operands]
    moved = instruction.clone(operands)
    moved.name = instruction.name
    moved.shape = replace(rearrange.operands[0].shape, element_type=instruction.shape.element_type)
    # The sharding was the old shape's (XLA drops it too).
    moved.attributes.pop("sharding", None)
    moved.sdy_sharding = None
    moved = computation.add_instruction(moved, before=instruction)
    if rearrange.opcode == "reshape":
        after = HloInstruction("reshape", "reshape", instruction.shape, [moved])
    else:
        after = HloInstruction("transpose", "transpose", instruction.shape, [moved],
                               {"dimensions": _permutation(rearrange)})
    replace_instruction(instruction, computation.add_instruction(after, before=instruction))


def _try_reshape_move(candidates: list[HloInstruction]) -> bool:
    remaining = {id(c): c for c in candidates}
    removed = True
    while remaining and removed:
        rearranges = {id(o): o for c in remaining.values() for o in c.operands if _is_rearrange(o)}
        removed = False
        for operand in rearranges.values():
            if any(id(user) not in remaining for user in operand.users):
                for user in operand.users:
                    removed |= remaining.pop(id(user), None) is not None
    if not remaining:
        return False
    for candidate in candidates:
        if id(candidate) in remaining:
            _sink(candidate)
    return True


class ReshapeMover(HloPass):
    """Sinks reshapes and transposes below elementwise ops."""

    name = "reshape-mover"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in non_fusion_non_composite_computations(module):
            candidates = [i for i in computation.instructions if not i.encodes_mlir_structure
                          and is_reshape_move_candidate(i)]
            changed |= _try_reshape_move(candidates)
        return changed
