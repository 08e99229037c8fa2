"""``vectorize-lanes`` (the CPU pipeline only, after ``unroll-loops``,
``lower-apply-indexing`` and ``canonicalize``): the unrolled lanes of a vector
back into vector ops (superword-level parallelism, SLP, on the MLIR level).

On the CPU ``vector_index`` maps onto SIMD lanes (ARCHITECTURE.md). After
``vectorize-loads-stores`` and ``unroll-loops`` a thread's body is one
``vector.transfer_read`` per input, then per lane ``k`` a chain of scalar ops
from ``vector.extract %v[k]`` to ``vector.insert %x, %acc [k]``, and one
``vector.transfer_write``. This pass starts from each chain of
``vector.insert`` ops that sets every lane of a vector (the seeds) and builds
the vector of the ``W`` lane values ``(x_0, ..., x_{W-1})`` (a bundle):

- ``vector.extract %v[k]`` in lane ``k`` of the same ``%v``: ``%v`` itself;
- the same value in every lane: ``vector.broadcast`` of it;
- ``arith.constant`` in every lane: one dense vector constant;
- the same elementwise op (``arith.*``, ``math.*``; same attributes) in every
  lane: that op on vectors, its operands built as bundles in turn;
- anything else (e.g. a ``tensor.extract`` at a lane's own index): the lanes
  packed by ``vector.broadcast`` of lane 0 and
  ``vector.insert``s of the others (they stay scalar code).

Every bundle is built once (values shared by several results, e.g. of a
multi-output fusion, stay shared) and placed right after the last op it
depends on. The seeds' results are then replaced by the vectors and the
scalar lanes left without uses are erased.

``lanes_vectorizable`` tells, before unrolling, whether every lane loop of a
module would become vector code without packing memory accesses or control
flow: the CPU pipeline uses it to fall back to one element per thread.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce

import xlapy.codegen.mlir_text  # noqa: F401  (lets arith's comparisons, selects and casts take vectors)
from xlapy.codegen.dialect import ApplyIndexingOp


def _constant_int(value: SSAValue | int) -> int | None:
    if isinstance(value, int):
        return value
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _position(op: vector.ExtractOp | vector.InsertOp) -> int | None:
    """The constant position of a 1-D extract or insert."""
    position = op.get_mixed_position()
    return _constant_int(position[0]) if len(position) == 1 else None


def _is_elementwise(op: Operation) -> bool:
    """Ops that apply lane by lane to vectors of their scalar types."""
    if op.regions or len(op.results) != 1 or isinstance(op, arith.ConstantOp):
        return False
    return op.name.startswith(("arith.", "math."))


def _is_scalar(type_: Attribute) -> bool:
    return isinstance(type_, (AnyFloat, IntegerType, IndexType))


def _same_attributes(ops: list[Operation]) -> bool:
    first = ops[0]
    return all(op.properties == first.properties and op.attributes == first.attributes for op in ops[1:])


class _Vectorizer:
    """Builds the bundles of one block (the block of the seeds)."""

    def __init__(self, block: Block, width: int):
        self.block = block
        self.width = width
        self.order = {op: i for i, op in enumerate(block.ops)}
        self.built: dict[tuple[SSAValue, ...], SSAValue] = {}
        # The last op inserted after each anchor (None: the start of the block), so that ops placed after the
        # same anchor stay in creation order (operands before their users).
        self.last: dict[Operation | None, Operation] = {}
        self.packed = 0

    def _anchor(self, values: tuple[SSAValue, ...]) -> Operation | None:
        """The last op of the block defining one of ``values`` (None: all come from before the block)."""
        anchor, last = None, -1
        for value in values:
            op = value.owner
            while isinstance(op, Operation) and op.parent_block() is not self.block:
                op = op.parent_op()
            if isinstance(op, Operation) and self.order.get(op, -1) > last:
                anchor, last = op, self.order[op]
        return anchor

    def _place(self, op: Operation, values: tuple[SSAValue, ...]) -> SSAValue:
        anchor = self._anchor(values)
        previous = self.last.get(anchor, anchor)
        if previous is None:
            first = self.block.first_op
            assert first is not None
            Rewriter.insert_op(op, InsertPoint.before(first))
        else:
            Rewriter.insert_op(op, InsertPoint.after(previous))
        self.last[anchor] = op
        return op.results[0]

    def build(self, lanes: tuple[SSAValue, ...]) -> SSAValue:
        found = self.built.get(lanes)
        if found is None:
            found = self.built[lanes] = self._build(lanes)
        return found

    def _build(self, lanes: tuple[SSAValue, ...]) -> SSAValue:
        element = lanes[0].type
        vector_type = VectorType(element, [self.width])
        if all(lane is lanes[0] for lane in lanes):
            return self._place(vector.BroadcastOp(lanes[0], vector_type), lanes)
        owners = [lane.owner for lane in lanes]
        if all(isinstance(op, vector.ExtractOp) for op in owners):
            sources = {op.vector for op in owners}  # type: ignore[union-attr]
            positions = [_position(op) for op in owners]  # type: ignore[arg-type]
            source = sources.pop() if len(sources) == 1 else None
            if source is not None and source.type == vector_type and positions == list(range(self.width)):
                return source
        if all(isinstance(op, arith.ConstantOp) for op in owners):
            values = [op.value for op in owners]  # type: ignore[union-attr]
            if all(isinstance(v, (IntegerAttr, FloatAttr)) for v in values):
                numbers = [v.value.data for v in values]  # type: ignore[union-attr]
                dense = DenseIntOrFPElementsAttr.from_list(vector_type, numbers)
                return self._place(arith.ConstantOp(dense), lanes)
        if all(isinstance(op, Operation) and op.name == owners[0].name for op in owners):
            ops: list[Operation] = owners  # type: ignore[assignment]
            if all(_same_operands(op, ops[0]) for op in ops[1:]) and _same_attributes(ops) and not ops[0].regions:
                # The same computation in every lane (e.g. a load at a loop-invariant index).
                return self._place(vector.BroadcastOp(lanes[0], vector_type), lanes)
            if _is_elementwise(ops[0]) and _same_attributes(ops) and all(
                    [o.type for o in op.operands] == [o.type for o in ops[0].operands] for op in ops):
                operands = [self.build(tuple(op.operands[i] for op in ops)) for i in range(len(ops[0].operands))]
                result_type = VectorType(ops[0].results[0].type, [self.width])
                new = type(ops[0]).create(operands=operands, result_types=[result_type],
                                          properties=dict(ops[0].properties), attributes=dict(ops[0].attributes))
                return self._place(new, lanes)
        return self._pack(lanes, vector_type)

    def _pack(self, lanes: tuple[SSAValue, ...], vector_type: VectorType) -> SSAValue:
        self.packed += 1
        anchor_values = lanes
        value = self._place(vector.BroadcastOp(lanes[0], vector_type), anchor_values)
        for k, lane in enumerate(lanes[1:], start=1):
            value = self._place(vector.InsertOp(lane, value, [k], vector_type), anchor_values)
        return value


def _same_operands(op: Operation, other: Operation) -> bool:
    return len(op.operands) == len(other.operands) and all(a is b for a, b in zip(op.operands, other.operands))


def _seed_lanes(op: vector.InsertOp) -> tuple[SSAValue, ...] | None:
    """The value of each lane when ``op`` ends a chain of inserts setting every lane of a 1-D vector."""
    vector_type = op.result.type
    if not isinstance(vector_type, VectorType) or vector_type.get_num_dims() != 1:
        return None
    width = vector_type.get_shape()[0]
    if not _is_scalar(vector_type.element_type):
        return None
    lanes: dict[int, SSAValue] = {}
    current: Operation = op
    while isinstance(current, vector.InsertOp):
        position = _position(current)
        if position is None or not 0 <= position < width:
            return None
        lanes.setdefault(position, current.source)  # later inserts win
        if len(lanes) == width:
            return tuple(lanes[k] for k in range(width))
        dest = current.dest
        if not isinstance(dest.owner, vector.InsertOp) or not dest.has_one_use():
            return None
        current = dest.owner
    return None


def _chain_ends(block: Block) -> list[vector.InsertOp]:
    """Inserts whose result is not the destination of another insert."""
    ends = []
    for op in block.ops:
        if isinstance(op, vector.InsertOp):
            continues = any(isinstance(use.operation, vector.InsertOp) and use.operation.dest is op.result
                            for use in op.result.uses)
            if not continues:
                ends.append(op)
    return ends


def vectorize_lanes(module: ModuleOp) -> int:
    """Rewrites every block's seeds; returns how many bundles had to be packed from scalars."""
    packed = 0
    blocks = [block for op in module.walk() for region in op.regions for block in region.blocks]
    for block in blocks:
        vectorizers: dict[int, _Vectorizer] = {}
        for end in _chain_ends(block):
            lanes = _seed_lanes(end)
            if lanes is None:
                continue
            width = len(lanes)
            vectorizer = vectorizers.setdefault(width, _Vectorizer(block, width))
            built = vectorizer.build(lanes)
            if built is not end.result:
                end.result.replace_all_uses_with(built)
        packed += sum(v.packed for v in vectorizers.values())
    for op in module.walk():
        for region in op.regions:
            region_dce(region)
    return packed


def remaining_lanes(module: ModuleOp) -> int:
    """How many scalar lanes are still read out of vectors (``vector.extract``): zero when all lanes became
    vector code."""
    return sum(1 for op in module.walk() if isinstance(op, vector.ExtractOp))


# -- before unrolling: would the lanes vectorize? ---------------------------------------------------


def _lane_loop(op: Operation) -> bool:
    """An ``scf.for`` from 0 to a constant of 2 or more, step 1: a loop over ``vector_index``."""
    if not isinstance(op, scf.ForOp):
        return False
    lb, ub, step = (_constant_int(v) for v in (op.lb, op.ub, op.step))
    return lb == 0 and step == 1 and ub is not None and ub >= 2


def _lanes_of_loop_vectorize(loop: scf.ForOp) -> bool:
    block = loop.body.block
    iv = block.args[0]
    varying: set[SSAValue] = {iv}
    for op in loop.body.walk():
        if isinstance(op, scf.YieldOp) and op.parent_op() is loop:
            # Tensors pass through unchanged (every store became a vector insert).
            return all(value is arg or isinstance(value.type, VectorType)
                       for value, arg in zip(op.arguments, block.args[1:]))
        depends = any(operand in varying for operand in op.operands)
        if isinstance(op, tensor.InsertOp):
            return False
        if not depends:
            continue
        if isinstance(op, vector.ExtractOp):
            if isinstance(op.vector.owner, Block) or loop.is_ancestor(op.vector.owner):
                return False  # only reads of vectors loaded before the loop
        elif isinstance(op, vector.InsertOp):
            if op.dest.owner is not block:
                return False  # only the lanes of an iter_arg
        elif not (_is_elementwise(op) or isinstance(op, ApplyIndexingOp)):
            return False  # a gather (tensor.extract at a lane's index), control flow, ...
        varying.update(op.results)
    return True


def lanes_vectorizable(module: ModuleOp) -> bool:
    """Whether every loop over vector lanes has only elementwise ops, index arithmetic and the vector reads and
    writes of ``vectorize-loads-stores`` depending on the lane (run before ``unroll-loops``)."""
    return all(_lanes_of_loop_vectorize(op) for op in module.walk() if _lane_loop(op))


class VectorizeLanesPass(ModulePass):
    """Turns the unrolled lanes of vectors back into vector ops (see the module docstring)."""

    name = "vectorize-lanes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        vectorize_lanes(op)
