"""Parser of HLO text as XLA prints it and JAX dumps it: with or without
`%` sigils, operand shapes inline or not, computation signatures or not,
stack-frame sections, and any attribute (unmodelled ones kept verbatim)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xlapy.errors import ParseError, XlapyError
from xlapy.hlo.attributes import (
    ATTRIBUTES,
    COMPUTATION,
    COMPUTATION_LIST,
    read_attribute,
    read_string,
    scan_value,
)
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.literal import LiteralError, parse_literal
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import ELEMENT_TYPES, ShapeParser

_NAME = re.compile(r"%?([A-Za-z_][\w.\-]*)", re.ASCII)
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_ATTRIBUTE_NAME = re.compile(r"([A-Za-z_][\w\-]*)\s*=", re.ASCII)
_STACK_FRAME_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
# XLA's order of called computations where it differs from the text's (a
# while's body comes first, then its condition).
_CALLEE_ORDER = {"while": ("body", "condition"), "select-and-scatter": ("select", "scatter"),
                 "conditional": ("true_computation", "false_computation", "branch_computations")}


@dataclass
class _Draft:
    """An instruction read but not yet linked to its operands."""

    instruction: HloInstruction
    operand_names: list[tuple[str, int]] = field(default_factory=list)
    control_predecessor_names: list[tuple[str, int]] = field(default_factory=list)
    computation_refs: list[tuple[str, str, int]] = field(default_factory=list)  # (attr, name, pos)


class HloParser(ShapeParser):
    def parse_module(self) -> HloModule:
        if not self.eat("HloModule"):
            raise self.error(f"expected 'HloModule' at the start of the module, got {self.found()}")
        module = HloModule(self._name("the module name"))
        while self.eat(","):
            name = self._attribute_name()
            module.attributes[name] = scan_value(self)
        self._stack_frame_sections(module)
        drafts: list[_Draft] = []
        positions: dict[str, int] = {}
        while not self.at_end():
            start = self.pos
            computation, computation_drafts = self._computation()
            if computation.name in positions:
                raise self.error(f"duplicate computation name '{computation.name}'", start)
            positions[computation.name] = start
            # Instruction names are unique in a module: XLA renames later duplicates.
            for instruction in computation.instructions:
                if instruction.name in module.names:
                    instruction.name = module.unique_name(instruction.name)
            module.add_computation(computation, entry=computation.is_entry)
            drafts.extend(computation_drafts)
        if not module.computations:
            raise self.error("the module has no computations")
        if module.entry is None:
            module.entry = module.computations[-1]  # as XLA: the last computation is the entry
            module.entry.is_entry = True
        self._link_computations(module, drafts)
        return module

    # -- pieces ---------------------------------------------------------------
    def _name(self, what: str) -> str:
        return self.match(_NAME, what).group(1)

    def _attribute_name(self) -> str:
        return self.match(_ATTRIBUTE_NAME, "an attribute 'name=value'").group(1)

    def _stack_frame_sections(self, module: HloModule) -> None:
        # Each section is its keyword and lines `N <entry>`, kept verbatim.
        while self.ident() in _STACK_FRAME_SECTIONS:
            start = self.pos
            self.pos += len(self.ident())
            while True:
                self.skip_space()
                if not re.match(r"[0-9]", self.text[self.pos:self.pos + 1]):
                    break
                newline = self.text.find("\n", self.pos)
                self.pos = len(self.text) if newline < 0 else newline
            module.stack_frame_sections.append(self.text[start:self.pos].strip())

    def _computation(self) -> tuple[HloComputation, list[_Draft]]:
        is_entry = self.eat("ENTRY")
        name_pos = self.pos
        computation = HloComputation(self._name("a computation name"), is_entry=is_entry)
        if self.peek("("):
            self._signature()
        self.expect("{", f"to start the body of computation '{computation.name}'")
        drafts: list[_Draft] = []
        by_name: dict[str, _Draft] = {}
        while not self.eat("}"):
            if self.at_end():
                raise self.error(f"expected '}}' to end computation '{computation.name}', got end of text")
            start = self.pos
            is_root = self.eat("ROOT")
            draft = self._instruction()
            instruction = draft.instruction
            if instruction.name in by_name:
                raise self.error(f"duplicate instruction name '{instruction.name}' in computation "
                                 f"'{computation.name}'", start + (4 if is_root else 0))
            if is_root:
                if computation.root is not None:
                    raise self.error(f"computation '{computation.name}' has a second ROOT", start)
                computation.root = instruction
            by_name[instruction.name] = draft
            instruction.parent = computation
            computation.instructions.append(instruction)
            drafts.append(draft)
        if computation.root is None:
            raise self.error(f"computation '{computation.name}' has no ROOT instruction", name_pos)
        # A computation of a non-main thread: `}, execution_thread="name"`.
        checkpoint = self.pos
        if self.eat(","):
            self.skip_space()
            if self.text.startswith("execution_thread", self.pos):
                self.pos += len("execution_thread")
                self.expect("=", "after execution_thread")
                computation.execution_thread = read_string(self)
            else:
                self.pos = checkpoint
        self._link_instructions(computation, drafts, by_name)
        return computation, drafts

    def _signature(self) -> None:
        # `(p: shape, ...) -> shape`; the parameters' own instructions carry the shapes.
        self.expect("(", "to start the computation signature")
        if not self.eat(")"):
            while True:
                self._name("a parameter name")
                self.expect(":", "after the parameter name")
                self.parse_shape()
                if self.eat(")"):
                    break
                self.expect(",", "or ')' in the computation signature")
        self.expect("->", "after the computation parameters")
        self.parse_shape()

    def _instruction(self) -> _Draft:
        name = self._name("an instruction name")
        self.expect("=", f"after instruction name '{name}'")
        # As XLA's parser does, an array without a layout gets the default one.
        shape = self.parse_shape().with_default_layout()
        self.skip_space()
        opcode_pos = self.pos
        match = _OPCODE.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected an opcode, got {self.found()}")
        opcode = match.group()
        if opcode not in OPCODES:
            raise self.error(f"unknown opcode '{opcode}'", opcode_pos)
        self.pos = match.end()
        instruction = HloInstruction(name, opcode, shape)
        draft = _Draft(instruction)
        self.expect("(", f"after opcode '{opcode}'")
        if opcode == "parameter":
            instruction.parameter_number = self.int("the parameter number", 0)
            self.expect(")", "after the parameter number")
        elif opcode == "constant":
            start = self.pos
            depth = 1
            while depth:
                if self.pos >= len(self.text):
                    raise self.error("expected ')' to end the constant literal", start)
                depth += {"(": 1, ")": -1}.get(self.text[self.pos], 0)
                self.pos += 1
            text = self.text[start:self.pos - 1]
            try:
                # XLA elides large constants as `{...}`: their value is unknown.
                instruction.literal = text.strip() if text.strip() == "{...}" else parse_literal(text, shape)
            except LiteralError as e:
                raise self.error(f"bad literal for {shape}: {e}", start + e.offset) from None
            except XlapyError as e:
                raise self.error(f"bad literal for {shape}: {e}", start) from None
        else:
            self._operands(draft)
        while self.eat(","):
            self.skip_space()
            attr_pos = self.pos
            attr = self._attribute_name()
            if attr in instruction.attributes:
                raise self.error(f"attribute '{attr}' given twice", attr_pos)
            self.skip_space()
            value_pos = self.pos
            if attr == "control-predecessors":
                self.expect("{", "to start the control predecessors")
                if not self.eat("}"):
                    while True:
                        self.skip_space()
                        draft.control_predecessor_names.append((self._name("an instruction name"), self.pos))
                        if self.eat("}"):
                            break
                        self.expect(",", "or '}' in the control predecessors")
                continue
            value = read_attribute(attr, self)
            instruction.attributes[attr] = value
            kind = ATTRIBUTES.get(attr)
            if kind is COMPUTATION:
                draft.computation_refs.append((attr, value, value_pos))
            elif kind is COMPUTATION_LIST:
                draft.computation_refs.extend((attr, v, value_pos) for v in value)
        return draft

    def _operands(self, draft: _Draft) -> None:
        if self.eat(")"):
            return
        while True:
            self.skip_space()
            # An operand may carry its shape inline: `f32[2]{0} %a` or `(f32[], s32[]) %t`.
            word = self.ident()
            if self.peek("(") or (word in ELEMENT_TYPES and self.text.startswith("[", self.pos + len(word))):
                self.parse_shape()
                self.skip_space()
            pos = self.pos
            draft.operand_names.append((self._name("an operand name"), pos))
            if self.eat(")"):
                return
            if not self.eat(","):
                raise self.error(f"expected ',' or ')' after operand, got {self.found()}")

    # -- linking --------------------------------------------------------------
    def _link_instructions(self, computation: HloComputation, drafts: list[_Draft],
                           by_name: dict[str, _Draft]) -> None:
        index = {name: i for i, name in enumerate(by_name)}

        def lookup(name: str, pos: int, user_index: int) -> HloInstruction:
            if name not in by_name:
                raise self.error(f"instruction '{name}' is not defined in computation '{computation.name}'", pos)
            if index[name] >= user_index:  # as in XLA, a value is defined before its uses
                raise self.error(f"instruction '{name}' is used before it is defined", pos)
            return by_name[name].instruction

        for user_index, draft in enumerate(drafts):
            for name, pos in draft.operand_names:
                draft.instruction.append_operand(lookup(name, pos, user_index))
            for name, pos in draft.control_predecessor_names:
                lookup(name, pos, user_index).add_control_dependency_to(draft.instruction)

    def _link_computations(self, module: HloModule, drafts: list[_Draft]) -> None:
        by_name = {c.name: c for c in module.computations}
        for draft in drafts:
            instruction = draft.instruction
            rank = _CALLEE_ORDER.get(instruction.opcode, ())
            refs = sorted(draft.computation_refs, key=lambda r: rank.index(r[0]) if r[0] in rank else 0)
            for attr, name, pos in refs:
                if name not in by_name:
                    raise self.error(f"computation '{name}' is not defined", pos)
                instruction.called_computations.append(by_name[name])
                if instruction.opcode == "fusion" and attr == "calls":
                    by_name[name].fusion_instruction = instruction


def parse_module(text: str, source: str | None = None) -> HloModule:
    """Parse HLO text (one module) into an ``HloModule``."""
    try:
        return HloParser(text, source=source).parse_module()
    except RecursionError:
        raise ParseError("nesting too deep", 1, 1, source) from None
