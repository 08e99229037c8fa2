"""MLIR text in and out: ``parse_mlir`` reads a module written with the
dialects codegen uses (builtin, func, arith, math, complex, scf, tensor,
vector, gpu, llvm, xla); ``print_mlir`` prints one, optionally with ``#map`` aliases for
the indexing maps as XLA's dumps (the examples of XLA's docs/emitters.md) show them."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, gpu
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, IndexType, IntegerType, ModuleOp, VectorType
from xdsl.dialects.complex import Complex
from xdsl.dialects.func import Func
from xdsl.dialects.llvm import LLVM
from xdsl.dialects.math import Math
from xdsl.dialects.scf import Scf
from xdsl.dialects.tensor import Tensor
from xdsl.dialects.vector import Vector
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.irdl import AnyOf, BaseAttr, EqAttrConstraint, RangeLengthConstraint, RangeOf
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException

from xlapy.codegen.dialect import XLA, BlockIdOp, IndexingMapAttr, ThreadIdOp, print_id_op
from xlapy.errors import ParseError, VerifyError

# xDSL's gpu.thread_id/gpu.block_id only have the generic syntax; ours read `gpu.thread_id x`.
_REPLACED_GPU_OPS = {gpu.ThreadIdOp: ThreadIdOp, gpu.BlockIdOp: BlockIdOp}
GPU = Dialect(
    "gpu",
    [_REPLACED_GPU_OPS.get(op, op) for op in gpu.GPU.operations],
    list(gpu.GPU.attributes),
)


# xDSL 0.74 declares these arith ops on scalars only; MLIR defines them elementwise on vectors too (the CPU's
# `vectorize-lanes` makes them). Each scalar-only operand and result constraint also accepts vectors of it.
_VECTOR_ELEMENTWISE = (arith.CmpfOp, arith.CmpiOp, arith.SelectOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp,
                       arith.FPToSIOp, arith.FPToUIOp, arith.SIToFPOp, arith.UIToFPOp, arith.IndexCastOp)


class _ScalarOrVector(AnyOf):
    """The scalar constraint or vectors of it; inferred (e.g. by the assembly format's parser) as the scalar."""

    def can_infer(self, var_constraint_names) -> bool:  # type: ignore[override]
        return self.attr_constrs[0].can_infer(var_constraint_names)

    def infer(self, context):  # type: ignore[override]
        return self.attr_constrs[0].infer(context)


def _allow_vectors(definitions: list) -> None:
    for i, (name, definition) in enumerate(definitions):
        constraint = definition.constr
        if not (isinstance(constraint, RangeLengthConstraint) and isinstance(constraint.constraint, RangeOf)):
            continue
        element = constraint.constraint.constr
        if isinstance(element, (EqAttrConstraint, BaseAttr, AnyOf)) and "VectorType" not in repr(element):
            either = _ScalarOrVector((element, VectorType.constr(element)))
            definitions[i] = (name, type(definition)(either))


def _element(type_: Attribute) -> Attribute:
    return type_.element_type if isinstance(type_, VectorType) else type_


def _width(type_: Attribute) -> int:
    return _element(type_).width.data  # type: ignore[attr-defined]


# The invariants xDSL's verifiers of these ops check on scalars, checked on element types.
_ELEMENT_CHECKS: dict[type[Operation], tuple[Callable[[Attribute, Attribute], bool], str]] = {
    arith.IndexCastOp: (lambda a, b: isinstance(_element(a), IndexType) != isinstance(_element(b), IndexType),
                        "exactly one side must be index"),
    arith.TruncIOp: (lambda a, b: _width(b) < _width(a), "the result must be narrower"),
    arith.ExtSIOp: (lambda a, b: _width(b) > _width(a), "the result must be wider"),
    arith.ExtUIOp: (lambda a, b: _width(b) > _width(a), "the result must be wider"),
}


def _vector_aware(op_type: type[Operation]) -> Callable[[Operation], None]:
    """The scalar verifier, or for vectors the same invariant on element types and one shape throughout."""
    scalar_verify = op_type.verify_
    check, message = _ELEMENT_CHECKS[op_type]

    def verify_(op: Operation) -> None:
        source, result = op.operands[0].type, op.results[0].type
        if not isinstance(source, VectorType) and not isinstance(result, VectorType):
            scalar_verify(op)
            return
        if not isinstance(source, VectorType) or not isinstance(result, VectorType) or \
                source.get_shape() != result.get_shape():
            raise VerifyException(f"{op.name}: {source} and {result} are not vectors of the same shape")
        if not check(source, result):
            raise VerifyException(f"{op.name}: {source} to {result}: {message}")

    return verify_


for _op in _VECTOR_ELEMENTWISE:
    _definition = _op.get_irdl_definition()
    _allow_vectors(_definition.operands)
    _allow_vectors(_definition.results)
    if _op in _ELEMENT_CHECKS:
        _op.verify_ = _vector_aware(_op)  # type: ignore[method-assign]


def _i1_like(type_: Attribute) -> Attribute:
    """``i1``, or a vector of ``i1`` of the shape of vector ``type_``."""
    if isinstance(type_, VectorType):
        return VectorType(IntegerType(1), type_.get_shape())
    return IntegerType(1)


def _with_vector_result(scalar_parse: Callable) -> Callable:
    """A compare's parser whose result is a vector of i1 when its operands are vectors (xDSL's is always i1)."""
    def parse(cls: type[Operation], parser: Parser) -> Operation:
        op = scalar_parse.__func__(cls, parser)
        if not isinstance(op.lhs.type, VectorType):
            return op
        vector_op = cls.create(operands=list(op.operands), result_types=[_i1_like(op.lhs.type)],
                               properties=dict(op.properties), attributes=dict(op.attributes))
        op.drop_all_references()
        return vector_op
    return classmethod(parse)


for _compare in (arith.CmpfOp, arith.CmpiOp):
    _compare.parse = _with_vector_result(_compare.parse)  # type: ignore[method-assign]


def _parse_select(cls: type[Operation], parser: Parser) -> Operation:
    """MLIR's ``arith.select %c, %a, %b : T`` and, for a vector condition, ``: vector<Nxi1>, T``."""
    names = [parser.parse_unresolved_operand()]
    for _ in range(2):
        parser.parse_punctuation(",")
        names.append(parser.parse_unresolved_operand())
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    types = [parser.parse_type()]
    if parser.parse_optional_punctuation(","):
        types.append(parser.parse_type())
    condition_type, value_type = (types[0], types[1]) if len(types) == 2 else (IntegerType(1), types[0])
    operands = parser.resolve_operands(names, [condition_type, value_type, value_type], parser.pos)
    return cls.create(operands=operands, result_types=[value_type], attributes=attributes)


def _print_select(op: Operation, printer: Printer) -> None:
    printer.print_string(" ")
    printer.print_list(op.operands, printer.print_operand)
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    if isinstance(op.operands[0].type, VectorType):
        printer.print_attribute(op.operands[0].type)
        printer.print_string(", ")
    printer.print_attribute(op.results[0].type)


arith.SelectOp.parse = classmethod(_parse_select)  # type: ignore[method-assign,assignment]
arith.SelectOp.print = _print_select  # type: ignore[method-assign,assignment]


def make_context() -> Context:
    """A context with every dialect codegen's IR uses."""
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math, Complex, Scf, Tensor, Vector, GPU, LLVM, XLA):
        ctx.load_dialect(dialect)
    return ctx


def parse_mlir(text: str, verify: bool = True) -> ModuleOp:
    """The module in ``text`` (a ``builtin.module`` or top-level ops, with
    optional ``#alias = ...`` definitions), verified unless told not to."""
    _check_string_literals(text)
    try:
        module = Parser(make_context(), text).parse_module()
    except XdslParseError as error:
        raise ParseError(str(error)) from error
    except VerifyException as error:  # an attribute's verifier runs as soon as it is parsed
        raise VerifyError(str(error)) from error
    if verify:
        verify_op(module)
    return module


_ESCAPE = re.compile(r"\\.")


def _check_string_literals(text: str) -> None:
    """Rejects a string literal left open at the end of a line: xDSL's lexer
    backtracks exponentially on one instead of reporting it."""
    for number, line in enumerate(text.splitlines(), 1):
        code = _ESCAPE.sub("", line.split("//", 1)[0] if line.lstrip().startswith("//") else line)
        if code.count('"') % 2:
            raise ParseError("string literal not closed on its line (MLIR strings cannot span lines)", number)


def verify_op(op: Operation) -> None:
    """``op.verify()`` reporting a broken invariant as xlapy's ``VerifyError``."""
    try:
        op.verify()
    except VerifyException as error:
        raise VerifyError(str(error)) from error


def print_mlir(op: Operation, map_aliases: bool = False) -> str:
    """``op`` in MLIR's custom syntax. With ``map_aliases`` the indexing maps
    are defined once at the top (``#map = #xla.indexing_map<"...">``) and
    referred to as ``#map``, ``#map1``, ... in the order they first occur."""
    aliases: dict[Attribute, str] = {}
    if map_aliases:
        for nested in op.walk():
            for attr in [*nested.properties.values(), *nested.attributes.values()]:
                if isinstance(attr, IndexingMapAttr) and attr not in aliases:
                    aliases[attr] = "#map" + (str(len(aliases)) if aliases else "")
    stream = io.StringIO()
    printer = _Printer(stream=stream)
    for attr, alias in aliases.items():
        printer.print_string(f"{alias} = ")
        printer.print_attribute(attr)
        printer.print_string("\n")
    if aliases:
        printer.print_string("\n")
    printer.aliases = aliases
    printer.print_op(op)
    printer.print_string("\n")
    return stream.getvalue()


@dataclass(eq=False, repr=False)
class _Printer(Printer):
    aliases: dict[Attribute, str] = field(default_factory=dict)

    def print_attribute(self, attribute: Attribute) -> None:
        alias = self.aliases.get(attribute) if isinstance(attribute, IndexingMapAttr) else None
        if alias is not None:
            self.print_string(alias)
        else:
            super().print_attribute(attribute)

    def print_op(self, op: Operation) -> None:
        # xDSL's own id classes (built by code that does not use ours) get the short syntax too.
        if type(op) in _REPLACED_GPU_OPS and not self.print_generic_format:
            self._print_results(op)
            self.print_string(op.name)
            print_id_op(op, self)
            return
        super().print_op(op)
