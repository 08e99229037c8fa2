"""Constant folding, as XLA's ``HloConstantFolding``
(``xla/hlo/transforms/simplifiers/hlo_constant_folding.cc``): an instruction
whose operands are constants (some of them possibly broadcasts of constants,
iotas, or tuples of these) is evaluated with the reference interpreter and
replaced by a ``constant`` holding the result.

XLA's rules about what not to fold are kept: parameters, constants and tuples
themselves; broadcasts and iotas (they would only grow the module; the
algebraic simplifier sinks broadcasts so that the smaller op folds); FFTs and
``while`` loops (compile time); ``rng`` and ``after-all`` anywhere inside;
instructions with side effects or control dependencies; a ``pad`` of a
broadcast; results or operands of more than 45 million elements; and an
instruction at least one of whose operands is not a constant proper (all of
them broadcasts of constants: the simplifier handles that). An instruction the
interpreter cannot evaluate is left alone, as XLA's ``TryEvaluate`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.interpreter.evaluator import Evaluator
from xlapy.shapes import Shape
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import (
    has_control_dependencies,
    has_side_effect,
    is_dead,
    is_hlo_op,
    non_fusion_non_composite_computations,
)

# XLA's kMaximumConstantSizeElements.
MAX_CONSTANT_ELEMENTS = 45 * 1000 * 1000

# Never folded, even inside a called computation: rng would need to match the
# backend's generator, and after-all makes a token out of nothing.
_ILLEGAL_OPCODES = frozenset({"rng", "after-all"})
# Not folded themselves: broadcasts and iotas only grow constants, FFTs and
# loops take long to evaluate.
_UNFOLDABLE_OPCODES = frozenset({"broadcast", "iota", "fft", "while"})
# Ops XLA's evaluator has no rule for, or whose value depends on the device or
# the outside world, while xlapy's interpreter (which plays a single device)
# would compute something for them.
_NOT_EVALUATED_OPCODES = frozenset({
    "all-reduce", "all-gather", "all-to-all", "ragged-all-to-all", "reduce-scatter", "collective-permute",
    "collective-broadcast", "replica-id", "partition-id", "custom-call", "infeed", "outfeed", "send", "recv",
    "send-done", "recv-done", "async-start", "async-update", "async-done", "copy-start", "copy-done",
    "opt-barrier", "domain", "add-dependency", "rng-bit-generator", "rng-get-and-update-state",
})


def _any_operand_constant(instr: HloInstruction) -> bool:
    for operand in instr.operands:
        if operand.opcode == "constant" or (operand.opcode == "tuple" and _any_operand_constant(operand)):
            return True
    return False


def _all_operands_constant_like(instr: HloInstruction) -> bool:
    """Every operand is a constant, a broadcast of one, an iota, or a tuple of these."""
    for operand in instr.operands:
        if operand.opcode == "tuple":
            if not _all_operands_constant_like(operand):
                return False
        elif not (operand.opcode in ("constant", "iota")
                  or (operand.opcode == "broadcast" and operand.operands[0].opcode == "constant")):
            return False
    return True


def _array_elements(shape: Shape) -> int:
    return shape.element_count if shape.is_array else 0


def _contains_token(shape: Shape) -> bool:
    return shape.is_token or any(_contains_token(s) for s in shape.tuple_shapes)


class HloConstantFolding(HloPass):
    """Replaces instructions computed from constants only by constants."""

    name = "constant-folding"

    def run(self, module: HloModule) -> bool:
        changed = False
        foldable_computations: dict[int, bool] = {}
        evaluator = Evaluator(module)
        for computation in non_fusion_non_composite_computations(module):
            for instr in computation.post_order():
                if instr.parent is not computation or is_dead(instr):
                    continue
                if not _any_operand_constant(instr) or not _all_operands_constant_like(instr):
                    continue
                if instr.opcode in ("parameter", "constant", "tuple") or _contains_token(instr.shape):
                    continue
                if not self._is_foldable(instr, foldable_computations):
                    continue
                value = _evaluate(evaluator, instr)
                if value is None:
                    continue
                self._replace_with_constant(computation, instr, value)
                changed = True
        return changed

    def _is_foldable(self, instr: HloInstruction, foldable_computations: dict[int, bool]) -> bool:
        if not is_hlo_op(instr) or instr.opcode in _UNFOLDABLE_OPCODES or instr.opcode in _NOT_EVALUATED_OPCODES:
            return False
        for callee in instr.called_computations:
            known = foldable_computations.get(id(callee))
            if known is None:
                foldable_computations[id(callee)] = False  # until shown otherwise; guards against call cycles
                known = all(self._is_foldable(nested, foldable_computations) for nested in callee.post_order())
                foldable_computations[id(callee)] = known
            if not known:
                return False
        if _is_or_contains_illegal(instr) or has_side_effect(instr) or has_control_dependencies(instr):
            return False
        # Folding a pad of a broadcast costs much compile time for little gain.
        if instr.opcode == "pad" and instr.operands[0].opcode == "broadcast" and instr.operands[1].opcode == "constant":
            return False
        if instr.shape.is_array:
            operand_elements = sum(_array_elements(o.shape) for o in instr.operands)
            if max(instr.shape.element_count, operand_elements) > MAX_CONSTANT_ELEMENTS:
                return False
        return True

    @staticmethod
    def _replace_with_constant(computation: HloComputation, instr: HloInstruction, value: Any) -> None:
        constant = HloInstruction("constant", "constant", instr.shape)
        constant.literal = value
        computation.add_instruction(constant, before=instr)
        instr.replace_all_uses_with(constant)
        _remove_with_dead_operands(computation, instr)


def _is_or_contains_illegal(instr: HloInstruction) -> bool:
    if instr.opcode in _ILLEGAL_OPCODES:
        return True
    return any(_is_or_contains_illegal(nested) for callee in instr.called_computations
               for nested in callee.instructions)


def _operand_value(evaluator: Evaluator, instr: HloInstruction) -> Any:
    """The value of a constant, a broadcast of one, an iota, or a tuple of these."""
    if instr.opcode == "constant":
        return evaluator.apply(instr, [])
    if instr.opcode == "broadcast":
        return evaluator.apply(instr, [_operand_value(evaluator, instr.operands[0])])
    if instr.opcode == "tuple":
        return tuple(_operand_value(evaluator, o) for o in instr.operands)
    return evaluator.apply(instr, [])


def _owned(value: Any) -> Any:
    """``value`` with arrays copied into their own contiguous memory (results
    may be read-only views, e.g. of broadcasts)."""
    if isinstance(value, tuple):
        return tuple(_owned(v) for v in value)
    return np.array(value, copy=True)


def _evaluate(evaluator: Evaluator, instr: HloInstruction) -> Any | None:
    """The value of ``instr``, or None when the interpreter cannot compute it."""
    try:
        operands = [_operand_value(evaluator, o) for o in instr.operands]
        return _owned(evaluator.apply(instr, operands))
    except (XlapyError, ArithmeticError):
        return None


def _remove_with_dead_operands(computation: HloComputation, instr: HloInstruction) -> None:
    """Removes ``instr`` and, transitively, the operands it leaves without
    users (constants, broadcasts, iotas and tuples here)."""
    pending = [instr]
    while pending:
        dead = pending.pop()
        if dead.parent is not computation or not is_dead(dead) or has_control_dependencies(dead):
            continue
        if dead.opcode == "parameter":
            continue
        operands = list(dead.operands)
        computation.remove_instruction(dead)
        pending.extend(operands)
