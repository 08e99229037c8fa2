"""Rules for ``dot``, as XLA's ``HandleDot`` with XLA:CPU's options
(``xla/service/cpu/cpu_compiler.cc``: no strength reduction of dots into
reductions, canonical dots only):

- a dot with no elements, or with an operand without any, is 0;
- a dot without contracting dimensions is a product of its operands, moved
  into place by transposes and broadcasts
  (``RewriteAsMultiplyDotWithZeroLhsContractingDim``);
- dimensions of size 1 are dropped from the operands by reshapes, and the
  result reshaped back (``RemoveDegenerateDimensionFromDot``): a contraction
  over size-1 dimensions only then becomes a product too;
- ``dot(transpose(A), transpose(B))`` of a canonical matrix dot, both
  operands transposed alike, is a transpose of ``dot(A, B)`` or of
  ``dot(B, A)`` (``RemoveTransposesFromDotOperands``).

The last sums the same products in an order a matrix-multiply library picks
for the new operand shapes, which can change the rounding of floats: as the
reassociations of ``arithmetic.py``, it is made for integer dots only. XLA's
rewrites of dots of concatenates, gathers and reordered constants
(``OptimizeDotOfConcat``, ``OptimizeDotOfGather``,
``OptimizeDotOfReorderContractingDims``) split or reorder the sum the same
way and are not made. Canonicalizing dots is ``DotDecomposer``'s work
(``xlapy/transforms/dot_decomposer.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.hlo.ir import HloInstruction
from xlapy.shapes import TypeKind
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule
from xlapy.transforms.hlo_rewrites import shapes_compatible

_DIMENSION_NUMBERS = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")
# Attributes a dot derived from another keeps (its precision config and
# what XLA's ``SetupDerivedInstruction`` carries over).
_KEPT = ("operand_precision", "algorithm", "metadata", "frontend_attributes")
# Precision algorithms a dot may be rewritten as a multiply under (XLA's
# ``SupportedDotPrecisionConfig``): none, or f32 products summed in f32.
_MULTIPLY_ALGORITHMS = ("", "dot_f32_f32_f32")


def _dims(dot: HloInstruction, name: str) -> tuple[int, ...]:
    return tuple(dot.attr(name, ()) or ())


def _kept(dot: HloInstruction) -> dict[str, object]:
    return {name: dot.attributes[name] for name in _KEPT if name in dot.attributes}


@rule("dot")
def _dot(dot: HloInstruction, s: Simplifier) -> bool:
    if s.options.is_layout_sensitive or len(dot.operands) != 2 or dot.attr("sparsity") is not None:
        return False
    lhs, rhs = dot.operands
    # A dot of no elements, or of an operand without any, is 0.
    if 0 in (dot.shape.element_count, lhs.shape.element_count, rhs.shape.element_count):
        return s.replace_with_new(dot, "broadcast", dot.shape, [building.scalar(s, 0, dot.shape.element_type, dot)],
                                  {"dimensions": ()})
    if not _dims(dot, "lhs_contracting_dims") and str(dot.attr("algorithm", "") or "") in _MULTIPLY_ALGORITHMS:
        return _rewrite_as_multiply(dot, s)
    if _remove_degenerate_dimensions(dot, s):
        return True
    return _remove_transposes_from_operands(dot, s)


def _batch_major(s: Simplifier, operand: HloInstruction, batch: Sequence[int], contracting: Sequence[int],
                 before: HloInstruction) -> HloInstruction:
    """``operand`` transposed to batch dimensions first and contracting ones
    last (XLA's ``NormalizeDotOperandToBatchMajorAndContractingMinor``)."""
    free = [d for d in range(operand.shape.rank) if d not in batch and d not in contracting]
    return building.transpose(s, operand, [*batch, *free, *contracting], before)


def _rewrite_as_multiply(dot: HloInstruction, s: Simplifier) -> bool:
    """A dot without contracting dimensions: each result element is one
    product, ``lhs[batch, i] * rhs[batch, j]``."""
    lhs, rhs = dot.operands
    element_type = dot.shape.element_type
    lhs_batch, rhs_batch = _dims(dot, "lhs_batch_dims"), _dims(dot, "rhs_batch_dims")
    new_lhs = building.convert(s, _batch_major(s, lhs, lhs_batch, (), dot), element_type, dot)
    new_rhs = building.convert(s, _batch_major(s, rhs, rhs_batch, (), dot), element_type, dot)
    rank = dot.shape.rank
    if rank != lhs.shape.rank:
        new_lhs = building.broadcast(s, new_lhs, dot.shape, range(lhs.shape.rank), dot)
    if rank != rhs.shape.rank:
        dims = [*range(len(lhs_batch)), *range(lhs.shape.rank, rank)]
        new_rhs = building.broadcast(s, new_rhs, dot.shape, dims, dot)
    return s.replace_with_new(dot, "multiply", dot.shape, [new_lhs, new_rhs])


def _without_degenerate(dims: Sequence[int], shape_dims: Sequence[int]) -> tuple[int, ...]:
    """``dims`` (dimension numbers of a shape) without those of size 1,
    renumbered as in the shape with its size-1 dimensions dropped."""
    kept = [d for d, size in enumerate(shape_dims) if size != 1]
    return tuple(kept.index(d) for d in dims if shape_dims[d] != 1)


def _remove_degenerate_dimensions(dot: HloInstruction, s: Simplifier) -> bool:
    lhs, rhs = dot.operands
    lhs_dims, rhs_dims = lhs.shape.dimensions, rhs.shape.dimensions
    if 1 not in lhs_dims and 1 not in rhs_dims:
        return False
    if dot.control_predecessors or dot.control_successors:
        return False
    numbers = {name: _without_degenerate(_dims(dot, name), lhs_dims if name.startswith("lhs") else rhs_dims)
               for name in _DIMENSION_NUMBERS}
    new_lhs = building.reshape(s, lhs, [d for d in lhs_dims if d != 1], dot) if 1 in lhs_dims else lhs
    new_rhs = building.reshape(s, rhs, [d for d in rhs_dims if d != 1], dot) if 1 in rhs_dims else rhs
    result = [new_lhs.shape.dimensions[d] for d in numbers["lhs_batch_dims"]]
    for operand, prefix in ((new_lhs, "lhs"), (new_rhs, "rhs")):
        used = numbers[f"{prefix}_batch_dims"] + numbers[f"{prefix}_contracting_dims"]
        result += [size for d, size in enumerate(operand.shape.dimensions) if d not in used]
    attributes = {name: value for name, value in numbers.items() if value or "contracting" in name}
    new_dot = s.add("dot", building.array_shape(dot.shape, dot.shape.element_type, result), [new_lhs, new_rhs],
                    {**attributes, **_kept(dot)}, before=dot)
    if shapes_compatible(new_dot.shape, dot.shape):
        return s.replace(dot, new_dot)
    return s.replace_with_new(dot, "reshape", dot.shape, [new_dot])


def _remove_transposes_from_operands(dot: HloInstruction, s: Simplifier) -> bool:
    """``dot(transpose(A), transpose(B))`` with both operands permuted alike,
    of a dot in canonical matrix form ``[batch..., m, k] x [batch..., k, n]``:
    a permutation keeping the matrix dimensions in place gives
    ``transpose(dot(A, B))``, one swapping them ``transpose(dot(B, A))``."""
    lhs, rhs = dot.operands
    if dot.shape.type.kind not in (TypeKind.SIGNED, TypeKind.UNSIGNED):
        return False  # the swapped operands may sum in another order (see the module docstring)
    if lhs.opcode != "transpose" or rhs.opcode != "transpose":
        return False
    permutation = tuple(lhs.attr("dimensions", ()))
    if permutation != tuple(rhs.attr("dimensions", ())):
        return False
    rank = dot.shape.rank
    batch = _dims(dot, "lhs_batch_dims")
    if (batch != _dims(dot, "rhs_batch_dims") or _dims(dot, "lhs_contracting_dims") != (rank - 1,)
            or _dims(dot, "rhs_contracting_dims") != (rank - 2,) or rank != len(batch) + 2):
        return False
    if permutation[rank - 2:] == (rank - 2, rank - 1):
        new_lhs, new_rhs = lhs.operands[0], rhs.operands[0]
        precision = dot.attributes.get("operand_precision")
    elif permutation[rank - 2:] == (rank - 1, rank - 2):
        new_lhs, new_rhs = rhs.operands[0], lhs.operands[0]
        precision = _swapped_precision(dot.attributes.get("operand_precision"))
    else:
        return False
    if dot.control_predecessors or dot.control_successors:
        return False
    # transpose(new_dot, permutation) must have the dot's shape.
    dims = [0] * rank
    for i, p in enumerate(permutation):
        dims[p] = dot.shape.dimensions[i]
    attributes = {name: dot.attributes[name] for name in (*_DIMENSION_NUMBERS, *_KEPT) if name in dot.attributes}
    if precision is not None:
        attributes["operand_precision"] = precision
    new_dot = s.add("dot", building.array_shape(dot.shape, dot.shape.element_type, dims), [new_lhs, new_rhs],
                    attributes, before=dot)
    return s.replace_with_new(dot, "transpose", dot.shape, [new_dot], {"dimensions": permutation})


def _swapped_precision(precision: object) -> object:
    """An ``operand_precision={a,b}`` value with the operands swapped."""
    if precision is None:
        return None
    parts = [p.strip() for p in str(precision).strip().strip("{}").split(",")]
    return "{" + ",".join(reversed(parts)) + "}" if len(parts) == 2 else precision
