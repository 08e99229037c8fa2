"""Rules for ops that move data, as XLA's ``HandleBroadcast``, ``HandleReshape``,
``HandleTranspose``, ``HandleSlice``, ``HandleConcatenate``, ``HandlePad`` and
``HandleCopy``: ops that change nothing go, and chains of the same op become one."""

from __future__ import annotations

from dataclasses import replace as with_fields

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.transforms.algebraic.registry import Simplifier, rule
from xlapy.transforms.hlo_rewrites import is_dead, shapes_equal, sharding_of


@rule("broadcast")
def _broadcast(broadcast: HloInstruction, s: Simplifier) -> bool:
    operand = broadcast.operands[0]
    dims = tuple(broadcast.attr("dimensions", ()))
    same_size = broadcast.shape.element_count == operand.shape.element_count
    # A broadcast adding only dimensions of size 1, in order, is a reshape.
    if same_size and list(dims) == sorted(dims):
        return s.replace_with_new(broadcast, "reshape", broadcast.shape, [operand])
    # One of the same rank that only reorders dimensions is a transpose.
    if same_size and broadcast.shape.rank == operand.shape.rank:
        return s.replace_with_new(broadcast, "transpose", broadcast.shape, [operand], {"dimensions": dims})
    if _sink_broadcast_after_elementwise_users(broadcast, s):
        return True
    # broadcast(broadcast(A)) => broadcast(A)
    if operand.opcode == "broadcast":
        inner = tuple(dims[d] for d in operand.attr("dimensions", ()))
        return s.replace_with_new(broadcast, "broadcast", broadcast.shape, [operand.operands[0]],
                                  {"dimensions": inner})
    return False


@rule("reshape")
def _reshape(reshape: HloInstruction, s: Simplifier) -> bool:
    operand = reshape.operands[0]
    # A reshape to the operand's own shape does nothing.
    if s.replace_if_compatible(reshape, operand):
        return True
    # reshape(reshape(A)) => reshape(A)
    if operand.opcode == "reshape":
        return s.replace_with_new(reshape, "reshape", reshape.shape, [operand.operands[0]])
    return False


@rule("transpose")
def _transpose(transpose: HloInstruction, s: Simplifier) -> bool:
    operand = transpose.operands[0]
    dims = tuple(transpose.attr("dimensions", ()))
    # The identity permutation does nothing.
    if dims == tuple(range(len(dims))) and s.replace_if_compatible(transpose, operand):
        return True
    # transpose(transpose(A)) => transpose(A) by the composed permutation.
    if operand.opcode == "transpose":
        inner = tuple(operand.attr("dimensions", ()))
        return s.replace_with_new(transpose, "transpose", transpose.shape, [operand.operands[0]],
                                  {"dimensions": tuple(inner[d] for d in dims)})
    return False


@rule("slice")
def _slice(slice_: HloInstruction, s: Simplifier) -> bool:
    operand = slice_.operands[0]
    # A slice of everything does nothing.
    if s.replace_if_compatible(slice_, operand):
        return True
    # slice(slice(A)) => slice(A): element i of the outer slice is element
    # start + i * stride of the inner one, itself an element of A.
    if operand.opcode == "slice" and slice_.shape.element_count > 0:
        combined = []
        for outer, inner, size in zip(slice_.attr("slice"), operand.attr("slice"), slice_.shape.dimensions):
            start = inner.start + outer.start * inner.stride
            stride = outer.stride * inner.stride
            combined.append(SliceDimension(start, start + (size - 1) * stride + 1, stride))
        return s.replace_with_new(slice_, "slice", slice_.shape, [operand.operands[0]], {"slice": tuple(combined)})
    return False


@rule("concatenate")
def _concatenate(concatenate: HloInstruction, s: Simplifier) -> bool:
    operands = list(concatenate.operands)
    # A concatenate of one operand is that operand.
    if len(operands) == 1:
        return s.replace_if_compatible(concatenate, operands[0])
    # Operands without elements add nothing.
    nonempty = [o for o in operands if o.shape.element_count > 0]
    if len(nonempty) < len(operands):
        if len(nonempty) <= 1:
            return s.replace_if_compatible(concatenate, nonempty[0] if nonempty else operands[0])
        smaller = s.add("concatenate", concatenate.shape, nonempty, dict(concatenate.attributes), before=concatenate)
        if s.replace_if_compatible(concatenate, smaller):
            return True
        s.computation.remove_instruction(smaller)
        return False
    if s.options.is_layout_sensitive:
        return False
    # concatenate(A, concatenate(B, C)) => concatenate(A, B, C) along the same dimension.
    dimension = concatenate.attr("dimensions")
    flattened: list[HloInstruction] = []
    for operand in operands:
        if operand.opcode == "concatenate" and operand.attr("dimensions") == dimension:
            flattened.extend(operand.operands)
        else:
            flattened.append(operand)
    if len(flattened) != len(operands):
        return s.replace_with_new(concatenate, "concatenate", concatenate.shape, flattened, {"dimensions": dimension})
    return False


@rule("pad")
def _pad(pad: HloInstruction, s: Simplifier) -> bool:
    # A pad adding nothing anywhere does nothing.
    padding = pad.attr("padding", ())
    if all(d.low == 0 and d.high == 0 and d.interior == 0 for d in padding):
        return s.replace_if_compatible(pad, pad.operands[0])
    return False


@rule("copy")
def _copy(copy: HloInstruction, s: Simplifier) -> bool:
    operand = copy.operands[0]
    # copy(copy(A)) => copy(A), or A itself if it has the copy's layout.
    if operand.opcode == "copy":
        source = operand.operands[0]
        if shapes_equal(source.shape, copy.shape):
            return s.replace(copy, source)
        return s.replace_with_new(copy, "copy", copy.shape, [source])
    # Without layouts to satisfy, a copy does nothing; a sharded copy at the
    # root of the entry stays (it sets the sharding of the program's result).
    module = copy.parent.module if copy.parent is not None else None
    at_entry_root = module is not None and module.entry is not None and module.entry.root is copy
    if sharding_of(copy) is not None and at_entry_root:
        return False
    return s.replace_if_compatible(copy, operand)


def _sink_broadcast_after_elementwise_users(broadcast: HloInstruction, s: Simplifier) -> bool:
    """``op(broadcast(A), broadcast(B))`` => ``broadcast(op(A, B))`` for each
    live elementwise user of ``broadcast`` whose operands are all broadcasts
    of scalars or broadcasts like this one (same operand shape and
    dimensions), as XLA's ``TryToSinkBroadcastAfterElementwiseOps``; the
    elementwise op then works on fewer elements. The old user is left for DCE.
    A sharding of the user goes to the new broadcast, which has its shape."""
    if broadcast.shape.rank == 0:
        return False
    operand = broadcast.operands[0]
    dims = tuple(broadcast.attr("dimensions", ()))

    def is_scalar_broadcast(instr: HloInstruction) -> bool:
        return instr.opcode == "broadcast" and instr.operands[0].shape.rank == 0

    def is_equal_broadcast(instr: HloInstruction) -> bool:
        return (instr.opcode == "broadcast" and shapes_equal(instr.operands[0].shape, operand.shape)
                and tuple(instr.attr("dimensions", ())) == dims)

    changed = False
    for user in list(dict.fromkeys(broadcast.users)):
        spec = OPCODES.get(user.opcode)
        if user.parent is not s.computation or is_dead(user) or user.opcode in ("copy", "fusion"):
            continue
        if spec is None or not spec.is_elementwise:
            continue
        if not all(is_scalar_broadcast(op) or is_equal_broadcast(op) for op in user.operands):
            continue
        new_operands = []
        for user_operand in user.operands:
            if is_scalar_broadcast(user_operand):
                shape = with_fields(operand.shape, element_type=user_operand.shape.element_type)
                new_operands.append(s.add("broadcast", shape, [user_operand.operands[0]], {"dimensions": ()},
                                          before=user))
            else:
                new_operands.append(user_operand.operands[0])
        attributes = {k: v for k, v in user.attributes.items() if k != "sharding"}
        new_user = HloInstruction(user.opcode, user.opcode, with_fields(operand.shape,
                                  element_type=user.shape.element_type), new_operands, attributes,
                                  user.called_computations)
        s.computation.add_instruction(new_user, before=user)
        sharding = {"sharding": user.attributes["sharding"]} if "sharding" in user.attributes else {}
        new_broadcast = s.add("broadcast", user.shape, [new_user], {"dimensions": dims, **sharding}, before=user)
        user.replace_all_uses_with(new_broadcast)
        changed = True
    return changed
