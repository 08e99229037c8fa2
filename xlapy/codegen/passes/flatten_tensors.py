"""``flatten-tensors`` (one step of the example in XLA's docs/emitters.md; XLA's ``flatten_tensors.cc``).

Every ranked tensor becomes the 1-D ``tensor<NxT>`` of its elements in
physical order (the ``#xla.layout`` encoding's minor-to-major order, row-major
when absent), so that every later access is a plain offset into a buffer.

- ``tensor.extract`` / ``tensor.insert`` / ``vector.transfer_read`` /
  ``vector.transfer_write`` on a tensor of rank != 1 get one index: an
  ``xla.apply_indexing`` of the linearization ``sum(idx[d] * stride[d])``.
  Indices that are results of an ``xla.apply_indexing`` are folded into it:
  the new map takes that op's operands (all as dimensions: the folded map's
  symbols become dimensions, as XLA's canonicalizer does, see the emitters document's example) and is
  simplified with their ranges, so the emitters document's example's three maps become
  ``(th_x, bl_x, vector_index) -> (bl_x * 512 + th_x * 4 + vector_index)``.
- Then every type changes: block arguments (functions, ``scf.for``,
  ``xla.loop``), op results (``scf.if``/``scf.for`` results,
  ``xla.allocate_shared``, calls, ...), function signatures, and the value of
  a tensor ``arith.constant`` (reordered into physical order).

XLA leaves rank-0 tensors alone; here they become ``tensor<1xT>`` so that the
lowering to pointers only sees 1-D tensors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, tensor, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    ModuleOp,
    NoneAttr,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from xlapy.codegen.dialect import ApplyIndexingOp, IndexingMapAttr, LayoutAttr
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.indexing import affine
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval

# Names a map prints by default; an explicit name like this could clash with another variable's default.
_DEFAULT_NAME = re.compile(r"(d|s|rt)\d+")


# --- types ---


def flat_type(type_: Attribute) -> TensorType | None:
    """The 1-D type a tensor type becomes, or None when ``type_`` stays."""
    if not isinstance(type_, TensorType):
        return None
    shape = type_.get_shape()
    if any(d < 0 for d in shape):
        raise UnimplementedError(f"flatten-tensors: dynamic shapes are not supported ({type_})")
    flat = TensorType(type_.element_type, [math.prod(shape)])
    return None if flat == type_ else flat


def minor_to_major(type_: TensorType) -> tuple[int, ...]:
    """The tensor's physical dimension order, minor first (default: row-major)."""
    rank = type_.get_num_dims()
    encoding = type_.encoding
    if isinstance(encoding, NoneAttr):
        return tuple(range(rank - 1, -1, -1))
    if not isinstance(encoding, LayoutAttr):
        raise UnimplementedError(f"flatten-tensors: tensor encoding {encoding} is not an #xla.layout")
    if len(encoding.minor_to_major) != rank:
        raise VerifyError(f"flatten-tensors: layout {encoding} does not match the rank of {type_}")
    return encoding.minor_to_major


def strides(type_: TensorType) -> list[int]:
    """Elements between neighbours along each logical dimension in physical order."""
    shape = type_.get_shape()
    result = [0] * len(shape)
    stride = 1
    for d in minor_to_major(type_):
        result[d] = stride
        stride *= shape[d]
    return result


# --- the linearized index ---


class _Variables:
    """The operands of the new apply_indexing: one dimension per distinct SSA
    value, with the intersection of the bounds every use gives it."""

    def __init__(self) -> None:
        self.values: list[SSAValue] = []
        self.vars: list[Variable] = []

    def position(self, value: SSAValue, var: Variable) -> int:
        for i, known in enumerate(self.values):
            if known is value:
                old = self.vars[i]
                self.vars[i] = Variable(old.bounds.intersect(var.bounds), old.name or var.name)
                return i
        self.values.append(value)
        self.vars.append(var)
        return len(self.values) - 1

    def unique_names(self) -> list[Variable]:
        """The variables with names a map can print and parse back: duplicates
        and names that look like another variable's default fall back to the default."""
        seen: set[str] = set()
        result = []
        for var in self.vars:
            name = var.name
            if not name or name in seen or _DEFAULT_NAME.fullmatch(name):
                name = ""
            seen.add(name)
            result.append(Variable(var.bounds, name))
        return result


def _fold_index(
    index: SSAValue, size: int, variables: _Variables, constraints: list[tuple[AffineExpr, Interval]]
) -> AffineExpr:
    """The index as an expression over ``variables``: the producing
    apply_indexing's result expression when there is one, else a new variable."""
    producer = index.owner
    if not isinstance(producer, ApplyIndexingOp):
        return affine.dim(variables.position(index, Variable(Interval(0, size - 1))))
    indexing_map = producer.indexing_map
    operand_vars = indexing_map.dim_vars + indexing_map.symbol_vars
    new_dims = [
        affine.dim(variables.position(value, var))
        for value, var in zip([*producer.dims, *producer.symbols], operand_vars)
    ]
    dims, symbols = new_dims[: indexing_map.num_dims], new_dims[indexing_map.num_dims :]
    constraints += [(affine.replace(e, dims, symbols), b) for e, b in indexing_map.constraints.items()]
    expr = affine.replace(indexing_map.results[index.index], dims, symbols)  # type: ignore[attr-defined]
    # The access is in bounds: the simplifier may use it, and it is what XLA's composition adds.
    constraints.append((expr, Interval(0, size - 1)))
    return expr


def _drop_unused_dims(indexing_map: IndexingMap, values: list[SSAValue]) -> tuple[IndexingMap, list[SSAValue]]:
    used: set[int] = set()
    for expr in [*indexing_map.results, *indexing_map.constraints]:
        affine.uses(expr, used, set())
    if len(used) == indexing_map.num_dims:
        return indexing_map, values
    keep = sorted(used)
    renumber = [affine.dim(keep.index(i)) if i in used else affine.const(0) for i in range(indexing_map.num_dims)]
    result = IndexingMap.from_exprs(
        [affine.replace(e, renumber, []) for e in indexing_map.results],
        [indexing_map.dim_vars[i] for i in keep],
        constraints=[(affine.replace(e, renumber, []), b) for e, b in indexing_map.constraints.items()],
    )
    return result, [values[i] for i in keep]


def linearized_map(type_: TensorType, indices: Sequence[SSAValue]) -> tuple[IndexingMap, list[SSAValue]]:
    """The simplified map from its operands (all dimensions) to the physical
    offset of ``type_[indices]``, and its operands."""
    shape = type_.get_shape()
    variables = _Variables()
    constraints: list[tuple[AffineExpr, Interval]] = []
    linear: AffineExpr = affine.const(0)
    for index, size, stride in zip(indices, shape, strides(type_)):
        linear = affine.add(linear, affine.mul(_fold_index(index, size, variables, constraints), stride))
    indexing_map = IndexingMap.from_exprs([linear], variables.unique_names(), constraints=constraints)
    return _drop_unused_dims(indexing_map.simplify().sort_summands(), variables.values)


def _dominates(op: Operation, user: Operation) -> bool:
    """Whether ``op`` (in some block) comes before ``user`` or an ancestor of it in that block."""
    block = op.parent_block()
    ancestor: Operation | None = user
    while ancestor is not None and ancestor.parent_block() is not block:
        ancestor = ancestor.parent_op()
    return ancestor is not None and ancestor is not op and op.is_before_in_block(ancestor)


class _Linearizer:
    """Creates the index ops before their users, reusing an equal op that
    dominates the user (the extract and insert of the emitters document's example share ``%dim``)."""

    def __init__(self) -> None:
        self._made: dict[tuple, list[Operation]] = {}
        self.folded: list[ApplyIndexingOp] = []

    def index(self, type_: TensorType, indices: Sequence[SSAValue], user: Operation) -> SSAValue:
        if type_.get_num_dims() == 0:
            return self._reuse_or_insert(("zero",), lambda: arith.ConstantOp(IntegerAttr(0, IndexType())), user)
        self.folded += [i.owner for i in indices if isinstance(i.owner, ApplyIndexingOp)]
        indexing_map, operands = linearized_map(type_, indices)
        if indexing_map.is_known_empty():
            # No in-bounds index has these operands' ranges: the access is on a branch that never runs (the
            # operand of a concatenate or pad that another part of the kernel writes). Any index will do.
            return self._reuse_or_insert(("const", 0), lambda: arith.ConstantOp(IntegerAttr(0, IndexType())), user)
        result = indexing_map.results[0]
        if result == affine.dim(0) and len(operands) == 1 and not indexing_map.constraints:
            return operands[0]
        value = affine.constant_value(result)
        if value is not None:
            return self._reuse_or_insert(
                ("const", value), lambda: arith.ConstantOp(IntegerAttr(value, IndexType())), user
            )
        attr = IndexingMapAttr(indexing_map)
        return self._reuse_or_insert(
            (attr, *map(id, operands)), lambda: ApplyIndexingOp(operands, [], attr), user, name="dim"
        )

    def _reuse_or_insert(
        self, key: tuple, build: Callable[[], Operation], user: Operation, name: str | None = None
    ) -> SSAValue:
        candidates = self._made.setdefault(key, [])
        for op in candidates:
            if _dominates(op, user):
                return op.results[0]
        op = build()
        if name is not None:
            op.results[0].name_hint = name
        Rewriter.insert_op(op, InsertPoint.before(user))
        candidates.append(op)
        return op.results[0]


# --- access ops: one rewrite per op class ---


def _tensor_type(value: SSAValue, op: Operation) -> TensorType:
    type_ = value.type
    if not isinstance(type_, TensorType):
        raise VerifyError(f"{op.name}: expected a ranked tensor, got {type_}")
    return type_


def _rewrite_extract(op: tensor.ExtractOp, linearizer: _Linearizer) -> None:
    index = linearizer.index(_tensor_type(op.tensor, op), op.indices, op)
    Rewriter.replace_op(op, tensor.ExtractOp(op.tensor, [index], op.result.type))


def _rewrite_insert(op: tensor.InsertOp, linearizer: _Linearizer) -> None:
    index = linearizer.index(_tensor_type(op.dest, op), op.indices, op)
    Rewriter.replace_op(op, tensor.InsertOp(op.scalar, op.dest, [index]))


def _check_transfer(
    op: vector.TransferReadOp | vector.TransferWriteOp, type_: TensorType, vector_type: Attribute
) -> None:
    """A 1-D transfer along the last logical dimension stays contiguous after
    flattening only when that dimension is the most minor one."""
    if not isinstance(vector_type, VectorType) or vector_type.get_num_dims() != 1:
        raise UnimplementedError(f"flatten-tensors: {op.name} of {vector_type}: only 1-D vectors are supported")
    if not op.permutation_map.data.is_minor_identity():
        raise UnimplementedError(f"flatten-tensors: {op.name} with a permutation map is not supported")
    if type_.get_num_dims() and minor_to_major(type_)[0] != type_.get_num_dims() - 1:
        raise UnimplementedError(f"flatten-tensors: {op.name} along a non-minor dimension of {type_}")


_FLAT_PERMUTATION = AffineMapAttr(AffineMap.minor_identity(1, 1))


def _rewrite_transfer_read(op: vector.TransferReadOp, linearizer: _Linearizer) -> None:
    type_ = _tensor_type(op.source, op)
    _check_transfer(op, type_, op.result.type)
    index = linearizer.index(type_, op.indices, op)
    new = vector.TransferReadOp(
        op.source, [index], op.padding, op.result.type, op.in_bounds, _FLAT_PERMUTATION, op.mask
    )
    new.attributes |= op.attributes
    Rewriter.replace_op(op, new)


def _rewrite_transfer_write(op: vector.TransferWriteOp, linearizer: _Linearizer) -> None:
    type_ = _tensor_type(op.source, op)
    _check_transfer(op, type_, op.vector.type)
    index = linearizer.index(type_, op.indices, op)
    result_type = op.result.type if op.result is not None else None
    new = vector.TransferWriteOp(op.vector, op.source, [index], op.in_bounds, op.mask, _FLAT_PERMUTATION, result_type)
    new.attributes |= op.attributes
    Rewriter.replace_op(op, new)


def _accessed_type(op: Operation) -> Attribute:
    return {
        tensor.ExtractOp: lambda: op.tensor.type,
        tensor.InsertOp: lambda: op.dest.type,
        vector.TransferReadOp: lambda: op.source.type,
        vector.TransferWriteOp: lambda: op.source.type,
    }[type(op)]()


_ACCESS_REWRITES: dict[type[Operation], Callable[[Operation, _Linearizer], None]] = {
    tensor.ExtractOp: _rewrite_extract,
    tensor.InsertOp: _rewrite_insert,
    vector.TransferReadOp: _rewrite_transfer_read,
    vector.TransferWriteOp: _rewrite_transfer_write,
}


# --- types of values, signatures and constants ---


def _flatten_dense(attr: DenseIntOrFPElementsAttr, type_: TensorType, flat: TensorType) -> DenseIntOrFPElementsAttr:
    """The constant's elements in physical order."""
    count = math.prod(type_.get_shape())
    raw = np.frombuffer(attr.data.data, dtype=np.uint8)
    element_bytes = len(raw) // max(count, 1)
    elements = raw.reshape((*type_.get_shape(), element_bytes))
    major_to_minor = list(reversed(minor_to_major(type_)))
    physical = np.ascontiguousarray(elements.transpose([*major_to_minor, type_.get_num_dims()]))
    return DenseIntOrFPElementsAttr(flat, BytesAttr(physical.tobytes()))


def _flatten_constant(op: Operation) -> None:
    if not isinstance(op, arith.ConstantOp) or not isinstance(op.value, DenseIntOrFPElementsAttr):
        return
    type_ = op.value.type
    flat = flat_type(type_)
    if flat is not None:
        assert isinstance(type_, TensorType)
        op.properties["value"] = _flatten_dense(op.value, type_, flat)


def _flatten_values(values: Sequence[SSAValue]) -> None:
    for value in list(values):
        flat = flat_type(value.type)
        if flat is not None:
            Rewriter.replace_value_with_new_type(value, flat)


def _flatten_signature(op: func.FuncOp) -> None:
    def flat_or_same(types: Sequence[Attribute]) -> list[Attribute]:
        return [flat_type(t) or t for t in types]

    function_type = op.function_type
    op.properties["function_type"] = FunctionType.from_lists(
        flat_or_same(function_type.inputs.data), flat_or_same(function_type.outputs.data)
    )


def _flatten_types(module: ModuleOp) -> None:
    for op in list(module.walk()):
        _flatten_constant(op)
        _flatten_values(op.results)
        for region in op.regions:
            block: Block
            for block in region.blocks:
                _flatten_values(block.args)
        if isinstance(op, func.FuncOp):
            _flatten_signature(op)


def flatten_tensors(module: ModuleOp) -> None:
    linearizer = _Linearizer()
    accesses = [
        op
        for op in module.walk()
        if type(op) in _ACCESS_REWRITES and isinstance(t := _accessed_type(op), TensorType) and t.get_num_dims() != 1
    ]
    for op in accesses:
        _ACCESS_REWRITES[type(op)](op, linearizer)
    # The folded index ops are usually dead now (the emitters document's example has none left).
    for op in dict.fromkeys(linearizer.folded):
        if op.parent is not None and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)
    _flatten_types(module)


class FlattenTensorsPass(ModulePass):
    """Makes every tensor 1-D (see the module docstring)."""

    name = "flatten-tensors"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        flatten_tensors(op)
