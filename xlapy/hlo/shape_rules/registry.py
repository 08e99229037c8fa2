"""The tables of shape rules, keyed by opcode, and their decorators.

A family module registers its rules here with ``@shape_rule("opcode", ...)``;
``xlapy.hlo.shape_rules.inference`` imports every family and answers for the
whole table. This module imports no family, so the families can import it."""

from __future__ import annotations

from collections.abc import Callable

from xlapy.hlo.ir import HloInstruction
from xlapy.registry import registrar
from xlapy.shapes import Shape

ShapeRule = Callable[[HloInstruction], Shape]


# opcode -> rule; an opcode without an entry has no rule (its declared shape is accepted).
SHAPE_RULES: dict[str, ShapeRule] = {}


shape_rule = registrar(SHAPE_RULES, "shape rules")


# custom_call_target -> the rule of a target whose meaning xlapy knows (the
# interpreter runs them); other targets are checked as calls only.
CUSTOM_CALL_RULES: dict[str, ShapeRule] = {}


custom_call_rule = registrar(CUSTOM_CALL_RULES, "custom-call rules")


# Checks of an op that a package built on this one adds (the sharding
# verifier registers the manual computation's shardings against its mesh),
# run after the op's shape rule; keyed by opcode.
OP_CHECKS: dict[str, Callable[[HloInstruction], None]] = {}


op_check = registrar(OP_CHECKS, "op checks")
