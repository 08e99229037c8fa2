"""Common-subexpression elimination, as XLA's ``HloCSE``
(``xla/service/hlo_cse.cc``).

In each computation:

1. Constants of equal shape (layouts too, when layout-sensitive) and
   bit-identical literals are merged into the first of them, in instruction
   order. Constants whose literal was elided (``{...}``) are never merged;
   neither are they in a computation holding ``domain`` instructions (XLA
   merges only within one domain; xlapy does not map domains).
2. Then, in post order, an instruction identical to one seen before is
   replaced by it, and removed with the operands it leaves unused.
   Identical means: same opcode, same shape (compatible, or equal with
   layouts when layout-sensitive), shardings that do not differ (one
   without a sharding matches any), the same operands (either order for
   the commutative binary ops; two ``iota``s of equal dimension and shape
   count as the same operand), the same attributes but for metadata,
   frontend attributes and sharding, and called computations that are
   structurally equal. ``after-all`` and ``add-dependency`` are never
   identical to anything. Skipped: instructions without operands (but
   ``partition-id`` and ``replica-id``), those with side effects
   (``hlo_rewrites.has_side_effect``), those marked ``MUST_FUSE`` in their
   frontend attributes, and those with control dependencies (unless
   ``ignore_control_dependencies``). An instruction kept as the
   representative has its repeated, equal ``iota`` operands made one.

Instructions that encode MLIR structure, and ops HLO has no opcode for (in
a module read from StableHLO), are left alone: their effects are not known
here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlapy.hlo.attributes import Verbatim, is_default
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    has_side_effect,
    is_dead,
    is_hlo_op,
    is_safely_removable,
    remove_instruction_and_unused_operands,
    shapes_compatible,
    shapes_equal,
    sharding_of,
    without_layout,
)

# XLA's HloOpcodeIsBinaryCommutative.
_COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
# Never identical to another instruction (their meaning is their identity).
_NEVER_IDENTICAL = frozenset({"after-all", "add-dependency"})
# Attributes that do not take part in identity: annotations (sharding is
# compared on its own) and the names of called computations (compared by
# structure).
_IGNORED_ATTRIBUTES = frozenset({
    "metadata", "frontend_attributes", "sharding", "statistics_viz", "origin", "to_apply", "calls",
    "condition", "body", "true_computation", "false_computation", "select", "scatter", "branch_computations",
    "called_computations",
})
_MUST_FUSE = "MUST_FUSE"

OperandsEqual = Callable[[HloInstruction, HloInstruction], bool]
ComputationsEqual = Callable[[HloComputation, HloComputation], bool]


def _literal_key(value: Any) -> Any:
    """Bit-exact identity of a literal value (an ndarray, a tuple of them, or
    None for a token)."""
    if isinstance(value, tuple):
        return tuple(_literal_key(v) for v in value)
    if value is None:
        return None
    array = np.ascontiguousarray(value)
    return array.dtype.str, array.shape, array.tobytes()


def _compared_attributes(instr: HloInstruction) -> dict[str, Any]:
    return {name: value for name, value in instr.attributes.items()
            if name not in _IGNORED_ATTRIBUTES and not is_default(name, value)}


def _attribute_text(value: Any) -> Any:
    return str(value).strip() if isinstance(value, Verbatim) else value


def identical(a: HloInstruction, b: HloInstruction, *, layout_sensitive: bool, operands_equal: OperandsEqual,
              computations_equal: ComputationsEqual, sharding_sensitive: bool = True) -> bool:
    """XLA's ``HloInstruction::Identical``, with ``operands_equal`` deciding
    operand pairs (in either order for commutative binary ops) and
    ``computations_equal`` called computations."""
    if a is b:
        return True
    if a.opcode != b.opcode or a.opcode in _NEVER_IDENTICAL:
        return False
    if not (shapes_equal(a.shape, b.shape) if layout_sensitive else shapes_compatible(a.shape, b.shape)):
        return False
    if sharding_sensitive:
        a_sharding, b_sharding = sharding_of(a), sharding_of(b)
        if a_sharding is not None and b_sharding is not None and a_sharding != b_sharding:
            return False
    if len(a.operands) != len(b.operands):
        return False
    if a.opcode in _COMMUTATIVE and len(a.operands) == 2:
        x0, x1 = a.operands
        y0, y1 = b.operands
        if not ((operands_equal(x0, y0) and operands_equal(x1, y1))
                or (operands_equal(x0, y1) and operands_equal(x1, y0))):
            return False
    elif not all(operands_equal(x, y) for x, y in zip(a.operands, b.operands)):
        return False
    if a.parameter_number != b.parameter_number:
        return False
    if a.opcode == "constant" and not _constants_equal(a, b, layout_sensitive):
        return False
    a_attributes, b_attributes = _compared_attributes(a), _compared_attributes(b)
    if a_attributes.keys() != b_attributes.keys():
        return False
    if any(_attribute_text(a_attributes[k]) != _attribute_text(b_attributes[k]) for k in a_attributes):
        return False
    if len(a.called_computations) != len(b.called_computations):
        return False
    return all(computations_equal(x, y) for x, y in zip(a.called_computations, b.called_computations))


def _constants_equal(a: HloInstruction, b: HloInstruction, layout_sensitive: bool) -> bool:
    if isinstance(a.literal, str) or isinstance(b.literal, str):
        return False  # elided literals: values unknown
    if not (shapes_equal(a.shape, b.shape) if layout_sensitive else shapes_compatible(a.shape, b.shape)):
        return False
    return _literal_key(a.literal) == _literal_key(b.literal)


def computations_equal(a: HloComputation, b: HloComputation) -> bool:
    """Structural equality of two computations, layouts included (XLA's
    ``HloComputation::operator==``): same thread, same parameters, and
    instructions pairing up identically from the roots."""
    if a is b:
        return True
    if a.execution_thread != b.execution_thread or a.root is None or b.root is None:
        return False
    a_parameters, b_parameters = a.parameters, b.parameters
    if len(a_parameters) != len(b_parameters):
        return False
    pairs: dict[int, HloInstruction] = {}
    pending: list[tuple[HloInstruction, HloInstruction]] = []
    checked: set[int] = set()

    def pair_up(x: HloInstruction, y: HloInstruction) -> bool:
        known = pairs.get(id(x))
        if known is not None:
            return known is y
        pairs[id(x)] = y
        pending.append((x, y))
        return True

    for p, q in zip(a_parameters, b_parameters):
        pair_up(p, q)
    if not pair_up(a.root, b.root):
        return False
    while pending:
        x, y = pending.pop()
        if id(x) in checked:
            continue
        checked.add(id(x))
        if not identical(x, y, layout_sensitive=True, operands_equal=pair_up, computations_equal=computations_equal,
                         sharding_sensitive=False):
            return False
    return True


class HloCSE(HloPass):
    """Merges equal constants, then identical instructions (see the module
    docstring). ``is_layout_sensitive``: layouts must match too (XLA:CPU runs
    it layout-insensitive before layout assignment). ``only_fusion_computations``:
    only fused computations are looked at."""

    name = "cse"

    def __init__(self, is_layout_sensitive: bool = False, only_fusion_computations: bool = False,
                 ignore_control_dependencies: bool = False) -> None:
        self.is_layout_sensitive = is_layout_sensitive
        self.only_fusion_computations = only_fusion_computations
        self.ignore_control_dependencies = ignore_control_dependencies

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in list(module.computations):
            if self.only_fusion_computations and computation.fusion_instruction is None:
                continue
            changed |= self._combine_constants(computation)
            changed |= self._eliminate(computation)
        return changed

    # -- constants ------------------------------------------------------------
    def _constant_key(self, constant: HloInstruction) -> Any:
        shape = constant.shape.with_default_layout() if self.is_layout_sensitive else without_layout(constant.shape)
        return shape, _literal_key(constant.literal)

    def _combine_constants(self, computation: HloComputation) -> bool:
        if any(i.opcode == "domain" for i in computation.instructions):
            return False
        first: dict[Any, HloInstruction] = {}
        combined = False
        for instruction in list(computation.instructions):
            if instruction.opcode != "constant" or not is_hlo_op(instruction) or isinstance(instruction.literal, str):
                continue
            key = self._constant_key(instruction)
            match = first.get(key)
            if match is None:
                first[key] = instruction
                continue
            if has_control_dependencies(instruction):
                continue  # it orders other instructions: it stays
            instruction.replace_all_uses_with(match)
            computation.remove_instruction(instruction)
            combined = True
        return combined

    # -- other instructions ---------------------------------------------------
    def _should_eliminate(self, instruction: HloInstruction) -> bool:
        if not instruction.operands and instruction.opcode not in ("partition-id", "replica-id"):
            return False
        if not is_hlo_op(instruction):
            return False
        if f"{_MUST_FUSE}=" in str(instruction.attributes.get("frontend_attributes", "")):
            return False
        return not has_side_effect(instruction)

    def _same_operand(self, a: HloInstruction, b: HloInstruction) -> bool:
        if a is b:
            return True
        if a.opcode != "iota" or b.opcode != "iota":
            return False
        same_shape = shapes_equal if self.is_layout_sensitive else shapes_compatible
        return a.attributes.get("iota_dimension") == b.attributes.get("iota_dimension") and same_shape(a.shape,
                                                                                                        b.shape)

    def _bucket(self, instruction: HloInstruction) -> tuple:
        """A hash of what identical instructions share (an iota operand
        counts as any equal iota)."""
        operand_ids = tuple(0 if o.opcode == "iota" else id(o) for o in instruction.operands)
        if instruction.opcode in _COMMUTATIVE and len(operand_ids) == 2:
            operand_ids = tuple(sorted(operand_ids))
        dimensions = instruction.shape.dimensions if instruction.shape.is_array else ()
        return instruction.opcode, dimensions, operand_ids

    def _eliminate(self, computation: HloComputation) -> bool:
        changed = False
        representatives: dict[tuple, list[HloInstruction]] = {}
        for instruction in computation.post_order():
            if instruction.parent is not computation or not self._should_eliminate(instruction):
                continue
            if not is_safely_removable(instruction, self.ignore_control_dependencies):
                continue
            bucket = representatives.setdefault(self._bucket(instruction), [])
            equivalent = next((r for r in bucket if r.parent is computation and identical(
                instruction, r, layout_sensitive=self.is_layout_sensitive, operands_equal=self._same_operand,
                computations_equal=computations_equal)), None)
            if equivalent is not None:
                instruction.replace_all_uses_with(equivalent)
                remove_instruction_and_unused_operands(computation, instruction, self.ignore_control_dependencies)
                changed = True
                continue
            bucket.append(instruction)
            changed |= self._merge_iota_operands(computation, instruction)
        return changed

    def _merge_iota_operands(self, computation: HloComputation, instruction: HloInstruction) -> bool:
        changed = False
        for i, a in enumerate(instruction.operands):
            if a.opcode != "iota":
                continue
            for j in range(i + 1, len(instruction.operands)):
                b = instruction.operands[j]
                if a is b or not self._same_operand(a, b):
                    continue
                instruction.replace_operand(j, a)
                changed = True
                if is_dead(b) and not has_control_dependencies(b):
                    computation.remove_instruction(b)
        return changed
