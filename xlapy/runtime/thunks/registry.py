"""The table of thunk rules, keyed by opcode, and its decorator.

A rule is ``rule(instr, emitter) -> list[Thunk]``: the thunks that run ``instr`` over the slices
``emitter.slice(...)`` gives (``emitter`` is a ``xlapy.runtime.thunk_emitter.ThunkEmitter``). A rule may raise
``UnimplementedError`` for a case it does not support; the emitter collects every such refusal. This module
imports no family, so the families can import it; ``all_rules`` imports every family."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xlapy.registry import registrar

if TYPE_CHECKING:
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter
    from xlapy.runtime.thunks.base import Thunk

ThunkRule = Callable[["HloInstruction", "ThunkEmitter"], "list[Thunk]"]

# opcode -> rule; register with ``@thunk_rule("opcode", ...)``.
THUNK_RULES: dict[str, ThunkRule] = {}

thunk_rule = registrar(THUNK_RULES, "thunk rules")
