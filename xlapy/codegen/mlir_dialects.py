"""The upstream MLIR dialects of codegen's IR (``arith``, ``math``, ``gpu``, ``llvm``) as xlapy defines them: xDSL's,
except where xDSL 0.74 lacks an op or declares it narrower than MLIR. Those ops are xlapy's own classes with MLIR's
names, collected in xlapy's ``Dialect`` objects (``ARITH``, ``MATH``, ``GPU``, ``LLVM``) that
``mlir_text.make_context`` loads; xDSL's classes are never modified.

- ``arith.cmpf``, ``arith.cmpi``, ``arith.select`` and the integer casts (``extsi``, ``extui``, ``trunci``,
  ``fptosi``, ``fptoui``, ``sitofp``, ``uitofp``, ``index_cast``): xDSL declares them on scalars only; MLIR's
  ``ArithOps.td`` defines them elementwise on vectors too, and the CPU's ``vectorize-lanes`` makes such vector ops
  (``vector_form`` gives the class to build). Each is a subclass of xDSL's op, so code matching xDSL's class
  (``isinstance(op, arith.CmpfOp)``, xDSL's canonicalization patterns) matches it too, and xDSL's
  ``parse``/``print``/traits are reused; xDSL's definitions are complete per class, so every field is declared
  again, each accepting a scalar or a vector of it.
- ``arith.remf`` (C's ``fmod``), which xDSL lacks, and ``math.logistic`` (1 / (1 + e^-x) as one op), an xlapy
  extension that the CPU backend lowers to its math library.
- ``llvm.intr.prefetch`` (LLVM's ``llvm.prefetch``, as MLIR's LLVM dialect defines it), which xDSL lacks: the
  CPU's ``prefetch-loads`` makes it.
- ``gpu.thread_id``/``gpu.block_id`` with MLIR's short syntax (``xlapy.codegen.dialect``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects import arith, gpu, llvm, math
from xdsl.dialects.arith import FastMathFlagsAttr
from xdsl.dialects.builtin import AnyFloatConstr, IndexType, IntegerAttr, IntegerType, VectorType
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AnyOf,
    AttrConstraint,
    BaseAttr,
    EqAttrConstraint,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from xlapy.codegen.dialect import BlockIdOp, ThreadIdOp


def _scalar_or_vector(scalar: AttrConstraint) -> AttrConstraint:
    return AnyOf((scalar, VectorType.constr(scalar)))


_I1 = _scalar_or_vector(EqAttrConstraint(IntegerType(1)))
_INTEGER = _scalar_or_vector(BaseAttr(IntegerType))
_INTEGER_OR_INDEX = _scalar_or_vector(AnyOf((BaseAttr(IntegerType), BaseAttr(IndexType))))
_FLOAT = _scalar_or_vector(AnyFloatConstr)


def _shape(type_: Attribute) -> tuple[int, ...] | None:
    """A vector's shape; None for a scalar."""
    return type_.get_shape() if isinstance(type_, VectorType) else None


def _element(type_: Attribute) -> Attribute:
    return type_.element_type if isinstance(type_, VectorType) else type_


def _width(type_: Attribute) -> int:
    return _element(type_).width.data  # type: ignore[attr-defined]


def _i1_like(type_: Attribute) -> Attribute:
    """``i1``, or a vector of ``i1`` of the shape of vector ``type_``."""
    return VectorType(IntegerType(1), type_.get_shape()) if isinstance(type_, VectorType) else IntegerType(1)


def _predicate(predicate: int | str, names: Sequence[str], op_name: str) -> IntegerAttr:
    if isinstance(predicate, str):
        if predicate not in names:
            raise VerifyException(f"{op_name}: unknown predicate {predicate}")
        predicate = list(names).index(predicate)
    return IntegerAttr(predicate, 64)


def _check_same_shape(op: Operation, first: Attribute, second: Attribute) -> None:
    if _shape(first) != _shape(second):
        raise VerifyException(f"{op.name}: {first} and {second} are not both scalars or vectors of the same shape")


# --- comparisons and select ---


@irdl_op_definition
class CmpiOp(arith.CmpiOp):
    """``arith.cmpi`` on signless integers or indices, or vectors of them: ``i1`` or a vector of ``i1``."""

    predicate = prop_def(IntegerAttr)
    lhs = operand_def(_INTEGER_OR_INDEX)
    rhs = operand_def(_INTEGER_OR_INDEX)
    result = result_def(_I1)

    def __init__(self, operand1: Operation | SSAValue, operand2: Operation | SSAValue, arg: int | str):
        lhs = SSAValue.get(operand1)
        IRDLOperation.__init__(self, operands=[lhs, operand2], result_types=[_i1_like(lhs.type)],
                               properties={"predicate": _predicate(arg, arith.CMPI_COMPARISON_OPERATIONS, self.name)})

    def verify_(self) -> None:
        _verify_compare(self)


_NO_FAST_MATH = FastMathFlagsAttr("none")


@irdl_op_definition
class CmpfOp(arith.CmpfOp):
    """``arith.cmpf`` on floats or vectors of them: ``i1`` or a vector of ``i1``."""

    predicate = prop_def(IntegerAttr)
    lhs = operand_def(_FLOAT)
    rhs = operand_def(_FLOAT)
    fastmath = prop_def(FastMathFlagsAttr, default_value=_NO_FAST_MATH)
    result = result_def(_I1)

    def __init__(self, operand1: Operation | SSAValue, operand2: Operation | SSAValue, arg: int | str,
                 fastmath: FastMathFlagsAttr | None = None):
        lhs = SSAValue.get(operand1)
        predicate = _predicate(arg, arith.CMPF_COMPARISON_OPERATIONS, self.name)
        IRDLOperation.__init__(self, operands=[lhs, operand2], result_types=[_i1_like(lhs.type)],
                               properties={"predicate": predicate, "fastmath": fastmath or _NO_FAST_MATH})

    def verify_(self) -> None:
        _verify_compare(self)


def _verify_compare(op: CmpiOp | CmpfOp) -> None:
    if op.lhs.type != op.rhs.type:
        raise VerifyException(f"{op.name}: operands of types {op.lhs.type} and {op.rhs.type}")
    if op.result.type != _i1_like(op.lhs.type):
        raise VerifyException(f"{op.name}: the result of a comparison of {op.lhs.type} must be "
                              f"{_i1_like(op.lhs.type)}, got {op.result.type}")


@irdl_op_definition
class SelectOp(arith.SelectOp):
    """``arith.select %c, %a, %b : T``; with a vector condition (one per lane of the vectors ``%a`` and ``%b``)
    ``arith.select %c, %a, %b : vector<Nxi1>, T``, MLIR's syntax for it."""

    _T: ClassVar = VarConstraint("_T", AnyAttr())
    cond = operand_def(_I1)
    lhs = operand_def(_T)
    rhs = operand_def(_T)
    result = result_def(_T)

    assembly_format = None  # the syntax above, which xDSL's declarative format cannot express

    def verify_(self) -> None:
        if isinstance(self.cond.type, VectorType):
            _check_same_shape(self, self.cond.type, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SelectOp:
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

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if isinstance(self.cond.type, VectorType):
            printer.print_attribute(self.cond.type)
            printer.print_string(", ")
        printer.print_attribute(self.result.type)


# --- casts ---


class _CastSyntax:
    """Lets a subclass of a cast keep the declarative assembly format it inherits
    (``$input attr-dict : type($input) to type($result)``): ``irdl_op_definition`` refuses a class with a format
    and ``parse``/``print`` methods other than ``Operation``'s, and xDSL's class has the ones of its own format."""

    print = Operation.print
    parse = classmethod(Operation.parse.__func__)  # type: ignore[attr-defined]


def _cast_verifier(check: Callable[[Attribute, Attribute], bool] | None, message: str) -> Callable[[Operation], None]:
    """A cast's ``verify_``: both sides scalars or vectors of one shape, and ``check`` of the two element types."""

    def verify_(op: Operation) -> None:
        source, result = op.operands[0].type, op.results[0].type
        _check_same_shape(op, source, result)
        if check is not None and not check(_element(source), _element(result)):
            raise VerifyException(f"{op.name}: {source} to {result}: {message}")

    return verify_


@irdl_op_definition
class ExtSIOp(_CastSyntax, arith.ExtSIOp):
    """``arith.extsi`` on integers or vectors of them."""

    input = operand_def(_INTEGER)
    result = result_def(_INTEGER)
    verify_ = _cast_verifier(lambda a, b: _width(b) > _width(a), "the result must be wider")


@irdl_op_definition
class ExtUIOp(_CastSyntax, arith.ExtUIOp):
    """``arith.extui`` on integers or vectors of them."""

    input = operand_def(_INTEGER)
    result = result_def(_INTEGER)
    verify_ = _cast_verifier(lambda a, b: _width(b) > _width(a), "the result must be wider")


@irdl_op_definition
class TruncIOp(_CastSyntax, arith.TruncIOp):
    """``arith.trunci`` on integers or vectors of them."""

    input = operand_def(_INTEGER)
    result = result_def(_INTEGER)
    verify_ = _cast_verifier(lambda a, b: _width(b) < _width(a), "the result must be narrower")


@irdl_op_definition
class IndexCastOp(_CastSyntax, arith.IndexCastOp):
    """``arith.index_cast`` between integers and indices, or vectors of them."""

    input = operand_def(_INTEGER_OR_INDEX)
    result = result_def(_INTEGER_OR_INDEX)
    verify_ = _cast_verifier(lambda a, b: isinstance(a, IndexType) != isinstance(b, IndexType),
                             "exactly one side must be index")


@irdl_op_definition
class FPToSIOp(_CastSyntax, arith.FPToSIOp):
    """``arith.fptosi`` on floats or vectors of them."""

    input = operand_def(_FLOAT)
    result = result_def(_INTEGER)
    verify_ = _cast_verifier(None, "")


@irdl_op_definition
class FPToUIOp(_CastSyntax, arith.FPToUIOp):
    """``arith.fptoui`` on floats or vectors of them."""

    input = operand_def(_FLOAT)
    result = result_def(_INTEGER)
    verify_ = _cast_verifier(None, "")


@irdl_op_definition
class SIToFPOp(_CastSyntax, arith.SIToFPOp):
    """``arith.sitofp`` on integers or vectors of them."""

    input = operand_def(_INTEGER)
    result = result_def(_FLOAT)
    verify_ = _cast_verifier(None, "")


@irdl_op_definition
class UIToFPOp(_CastSyntax, arith.UIToFPOp):
    """``arith.uitofp`` on integers or vectors of them."""

    input = operand_def(_INTEGER)
    result = result_def(_FLOAT)
    verify_ = _cast_verifier(None, "")


# --- ops xDSL lacks ---


@irdl_op_definition
class RemFOp(arith.FloatingPointLikeBinaryOperation):
    """``arith.remf`` (C's fmod), which xDSL's arith dialect lacks."""

    name = "arith.remf"
    traits = traits_def(Pure())


@irdl_op_definition
class LogisticOp(math.FloatingPointLikeUnaryMathOperation):
    """``math.logistic``: 1 / (1 + e^-x) as one op (an xlapy extension of the math dialect), which the CPU
    backend lowers to the math library's ``logistic``."""

    name = "math.logistic"
    traits = traits_def(Pure())


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """``llvm.intr.prefetch``: a hint that the cache line at ``addr`` will be read (``rw`` 0) or written (1) soon,
    with temporal locality ``hint`` from 0 (none) to 3 (keep it in every cache level), of the data (``cache`` 1)
    or the instruction cache (0). It never faults and changes nothing the program computes."""

    name = "llvm.intr.prefetch"
    addr = operand_def(llvm.LLVMPointerType)
    cache = prop_def(IntegerAttr[IntegerType])
    hint = prop_def(IntegerAttr[IntegerType])
    rw = prop_def(IntegerAttr[IntegerType])

    def __init__(self, addr: SSAValue, rw: int = 0, hint: int = 3, cache: int = 1):
        # In MLIR's order of the properties (by name), as its printer writes them.
        super().__init__(operands=[addr], properties={
            "cache": IntegerAttr(cache, 32), "hint": IntegerAttr(hint, 32), "rw": IntegerAttr(rw, 32)})


# --- the dialects ---

_VECTOR_FORMS: dict[type[Operation], type[Operation]] = {
    arith.CmpiOp: CmpiOp, arith.CmpfOp: CmpfOp, arith.SelectOp: SelectOp, arith.ExtSIOp: ExtSIOp,
    arith.ExtUIOp: ExtUIOp, arith.TruncIOp: TruncIOp, arith.IndexCastOp: IndexCastOp, arith.FPToSIOp: FPToSIOp,
    arith.FPToUIOp: FPToUIOp, arith.SIToFPOp: SIToFPOp, arith.UIToFPOp: UIToFPOp,
}
_REPLACED_GPU_OPS: dict[type[Operation], type[Operation]] = {gpu.ThreadIdOp: ThreadIdOp, gpu.BlockIdOp: BlockIdOp}


def vector_form(op_type: type[Operation]) -> type[Operation]:
    """The class to build an op of class ``op_type`` with vector operands: xlapy's where xDSL's takes scalars only."""
    return _VECTOR_FORMS.get(op_type, op_type)


ARITH = Dialect(
    "arith",
    [*(vector_form(op) for op in arith.Arith.operations), RemFOp],
    list(arith.Arith.attributes),
    [arith.ArithConstantMaterializationInterface()],
)
MATH = Dialect("math", [*math.Math.operations, LogisticOp], list(math.Math.attributes))
LLVM = Dialect("llvm", [*llvm.LLVM.operations, PrefetchOp], list(llvm.LLVM.attributes))
GPU = Dialect("gpu", [_REPLACED_GPU_OPS.get(op, op) for op in gpu.GPU.operations], list(gpu.GPU.attributes))


def has_replaced_gpu_syntax(op: Operation) -> bool:
    """Whether ``op`` is one of xDSL's own ``gpu.thread_id``/``gpu.block_id`` (built by code that does not use
    xlapy's classes), which the printer still gives MLIR's short syntax."""
    return type(op) in _REPLACED_GPU_OPS
