"""The ``xla`` dialect: XLA's ``xla``/``xla_gpu`` ops (``xla_ops.td``,
``xla_gpu_ops.td``) as xDSL operations, with the custom assembly formats of
XLA's docs/emitters.md (its MLIR examples, with the prefix ``xla.`` instead of ``xla_gpu.``).

- ``#xla.indexing_map<"...">`` carries an ``IndexingMap`` in XLA's one-line text;
- ``#xla.layout<[minor, ..., major]>`` is the ``encoding`` of a tensor whose
  layout is not the default row-major one;
- ``xla.loop``, ``xla.apply_indexing``, ``xla.pure_call``,
  ``xla.allocate_shared``, ``xla.sync_threads`` and ``xla.yield``;
- ``gpu.thread_id`` / ``gpu.block_id`` with MLIR's short syntax
  (``gpu.thread_id x {xla.range = [0 : index, 127 : index]}``), which xDSL's
  own classes lack; ``xla.range`` holds the inclusive range of the id.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import gpu
from xdsl.dialects.builtin import (
    ArrayAttr,
    FlatSymbolRefAttrConstr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TensorType,
)
from xdsl.dialects.utils import AbstractYieldOperation, parse_assignment, print_assignment
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect, SymbolTable
from xdsl.utils.exceptions import VerifyException

from xlapy.errors import XlapyError
from xlapy.indexing.indexing_map import IndexingMap

RANGE_ATTR = "xla.range"
"""Discardable attribute of ``gpu.thread_id``/``gpu.block_id``: ``[lower, upper]`` (inclusive)."""

# Parsing a map is slow compared to reading an attribute, and passes ask for
# the map of the same attribute many times: keep one IndexingMap per text.
_MAPS: dict[str, IndexingMap] = {}


def _map_of_text(text: str) -> IndexingMap:
    indexing_map = _MAPS.get(text)
    if indexing_map is None:
        indexing_map = _MAPS[text] = IndexingMap.parse(text)
    return indexing_map


# --- attributes ---


@irdl_attr_definition
class IndexingMapAttr(ParametrizedAttribute):
    """``#xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 9], s0 in [0, 3]">``."""

    name = "xla.indexing_map"

    text: StringAttr

    def __init__(self, indexing_map: IndexingMap | str):
        if isinstance(indexing_map, str):
            text = indexing_map
        else:
            # Spelled out even when known empty: the text is the attribute's identity, and empty maps of
            # different arities must stay different attributes.
            text = indexing_map.to_string(multiline=False, spell_out_empty=True)
            _MAPS.setdefault(text, indexing_map)
        super().__init__(StringAttr(text))

    @property
    def indexing_map(self) -> IndexingMap:
        return _map_of_text(self.text.data)

    def verify(self) -> None:
        try:
            indexing_map = self.indexing_map
        except (XlapyError, ValueError) as error:  # the map parser says why
            raise VerifyException(f"#xla.indexing_map: {error}") from error
        if indexing_map.is_undefined():
            raise VerifyException("#xla.indexing_map: an undefined map cannot be used in IR")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.text.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            # XLA splits long maps into adjacent literals ("...," "domain: ..."); join them.
            parts = [parser.parse_str_literal("in #xla.indexing_map")]
            while (part := parser.parse_optional_str_literal()) is not None:
                parts.append(part)
        # Store the canonical text, so that equal maps spelled differently are equal attributes.
        try:
            indexing_map = _map_of_text("".join(parts))
        except (XlapyError, ValueError) as error:
            parser.raise_error(f"bad #xla.indexing_map: {error}")
        return [StringAttr(indexing_map.to_string(multiline=False, spell_out_empty=True))]


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """``#xla.layout<[0, 1]>``: the minor-to-major order of a tensor's dimensions."""

    name = "xla.layout"

    dims: ArrayAttr[IntAttr]

    def __init__(self, minor_to_major: Sequence[int]):
        super().__init__(ArrayAttr([IntAttr(d) for d in minor_to_major]))

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.dims.data)

    def verify(self) -> None:
        if sorted(self.minor_to_major) != list(range(len(self.dims.data))):
            raise VerifyException(f"#xla.layout: {list(self.minor_to_major)} is not a permutation")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"[{', '.join(str(d) for d in self.minor_to_major)}]")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        return [ArrayAttr([IntAttr(d) for d in dims])]


def range_attr(lower: int, upper: int) -> ArrayAttr:
    """The value of ``xla.range``: ``[lower : index, upper : index]``."""
    return ArrayAttr([IntegerAttr(lower, IndexType()), IntegerAttr(upper, IndexType())])


def get_range(op: Operation) -> tuple[int, int] | None:
    """The inclusive ``xla.range`` of an op, if it has one."""
    attr = op.attributes.get(RANGE_ATTR)
    if not isinstance(attr, ArrayAttr) or len(attr.data) != 2:
        return None
    lower, upper = attr.data
    if not isinstance(lower, IntegerAttr) or not isinstance(upper, IntegerAttr):
        return None
    return lower.value.data, upper.value.data


# --- helpers for the custom syntaxes ---


def _print_value_list(printer: Printer, values: Sequence[SSAValue], open_: str, close: str) -> None:
    printer.print_string(open_)
    printer.print_list(values, printer.print_ssa_value)
    printer.print_string(close)


def _parse_index_operands(parser: Parser, delimiter: Parser.Delimiter) -> list[SSAValue]:
    unresolved: list[UnresolvedOperand] = parser.parse_comma_separated_list(delimiter, parser.parse_unresolved_operand)
    return [parser.resolve_operand(u, IndexType()) for u in unresolved]


def _parse_map_attr(parser: Parser) -> IndexingMapAttr:
    pos = parser.pos
    attr = parser.parse_attribute()
    if not isinstance(attr, IndexingMapAttr):
        parser.raise_error(f"expected an #xla.indexing_map, got {attr}", pos, parser.pos)
    return attr


def _map_of(attr: IndexingMapAttr, op_name: str) -> IndexingMap:
    try:
        return attr.indexing_map
    except (XlapyError, ValueError) as error:
        raise VerifyException(f"{op_name}: bad indexing map: {error}") from error


# --- ops ---


@irdl_op_definition
class LoopOp(IRDLOperation):
    """``xla.loop``: runs its body for every value of the map's range
    variables (first symbol outermost) for which (dims, symbols) is in the
    map's domain, with the map's results as indices; iter values thread
    through and are left unchanged by out-of-domain iterations.

    The body block's arguments: one ``index`` per range variable, one
    ``index`` per map result, one per init (of the init's type)."""

    name = "xla.loop"

    dims = var_operand_def(IndexType)
    inits = var_operand_def()
    outs = var_result_def()
    indexing_map_attr = prop_def(IndexingMapAttr, prop_name="indexing_map")
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        dims: Sequence[SSAValue],
        indexing_map: IndexingMap | IndexingMapAttr,
        inits: Sequence[SSAValue],
        body: Region | None = None,
    ):
        attr = indexing_map if isinstance(indexing_map, IndexingMapAttr) else IndexingMapAttr(indexing_map)
        if body is None:
            body = Region(Block(arg_types=self._block_arg_types(attr.indexing_map, inits)))
            self._name_block_args(attr.indexing_map, body.block)
        super().__init__(
            operands=[dims, inits],
            result_types=[[SSAValue.get(v).type for v in inits]],
            properties={"indexing_map": attr},
            regions=[body],
        )

    @staticmethod
    def _block_arg_types(indexing_map: IndexingMap, inits: Sequence[SSAValue]) -> list[Attribute]:
        index_count = len(indexing_map.range_vars) + len(indexing_map.results)
        return [IndexType()] * index_count + [SSAValue.get(v).type for v in inits]

    @staticmethod
    def _name_block_args(indexing_map: IndexingMap, block: Block) -> None:
        """Names as in XLA's emitter dumps: the range variables' names, ``dim<i>``, ``iter``."""
        ranges = len(indexing_map.range_vars)
        for arg, var in zip(block.args, indexing_map.range_vars):
            if var.name and SSAValue.is_valid_name(var.name):
                arg.name_hint = var.name
        for i in range(len(indexing_map.results)):
            block.args[ranges + i].name_hint = f"dim{i}"
        for arg in block.args[ranges + len(indexing_map.results) :]:
            arg.name_hint = "iter"

    @property
    def indexing_map(self) -> IndexingMap:
        return self.indexing_map_attr.indexing_map

    @property
    def symbol_args(self) -> tuple[SSAValue, ...]:
        """The body's arguments for the map's range variables."""
        return tuple(self.body.block.args[: len(self.indexing_map.range_vars)])

    @property
    def index_args(self) -> tuple[SSAValue, ...]:
        """The body's arguments for the map's results."""
        start = len(self.indexing_map.range_vars)
        return tuple(self.body.block.args[start : start + len(self.indexing_map.results)])

    @property
    def iter_args(self) -> tuple[SSAValue, ...]:
        """The body's arguments for the loop-carried values."""
        return tuple(self.body.block.args[len(self.body.block.args) - len(self.inits) :])

    def verify_(self) -> None:
        indexing_map = _map_of(self.indexing_map_attr, self.name)
        if indexing_map.rt_vars:
            raise VerifyException(f"{self.name}: runtime variables are not supported in the loop's map")
        if len(self.dims) != indexing_map.num_dims:
            raise VerifyException(
                f"{self.name}: {len(self.dims)} dimension operands, the map has {indexing_map.num_dims} dimensions"
            )
        expected = self._block_arg_types(indexing_map, self.inits)
        actual = list(self.body.block.args)
        if len(actual) != len(expected):
            raise VerifyException(
                f"{self.name}: the body has {len(actual)} arguments, expected {len(expected)} "
                f"({len(indexing_map.range_vars)} range variables, {len(indexing_map.results)} map results, "
                f"{len(self.inits)} iter_args)"
            )
        for i, (arg, type_) in enumerate(zip(actual, expected)):
            if arg.type != type_:
                raise VerifyException(f"{self.name}: body argument #{i} has type {arg.type}, expected {type_}")
        init_types = [v.type for v in self.inits]
        if list(self.result_types) != init_types:
            raise VerifyException(f"{self.name}: result types {list(self.result_types)} differ from {init_types}")
        terminator = self.body.block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"{self.name}: the body must end with xla.yield")
        yield_types = [v.type for v in terminator.arguments]
        if yield_types != init_types:
            raise VerifyException(f"{self.name}: xla.yield types {yield_types} differ from iter_args {init_types}")

    def print(self, printer: Printer) -> None:
        ranges = len(self.indexing_map.range_vars)
        block_args = self.body.block.args
        printer.print_string(" ")
        _print_value_list(printer, self.dims, "(", ")")
        if ranges:
            _print_value_list(printer, block_args[:ranges], "[", "]")
        printer.print_string(" -> ")
        _print_value_list(printer, self.index_args, "(", ")")
        printer.print_string(" in ")
        printer.print_attribute(self.indexing_map_attr)
        if self.inits:
            printer.print_string(" iter_args(")
            printer.print_list(zip(self.iter_args, self.inits), lambda pair: print_assignment(printer, *pair))
            printer.print_string(") -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_block_terminators=True)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> LoopOp:
        dims = _parse_index_operands(parser, parser.Delimiter.PAREN)
        symbols: list[Parser.UnresolvedArgument] = []
        if parser.parse_optional_punctuation("[") is not None:
            symbols = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, lambda: parser.parse_argument(expect_type=False)
            )
            parser.parse_punctuation("]")
        parser.parse_punctuation("->")
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_keyword("in")
        attr = _parse_map_attr(parser)
        iter_args: list[Parser.UnresolvedArgument] = []
        inits: list[SSAValue] = []
        types: list[Attribute] = []
        if parser.parse_optional_keyword("iter_args"):
            pairs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: parse_assignment(parser))
            parser.parse_punctuation("->")
            pos = parser.pos
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
            if len(types) != len(pairs):
                parser.raise_error(f"{len(pairs)} iter_args but {len(types)} types", pos, parser.pos)
            iter_args = [arg for arg, _ in pairs]
            inits = [parser.resolve_operand(value, t) for (_, value), t in zip(pairs, types)]
        arguments = [a.resolve(IndexType()) for a in [*symbols, *indices]]
        arguments += [a.resolve(t) for a, t in zip(iter_args, types)]
        body = parser.parse_region(arguments)
        op = cls(dims, attr, inits, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class ApplyIndexingOp(IRDLOperation):
    """``%a, %b = xla.apply_indexing #map(%d0, %d1)[%s0]``: the map's results
    at the given dimensions and symbols (no bounds check)."""

    name = "xla.apply_indexing"

    dims = var_operand_def(IndexType)
    symbols = var_operand_def(IndexType)
    indices = var_result_def(IndexType)
    indexing_map_attr = prop_def(IndexingMapAttr, prop_name="indexing_map")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        dims: Sequence[SSAValue],
        symbols: Sequence[SSAValue],
        indexing_map: IndexingMap | IndexingMapAttr,
    ):
        attr = indexing_map if isinstance(indexing_map, IndexingMapAttr) else IndexingMapAttr(indexing_map)
        super().__init__(
            operands=[dims, symbols],
            result_types=[[IndexType()] * len(attr.indexing_map.results)],
            properties={"indexing_map": attr},
        )

    @property
    def indexing_map(self) -> IndexingMap:
        return self.indexing_map_attr.indexing_map

    def verify_(self) -> None:
        indexing_map = _map_of(self.indexing_map_attr, self.name)
        if len(self.dims) != indexing_map.num_dims:
            raise VerifyException(
                f"{self.name}: {len(self.dims)} dimension operands, the map has {indexing_map.num_dims} dimensions"
            )
        if len(self.symbols) != indexing_map.num_symbols:
            raise VerifyException(
                f"{self.name}: {len(self.symbols)} symbol operands, the map has {indexing_map.num_symbols} symbols"
            )
        if len(self.indices) != len(indexing_map.results):
            raise VerifyException(
                f"{self.name}: {len(self.indices)} results, the map has {len(indexing_map.results)} results"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.indexing_map_attr)
        _print_value_list(printer, self.dims, "(", ")")
        if self.symbols:
            _print_value_list(printer, self.symbols, "[", "]")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ApplyIndexingOp:
        attr = _parse_map_attr(parser)
        dims = _parse_index_operands(parser, parser.Delimiter.PAREN)
        symbols: list[SSAValue] = []
        if parser.parse_optional_punctuation("[") is not None:
            symbols = _parse_index_operands(parser, parser.Delimiter.NONE)
            parser.parse_punctuation("]")
        op = cls(dims, symbols, attr)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class PureCallOp(IRDLOperation):
    """``xla.pure_call @f(%a, %i) : (tensor<..>, index) -> bf16``: a call of a
    function without side effects (so it may be CSE'd, hoisted or dropped)."""

    name = "xla.pure_call"

    callee = prop_def(FlatSymbolRefAttrConstr)
    arguments = var_operand_def()
    res = var_result_def()

    traits = traits_def(Pure())

    assembly_format = "$callee `(` $arguments `)` attr-dict `:` functional-type($arguments, $res)"

    def __init__(self, callee: str | SymbolRefAttr, operands: Sequence[SSAValue], result_types: Sequence[Attribute]):
        if isinstance(callee, str):
            callee = SymbolRefAttr(callee)
        super().__init__(operands=[operands], result_types=[result_types], properties={"callee": callee})

    def verify_(self) -> None:
        # A call built before its module exists cannot be checked yet.
        anchor = self.parent_op()
        while anchor is not None and not anchor.has_trait(SymbolTable):
            anchor = anchor.parent_op()
        if anchor is None:
            return
        name = self.callee.string_value()
        callee = SymbolTable.lookup_symbol(self, self.callee)
        function_type = getattr(callee, "function_type", None)
        if not isinstance(function_type, FunctionType):
            raise VerifyException(f"{self.name}: no function @{name} in the module")
        inputs, outputs = list(function_type.inputs.data), list(function_type.outputs.data)
        operand_types, result_types = [v.type for v in self.arguments], list(self.result_types)
        if inputs != operand_types:
            raise VerifyException(f"{self.name} @{name}: operand types {operand_types} differ from {inputs}")
        if outputs != result_types:
            raise VerifyException(f"{self.name} @{name}: result types {result_types} differ from {outputs}")


@irdl_op_definition
class AllocateSharedOp(IRDLOperation):
    """``%shmem = xla.allocate_shared : tensor<32x1x33xf32>``: a tensor in
    memory shared by the threads of a block (uninitialized)."""

    name = "xla.allocate_shared"

    result = result_def(base(TensorType))

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, tensor_type: TensorType):
        super().__init__(result_types=[tensor_type])

    def verify_(self) -> None:
        type_ = self.result.type
        assert isinstance(type_, TensorType)
        if any(d < 0 for d in type_.get_shape()):
            raise VerifyException(f"{self.name}: the shared tensor must have a static shape, got {type_}")


@irdl_op_definition
class SyncThreadsOp(IRDLOperation):
    """``%s = xla.sync_threads %a : tensor<...>``: a barrier for the threads
    of a block; the results are the operands after every thread's writes. After ``lower-tensors`` the bare
    ``xla.sync_threads`` (no operands, no results) marks where the CPU backend splits the block's threads into
    phases."""

    name = "xla.sync_threads"

    tensors = var_operand_def()
    synced = var_result_def()

    def __init__(self, tensors: Sequence[SSAValue]):
        super().__init__(operands=[tensors], result_types=[[SSAValue.get(v).type for v in tensors]])

    def verify_(self) -> None:
        operand_types, result_types = [v.type for v in self.tensors], list(self.result_types)
        if operand_types != result_types:
            raise VerifyException(f"{self.name}: result types {result_types} differ from operand types {operand_types}")

    def print(self, printer: Printer) -> None:
        if not self.tensors:  # the bare barrier left by lower-tensors
            printer.print_op_attributes(self.attributes)
            return
        printer.print_string(" ")
        printer.print_list(self.tensors, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.result_types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> SyncThreadsOp:
        unresolved = []
        if (first := parser.parse_optional_unresolved_operand()) is not None:
            unresolved = [first]
            while parser.parse_optional_punctuation(",") is not None:
                unresolved.append(parser.parse_unresolved_operand())
        attributes = parser.parse_optional_attr_dict()
        types: list[Attribute] = []
        if unresolved:
            parser.parse_punctuation(":")
            pos = parser.pos
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            if len(types) != len(unresolved):
                parser.raise_error(f"{len(unresolved)} operands but {len(types)} types", pos, parser.pos)
        op = cls([parser.resolve_operand(u, t) for u, t in zip(unresolved, types)])
        op.attributes |= attributes
        return op


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """``xla.yield %x : tensor<...>``: the terminator of ``xla.loop``."""

    name = "xla.yield"

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(LoopOp), Pure()))

    def __init__(self, values: Sequence[SSAValue] = ()):
        super().__init__(*values)


# --- gpu.thread_id / gpu.block_id with MLIR's short syntax ---


class _IdSyntax:
    """``gpu.thread_id x {xla.range = [0 : index, 127 : index]}``."""

    def print(self, printer: Printer) -> None:
        print_id_op(self, printer)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, parser: Parser) -> Operation:
        pos = parser.pos
        name = parser.parse_identifier("for the dimension (x, y or z)")
        if name not in ("x", "y", "z"):
            parser.raise_error(f"expected x, y or z, got {name}", pos, parser.pos)
        op = cls.build(  # type: ignore[attr-defined]
            result_types=[IndexType()], properties={"dimension": gpu.DimensionAttr(gpu.DimensionEnum(name))}
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op


def print_id_op(op: Operation, printer: Printer) -> None:
    """The short syntax of a ``gpu.thread_id``/``gpu.block_id`` (also for xDSL's own classes)."""
    dimension = op.properties["dimension"]
    assert isinstance(dimension, gpu.DimensionAttr)
    printer.print_string(f" {dimension.data.value}")
    printer.print_op_attributes(op.attributes)


def _id_init(op: IRDLOperation, dim: str, upper: int | None) -> None:
    IRDLOperation.__init__(
        op, result_types=[IndexType()], properties={"dimension": gpu.DimensionAttr(gpu.DimensionEnum(dim))}
    )
    if upper is not None:
        op.attributes[RANGE_ATTR] = range_attr(0, upper)


# Subclasses of xDSL's (already defined) ops: same definition, custom syntax, and
# `isinstance(op, gpu.ThreadIdOp)` still holds for parsed ops.
class ThreadIdOp(_IdSyntax, gpu.ThreadIdOp):
    """``gpu.thread_id x``; ``upper`` (inclusive) becomes the ``xla.range`` attribute."""

    def __init__(self, dim: str = "x", upper: int | None = None):
        _id_init(self, dim, upper)


class BlockIdOp(_IdSyntax, gpu.BlockIdOp):
    """``gpu.block_id x``; ``upper`` (inclusive) becomes the ``xla.range`` attribute."""

    def __init__(self, dim: str = "x", upper: int | None = None):
        _id_init(self, dim, upper)


XLA = Dialect(
    "xla",
    [LoopOp, ApplyIndexingOp, PureCallOp, AllocateSharedOp, SyncThreadsOp, YieldOp],
    [IndexingMapAttr, LayoutAttr],
)
