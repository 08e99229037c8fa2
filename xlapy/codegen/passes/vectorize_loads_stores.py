"""``vectorize-loads-stores`` (one step of the example in XLA's docs/emitters.md; XLA's
``vectorize_loads_stores.cc``).

In an ``scf.for %iv = 0 to N step 1`` (N a constant power of two, 2 to 64)
whose body accesses a 1-D tensor at ``apply_indexing #map(..., %iv, ...)``
with the map ``f(others) + iv`` (coefficient exactly 1) and ``f`` a multiple
of N everywhere (aligned):

- ``tensor.extract %t[%i]`` from a tensor defined outside the loop becomes a
  ``vector.transfer_read %t[%base]`` of N elements hoisted before the loop and
  ``vector.extract %v[%iv]`` inside it;
- ``tensor.insert %x into %iter[%i]``, where ``%iter`` is the loop's iter_arg,
  used only by this insert, and the insert's only use is the matching
  ``scf.yield`` operand, becomes ``vector.insert %x, %iter_vector [%iv]`` into
  a new vector iter_arg (initially zero); the tensor passes through the loop
  unchanged and ``vector.transfer_write %res#vec, %init[%base]`` after the
  loop replaces the loop's tensor result.

``%base`` is the same apply_indexing with ``%iv`` replaced by 0, hoisted. Only
ops directly in the loop body are rewritten (not inside an ``scf.if``): there
every iteration runs the access, which is what makes the whole vector access
in bounds. Alignment plus a tensor size divisible by N keep it in bounds too; a read from a tensor of another
size is vectorized when the range of its index shows every lane in bounds.

An index computed through a broadcast (or any other chain of apply_indexing
ops in the loop body, e.g. ``#map2(%dim0, %dim1)`` of ``%dim0, %dim1 =
#map1(...)[%iv]``) is first folded into one map of values defined outside the
loop and ``%iv``, and simplified with their ranges:

- when the folded index of a read does not depend on ``%iv`` (every lane reads
  the same element, e.g. of an operand broadcast along the vectorized
  dimension), the ``tensor.extract`` moves before the loop, at that index;
- when it is ``aligned(invariants) + iv``, the access is vectorized as above,
  at the folded index with ``%iv`` = 0;
- anything else (a gather) is left alone.

In a lane loop, a read inside a loop nested in it through ``scf.for`` bodies (a reduction's loop, whose bounds
are the same in every lane) whose folded index is ``aligned(invariants, nested induction variables) + iv``
becomes a ``vector.transfer_read`` at that place (the index with ``%iv`` = 0) and ``vector.extract`` of the lane:
every lane runs every iteration of the nested loops, so the vector is in bounds.

pred (i1) and the sub-byte integers are vectors of their type here;
``lower-tensors`` loads and stores them as bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NoneAttr,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.codegen.passes.simplify_arith import value_range
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.simplifier import sum_of, summands

# Power-of-two vector lengths (XLA's GPU emitter only makes 2, 4 and 8; on the CPU wider
# vectors map onto SIMD registers, and the loop stays small enough for unroll-loops).
VECTOR_SIZES = frozenset(1 << k for k in range(1, 7))

# Variable names that would print as another variable's default name.
_DEFAULT_NAME = re.compile(r"(d|s|rt)\d+")

_IN_BOUNDS = ArrayAttr([IntegerAttr.from_bool(True)])
_PERMUTATION = AffineMapAttr(AffineMap.minor_identity(1, 1))


def _constant_int(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _defined_outside(value: SSAValue, loop: Operation) -> bool:
    return not loop.is_ancestor(value.owner)


def _lane_count(loop: scf.ForOp) -> int | None:
    """N for a loop from 0 to N (a vector size) by 1 over an index: a loop over the lanes of vectors."""
    if _constant_int(loop.lb) != 0 or _constant_int(loop.step) != 1 or not isinstance(loop.lb.type, IndexType):
        return None  # vector.extract/insert take an index position.
    size = _constant_int(loop.ub)
    return size if size in VECTOR_SIZES else None


def _vector_type(loop: scf.ForOp, type_: Attribute) -> VectorType | None:
    """The vector one access per iteration adds up to, if the loop and tensor allow it."""
    size = _lane_count(loop)
    if size is None:
        return None
    if not isinstance(type_, TensorType) or type_.get_num_dims() != 1 or not isinstance(type_.encoding, NoneAttr):
        return None
    element = type_.element_type
    # pred (i1) and sub-byte integers too: lower-tensors loads and stores their vectors as bytes.
    if not isinstance(element, (AnyFloat, IntegerType)) or type_.get_shape()[0] % size:
        return None
    return VectorType(element, [size])


def _vector_type_in_bounds(loop: scf.ForOp, type_: Attribute, folded: _FoldedIndex) -> VectorType | None:
    """The vector of a read whose tensor's size is no multiple of the lanes, when the range of its index proves
    every lane in bounds (a row reduction's rows cut out of a longer 1-D tensor)."""
    size = _lane_count(loop)
    if size is None or not isinstance(type_, TensorType) or type_.get_num_dims() != 1:
        return None
    if not isinstance(type_.encoding, NoneAttr) or not isinstance(type_.element_type, (AnyFloat, IntegerType)):
        return None
    if folded.indexing_map.touched_ranges()[0].upper > type_.get_shape()[0] - 1:
        return None
    return VectorType(type_.element_type, [size])


def _is_aligned(rest: AffineExpr, size: int, indexing_map: IndexingMap) -> bool:
    """Whether ``rest`` is a multiple of ``size`` at every point of the map's domain."""
    if affine.largest_known_divisor(rest) % size == 0:
        return True
    # The ranges of the variables may prove more than the coefficients (e.g. a variable in [0, 0]).
    probe = IndexingMap.from_exprs([affine.mod(rest, size)], indexing_map.dim_vars, indexing_map.symbol_vars).simplify()
    return probe.results[0] == affine.const(0)


def _contiguous_op(index: SSAValue, loop: scf.ForOp, size: int) -> tuple[ApplyIndexingOp, int] | None:
    """The apply_indexing computing ``index`` and the position of ``%iv`` among
    its operands, when ``index = aligned(invariants) + iv``."""
    iv = loop.body.block.args[0]
    op = index.owner
    if not isinstance(op, ApplyIndexingOp) or len(op.indices) != 1:
        return None
    operands = [*op.dims, *op.symbols]
    positions = [i for i, v in enumerate(operands) if v is iv]
    if len(positions) != 1 or not all(_defined_outside(v, loop) for v in operands if v is not iv):
        return None
    position = positions[0]
    indexing_map = op.indexing_map
    num_dims = indexing_map.num_dims
    iv_expr = affine.dim(position) if position < num_dims else affine.sym(position - num_dims)
    terms = list(summands(indexing_map.results[0]))
    others = [t for t in terms if t != iv_expr]
    if len(others) != len(terms) - 1 or any(_uses(t, iv_expr) for t in others):
        return None  # The stride is not exactly 1.
    if not _is_aligned(sum_of(others), size, indexing_map):
        return None
    return op, position


def _uses(expr: AffineExpr, variable: AffineDimExpr | AffineSymExpr) -> bool:
    dims: set[int] = set()
    symbols: set[int] = set()
    affine.uses(expr, dims, symbols)
    return variable.position in (dims if isinstance(variable, AffineDimExpr) else symbols)


@dataclass
class _FoldedIndex:
    """An index as one simplified map whose dimensions are values defined outside the loop and the loop's
    induction variable (``values``, ``iv`` its position among them, if it is one)."""

    indexing_map: IndexingMap
    values: list[SSAValue] = field(default_factory=list)
    iv: int | None = None

    @property
    def expr(self) -> AffineExpr:
        return self.indexing_map.results[0]

    def uses_iv(self) -> bool:
        return self.iv is not None and _uses(self.expr, affine.dim(self.iv))

    def is_contiguous(self, size: int) -> bool:
        """``aligned(invariants) + iv``: lanes read consecutive elements from a multiple of ``size``."""
        if self.iv is None:
            return False
        iv = affine.dim(self.iv)
        terms = list(summands(self.expr))
        others = [t for t in terms if t != iv]
        return (len(others) == len(terms) - 1 and not any(_uses(t, iv) for t in others)
                and _is_aligned(sum_of(others), size, self.indexing_map))


class _IndexFolder:
    """Folds the apply_indexing ops of a loop body that compute an index into one expression of their operands
    from outside the loop and the induction variable (the dimensions, with the ranges the maps give them)."""

    def __init__(self, loop: scf.ForOp, size: int, nested: Sequence[scf.ForOp] = ()):
        self.loop = loop
        self.size = size
        self.nested = list(nested)
        self.values: list[SSAValue] = []
        self.variables: list[Variable] = []
        self.constraints: list[tuple[AffineExpr, Interval]] = []

    def _dim(self, value: SSAValue, variable: Variable) -> AffineExpr:
        for i, known in enumerate(self.values):
            if known is value:
                bounds = self.variables[i].bounds.intersect(variable.bounds)
                self.variables[i] = Variable(bounds, self.variables[i].name)
                return affine.dim(i)
        self.values.append(value)
        self.variables.append(variable)
        return affine.dim(len(self.values) - 1)

    def fold(self, value: SSAValue, variable: Variable) -> AffineExpr | None:
        constant = _constant_int(value)
        if constant is not None:
            return affine.const(constant)
        iv = self.loop.body.block.args[0]
        if value is iv:
            return self._dim(iv, Variable(Interval(0, self.size - 1), "vector_index"))
        if _defined_outside(value, self.loop):
            known = value_range(value)
            bounds = variable.bounds if known is None else variable.bounds.intersect(Interval(*known))
            return self._dim(value, Variable(bounds, variable.name)) if bounds.lower <= bounds.upper else None
        nested = _nested_loop_of(value, self.nested)
        if nested is not None:  # the same in every lane, in the range of the nested loop's bounds
            lb, ub = _constant_int(nested.lb), _constant_int(nested.ub)
            bounds = Interval(lb, ub - 1) if lb is not None and ub is not None and lb < ub else variable.bounds
            return self._dim(value, Variable(bounds))
        op = value.owner
        if not isinstance(op, Operation) or not any(op.parent_op() is p for p in [self.loop, *self.nested]):
            return None
        if isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp)) and isinstance(value.type, IndexType):
            return self._fold_arithmetic(op)
        if not isinstance(op, ApplyIndexingOp):
            return None  # computed in the loop by something else: nothing is known about it
        indexing_map = op.indexing_map
        operands = []
        for operand, operand_variable in zip([*op.dims, *op.symbols], indexing_map.dim_vars + indexing_map.symbol_vars):
            expr = self.fold(operand, operand_variable)
            if expr is None:
                return None
            if not isinstance(expr, AffineDimExpr) and affine.constant_value(expr) is None:
                # The operands are in the map's domain (what composing maps assumes, too).
                self.constraints.append((expr, operand_variable.bounds))
            operands.append(expr)
        dims, symbols = operands[:indexing_map.num_dims], operands[indexing_map.num_dims:]
        self.constraints += [(affine.replace(e, dims, symbols), b) for e, b in indexing_map.constraints.items()]
        return affine.replace(indexing_map.results[value.index], dims, symbols)  # type: ignore[attr-defined]


    def _fold_arithmetic(self, op: arith.AddiOp | arith.SubiOp | arith.MuliOp) -> AffineExpr | None:
        """``a + b``, ``a - b`` or ``a * c`` of index values (an offset added to an index, as the elemental
        dynamic-slice and the in-place dynamic-update-slice emitter add their clamped starts), a constant ``c``."""
        anything = Variable(Interval(-(1 << 62), 1 << 62))
        a, b = self.fold(op.lhs, anything), self.fold(op.rhs, anything)
        if a is None or b is None:
            return None
        if isinstance(op, arith.AddiOp):
            return affine.add(a, b)
        if isinstance(op, arith.SubiOp):
            return affine.add(a, affine.mul(b, affine.const(-1)))
        if affine.constant_value(a) is None and affine.constant_value(b) is None:
            return None  # not affine
        return affine.mul(a, b)


def _nested_loop_of(value: SSAValue, nested: Sequence[scf.ForOp]) -> scf.ForOp | None:
    """The loop among ``nested`` whose induction variable ``value`` is."""
    block = value.owner
    if not isinstance(block, Block) or block.args[0] is not value:
        return None
    return next((loop for loop in nested if loop.body.block is block), None)


def _nested_loops(loop: scf.ForOp) -> list[scf.ForOp]:
    """The ``scf.for`` loops nested in ``loop`` through ``scf.for`` bodies alone (every iteration of the lane loop
    runs them) whose bounds are the same in every lane: constants or values from outside ``loop``."""
    found: list[scf.ForOp] = []
    blocks = [loop.body.block]
    while blocks:
        for op in blocks.pop().ops:
            if isinstance(op, scf.ForOp) and all(
                    _constant_int(v) is not None or _defined_outside(v, loop) for v in (op.lb, op.ub, op.step)):
                found.append(op)
                blocks.append(op.body.block)
    return found


def _fold_index(index: SSAValue, loop: scf.ForOp, size: int, tensor_type: TensorType,
                nested: Sequence[scf.ForOp] = ()) -> _FoldedIndex | None:
    """``index`` (into ``tensor_type``, 1-D) as one map of values from outside the loop, the induction variables of
    the ``nested`` loops and the loop's induction variable, when the loop bodies compute it with apply_indexing ops
    only."""
    folder = _IndexFolder(loop, size, nested)
    expr = folder.fold(index, Variable(Interval(0, tensor_type.get_shape()[0] - 1)))
    if expr is None:
        return None
    indexing_map = IndexingMap.from_exprs([expr], folder.variables, constraints=folder.constraints).simplify()
    if indexing_map.is_known_empty():
        return None
    iv = loop.body.block.args[0]
    position = next((i for i, value in enumerate(folder.values) if value is iv), None)
    return _FoldedIndex(indexing_map, folder.values, position)


class _LoopVectorizer:
    """Rewrites one loop; hoisted values (base indices, loaded vectors, padding)
    are shared by the accesses that need the same one."""

    def __init__(self, loop: scf.ForOp):
        self.loop = loop
        self._bases: dict[tuple, SSAValue] = {}
        self._reads: dict[tuple, SSAValue] = {}
        self._paddings: dict[Attribute, SSAValue] = {}

    @property
    def iv(self) -> SSAValue:
        return self.loop.body.block.args[0]

    def _insert_before_loop(self, op: Operation) -> Operation:
        Rewriter.insert_op(op, InsertPoint.before(self.loop))
        return op

    def base_index(self, index: SSAValue, size: int) -> SSAValue | None:
        """The index at ``%iv = 0``, computed before the loop, or None when the
        access is not contiguous and aligned."""
        if index is self.iv:
            return self.loop.lb
        found = _contiguous_op(index, self.loop, size)
        if found is None:
            return None
        op, position = found
        # The loop's lower bound is the constant 0, defined before the loop.
        operands = [self.loop.lb if i == position else v for i, v in enumerate([*op.dims, *op.symbols])]
        key = (op.indexing_map_attr, *map(id, operands))
        base = self._bases.get(key)
        if base is None:
            num_dims = len(op.dims)
            new = self._insert_before_loop(
                ApplyIndexingOp(operands[:num_dims], operands[num_dims:], op.indexing_map_attr)
            )
            base = self._bases[key] = new.results[0]
        return base

    def _padding(self, element: Attribute) -> SSAValue:
        value = self._paddings.get(element)
        if value is None:
            attr = FloatAttr(0.0, element) if isinstance(element, AnyFloat) else IntegerAttr(0, element)
            value = self._paddings[element] = self._insert_before_loop(arith.ConstantOp(attr)).results[0]
            value.name_hint = "cst"
        return value

    def folded_index(self, folded: _FoldedIndex, before: Operation | None = None) -> SSAValue:
        """The folded index computed before the loop (or before the op ``before`` inside it), with the induction
        variable at the lower bound (0)."""
        values = [self.loop.lb if i == folded.iv else v for i, v in enumerate(folded.values)]
        indexing_map, values = _without_unused_dims(folded.indexing_map, values)
        result = indexing_map.results[0]
        if not indexing_map.constraints:
            if result == affine.dim(0) and len(values) == 1:
                return values[0]
            value = affine.constant_value(result)
            if value is not None:
                constant = self._insert_before_loop(arith.ConstantOp(IntegerAttr(value, IndexType())))
                return constant.results[0]
        if before is not None:
            base_op = ApplyIndexingOp(values, [], indexing_map)
            Rewriter.insert_op(base_op, InsertPoint.before(before))
            return base_op.results[0]
        key = (indexing_map, *map(id, values))
        base = self._bases.get(key)
        if base is None:
            base = self._bases[key] = self._insert_before_loop(ApplyIndexingOp(values, [], indexing_map)).results[0]
        return base

    def vectorize_load(self, op: tensor.ExtractOp) -> None:
        if not _defined_outside(op.tensor, self.loop) or len(op.indices) != 1:
            return  # The tensor may change from one iteration to the next; a 0-D tensor has one element.
        size = _lane_count(self.loop)
        if size is None:
            return
        vector_type = _vector_type(self.loop, op.tensor.type)
        base = self.base_index(op.indices[0], size) if vector_type is not None else None
        if base is None:
            folded = _fold_index(op.indices[0], self.loop, size, op.tensor.type)
            if folded is None:
                return
            if not folded.uses_iv():  # the same element in every lane: read it once, before the loop
                self.hoist(op, self.folded_index(folded))
                return
            if vector_type is None:
                vector_type = _vector_type_in_bounds(self.loop, op.tensor.type, folded)
            if vector_type is None or not folded.is_contiguous(size):
                return  # a gather
            base = self.folded_index(folded)
        key = (id(op.tensor), id(base), vector_type)
        loaded = self._reads.get(key)
        if loaded is None:
            read = vector.TransferReadOp(
                op.tensor, [base], self._padding(vector_type.element_type), vector_type, _IN_BOUNDS, _PERMUTATION
            )
            loaded = self._reads[key] = self._insert_before_loop(read).results[0]
        Rewriter.replace_op(op, vector.ExtractOp(loaded, [self.iv], vector_type.element_type))

    def vectorize_nested_load(self, op: tensor.ExtractOp, nested: Sequence[scf.ForOp]) -> None:
        """A read in a loop nested in the lane loop (a reduction's loop over the reduced elements): when the lanes
        read consecutive elements, one ``vector.transfer_read`` where the read is (at the nested loops' indices,
        the same in every lane) and ``vector.extract`` of the lane. Every lane runs every iteration of the nested
        loops, so the whole vector is in bounds."""
        size = _lane_count(self.loop)
        if size is None or not _defined_outside(op.tensor, self.loop) or len(op.indices) != 1:
            return
        vector_type = _vector_type(self.loop, op.tensor.type)
        if vector_type is None:
            return
        folded = _fold_index(op.indices[0], self.loop, size, op.tensor.type, nested)
        if folded is None or not folded.is_contiguous(size):
            return  # the same element in every lane (it stays a scalar read), or a gather
        base = self.folded_index(folded, before=op)
        read = vector.TransferReadOp(
            op.tensor, [base], self._padding(vector_type.element_type), vector_type, _IN_BOUNDS, _PERMUTATION
        )
        Rewriter.insert_op(read, InsertPoint.before(op))
        Rewriter.replace_op(op, vector.ExtractOp(read.results[0], [self.iv], vector_type.element_type))

    def hoist(self, op: tensor.ExtractOp, index: SSAValue) -> None:
        """Moves the extract before the loop, reading at ``index``."""
        read = self._insert_before_loop(tensor.ExtractOp(op.tensor, [index], op.result.type))
        read.results[0].name_hint = op.result.name_hint
        op.result.replace_all_uses_with(read.results[0])
        Rewriter.erase_op(op)

    def _store_position(self, op: tensor.InsertOp) -> int | None:
        """The iter_arg position the insert updates, if its writes can wait until after the loop."""
        block = self.loop.body.block
        dest = op.dest
        if dest.owner is not block or dest is self.iv or not dest.has_one_use():
            return None
        use = op.result.get_unique_use()
        position = block.args.index(dest) - 1
        if use is None or not isinstance(use.operation, scf.YieldOp) or use.index != position:
            return None
        return position

    def vectorize_store(self, op: tensor.InsertOp) -> None:
        position = self._store_position(op)
        if position is None:
            return
        vector_type = _vector_type(self.loop, op.dest.type)
        if vector_type is None:
            return
        index, size = op.indices[0], vector_type.get_shape()[0]
        folded = None
        if index is not self.iv and _contiguous_op(index, self.loop, size) is None:
            folded = _fold_index(index, self.loop, size, op.dest.type)
            if folded is None or not folded.is_contiguous(size):
                return
        # The same order of hoisted ops as the emitters document's example: the zero vector, then the base index.
        is_float = isinstance(vector_type.element_type, AnyFloat)
        zero = DenseIntOrFPElementsAttr.from_list(vector_type, [0.0 if is_float else 0])
        init = self._insert_before_loop(arith.ConstantOp(zero)).results[0]
        init.name_hint = "vector"
        base = self.base_index(index, size) if folded is None else self.folded_index(folded)
        assert base is not None
        init_tensor = self.loop.iter_args[position]
        accumulator = self._add_iter_arg(init)
        inserted = vector.InsertOp(op.scalar, accumulator, [self.iv])
        Rewriter.insert_op(inserted, InsertPoint.before(op))
        op.result.replace_all_uses_with(op.dest)
        Rewriter.erase_op(op)
        yield_op = self.loop.body.block.last_op
        assert isinstance(yield_op, scf.YieldOp)
        Rewriter.replace_op(yield_op, scf.YieldOp(*yield_op.arguments, inserted.result))
        write = vector.TransferWriteOp(
            self.loop.results[-1], init_tensor, [base], _IN_BOUNDS, None, _PERMUTATION, init_tensor.type
        )
        Rewriter.insert_op(write, InsertPoint.after(self.loop))
        assert write.result is not None
        self.loop.results[position].replace_all_uses_with(write.result)

    def _add_iter_arg(self, init: SSAValue) -> SSAValue:
        """Rebuilds the loop with one more iter_arg; returns its block argument."""
        old = self.loop
        block = old.body.block
        argument = block.insert_arg(init.type, len(block.args))
        argument.name_hint = "iter_vector"
        body = old.detach_region(old.body)
        new = scf.ForOp(old.lb, old.ub, old.step, [*old.iter_args, init], body)
        new.attributes |= old.attributes
        Rewriter.insert_op(new, InsertPoint.before(old))
        for before, after in zip(old.results, new.results):
            after.name_hint = before.name_hint
            before.replace_all_uses_with(after)
        Rewriter.erase_op(old)
        self.loop = new
        return argument

    def run(self) -> None:
        # Stores first: each rebuilds the loop, and the loads then see the final one.
        for op in _direct_ops(self.loop.body.block, tensor.InsertOp):
            self.vectorize_store(op)
        for op in _direct_ops(self.loop.body.block, tensor.ExtractOp):
            self.vectorize_load(op)
        nested = _nested_loops(self.loop) if _lane_count(self.loop) is not None else []
        for inner in nested:
            for op in _direct_ops(inner.body.block, tensor.ExtractOp):
                self.vectorize_nested_load(op, nested)
        # The per-iteration indices of the rewritten accesses are dead now (the emitters document's example has
        # none); users first, so that the indices a folded chain was computed from go too.
        for block in [*(inner.body.block for inner in reversed(nested)), self.loop.body.block]:
            for op in reversed(_direct_ops(block, ApplyIndexingOp)):
                if not any(result.uses for result in op.results):
                    Rewriter.erase_op(op)


def _without_unused_dims(indexing_map: IndexingMap, values: list[SSAValue]) -> tuple[IndexingMap, list[SSAValue]]:
    """The map without the dimensions neither its result nor its constraints use, and their values; variables
    keep their names where they print back unambiguously."""
    used: set[int] = set()
    for expr in [*indexing_map.results, *indexing_map.constraints]:
        affine.uses(expr, used, set())
    keep = sorted(used)
    renumber = [affine.dim(keep.index(i)) if i in used else affine.const(0) for i in range(indexing_map.num_dims)]
    names: set[str] = set()
    variables = []
    for i in keep:
        variable = indexing_map.dim_vars[i]
        name = variable.name if variable.name not in names and not _DEFAULT_NAME.fullmatch(variable.name) else ""
        names.add(name)
        variables.append(Variable(variable.bounds, name))
    result = IndexingMap.from_exprs(
        [affine.replace(e, renumber, []) for e in indexing_map.results], variables,
        constraints=[(affine.replace(e, renumber, []), b) for e, b in indexing_map.constraints.items()],
    )
    return result, [values[i] for i in keep]


def _direct_ops(block: Block, kind: type[Operation]) -> Sequence[Operation]:
    return [op for op in block.ops if isinstance(op, kind)]


def vectorize_loads_stores(module: ModuleOp) -> None:
    for loop in [op for op in module.walk() if isinstance(op, scf.ForOp)]:
        _LoopVectorizer(loop).run()


class VectorizeLoadsStoresPass(ModulePass):
    """Turns contiguous, aligned element accesses in small loops into vector
    transfers (see the module docstring)."""

    name = "vectorize-loads-stores"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        vectorize_loads_stores(op)
