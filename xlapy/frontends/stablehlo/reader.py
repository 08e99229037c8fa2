"""Reading MLIR text into the HLO IR: modules, meshes, functions, regions and ops
(each op's own syntax is read by its spec in ``xlapy.frontends.stablehlo_ops``)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from xlapy.errors import ParseError
from xlapy.frontends.mlir_syntax import (
    OP_NAME,
    VALUE_NAME,
    VALUE_USE,
    ArrayAttr,
    Attr,
    DictAttr,
    FunctionType,
    ObjectAttr,
    StringAttr,
    Type,
    TypeAttr,
    eat_keyword,
    expect_keyword,
    parse_attr_dict,
    parse_attribute,
    parse_result_types,
    parse_type,
    parse_type_list,
    peek_keyword,
    read_location,
    read_string,
    read_symbol,
    result_types_text,
    shape_of,
    type_of,
)
from xlapy.frontends.stablehlo.common import is_opaque, stored_type
from xlapy.frontends.stablehlo_ops.catalog import spec_for
from xlapy.frontends.stablehlo_ops.data_movement import constant_literal
from xlapy.frontends.stablehlo_ops.drafts import ArgDecl, OpDraft
from xlapy.frontends.stablehlo_ops.records import (
    ArgRecord,
    FuncRecord,
    MeshRecord,
    ModuleRecord,
    OpRecord,
    RegionRecord,
    TerminatorRecord,
)
from xlapy.frontends.stablehlo_ops.registry import OpSpec
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.attributes import Verbatim
from xlapy.hlo.mlir_structure import region_results
from xlapy.shapes import Shape
from xlapy.syntax import Cursor, IntegerError, read_int


class _Scope:
    """The SSA names visible in a region: its own and those of enclosing regions."""

    def __init__(self, parent: _Scope | None = None):
        self.parent = parent
        self.values: dict[str, list[HloInstruction]] = {}

    def lookup(self, name: str) -> list[HloInstruction] | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return None


_TERMINATORS = ("stablehlo.return", "sdy.return", "func.return")


class Reader:
    """Reads one module. Op specs call the methods below (``operand``,
    ``functional_type``, ``region``...) to read their syntax."""

    def __init__(self, text: str, source: str | None):
        self.cursor = Cursor(text, 0, source)
        self.module = HloModule("module")
        self.record = ModuleRecord()
        self.module.mlir = self.record
        self.scope = _Scope()
        self.computation: HloComputation | None = None
        self.functions: dict[str, tuple[HloComputation, int]] = {}
        self.calls: list[tuple[HloInstruction, list[tuple[str, int]]]] = []
        self.mesh_uses: list[tuple[str, int]] = []
        self.region_counter = itertools.count()
        self.generic_module = False

    # -- helpers the op specs use ------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> ParseError:
        return self.cursor.error(message, pos)

    def found(self) -> str:
        return self.cursor.found()

    def expect(self, literal: str, what: str) -> None:
        self.cursor.expect(literal, what)

    def eat(self, literal: str) -> bool:
        return self.cursor.eat(literal)

    def peek(self, literal: str) -> bool:
        return self.cursor.peek(literal)

    def eat_keyword(self, word: str) -> bool:
        return eat_keyword(self.cursor, word)

    def type(self) -> Type:
        return parse_type(self.cursor)

    def type_list(self) -> list[Type]:
        return parse_type_list(self.cursor)

    def parse_type_text(self, text: str, pos: int) -> Type:
        try:
            return parse_type(Cursor(text.strip()))
        except ParseError as e:
            raise self.error(e.message, pos) from None

    def value_name(self) -> str:
        """A value being defined: ``%name``."""
        return self.cursor.match(VALUE_NAME, "a value name ('%name')").group(1)

    def read_operand(self, draft: OpDraft) -> tuple[HloInstruction, int]:
        """A use of a value, ``%name`` or ``%name#N``, and where it was written."""
        self.cursor.skip_space()
        pos = self.cursor.pos
        match = self.cursor.match(VALUE_USE, "a value ('%name')")
        name, index = match.group(1), match.group(2)
        values = self.scope.lookup(name)
        if values is None:
            raise self.error(f"use of undefined value '%{name}'", pos)
        if index is None:
            if len(values) != 1:
                raise self.error(f"'%{name}' names {len(values)} results: use '%{name}#N'", pos)
            return values[0], pos
        try:
            return values[read_int(index, 0, len(values) - 1)], pos
        except IntegerError:
            raise self.error(f"'%{name}' has {len(values)} results, there is no #{index[:20]}", pos) from None

    def operand(self, draft: OpDraft) -> HloInstruction:
        value, pos = self.read_operand(draft)
        draft.operands.append(value)
        draft.operand_positions.append(pos)
        return value

    def operands(self, draft: OpDraft) -> None:
        """``%a, %b, ...`` (possibly none)."""
        if not self.cursor.peek("%"):
            return
        self.operand(draft)
        while True:
            checkpoint = self.cursor.pos
            if not self.cursor.eat(","):
                return
            if not self.cursor.peek("%"):
                self.cursor.pos = checkpoint
                return
            self.operand(draft)

    def attr_dict(self, draft: OpDraft) -> None:
        if self.cursor.peek("{"):
            self._merge_attributes(draft, parse_attr_dict(self.cursor))

    def attr_dict_with_keyword(self, draft: OpDraft) -> None:
        if eat_keyword(self.cursor, "attributes"):
            self._merge_attributes(draft, parse_attr_dict(self.cursor))

    def _merge_attributes(self, draft: OpDraft, attrs: dict[str, Attr]) -> None:
        for name, value in attrs.items():
            if name in draft.attributes:
                raise self.error(f"attribute '{name}' given twice on {draft.name}", draft.pos)
            draft.attributes[name] = value

    def functional_type(self, draft: OpDraft) -> None:
        start = self.cursor.pos
        type_ = parse_type(self.cursor)
        if not isinstance(type_, FunctionType):
            raise self.error(f"expected a function type '(...) -> ...', got {type_}", start)
        draft.operand_types = list(type_.inputs)
        draft.result_types = list(type_.results)

    def same_type_or_functional(self, draft: OpDraft) -> None:
        """``type`` (of every operand and the result) or ``(types) -> types``."""
        if self.cursor.peek("("):
            self.functional_type(draft)
            return
        type_ = parse_type(self.cursor)
        draft.operand_types = [type_] * len(draft.operands)
        draft.result_types = [type_]

    def result_type_list(self, draft: OpDraft) -> None:
        draft.result_types = parse_result_types(self.cursor)

    def block_args(self) -> list[ArgDecl]:
        """``(%a: type, %b: type loc(...))``."""
        def one() -> ArgDecl:
            self.cursor.skip_space()
            pos = self.cursor.pos
            name = self.value_name()
            self.expect(":", "after a block argument")
            type_ = parse_type(self.cursor)
            return ArgDecl(name, type_, pos, read_location(self.cursor))

        return self.cursor.delimited("(", ")", one, "the block arguments")

    def sharding(self) -> Any:
        """A tensor sharding (``<@mesh, [...]>`` or ``#sdy.sharding<...>``)."""
        from xlapy.sharding.tensor_sharding import parse_tensor_sharding

        self.cursor.skip_space()
        pos = self.cursor.pos
        sharding = parse_tensor_sharding(self.cursor)
        self._note_mesh_uses(sharding, pos)
        return sharding

    def returned_count(self, region: HloComputation) -> int:
        return len(region_results(region))

    def region(self, draft: OpDraft, args: list[ArgDecl] | None = None) -> HloComputation:
        """``{ [^bb0(args):] ops terminator }``; ``args`` when the op's syntax declared them."""
        cursor = self.cursor
        cursor.skip_space()
        start = cursor.pos
        cursor.expect("{", "to start a region")
        region = self._new_computation(self._region_name(), RegionRecord())
        label = re.compile(r"\^([A-Za-z0-9_$.\-]+)").match(cursor.text, cursor.pos) if cursor.peek("^") else None
        if label:
            cursor.pos = label.end()
            region.mlir.label = "^" + label.group(1)
            label_args = self.block_args() if cursor.peek("(") else []
            cursor.expect(":", "after the block label")
            if args is not None and label_args:
                raise self.error("the region's arguments are declared twice", start)
            if args is None:
                args = label_args
        saved = (self.scope, self.computation)
        self.scope = _Scope(self.scope)
        self.computation = region
        try:
            with cursor.nested("regions"):
                self._parameters(region, args or [])
                region.mlir.terminator = self._block(region, f"a region of {draft.name}")
        finally:
            self.scope, self.computation = saved
        cursor.expect("}", "to end the region")
        draft.regions.append(region)
        return region

    def synthetic_region(self, arg_types: list[Type], op_name: str, result_type: Type) -> HloComputation:
        """The region of ``reduce ... applies <op>``: ``op(%lhs, %rhs)`` returned."""
        region = self._new_computation(self._region_name(), RegionRecord())
        params = self._parameters(region, [ArgDecl("", t, self.cursor.pos) for t in arg_types], define=False)
        spec = spec_for(op_name)
        draft = OpDraft(op_name, self.cursor.pos, list(params), [], list(arg_types), [result_type])
        opcode = spec.opcode_for(draft) if spec is not None else op_name
        instr = HloInstruction(_instruction_name(opcode), opcode, _shape_of_results([result_type], self, draft.pos),
                               list(params))
        instr.mlir = OpRecord(op_name, [], {}, (), [result_type])
        region.add_instruction(instr)
        region.root = instr
        return region

    # -- module, meshes, functions --------------------------------------------------------------
    def parse(self) -> HloModule:
        cursor, record = self.cursor, self.record
        self._aliases(record.prologue)
        # Meshes declared before the module (as the compiler API document writes them) belong to it.
        while peek_keyword(cursor) == "sdy.mesh" or cursor.peek("@"):
            self._mesh()
        if eat_keyword(cursor, "module") or self._generic_module_start():
            generic = self.generic_module
            if cursor.peek("@") and not generic:
                record.name = read_symbol(cursor, "the module name")
            if not generic and eat_keyword(cursor, "attributes"):
                record.attributes = parse_attr_dict(cursor)
            cursor.expect("{", "to start the module body")
            self._items(closing=True)
            cursor.expect("}", "to end the module")
            if generic:
                cursor.expect(")", "after the module's body")
                if cursor.peek("{"):
                    record.attributes = parse_attr_dict(cursor)
                cursor.expect(":", "before the module op's type")
                parse_type(cursor)
            record.location = read_location(cursor)
            self._aliases(record.epilogue)
            if not cursor.at_end():
                raise self.error(f"unexpected {cursor.found()} after the module")
        else:
            self._items(closing=False)
        self.module.name = record.name or self.cursor.source or "module"
        self.module.attributes.update(_hlo_module_attributes(record.attributes))
        self._link_calls()
        self._check_meshes()
        functions = record.functions
        if functions:
            by_name = {c.name: c for c in functions}
            public = [c for c in functions if c.mlir.visibility != "private"]
            entry = by_name.get("main") or (functions[0] if len(functions) == 1 else (public or functions)[0])
            entry.is_entry = True
            self.module.entry = entry
        return self.module

    def _generic_module_start(self) -> bool:
        """``"builtin.module"() <{sym_name = "m"}> (`` up to the body's ``{``."""
        cursor = self.cursor
        if not cursor.peek('"builtin.module"'):
            return False
        read_string(cursor)
        cursor.expect("(", "after 'builtin.module'")
        cursor.expect(")", "(a module has no operands)")
        if cursor.peek("<"):
            cursor.pos += 1
            props = parse_attr_dict(cursor)
            cursor.expect(">", "after the module's properties")
            name = props.get("sym_name")
            if isinstance(name, StringAttr):
                self.record.name = name.value
        cursor.expect("(", "before the module's body")
        self.generic_module = True
        return True

    def _aliases(self, out: list[str]) -> None:
        """``#name = attribute`` / ``!name = type`` definitions, kept verbatim."""
        cursor = self.cursor
        while True:
            cursor.skip_space()
            match = re.compile(r"[#!][A-Za-z_][A-Za-z0-9_.$\-]*\s*=").match(cursor.text, cursor.pos)
            if not match:
                return
            start = cursor.pos
            cursor.pos = match.end()
            if cursor.text[start] == "#":
                parse_attribute(cursor)
            else:
                parse_type(cursor)
            out.append(cursor.text[start:cursor.pos])

    def _items(self, closing: bool) -> None:
        cursor = self.cursor
        while True:
            if closing and cursor.peek("}"):
                return
            if cursor.at_end():
                if closing:
                    raise self.error("expected '}' to end the module, got end of text")
                return
            if cursor.peek("#") or cursor.peek("!"):
                start = cursor.pos
                self._aliases(self.record.epilogue if self.record.items else self.record.prologue)
                if cursor.pos == start:
                    raise self.error(f"expected an alias definition '#name = ...', got {cursor.found()}")
                continue
            word = peek_keyword(cursor)
            if word == "sdy.mesh" or cursor.peek("@"):
                self._mesh()
            elif word in ("func.func", "func"):
                self._function()
            elif cursor.peek('"func.func"'):
                self._generic_function()
            elif cursor.peek('"sdy.mesh"'):
                self._generic_mesh()
            else:
                raise self.error(f"expected 'sdy.mesh' or 'func.func' in the module, got {cursor.found()}")

    def _mesh(self) -> None:
        from xlapy.sharding.mesh import parse_mesh

        cursor = self.cursor
        # `@name = <...>` is the compiler API document's shorthand for `sdy.mesh @name = <...>`.
        eat_keyword(cursor, "sdy.mesh")
        cursor.skip_space()
        pos = cursor.pos
        name = read_symbol(cursor, "the mesh name")
        if name in self.module.meshes:
            raise self.error(f"mesh '@{name}' is declared twice", pos)
        cursor.expect("=", "after the mesh name")
        self.module.meshes[name] = parse_mesh(cursor)
        attrs = parse_attr_dict(cursor) if cursor.peek("{") else {}
        self.record.meshes[name] = MeshRecord(attrs, read_location(cursor))
        self.record.items.append(("mesh", name))

    def _generic_mesh(self) -> None:
        """``"sdy.mesh"() <{mesh = #sdy.mesh<...>, sym_name = "m"}> : () -> ()``."""
        cursor = self.cursor
        pos = cursor.pos
        read_string(cursor)
        cursor.expect("(", "after 'sdy.mesh'")
        cursor.expect(")", "(a mesh has no operands)")
        cursor.expect("<", "before the mesh's properties")
        props = parse_attr_dict(cursor)
        cursor.expect(">", "after the mesh's properties")
        attrs = parse_attr_dict(cursor) if cursor.peek("{") else {}
        cursor.expect(":", "before the mesh op's type")
        parse_type(cursor)
        name, mesh = props.get("sym_name"), props.get("mesh")
        if not isinstance(name, StringAttr) or not isinstance(mesh, ObjectAttr):
            raise self.error("a generic sdy.mesh needs sym_name and mesh = #sdy.mesh<...>", pos)
        if name.value in self.module.meshes:
            raise self.error(f"mesh '@{name.value}' is declared twice", pos)
        self.module.meshes[name.value] = mesh.value
        self.record.meshes[name.value] = MeshRecord(attrs, read_location(cursor))
        self.record.items.append(("mesh", name.value))

    def _function(self) -> None:
        cursor = self.cursor
        if not eat_keyword(cursor, "func.func"):
            expect_keyword(cursor, "func", "")  # the builtin spelling of older MLIR
        visibility = None
        word = peek_keyword(cursor)
        if word in ("public", "private", "nested"):
            visibility = word
            cursor.pos += len(word)
        cursor.skip_space()
        pos = cursor.pos
        name = read_symbol(cursor, "the function name")
        record = FuncRecord(name, visibility)
        args: list[ArgDecl] = []
        arg_attrs: list[dict[str, Attr]] = []

        def argument() -> None:
            cursor.skip_space()
            arg_pos = cursor.pos
            arg_name = self.value_name()
            cursor.expect(":", "after a function argument")
            arg_type = parse_type(cursor)
            attrs = parse_attr_dict(cursor) if cursor.peek("{") else {}
            args.append(ArgDecl(arg_name, arg_type, arg_pos, read_location(cursor)))
            arg_attrs.append(attrs)

        if cursor.peek("(") and not re.match(r"\(\s*(%|\))", cursor.text[cursor.pos:cursor.pos + 40]):
            raise self.error("function declarations without a body are not supported", pos)
        cursor.delimited("(", ")", argument, "the function arguments")
        if cursor.eat("->"):
            if cursor.peek("("):
                def result() -> None:
                    record.result_types.append(parse_type(cursor))
                    record.result_attributes.append(parse_attr_dict(cursor) if cursor.peek("{") else {})

                cursor.delimited("(", ")", result, "the function results")
            else:
                record.result_types.append(parse_type(cursor))
                record.result_attributes.append({})
        if eat_keyword(cursor, "attributes"):
            record.attributes = parse_attr_dict(cursor)
        cursor.skip_space()
        if not cursor.peek("{"):
            raise self.error(f"expected '{{' to start the body of function '@{name}', got {cursor.found()}")
        self._function_body(record, args, arg_attrs, pos)
        record.location = read_location(cursor)

    def _generic_function(self) -> None:
        """``"func.func"() <{function_type = ..., sym_name = "f", ...}> ({^bb0(args): ...}) : () -> ()``."""
        cursor = self.cursor
        pos = cursor.pos
        read_string(cursor)
        cursor.expect("(", "after 'func.func'")
        cursor.expect(")", "(a function has no operands)")
        cursor.expect("<", "before the function's properties")
        props = parse_attr_dict(cursor)
        cursor.expect(">", "after the function's properties")
        name, type_ = props.pop("sym_name", None), props.pop("function_type", None)
        if not isinstance(name, StringAttr) or not isinstance(type_, TypeAttr) or \
                not isinstance(type_.type, FunctionType):
            raise self.error("a generic func.func needs sym_name and function_type", pos)
        visibility = props.pop("sym_visibility", None)
        record = FuncRecord(name.value, visibility.value if isinstance(visibility, StringAttr) else None)
        record.result_types = list(type_.type.results)
        arg_attrs = _dict_list(props.pop("arg_attrs", None), len(type_.type.inputs))
        record.result_attributes = _dict_list(props.pop("res_attrs", None), len(record.result_types))
        cursor.expect("(", "before the function's body")
        cursor.skip_space()
        body_pos = cursor.pos
        cursor.expect("{", "to start the function's body")
        args: list[ArgDecl] = []
        if cursor.peek("^"):
            cursor.match(re.compile(r"\^[A-Za-z0-9_$.\-]*"), "a block label")
            args = self.block_args() if cursor.peek("(") else []
            cursor.expect(":", "after the block label")
        if [a.type for a in args] != list(type_.type.inputs):
            raise self.error("the function's block arguments do not match its function_type", body_pos)
        cursor.pos = body_pos
        attrs = dict(props)
        self._function_body(record, args, arg_attrs, pos, skip_label=True)
        cursor.expect(")", "after the function's body")
        if cursor.peek("{"):
            attrs.update(parse_attr_dict(cursor))
        record.attributes = attrs
        cursor.expect(":", "before the function op's type")
        parse_type(cursor)
        record.location = read_location(cursor)

    def _function_body(self, record: FuncRecord, args: list[ArgDecl], arg_attrs: list[dict[str, Attr]], pos: int,
                       skip_label: bool = False) -> None:
        cursor = self.cursor
        name = record.name
        if name in self.functions:
            raise self.error(f"function '@{name}' is defined twice", pos)
        function = self._new_computation(name, record)
        self.functions[name] = (function, pos)
        self.record.items.append(("func", function))
        cursor.expect("{", "")
        if skip_label:
            cursor.match(re.compile(r"\s*(?:\^[A-Za-z0-9_$.\-]*(?:\([^)]*\))?\s*:)?"), "")
        saved = (self.scope, self.computation)
        self.scope = _Scope()
        self.computation = function
        try:
            params = self._parameters(function, args)
            for param, attrs, arg in zip(params, arg_attrs, args):
                param.sdy_sharding = self._take_sharding(attrs, "sdy.sharding", arg.pos)
                param.mlir.attributes = attrs
                param.attributes.update(_hlo_sharding(attrs))
            record.terminator = self._block(function, f"function '@{name}'")
        finally:
            self.scope, self.computation = saved
        cursor.expect("}", f"to end function '@{name}'")
        function.result_shardings = [self._take_sharding(attrs, "sdy.sharding", pos)
                                     for attrs in record.result_attributes]
        self._check_returns(function, record.result_types, pos)

    def _take_sharding(self, attrs: dict[str, Attr], key: str, pos: int) -> Any:
        value = attrs.pop(key, None)
        if value is None:
            return None
        if not isinstance(value, ObjectAttr) or not hasattr(value.value, "dim_shardings"):
            raise self.error(f"expected '{key} = #sdy.sharding<...>'", pos)
        self._note_mesh_uses(value.value, pos)
        return value.value

    def _check_returns(self, function: HloComputation, result_types: list[Type], pos: int) -> None:
        returned = region_results(function)
        types = [self._value_type(v) for v in returned]
        if len(types) != len(result_types):
            raise self.error(f"function '@{function.name}' returns {len(types)} values, its type says "
                             f"{len(result_types)}", pos)
        for i, (got, declared) in enumerate(zip(types, result_types)):
            if got != declared:
                raise self.error(f"function '@{function.name}' returns {got} as result {i}, its type says "
                                 f"{declared}", pos)

    # -- blocks and ops ---------------------------------------------------------------------------
    def _new_computation(self, name: str, record: Any) -> HloComputation:
        computation = HloComputation(name)
        computation.mlir = record
        self.module.add_computation(computation)
        return computation

    def _region_name(self) -> str:
        taken = {c.name for c in self.module.computations} if len(self.functions) else set()
        while True:
            name = f"region_{next(self.region_counter)}"
            if name not in self.functions and name not in taken:
                return name

    def _parameters(self, computation: HloComputation, args: list[ArgDecl],
                    define: bool = True) -> list[HloInstruction]:
        params = []
        for number, arg in enumerate(args):
            shape = _shape_of_results([arg.type], self, arg.pos)
            param = HloInstruction(_instruction_name("Arg_" + str(number)), "parameter", shape)
            param.parameter_number = number
            param.mlir = ArgRecord(arg.name, arg.type, {}, arg.location)
            computation.add_instruction(param)
            if define:
                self._define(arg.name, [param], arg.pos)
            params.append(param)
        return params

    def _define(self, name: str, values: list[HloInstruction], pos: int) -> None:
        if self.scope.lookup(name) is not None:
            raise self.error(f"redefinition of SSA value '%{name}'", pos)
        self.scope.values[name] = values

    def _block(self, computation: HloComputation, what: str) -> TerminatorRecord:
        """Ops up to and including the terminator (any return op: JAX ends some
        functions with stablehlo.return); sets the computation's root."""
        cursor = self.cursor
        while True:
            cursor.skip_space()
            if cursor.peek("}") or cursor.at_end():
                raise self.error(f"{what} has no terminator (a return op)")
            terminator = self._op(computation)
            if terminator is not None:
                record, values = terminator
                _set_root(computation, values)
                if not cursor.peek("}"):
                    raise self.error(f"expected '}}' after the terminator of {what}, got {cursor.found()}")
                return record

    def _op(self, computation: HloComputation) -> tuple[TerminatorRecord, list[HloInstruction]] | None:
        cursor = self.cursor
        results: list[tuple[str, int, int]] = []
        if cursor.peek("%"):
            while True:
                cursor.skip_space()
                pos = cursor.pos
                name = self.value_name()
                count = 1
                if cursor.text.startswith(":", cursor.pos) and re.match(r":[0-9]", cursor.text[cursor.pos:]):
                    cursor.pos += 1
                    count = cursor.checked_int(cursor.match(re.compile(r"[0-9]+"), "a result count").group(),
                                               cursor.pos, 1)
                results.append((name, count, pos))
                if not cursor.eat(","):
                    break
            cursor.expect("=", "after the op's results")
        cursor.skip_space()
        pos = cursor.pos
        generic = cursor.peek('"')
        if generic:
            name = read_string(cursor)
        else:
            match = OP_NAME.match(cursor.text, cursor.pos)
            if not match:
                raise self.error(f"expected an op, got {cursor.found()}")
            name = match.group()
            cursor.pos = match.end()
            if "." not in name:  # the func dialect's ops are written without prefix in functions
                name = "func." + name
        spec = spec_for(name)
        draft = OpDraft(name, pos, generic=generic)
        if name in _TERMINATORS:
            if results:
                raise self.error(f"'{name}' has no results", results[0][2])
            return self._terminator(draft, generic)
        if generic:
            self._generic(draft)
            if spec is not None and spec.from_generic is not None:
                self._guarded(lambda: spec.from_generic(self, draft), draft)
        elif spec is None or spec.parse is None:
            raise self.error(f"unknown op '{name}' (ops xlapy does not know must be written in the generic form)",
                             pos)
        else:
            self._guarded(lambda: spec.parse(self, draft), draft)
        location = read_location(cursor)
        if spec is not None and spec.check is not None:
            spec.check(self, draft)
        self._guarded(lambda: self._emit(computation, draft, results, location, spec), draft)
        return None

    def _guarded(self, step: Any, draft: OpDraft) -> None:
        """Run a reading step of an op; values its syntax cannot hold (a bad
        attribute of a known op) are reported at the op."""
        try:
            step()
        except (ValueError, OverflowError, IndexError, KeyError, TypeError, AttributeError) as e:
            raise self.error(f"bad {draft.name}: {e}", draft.pos) from None

    def _terminator(self, draft: OpDraft, generic: bool) -> tuple[TerminatorRecord, list[HloInstruction]]:
        cursor = self.cursor
        if generic:
            self._generic(draft)
        else:
            self.operands(draft)
            self.attr_dict(draft)
            if draft.operands:
                self.expect(":", "before the returned types")
                draft.operand_types = self.type_list()
            else:
                draft.operand_types = []
        self._check_operand_types(draft)
        record = TerminatorRecord(draft.name, draft.attributes, read_location(cursor))
        return record, list(draft.operands)

    def _generic(self, draft: OpDraft) -> None:
        """``"name"(%a, %b) <{props}> ({regions}) {attrs} : (types) -> types``."""
        cursor = self.cursor
        cursor.expect("(", f"after the op name '{draft.name}'")
        self.operands(draft)
        cursor.expect(")", "after the op's operands")
        if cursor.peek("["):
            raise self.error("ops with successor blocks are not supported")
        if cursor.peek("<"):
            cursor.pos += 1
            props = parse_attr_dict(cursor)
            cursor.expect(">", "to end the op's properties")
            self._merge_attributes(draft, props)
            draft.properties = tuple(props)
        if cursor.peek("("):
            cursor.expect("(", "")
            while True:
                self.region(draft)
                if not cursor.eat(","):
                    break
            cursor.expect(")", "after the op's regions")
        self.attr_dict(draft)
        cursor.expect(":", "before the op's type")
        self.functional_type(draft)

    def _check_operand_types(self, draft: OpDraft) -> None:
        declared = draft.operand_types
        if declared is None:
            return
        if len(declared) != len(draft.operands):
            raise self.error(f"{draft.name} has {len(draft.operands)} operands, its type lists {len(declared)}",
                             draft.pos)
        for value, pos, type_ in zip(draft.operands, draft.operand_positions, declared):
            actual = self._value_type(value)
            if actual != type_:
                raise self.error(f"use of value expects type {type_}, but the value has type {actual}", pos)

    def _value_type(self, value: HloInstruction) -> Type:
        return stored_type(value) or type_of(value.shape)

    def _emit(self, computation: HloComputation, draft: OpDraft, results: list[tuple[str, int, int]],
              location: str | None, spec: OpSpec | None) -> None:
        self._check_operand_types(draft)
        count = len(draft.result_types)
        declared = sum(n for _, n, _ in results)
        if results and declared != count:
            raise self.error(f"{draft.name} has {count} results, but {declared} are named", results[0][2])
        shardings = self._take_per_value(draft.attributes, draft.pos, count)
        rule = draft.attributes.pop("sdy.sharding_rule", None)
        opcode = spec.opcode_for(draft) if spec is not None else draft.name
        try:
            hlo = dict(spec.hlo(draft)) if spec is not None and spec.hlo is not None else {}
        except (ValueError, KeyError, IndexError, AttributeError, TypeError) as e:
            raise self.error(f"bad attributes for {draft.name}: {e}", draft.pos) from None
        hlo.update(draft.hlo_attributes)
        hlo.update(_hlo_sharding(draft.attributes))
        if rule is not None:
            hlo["sdy.sharding_rule"] = rule.value if isinstance(rule, ObjectAttr) else rule
        shape = _shape_of_results(draft.result_types, self, draft.pos)
        instr = HloInstruction(_instruction_name(opcode), opcode, shape, draft.operands, hlo, draft.regions)
        groups = [(name, n) for name, n, _ in results]
        instr.mlir = OpRecord(draft.name, groups, draft.attributes, draft.properties, draft.result_types,
                              draft.generic, location, draft.extra)
        computation.add_instruction(instr)
        if opcode == "constant":
            instr.literal = constant_literal(draft)
        if draft.sharding is not None:
            instr.sdy_sharding = draft.sharding
        values = [instr] if count == 1 else _add_result_elements(computation, instr, count)
        if draft.result_shardings is not None:
            shardings = draft.result_shardings
        if shardings is not None:
            for value, sharding in zip(values, shardings):
                value.sdy_sharding = sharding
        offset = 0
        for name, n, pos in results:
            self._define(name, values[offset:offset + n], pos)
            offset += n
        if draft.extra.get("callees"):
            self.calls.append((instr, draft.extra["callees"]))

    def _take_per_value(self, attrs: dict[str, Attr], pos: int, count: int) -> list | None:
        value = attrs.pop("sdy.sharding", None)
        if value is None:
            return None
        shardings = value.value if isinstance(value, ObjectAttr) else None
        if not isinstance(shardings, tuple):
            raise self.error("expected 'sdy.sharding = #sdy.sharding_per_value<[...]>' on an op", pos)
        if len(shardings) != count:
            raise self.error(f"the op has {count} results but {len(shardings)} shardings", pos)
        for sharding in shardings:
            self._note_mesh_uses(sharding, pos)
        return list(shardings)

    def note_mesh_uses(self, shardings: Any, pos: int) -> None:
        for sharding in shardings:
            self._note_mesh_uses(sharding, pos)

    def _note_mesh_uses(self, sharding: Any, pos: int) -> None:
        mesh = getattr(sharding, "mesh", None)
        if isinstance(mesh, str):
            self.mesh_uses.append((mesh, pos))

    # -- after the whole module ---------------------------------------------------------------------
    def _link_calls(self) -> None:
        for instr, callees in self.calls:
            for name, pos in callees:
                entry = self.functions.get(name)
                if entry is None:
                    raise self.error(f"reference to undefined function '@{name}'", pos)
                instr.called_computations.append(entry[0])
            if instr.opcode == "call":
                callee = instr.called_computations[0]
                instr.attributes = {"to_apply": callee.name, **instr.attributes}
                if instr.mlir.name == "func.call":
                    self._check_call(instr, callee, callees[0][1])

    def _check_call(self, instr: HloInstruction, callee: HloComputation, pos: int) -> None:
        params = [self._value_type(p) for p in callee.parameters]
        args = [self._value_type(a) for a in instr.operands]
        if params != args:
            raise self.error(f"call to '@{callee.name}' passes ({', '.join(map(str, args))}), it takes "
                             f"({', '.join(map(str, params))})", pos)
        if list(instr.mlir.result_types) != list(callee.mlir.result_types):
            raise self.error(f"call to '@{callee.name}' expects results {result_types_text(instr.mlir.result_types)}"
                             f", it returns {result_types_text(callee.mlir.result_types)}", pos)

    def _check_meshes(self) -> None:
        for name, pos in self.mesh_uses:
            if name not in self.module.meshes:
                raise self.error(f"unknown mesh '@{name}'", pos)


def _dict_list(attr: Attr | None, count: int) -> list[dict[str, Attr]]:
    """``[{...}, {...}]`` (arg_attrs / res_attrs of a generic func.func) as dictionaries."""
    if isinstance(attr, ArrayAttr):
        dicts = [dict(item.entries) if isinstance(item, DictAttr) else {} for item in attr.items]
        return dicts + [{} for _ in range(count - len(dicts))]
    return [{} for _ in range(count)]


def _hlo_sharding(attrs: dict[str, Attr]) -> dict[str, Verbatim]:
    """HLO's ``sharding`` attribute from ``mhlo.sharding = "{...}"`` (what JAX
    writes without Shardy, e.g. on ``custom_call @Sharding``), kept verbatim."""
    value = attrs.get("mhlo.sharding")
    return {"sharding": Verbatim(value.value)} if isinstance(value, StringAttr) else {}


# The module attributes JAX writes for XLA, and their names in HLO's module header.
_MODULE_ATTRIBUTES = {"mhlo.num_replicas": "replica_count", "mhlo.num_partitions": "num_partitions"}


def _hlo_module_attributes(attrs: dict[str, Attr]) -> dict[str, str]:
    """HLO's module attributes (as ``xlapy.hlo.parse_module`` keeps them) that
    the MLIR module's attributes give."""
    found = {}
    for mlir_name, hlo_name in _MODULE_ATTRIBUTES.items():
        value = getattr(attrs.get(mlir_name), "value", None)
        if value is not None:
            found[hlo_name] = str(value)
    return found


def _instruction_name(opcode: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", opcode)


def _shape_of_results(types: list[Type], parser: Reader, pos: int) -> Shape:
    try:
        shapes = [shape_of(t) if not is_opaque(t) else Shape("opaque") for t in types]
    except (ValueError, KeyError) as e:
        raise parser.error(f"unsupported type: {e}", pos) from None
    return shapes[0] if len(shapes) == 1 else Shape.make_tuple(shapes)


def _add_result_elements(computation: HloComputation, instr: HloInstruction, count: int) -> list[HloInstruction]:
    """One get-tuple-element per result of a multi-result op, encoding MLIR's several results."""
    elements = []
    for index in range(count):
        element = HloInstruction("get-tuple-element", "get-tuple-element", instr.shape.tuple_shapes[index], [instr],
                                 {"index": index})
        element.encodes_mlir_structure = True
        computation.add_instruction(element)
        elements.append(element)
    return elements


def _set_root(computation: HloComputation, values: list[HloInstruction]) -> None:
    if len(values) == 1 and values[0].parent is computation:
        computation.root = values[0]
        return
    root = HloInstruction("tuple", "tuple", Shape.make_tuple([v.shape for v in values]), values)
    root.encodes_mlir_structure = True
    computation.add_instruction(root)
    computation.root = root
