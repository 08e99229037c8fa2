"""Elemental emission (XLA's elemental_hlo_to_mlir; docs/emitters.md): the value
of an HLO instruction at given output indices, as arith/math/tensor ops.

``FunctionEmitter`` emits a subgraph function, asking each instruction's rule
for its value. The rules live in two tables, one rule per opcode: ``ELEMENTAL``
and, for an instruction with a complex operand or result, ``COMPLEX_ELEMENTAL``
(unless the rule only moves elements: ``ANY_ELEMENT_TYPE``). The rules
themselves are in one module per family (``elemental_movement``,
``elemental_arith``, ``elemental_complex``), which register them here;
``elemental_rules`` imports every family, so code that emits imports from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import ArrayAttr, ComplexType, FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import ApplyIndexingOp, PureCallOp
from xlapy.codegen.partitioner import PartitionedComputation, Subgraph
from xlapy.codegen.types import element_type, is_complex, is_unsigned, tensor_type
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.registry import registrar

Indices = tuple[SSAValue, ...]
Rule = Callable[["FunctionEmitter", HloInstruction, Indices], SSAValue]

ELEMENTAL: dict[str, Rule] = {}
elemental_rule = registrar(ELEMENTAL, "elemental rule")
# The rules of instructions with a complex operand or result.
COMPLEX_ELEMENTAL: dict[str, Rule] = {}
complex_rule = registrar(COMPLEX_ELEMENTAL, "complex elemental rule")
# Opcodes whose ``ELEMENTAL`` rule only moves or chooses elements: it applies to complex elements too.
ANY_ELEMENT_TYPE = frozenset({
    "broadcast", "transpose", "reshape", "bitcast", "slice", "reverse", "copy", "constant", "pad", "concatenate",
    "dynamic-slice", "gather", "select",
})  # fmt: skip


class FunctionEmitter:
    """Emits the body of one subgraph function: ``params`` are the tensors of
    the computation's parameters, ``indices`` the subgraph's output indices."""

    def __init__(self, partitioned: PartitionedComputation, subgraph: Subgraph, block: Block,
                 params: Sequence[SSAValue], indices: Indices):
        self.partitioned = partitioned
        self.subgraph = subgraph
        self.params = list(params)
        self.builder = Builder(InsertPoint.at_end(block))
        self.root_indices = indices
        self._values: dict[tuple, SSAValue] = {}
        self._calls: dict[tuple, Sequence[SSAValue]] = {}
        self._constants: dict[tuple, SSAValue] = {}

    # --- building blocks ---

    def insert(self, op):
        return self.builder.insert(op)

    def index(self, value: int) -> SSAValue:
        return self._constant(IntegerAttr(value, IndexType()))

    def constant(self, value, type_name: str) -> SSAValue:
        """A scalar constant of HLO element type ``type_name`` (a ``complex.constant`` for c64 and c128)."""
        mlir_type = element_type(type_name)
        if isinstance(mlir_type, IntegerType):
            width = mlir_type.width.data
            as_int = int(value) & ((1 << width) - 1)
            if width > 1 and as_int >= 1 << (width - 1):
                as_int -= 1 << width
            return self._constant(IntegerAttr(as_int, mlir_type, truncate_bits=True))
        if isinstance(mlir_type, ComplexType):
            value = complex(value)
            parts = ArrayAttr([FloatAttr(value.real, mlir_type.element_type),
                               FloatAttr(value.imag, mlir_type.element_type)])
            return self._constant(parts, lambda: complex_dialect.ConstantOp(parts, mlir_type))
        return self._constant(FloatAttr(float(value), mlir_type))

    def _constant(self, attr: Attribute, make: Callable[[], Operation] | None = None) -> SSAValue:
        # Constants go to the function's entry block, once each, so that
        # values used inside scf.if regions dominate their uses.
        key = (type(attr), str(attr))
        found = self._constants.get(key)
        if found is None:
            entry = self.builder.insertion_point.block
            while entry.parent_op() is not None and not isinstance(entry.parent_op(), func.FuncOp):
                entry = entry.parent_op().parent_block()
            op = make() if make is not None else arith.ConstantOp(attr)
            if entry.first_op is None:
                entry.add_op(op)
            else:
                entry.insert_op_before(op, entry.first_op)
            found = self._constants[key] = op.results[0]
        return found

    def to_index(self, value: SSAValue, type_name: str) -> SSAValue:
        """An integer of HLO type ``type_name`` as an index (unsigned types zero-extended)."""
        if is_unsigned(type_name) and value.type.width.data < 64:
            value = self.insert(arith.ExtUIOp(value, IntegerType(64))).result
        return self.insert(arith.IndexCastOp(value, IndexType())).result

    def apply_map(self, indexing_map: IndexingMap, indices: Indices) -> Indices:
        """The results of ``indexing_map`` (no symbols) at ``indices``; identity maps emit nothing."""
        if not indexing_map.symbol_vars and indexing_map.reads_its_own_indices():
            return indices
        if not indexing_map.results:
            return ()
        op = self.insert(ApplyIndexingOp(list(indices), [], indexing_map))
        return tuple(op.results)

    # --- emission ---

    def emit(self, instr: HloInstruction, indices: Indices) -> SSAValue:
        """The value of ``instr`` at ``indices``."""
        key = (instr, indices)
        found = self._values.get(key)
        if found is not None:
            return found
        if instr.opcode == "parameter":
            value = self.extract(self.params[instr.parameter_number], indices)
        elif instr.opcode == "constant" and instr.shape.dimensions:
            position = array_constants(self.partitioned).index(instr)
            value = self.extract(self.params[len(self.partitioned.computation.parameters) + position], indices)
        elif self.partitioned.subgraph_of.get(instr, self.subgraph) is not self.subgraph:
            value = self._call(instr, indices)
        else:
            value = rule_of(instr)(self, instr, indices)
        self._values[key] = value
        return value

    def extract(self, source: SSAValue, indices: Indices) -> SSAValue:
        return self.insert(tensor.ExtractOp(source, list(indices), source.type.element_type)).result

    def _call(self, instr: HloInstruction, indices: Indices) -> SSAValue:
        callee = self.partitioned.subgraph_of[instr]
        key = (callee.name, indices)
        results = self._calls.get(key)
        if results is None:
            result_types = [element_type(r.shape.element_type, r.name) for r in callee.roots]
            op = self.insert(PureCallOp(callee.name, [*self.params, *indices], result_types))
            results = self._calls[key] = op.results
        return results[callee.roots.index(instr)]

    def operand(self, instr: HloInstruction, k: int, indices: Indices) -> SSAValue:
        return self.emit(instr.operands[k], indices)

    def if_else(self, condition: SSAValue, result_type: Attribute, then_: Callable[[], SSAValue],
                else_: Callable[[], SSAValue]) -> SSAValue:
        """``scf.if`` yielding ``then_()`` or ``else_()``, each emitted inside its region."""
        regions = []
        for body in (then_, else_):
            block = Block()
            saved, saved_values, saved_calls = self.builder, dict(self._values), dict(self._calls)
            self.builder = Builder(InsertPoint.at_end(block))
            value = body()
            block.add_op(scf.YieldOp(value))
            self.builder, self._values, self._calls = saved, saved_values, saved_calls
            regions.append(Region(block))
        return self.insert(scf.IfOp(condition, [result_type], regions[0], regions[1])).results[0]


def rule_of(instr: HloInstruction) -> Rule:
    """The elemental rule of ``instr``; ``UnimplementedError`` when the code generator has none."""
    complex_type = next((t for t in (*(o.shape.element_type for o in instr.operands), instr.shape.element_type)
                         if is_complex(t)), None)
    if complex_type is not None and instr.opcode not in ANY_ELEMENT_TYPE:
        rule_ = COMPLEX_ELEMENTAL.get(instr.opcode)
        if rule_ is None:
            raise UnimplementedError(f"{instr.opcode} ({instr.name}) on {complex_type} is not supported inside a "
                                     f"loop fusion by the code generator")
        return rule_
    rule_ = ELEMENTAL.get(instr.opcode)
    if rule_ is None:
        raise UnimplementedError(
            f"{instr.opcode} ({instr.name}) is not supported inside a loop fusion by the code generator")
    return rule_


def array_constants(partitioned: PartitionedComputation) -> list[HloInstruction]:
    """The non-scalar constants of the computation. Like XLA's large
    constants they live in buffers of their own, passed after the parameters."""
    return [i for i in partitioned.computation.instructions if i.opcode == "constant" and i.shape.dimensions]


def buffer_arguments(partitioned: PartitionedComputation) -> list[HloInstruction]:
    """The instructions whose tensors every function takes: parameters, then array constants."""
    return [*partitioned.computation.parameters, *array_constants(partitioned)]


def emit_subgraph_function(partitioned: PartitionedComputation, subgraph: Subgraph) -> func.FuncOp:
    """``func.func private @name(params..., indices...) -> (root element types)`` (XLA's docs/emitters.md)."""
    buffers = buffer_arguments(partitioned)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    rank = subgraph.index_rank
    result_types = [element_type(r.shape.element_type, r.name) for r in subgraph.roots]
    block = Block(arg_types=[*param_types, *([IndexType()] * rank)])
    params, indices = block.args[:len(param_types)], tuple(block.args[len(param_types):])
    for arg, p in zip(params, buffers):
        arg.name_hint = _name_hint(p.name)
    for i, arg in enumerate(indices):
        arg.name_hint = f"i{i}"
    emitter = FunctionEmitter(partitioned, subgraph, block, params, indices)
    values = [emitter.emit(root, indices) for root in subgraph.roots]
    emitter.insert(func.ReturnOp(*values))
    return func.FuncOp(subgraph.name, ([*param_types, *([IndexType()] * rank)], result_types),
                       Region(block), visibility="private")


def _name_hint(name: str) -> str | None:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else None
