"""Writing an imported module back as MLIR text, as MLIR's printer writes it."""

from __future__ import annotations

import itertools
from typing import Any

from xlapy.errors import XlapyError
from xlapy.frontends.mlir_syntax import (
    Attr,
    FunctionType,
    ObjectAttr,
    TensorType,
    Type,
    format_attr_dict,
    quote_string,
    result_types_text,
    shape_of,
    symbol,
    type_of,
)
from xlapy.frontends.stablehlo.common import is_opaque, same_shape, stored_type
from xlapy.frontends.stablehlo.names import MlirNames
from xlapy.frontends.stablehlo_ops.catalog import spec_for
from xlapy.frontends.stablehlo_ops.records import (
    ArgRecord,
    FuncRecord,
    MeshRecord,
    ModuleRecord,
    OpRecord,
    RegionRecord,
    TerminatorRecord,
)
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results, region_results

# The records that keep where their text was (``loc(...)``).
Located = OpRecord | ArgRecord | TerminatorRecord | FuncRecord | MeshRecord | ModuleRecord


def _written(value: HloInstruction) -> OpRecord | ArgRecord | None:
    """The record of the op or argument ``value`` was written as, if any."""
    record = value.mlir
    return record if isinstance(record, OpRecord | ArgRecord) else None


class Printer:
    """Writes one module; op specs call ``use``, ``functional``, ``attr_dict``,
    ``region``... to print their syntax."""

    def __init__(self, module: HloModule, rename: bool, locations: bool = True):
        self.module = module
        self.rename = rename
        self.locations = locations
        self.indent = ""
        self.in_function = False
        self.names: dict[int, str] = {}
        self.groups: dict[int, list[tuple[str, int]]] = {}
        self.synthesized: dict[int, OpRecord] = {}

    # -- helpers the op specs use ------------------------------------------------------------
    def record(self, instr: HloInstruction) -> OpRecord:
        record = instr.mlir
        if isinstance(record, OpRecord):
            return record
        cached = self.synthesized.get(id(instr))
        if cached is None:
            from xlapy.frontends.stablehlo_ops.synthesize import synthesized_record

            shape = instr.shape
            types = [type_of(s) for s in shape.tuple_shapes] if shape.is_tuple else [type_of(shape)]
            cached = synthesized_record(instr, types)
            self.synthesized[id(instr)] = cached
        return cached

    def location(self, record: Located | None) -> str:
        """`` loc(...)`` of a record, or nothing."""
        location = record.location if record is not None else None
        return f" {location}" if location and self.locations else ""

    def value_location(self, value: HloInstruction) -> str:
        """`` loc(...)`` of an op or argument as written, or nothing."""
        return self.location(_written(value))

    def has_location(self, instr: HloInstruction) -> bool:
        record = _written(instr)
        return record is not None and bool(record.location)

    def op_name(self, instr: HloInstruction) -> str:
        name = self.record(instr).name
        if self.in_function and name.startswith("func."):
            return name[len("func."):]
        return name

    def use(self, value: HloInstruction) -> str:
        name = self.names.get(id(value))
        if name is None:
            raise XlapyError(f"{value.name} is used but not defined where it is printed")
        return "%" + name

    def uses(self, values: list[HloInstruction]) -> str:
        return ", ".join(self.use(v) for v in values)

    def value_type(self, value: HloInstruction) -> Type:
        stored = stored_type(value)
        if stored is not None:
            try:
                if is_opaque(stored) or same_shape(shape_of(stored), value.shape):
                    return stored
            except (ValueError, KeyError):
                return stored
        return type_of(value.shape)

    def results(self, instr: HloInstruction) -> list[HloInstruction]:
        record = instr.mlir
        count = len(record.result_types) if isinstance(record, OpRecord) else (
            len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1)
        if count == 1:
            return [instr]
        return op_results(instr)

    def result_types(self, instr: HloInstruction) -> list[Type]:
        results = self.results(instr)
        if results or not instr.shape.is_tuple:
            return [self.value_type(r) for r in results]
        return [type_of(s) for s in instr.shape.tuple_shapes]

    def functional(self, instr: HloInstruction) -> str:
        inputs = ", ".join(str(self.value_type(o)) for o in instr.operands)
        return f"({inputs}) -> {result_types_text(self.result_types(instr))}"

    def same_or_functional(self, instr: HloInstruction) -> str:
        results = self.result_types(instr)
        types = [self.value_type(o) for o in instr.operands]
        if len(results) == 1 and all(t == results[0] for t in types):
            return str(results[0])
        return self.functional(instr)

    def sharding_body(self, sharding: Any, instr: HloInstruction) -> str:
        if sharding is None:
            sharding = self._open_sharding(instr, self.results(instr)[0] if self.results(instr) else instr)
        return sharding.body()

    def attr_dict(self, instr: HloInstruction, elided: tuple[str, ...] = (), keyword: bool = False) -> str:
        record = self.record(instr)
        spec = spec_for(record.name)
        skip = set(elided) | set(spec.elided if spec is not None else ())
        attrs: dict[str, Attr] = {k: v for k, v in record.attributes.items() if k not in skip}
        if spec is None or not spec.inline_shardings:
            per_value = self._per_value(instr)
            if per_value is not None:
                attrs["sdy.sharding"] = per_value
        rule = instr.attributes.get("sdy.sharding_rule")
        if rule is not None:
            attrs["sdy.sharding_rule"] = ObjectAttr(rule)
        text = format_attr_dict(attrs)
        if not text:
            return ""
        return (" attributes " if keyword else " ") + text

    def arg_decl(self, param: HloInstruction) -> str:
        return f"{self.use(param)}: {self.value_type(param)}{self.value_location(param)}"

    def region(self, region: HloComputation, label: bool) -> str:
        """``{`` [``^bb0(args):``] ops terminator ``}`` at the current indentation."""
        record = region.mlir if isinstance(region.mlir, RegionRecord) else RegionRecord()
        lines = []
        if label and region.parameters:
            args = ", ".join(self.arg_decl(p) for p in region.parameters)
            lines.append(f"{self.indent}{record.label or '^bb0'}({args}):")
        saved = self.indent, self.in_function
        self.indent += "  "
        self.in_function = False
        try:
            lines.extend(self._body(region, record.terminator))
        finally:
            self.indent, self.in_function = saved
        return "{\n" + "\n".join(lines) + "\n" + self.indent + "}"

    # -- shardings ---------------------------------------------------------------------------------
    def _per_value(self, instr: HloInstruction) -> ObjectAttr | None:
        from xlapy.sharding.tensor_sharding import print_sharding_per_value

        results = self.results(instr)
        shardings = [r.sdy_sharding for r in results]
        if not any(s is not None for s in shardings):
            return None
        filled = [s if s is not None else self._open_sharding(instr, r) for s, r in zip(shardings, results)]
        return ObjectAttr(filled, print_sharding_per_value)

    def _open_sharding(self, instr: HloInstruction, value: HloInstruction) -> Any:
        """A fully open sharding of ``value`` on the mesh of ``instr``'s other shardings."""
        from xlapy.sharding.tensor_sharding import TensorSharding

        mesh = None
        candidates = [r.sdy_sharding for r in self.results(instr)] + list(instr.attributes.get("in_shardings", ()))
        for sharding in candidates:
            if sharding is not None:
                mesh = sharding.mesh
                break
        if mesh is None:
            mesh = next(iter(self.module.meshes), "mesh")
        type_ = self.value_type(value)
        rank = type_.rank if isinstance(type_, TensorType) else 0
        return TensorSharding.fully_open(mesh, rank)

    # -- module ---------------------------------------------------------------------------------------
    def module_text(self) -> str:
        module = self.module
        record = module.mlir if isinstance(module.mlir, ModuleRecord) else _default_record(module)
        functions = [item for kind, item in record.items if kind == "func"]
        self._name_values(functions)
        lines = list(record.prologue) if self.locations else []
        header = "module"
        if record.name:
            header += f" {symbol(record.name)}"
        if record.attributes:
            header += f" attributes {format_attr_dict(record.attributes)}"
        lines.append(header + " {")
        self.indent = "  "
        printed_meshes = set()
        pending_meshes = [name for name in module.meshes if name not in record.meshes]
        for kind, item in record.items:
            if kind == "mesh":
                if item not in module.meshes:
                    continue
                lines.append(self._mesh_line(item, record.meshes.get(item)))
                printed_meshes.add(item)
            else:
                if pending_meshes:
                    lines.extend(self._mesh_line(name, None) for name in pending_meshes)
                    pending_meshes = []
                lines.extend(self._function(item))
        lines.extend(self._mesh_line(name, None) for name in pending_meshes)
        lines.append("}" + self.location(record))
        if self.locations:
            lines.extend(record.epilogue)
        return "\n".join(lines) + "\n"

    def _mesh_line(self, name: str, record: MeshRecord | None) -> str:
        attrs = format_attr_dict(record.attributes) if record is not None else ""
        return f"  sdy.mesh {symbol(name)} = {self.module.meshes[name]}" + (f" {attrs}" if attrs else "") + \
            self.location(record)

    def _function(self, function: HloComputation) -> list[str]:
        record = function.mlir if isinstance(function.mlir, FuncRecord) else FuncRecord(function.name)
        args = []
        for param in function.parameters:
            attrs = dict(param.mlir.attributes) if isinstance(param.mlir, ArgRecord) else {}
            if param.sdy_sharding is not None:
                attrs["sdy.sharding"] = ObjectAttr(param.sdy_sharding)
            attr_text = format_attr_dict(attrs)
            args.append(f"{self.use(param)}: {self.value_type(param)}" + (f" {attr_text}" if attr_text else "")
                        + self.value_location(param))
        results = []
        returned = region_results(function)
        any_attrs = False
        for i, value in enumerate(returned):
            attrs = dict(record.result_attributes[i]) if i < len(record.result_attributes) else {}
            sharding = function.result_shardings[i] if i < len(function.result_shardings) else None
            if sharding is not None:
                attrs["sdy.sharding"] = ObjectAttr(sharding)
            attr_text = format_attr_dict(attrs)
            any_attrs = any_attrs or bool(attr_text)
            results.append(f"{self.value_type(value)}" + (f" {attr_text}" if attr_text else ""))
        head = "func.func " + (f"{record.visibility} " if record.visibility else "") + symbol(function.name)
        head += f"({', '.join(args)})"
        if len(results) == 1 and not any_attrs and not isinstance(self.value_type(returned[0]), FunctionType):
            head += f" -> {results[0]}"
        elif results:
            head += f" -> ({', '.join(results)})"
        if record.attributes:
            head += f" attributes {format_attr_dict(record.attributes)}"
        saved = self.indent, self.in_function
        self.indent, self.in_function = "    ", True
        try:
            body = self._body(function, record.terminator)
        finally:
            self.indent, self.in_function = saved
        return [f"  {head} {{", *body, "  }" + self.location(record)]

    def _body(self, computation: HloComputation, terminator: TerminatorRecord) -> list[str]:
        lines = [self._op_line(i) for i in computation.instructions
                 if i.opcode != "parameter" and not encodes_mlir_structure(i)]
        returned = region_results(computation)
        name = terminator.name
        if self.in_function and name.startswith("func."):
            name = name[len("func."):]
        text = f"{self.indent}{name}"
        if returned:
            text += " " + self.uses(returned)
        attrs = format_attr_dict(terminator.attributes)
        if attrs:
            text += " " + attrs
        if returned:
            text += " : " + ", ".join(str(self.value_type(v)) for v in returned)
        lines.append(text + self.location(terminator))
        return lines

    def _op_line(self, instr: HloInstruction) -> str:
        record = self.record(instr)
        spec = spec_for(record.name)
        groups = self.groups.get(id(instr), [])
        defs = ", ".join(f"%{name}" + (f":{count}" if count > 1 else "") for name, count in groups)
        body = None
        if spec is not None and spec.print is not None:
            try:
                body = spec.print(self, instr)
            except (KeyError, IndexError, AttributeError, TypeError, ValueError):
                # An op a pass created without the attributes its syntax needs: the generic form shows what it has.
                if not record.extra.get("synthesized"):
                    raise
        if body is None:
            body = self._generic(instr)
        return f"{self.indent}{defs + ' = ' if defs else ''}{body}{self.location(record)}"

    def _generic(self, instr: HloInstruction) -> str:
        record = self.record(instr)
        attrs = dict(record.attributes)
        spec = spec_for(record.name)
        names = spec.properties if spec is not None and spec.properties else record.properties
        props = {k: attrs.pop(k) for k in names if k in attrs}
        per_value = self._per_value(instr)
        if per_value is not None:
            attrs["sdy.sharding"] = per_value
        rule = instr.attributes.get("sdy.sharding_rule")
        if rule is not None:
            attrs["sdy.sharding_rule"] = ObjectAttr(rule)
        text = f"{quote_string(record.name)}({self.uses(instr.operands)})"
        if props:
            text += f" <{format_attr_dict(props)}>"
        regions = [c for c in instr.called_computations if not isinstance(c.mlir, FuncRecord)]
        if regions:
            text += " (" + ", ".join(self.region(r, label=True) for r in regions) + ")"
        if attrs:
            text += " " + format_attr_dict(attrs)
        return text + f" : {self.functional(instr)}"

    # -- names ------------------------------------------------------------------------------------
    def _name_values(self, functions: list[HloComputation]) -> None:
        for function in functions:
            if self.rename:
                MlirNames(self).name_function(function)
            else:
                self._keep_names(function)

    def _keep_names(self, function: HloComputation) -> None:
        used: set[str] = set()
        regions = _regions_within(function)
        for computation in regions:
            for instr in computation.instructions:
                record = instr.mlir
                if isinstance(record, ArgRecord) and record.name:
                    used.add(record.name)
                elif isinstance(record, OpRecord):
                    used.update(name for name, _ in record.results)
        numbers = [int(n) for n in used if n.isdigit()]
        counter = itertools.count(max(numbers) + 1 if numbers else 0)

        def fresh() -> str:
            while True:
                name = str(next(counter))
                if name not in used:
                    used.add(name)
                    return name

        for computation in regions:
            for instr in computation.instructions:
                record = instr.mlir
                if instr.opcode == "parameter":
                    self.names[id(instr)] = record.name if isinstance(record, ArgRecord) and record.name else fresh()
                    continue
                if encodes_mlir_structure(instr):
                    continue
                results = self.results(instr)
                groups = list(record.results) if isinstance(record, OpRecord) else []
                if sum(n for _, n in groups) != len(results):
                    groups = [(fresh(), len(results))] if results else []
                self.assign_names(instr, results, groups)
        for computation in regions:
            for instr in computation.instructions:
                if instr.opcode == "stablehlo.while" and len(instr.called_computations) == 2:
                    # Its pretty form declares the iteration arguments once, for the condition and the body.
                    cond, body = instr.called_computations
                    for cond_param, body_param in zip(cond.parameters, body.parameters):
                        self.names[id(body_param)] = self.names[id(cond_param)]

    def assign_names(self, instr: HloInstruction, results: list[HloInstruction],
                     groups: list[tuple[str, int]]) -> None:
        """``instr``'s results print as ``groups`` (``[("0", 2)]``: ``%0:2``, its results ``%0#0``, ``%0#1``)."""
        self.groups[id(instr)] = groups
        index = 0
        for name, count in groups:
            for j in range(count):
                if index < len(results):
                    self.names[id(results[index])] = name if count == 1 else f"{name}#{j}"
                index += 1


def _regions_within(function: HloComputation) -> list[HloComputation]:
    """The function and every region nested in it, outermost first."""
    order, queue = [], [function]
    while queue:
        computation = queue.pop(0)
        order.append(computation)
        for instr in computation.instructions:
            queue.extend(c for c in instr.called_computations if isinstance(c.mlir, RegionRecord))
    return order


def _default_record(module: HloModule) -> ModuleRecord:
    record = ModuleRecord(name=module.name)
    record.items = [("mesh", name) for name in module.meshes]
    if module.entry is not None:
        record.items.append(("func", module.entry))
    return record


