"""Transpose folding, as XLA's ``TransposeFolding``
(``xla/service/transpose_folding.cc``) with its default rule for dots.

A ``dot`` operand that is a transpose (other than the identity) is replaced by
the transpose's operand, the transpose's permutation going into the dot's
dimension numbers: a contracting or batch dimension ``d`` of the transposed
value is dimension ``permutation[d]`` of the operand. The result is the same
value, computed by a GEMM that reads its input transposed.

The default rule (``IsRowColumnTransposeDotOperand``) folds only a transpose
that swaps the two matrix dimensions: the operand has one contracting
dimension, every other dimension but one is a batch dimension, and the
transpose leaves each batch dimension in place. Dots with an operand of rank
below 2 are left alone, and so are dots in fusion computations and in the
computations of composite calls. Another rule may be passed in
(``can_fold_operand(dot, operand_index)``).

The dot keeps its name, sharding, metadata and control dependencies; a
transpose no longer used goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import non_fusion_non_composite_computations, remove_instruction_and_unused_operands

_SIDES = ("lhs", "rhs")

CanFoldOperand = Callable[[HloInstruction, int], bool]


def _permutation(transpose: HloInstruction) -> tuple[int, ...]:
    return tuple(transpose.attr("dimensions", ()) or ())


def is_non_identity_transpose(instruction: HloInstruction) -> bool:
    permutation = _permutation(instruction)
    return instruction.opcode == "transpose" and permutation != tuple(range(len(permutation)))


def is_row_column_transpose_dot_operand(dot: HloInstruction, operand_index: int) -> bool:
    """XLA's default rule: the transpose feeding operand ``operand_index``
    of ``dot`` swaps only its non-batch dimensions, one of which contracts."""
    transpose = dot.operands[operand_index]
    side = _SIDES[operand_index]
    batch = tuple(dot.attr(f"{side}_batch_dims", ()) or ())
    contracting = tuple(dot.attr(f"{side}_contracting_dims", ()) or ())
    permutation = _permutation(transpose)
    return (len(batch) == transpose.shape.rank - 2 and len(contracting) == 1
            and all(permutation[d] == d for d in batch))


def _fold(dot: HloInstruction, operand_indices: Sequence[int]) -> None:
    computation = dot.parent
    assert computation is not None
    transposes = []
    for index in operand_indices:
        transpose = dot.operands[index]
        permutation = _permutation(transpose)
        side = _SIDES[index]
        for kind in ("contracting", "batch"):
            key = f"{side}_{kind}_dims"
            dims = tuple(dot.attr(key, ()) or ())
            if dims:
                dot.attributes[key] = tuple(permutation[d] for d in dims)
        dot.replace_operand(index, transpose.operands[0])
        transposes.append(transpose)
    for transpose in transposes:
        if transpose.parent is computation:
            remove_instruction_and_unused_operands(computation, transpose)


class TransposeFolding(HloPass):
    """Folds the transposes feeding dots into the dots' dimension numbers."""

    name = "transpose-folding"

    def __init__(self, can_fold_operand: CanFoldOperand = is_row_column_transpose_dot_operand) -> None:
        self.can_fold_operand = can_fold_operand

    def run(self, module: HloModule) -> bool:
        # All folds are found before any is made, as XLA does.
        foldable: list[tuple[HloInstruction, list[int]]] = []
        for computation in non_fusion_non_composite_computations(module):
            for instruction in computation.post_order():
                if instruction.opcode != "dot" or len(instruction.operands) != 2:
                    continue
                if any(operand.shape.rank < 2 for operand in instruction.operands):
                    continue
                indices = [i for i in range(2) if is_non_identity_transpose(instruction.operands[i])
                           and self.can_fold_operand(instruction, i)]
                if indices:
                    foldable.append((instruction, indices))
        for dot, indices in foldable:
            _fold(dot, indices)
        return bool(foldable)
