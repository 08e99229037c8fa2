"""Elemental emission (XLA's elemental_hlo_to_mlir; docs/emitters.md): the value
of an HLO instruction at given output indices, as arith/math/tensor ops.

``FunctionEmitter`` emits a subgraph function, asking each instruction's rule
for its value. The rules live in two tables, one rule per opcode: ``ELEMENTAL``
and, for an instruction with a complex operand or result, ``COMPLEX_ELEMENTAL``
(unless the rule only moves elements: ``ANY_ELEMENT_TYPE``). The rules
themselves are in one module per family (``elemental_movement``,
``elemental_arith``, ``elemental_complex``, ``elemental_reduce``), which register them here;
``elemental_rules`` imports every family, so code that emits imports from there.

A rule returns the instruction's value at the indices: one scalar, or for a tuple-shaped instruction (a variadic
reduce) a tuple of scalars, one per element, which ``get-tuple-element`` picks from. Rules that loop
(reductions) build an ``xla.loop`` with ``FunctionEmitter.loop`` and apply a computation to scalars with
``FunctionEmitter.call``: each such computation is one private function of scalars (``CalledFunctions``), as
XLA's call targets are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from xdsl.builder import Builder
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import ArrayAttr, ComplexType, FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp, PureCallOp, YieldOp
from xlapy.codegen.partitioner import PartitionedComputation, Subgraph, computation_roots
from xlapy.codegen.types import element_type, is_complex, is_unsigned, tensor_type
from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing import IndexingMap, affine
from xlapy.registry import registrar

Indices = tuple[SSAValue, ...]
# The value of an instruction at some indices: a scalar, or one scalar per element of a tuple-shaped instruction.
Value = SSAValue | tuple[SSAValue, ...]
Rule = Callable[["FunctionEmitter", HloInstruction, Indices], Value]

ELEMENTAL: dict[str, Rule] = {}
elemental_rule = registrar(ELEMENTAL, "elemental rule")
# The rules of instructions with a complex operand or result.
COMPLEX_ELEMENTAL: dict[str, Rule] = {}
complex_rule = registrar(COMPLEX_ELEMENTAL, "complex elemental rule")
# Opcodes whose ``ELEMENTAL`` rule only moves or chooses elements: it applies to complex elements too.
ANY_ELEMENT_TYPE = frozenset({
    "broadcast", "transpose", "reshape", "bitcast", "slice", "reverse", "copy", "constant", "pad", "concatenate",
    "dynamic-slice", "gather", "select", "dynamic-update-slice",
    # Reductions leave the arithmetic to their reducer computation, whose own ops are looked up.
    "reduce", "reduce-window",
})  # fmt: skip


def result_types(instr: HloInstruction) -> list[Attribute]:
    """The scalar types of ``instr``'s value: one per element of a tuple shape."""
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    return [element_type(s.element_type, instr.name) for s in shapes]


def flatten(values: Sequence[Value]) -> list[SSAValue]:
    return [v for value in values for v in (value if isinstance(value, tuple) else (value,))]


class CalledFunctions:
    """The functions of the computations that fused instructions apply to scalars (a reduce's reducer): one
    private ``func.func`` of scalars per computation, emitted when first called and not partitioned, as XLA's
    call targets. ``functions`` go into the module after the subgraphs' functions."""

    def __init__(self, taken: Sequence[str] = ()):
        self.functions: list[func.FuncOp] = []
        self._names: dict[HloComputation, str] = {}
        self._taken = set(taken)

    def name_of(self, computation: HloComputation) -> str:
        """The name of ``computation``'s function (emitted on first use)."""
        name = self._names.get(computation)
        if name is None:
            base = _symbol(computation.name)
            name, k = base, 0
            while name in self._taken:
                k += 1
                name = f"{base}_{k}"
            self._taken.add(name)
            self._names[computation] = name
            self.functions.append(emit_scalar_function(computation, name, self))
        return name


class FunctionEmitter:
    """Emits the body of one subgraph function: ``params`` are the tensors of
    the computation's parameters, ``indices`` the subgraph's output indices."""

    def __init__(self, partitioned: PartitionedComputation, subgraph: Subgraph, block: Block,
                 params: Sequence[SSAValue], indices: Indices, called: CalledFunctions | None = None,
                 bound: dict[HloInstruction, SSAValue] | None = None):
        self.partitioned = partitioned
        self.subgraph = subgraph
        self.params = list(params)
        self.builder = Builder(InsertPoint.at_end(block))
        self._function_block = block
        self.root_indices = indices
        self.called = called if called is not None else CalledFunctions()
        # Scalar values of parameters given directly (the arguments of a function of scalars).
        self._bound = dict(bound or {})
        self._values: dict[tuple, Value] = {}
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

    def emit(self, instr: HloInstruction, indices: Indices) -> Value:
        """The value of ``instr`` at ``indices`` (a tuple of scalars for a tuple-shaped instruction)."""
        key = (instr, indices)
        found = self._values.get(key)
        if found is not None:
            return found
        if instr in self._bound:
            value = self._bound[instr]
        elif instr.opcode == "parameter":
            value = self.extract(self.params[instr.parameter_number], indices)
        elif instr.opcode == "constant" and instr.shape.dimensions:
            position = array_constants(self.partitioned).index(instr)
            value = self.extract(self.params[len(self.partitioned.computation.parameters) + position], indices)
        elif self.partitioned.subgraph_of.get(instr, self.subgraph) is not self.subgraph:
            value = self._call(instr, indices)
        elif instr.opcode == "get-tuple-element":  # of a variadic reduce: its elements are computed together
            value = self.emit_tuple(instr.operands[0], indices)[instr.attr("index")]
        else:
            value = rule_of(instr)(self, instr, indices)
        self._values[key] = value
        return value

    def extract(self, source: SSAValue, indices: Indices) -> SSAValue:
        return self.insert(tensor.ExtractOp(source, list(indices), source.type.element_type)).result

    def emit_scalar(self, instr: HloInstruction, indices: Indices) -> SSAValue:
        value = self.emit(instr, indices)
        if isinstance(value, tuple):
            raise UnimplementedError(f"{instr.name} is a tuple: only get-tuple-element reads it in a loop fusion")
        return value

    def emit_tuple(self, instr: HloInstruction, indices: Indices) -> tuple[SSAValue, ...]:
        value = self.emit(instr, indices)
        if not isinstance(value, tuple):
            raise UnimplementedError(f"get-tuple-element of {instr.name}, which is not a tuple, in a loop fusion")
        return value

    def _call(self, instr: HloInstruction, indices: Indices) -> Value:
        callee = self.partitioned.subgraph_of[instr]
        key = (callee.name, indices)
        results = self._calls.get(key)
        if results is None:
            types = [t for r in callee.roots for t in result_types(r)]
            op = self.insert(PureCallOp(callee.name, [*self.params, *indices], types))
            results = self._calls[key] = op.results
        position = callee.roots.index(instr)
        first = sum(len(result_types(r)) for r in callee.roots[:position])
        if instr.shape.is_tuple:
            return tuple(results[first:first + len(instr.shape.tuple_shapes)])
        return results[first]

    def operand(self, instr: HloInstruction, k: int, indices: Indices) -> SSAValue:
        return self.emit_scalar(instr.operands[k], indices)

    @contextmanager
    def _region(self, block: Block) -> Iterator[None]:
        """Emits into ``block`` (a region's), then forgets the values computed there: they do not dominate what
        follows the region's op."""
        saved, saved_values, saved_calls = self.builder, dict(self._values), dict(self._calls)
        self.builder = Builder(InsertPoint.at_end(block))
        try:
            yield
        finally:
            self.builder, self._values, self._calls = saved, saved_values, saved_calls
            # A constant made inside a region that is not yet in the function stayed in that region.
            self._constants = {k: v for k, v in self._constants.items()
                               if v.owner.parent_block() is self._function_block}

    def loop(self, dims: Indices, indexing_map: IndexingMap, inits: Sequence[SSAValue],
             body: Callable[[Indices, Indices], Sequence[SSAValue]]) -> Sequence[SSAValue]:
        """An ``xla.loop`` over the range variables of ``indexing_map`` at dimensions ``dims`` (XLA's
        ``EmitLoopNest``): ``body(map results, iter values)`` gives the next iter values, for every point of the
        map's domain in row-major order of the range variables (points outside it are skipped); returns the last
        iter values."""
        if indexing_map.constraints:
            op = self.insert(LoopOp(list(dims), indexing_map, list(inits)))
            with self._region(op.body.block):
                self.insert(YieldOp(list(body(op.index_args, op.iter_args))))
            return op.results
        # Every point is in the domain: the loop runs over the range variables alone, so that the lowered loop
        # does not check the dimensions (indices the function is only called with in bounds) every iteration.
        symbols = [affine.sym(i) for i in range(len(indexing_map.range_vars))]
        ranges = IndexingMap.from_exprs(symbols, [], indexing_map.range_vars)
        op = self.insert(LoopOp([], ranges, list(inits)))
        with self._region(op.body.block):
            indices = self.insert(ApplyIndexingOp(list(dims), list(op.index_args), indexing_map)).results
            self.insert(YieldOp(list(body(tuple(indices), op.iter_args))))
        return op.results

    def call(self, computation: HloComputation, args: Sequence[SSAValue]) -> Sequence[SSAValue]:
        """``func.call`` of ``computation``'s function of scalars; its results (one per root tuple element)."""
        name = self.called.name_of(computation)
        roots = computation.root.operands if computation.root.opcode == "tuple" else [computation.root]
        types = [element_type(r.shape.element_type, r.name) for r in roots]
        return self.insert(func.CallOp(name, list(args), types)).results

    def if_else(self, condition: SSAValue, result_type: Attribute, then_: Callable[[], SSAValue],
                else_: Callable[[], SSAValue]) -> SSAValue:
        """``scf.if`` yielding ``then_()`` or ``else_()``, each emitted inside its region."""
        regions = []
        for body in (then_, else_):
            block = Block()
            with self._region(block):
                value = body()
                block.add_op(scf.YieldOp(value))
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


def emit_subgraph_function(partitioned: PartitionedComputation, subgraph: Subgraph,
                           called: CalledFunctions | None = None) -> func.FuncOp:
    """``func.func private @name(params..., indices...) -> (root element types)`` (XLA's docs/emitters.md); the
    functions it calls that apply computations to scalars go to ``called``."""
    buffers = buffer_arguments(partitioned)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    rank = subgraph.index_rank
    types = [t for r in subgraph.roots for t in result_types(r)]
    block = Block(arg_types=[*param_types, *([IndexType()] * rank)])
    params, indices = block.args[:len(param_types)], tuple(block.args[len(param_types):])
    for arg, p in zip(params, buffers):
        arg.name_hint = _name_hint(p.name)
    for i, arg in enumerate(indices):
        arg.name_hint = f"i{i}"
    emitter = FunctionEmitter(partitioned, subgraph, block, params, indices, called)
    values = flatten([emitter.emit(root, indices) for root in subgraph.roots])
    emitter.insert(func.ReturnOp(*values))
    return func.FuncOp(subgraph.name, ([*param_types, *([IndexType()] * rank)], types),
                       Region(block), visibility="private")


def emit_scalar_function(computation: HloComputation, name: str, called: CalledFunctions) -> func.FuncOp:
    """``func.func private @name(scalar params...) -> (root element types)``: a computation of scalars (a
    reducer), in one function."""
    for instr in computation.instructions:
        shapes = instr.shape.tuple_shapes if instr.shape.is_tuple and instr is computation.root else (instr.shape,)
        if any(s.is_tuple or s.dimensions for s in shapes):
            raise UnimplementedError(f"{instr.opcode} ({instr.name}) of shape {instr.shape} in {computation.name}: "
                                     f"a computation applied inside a loop fusion computes scalars")
    params = sorted(computation.parameters, key=lambda p: p.parameter_number)
    param_types = [element_type(p.shape.element_type, p.name) for p in params]
    block = Block(arg_types=param_types)
    subgraph = Subgraph(name, computation_roots(computation), list(computation.post_order()))
    partitioned = PartitionedComputation(computation, [subgraph], {i: subgraph for i in computation.instructions})
    emitter = FunctionEmitter(partitioned, subgraph, block, [], (), called, dict(zip(params, block.args)))
    root = computation.root
    values = [emitter.emit_scalar(r, ()) for r in (root.operands if root.opcode == "tuple" else [root])]
    emitter.insert(func.ReturnOp(*values))
    return func.FuncOp(name, (param_types, [v.type for v in values]), Region(block), visibility="private")


def _symbol(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_.$" else "_" for c in name)


def _name_hint(name: str) -> str | None:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else None
