"""Rules for ``reverse``, as XLA's ``HandleReverse``: reversing dimensions
of size 1 does nothing; two reverses cancel on the dimensions both reverse;
and a reverse moves below an elementwise op with a broadcast scalar operand,
and below a reshape that only inserts dimensions of size 1, toward the
value it reorders."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.opcodes import OPCODES, OpKind
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule


def _reverse(s: Simplifier, operand: HloInstruction, dims: list[int], before: HloInstruction) -> HloInstruction:
    if not dims:
        return operand
    return s.add("reverse", operand.shape, [operand], {"dimensions": tuple(dims)}, before=before)


def _is_scalar_broadcast(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and not instr.attr("dimensions", ()) and instr.operands[0].shape.rank == 0


def inserted_unit_dimensions(operand: tuple[int, ...], result: tuple[int, ...]) -> list[int | None] | None:
    """For a reshape from ``operand`` to ``result`` dimensions that only
    inserts dimensions of size 1: for each result dimension, the operand
    dimension it is (None for an inserted one). None for any other reshape."""
    matched: list[int | None] = []
    i = 0
    for size in result:
        if i < len(operand) and operand[i] == size:
            matched.append(i)
            i += 1
        elif size == 1:
            matched.append(None)
        else:
            return None
    return matched if i == len(operand) else None


@rule("reverse")
def _reverse_rule(reverse: HloInstruction, s: Simplifier) -> bool:
    operand = reverse.operands[0]
    dims = sorted(reverse.attr("dimensions", ()))
    # Reversing dimensions of size 1 does nothing.
    if all(reverse.shape.dimensions[d] == 1 for d in dims):
        return s.replace(reverse, operand)
    if s.options.is_layout_sensitive:
        return False
    # reverse(reverse(A)) => A reversed on the dimensions exactly one of them reverses.
    if operand.opcode == "reverse":
        remaining = sorted(set(dims) ^ set(operand.attr("dimensions", ())))
        return s.replace(reverse, _reverse(s, operand.operands[0], remaining, reverse))
    # reverse(op(A, broadcast(c))) => op(reverse(A), broadcast(c)) for an elementwise binary op.
    spec = OPCODES.get(operand.opcode)
    if spec is not None and spec.kind is OpKind.BINARY:
        if operand.opcode in ("compare", "rng"):
            return False
        lhs, rhs = operand.operands
        if _is_scalar_broadcast(lhs):
            rhs = _reverse(s, rhs, dims, reverse)
        elif _is_scalar_broadcast(rhs):
            lhs = _reverse(s, lhs, dims, reverse)
        else:
            return False
        return s.replace_with_new(reverse, operand.opcode, operand.shape, [lhs, rhs])
    # reverse(reshape(A)) => reshape(reverse(A)) when the reshape only inserts dimensions of size 1.
    if operand.opcode == "reshape":
        source = operand.operands[0]
        matched = inserted_unit_dimensions(tuple(source.shape.dimensions), tuple(operand.shape.dimensions))
        if matched is None:
            return False
        source_dims = [matched[d] for d in dims if operand.shape.dimensions[d] != 1]
        reversed_source = _reverse(s, source, [d for d in source_dims if d is not None], reverse)
        return s.replace(reverse, building.reshape(s, reversed_source, operand.shape.dimensions, reverse))
    return False
