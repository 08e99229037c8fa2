"""``vectorize-lanes`` (the CPU pipeline only, after ``lower-apply-indexing``,
``cse`` and ``canonicalize``): loops over vector lanes into vector ops.

On the CPU ``vector_index`` maps onto SIMD lanes. After
``vectorize-loads-stores`` a thread's body is one ``vector.transfer_read`` per
input, a loop ``scf.for %iv = 0 to W`` whose iteration ``k`` computes lane
``k`` from ``vector.extract %v[%iv]`` to ``vector.insert %x, %acc [%iv]``
into a vector iter_arg, and one ``vector.transfer_write``. ``unroll-loops``
leaves such a loop rolled in a CPU kernel (``vectorizes_as_loop``), and this
pass replaces it by the vector form of its body, placed before it:

- the induction variable: the constant ``[0, 1, ..., W - 1]``;
- ``vector.extract %v[%iv]`` (``%v`` loaded before the loop): ``%v``;
- ``vector.insert %x, %acc [%iv]``: the vector of ``%x``, which becomes the
  loop's result for that iter_arg (every lane is set);
- an elementwise op (``arith.*``, ``math.*``): the same op on vectors of ``W``
  lanes, index arithmetic included (xlapy's class of the op where xDSL's takes
  scalars only: ``mlir_dialects.vector_form``);
- an op that does not depend on the lane (a constant, a load at the same
  index in every lane, ...): moved before the loop as it is (every op of such a
  body is pure), as a splat where lanes use it.

Iter_args the loop passes through unchanged (the output tensors, written by
the ``vector.transfer_write`` after the loop) become their initial values.
The work is proportional to the body, not to ``W`` times the body as an
unrolled loop's would be, and LLVM receives ``W``-lane vector code.

``lanes_vectorizable`` tells, before unrolling, whether every lane loop of a
module will become vector code: the CPU pipeline uses it to fall back to one
element per thread (a gather, control flow, a store that is not a vector).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce

from xlapy.codegen.dialect import ApplyIndexingOp
from xlapy.codegen.mlir_dialects import vector_form


def _constant_int(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _is_elementwise(op: Operation) -> bool:
    """Ops that apply lane by lane to vectors of their scalar types."""
    if op.regions or len(op.results) != 1 or isinstance(op, arith.ConstantOp):
        return False
    return op.name.startswith(("arith.", "math."))


# -- which loops vectorize ---------------------------------------------------------------------------


def _lane_loop(op: Operation) -> bool:
    """An ``scf.for`` from 0 to a constant of 2 or more, step 1: a loop over ``vector_index``."""
    if not isinstance(op, scf.ForOp):
        return False
    lb, ub, step = (_constant_int(v) for v in (op.lb, op.ub, op.step))
    return lb == 0 and step == 1 and ub is not None and ub >= 2


def _at(op: vector.ExtractOp | vector.InsertOp, iv: SSAValue) -> bool:
    """Whether ``op`` reads or writes the lane ``iv`` of a 1-D vector."""
    position = op.get_mixed_position()
    return len(position) == 1 and position[0] is iv


def _lanes_depend_on_vectors_only(loop: scf.ForOp) -> bool:
    """Whether every op depending on the lane is elementwise, index arithmetic (apply_indexing, lowered to
    elementwise ops later) or a lane read out of a vector loaded before the loop, every lane written by a
    ``vector.insert`` at the lane into a vector iter_arg, and nothing else stored."""
    block = loop.body.block
    iv = block.args[0]
    varying: set[SSAValue] = {iv}
    for op in block.ops:
        if op.regions or isinstance(op, tensor.InsertOp):
            return False  # control flow, or a store that is not a vector
        if isinstance(op, scf.YieldOp) or not any(operand in varying for operand in op.operands):
            continue
        if isinstance(op, vector.ExtractOp):
            source = op.vector
            if isinstance(source.owner, Block) or loop.is_ancestor(source.owner):
                return False  # only reads of vectors loaded before the loop
            if source.type != VectorType(op.result.type, [_constant_int(loop.ub)]) or not _at(op, iv):
                return False
        elif isinstance(op, vector.InsertOp):
            if op.dest.owner is not block or not _at(op, iv):
                return False  # only the lanes of an iter_arg
        elif not (_is_elementwise(op) or isinstance(op, ApplyIndexingOp)):
            return False  # a gather (tensor.extract at a lane's index), ...
        varying.update(op.results)
    return True


def _iter_args_set_lane_by_lane(loop: scf.ForOp) -> bool:
    """Every iter_arg is passed through unchanged or is a vector whose only use sets the lane."""
    block = loop.body.block
    yield_op = block.last_op
    assert isinstance(yield_op, scf.YieldOp)
    for value, arg in zip(yield_op.arguments, block.args[1:]):
        if value is arg:
            continue
        insert = value.owner
        if not (isinstance(insert, vector.InsertOp) and insert.dest is arg and arg.has_one_use()):
            return False
    return True


def vectorizes_as_loop(op: Operation) -> bool:
    """Whether ``op`` is a loop over vector lanes that ``vectorize-lanes`` turns into vector ops as it is (without
    unrolling it first)."""
    return _lane_loop(op) and _lanes_depend_on_vectors_only(op) and _iter_args_set_lane_by_lane(op)  # type: ignore[arg-type]


def lanes_vectorizable(module: ModuleOp) -> bool:
    """Whether every loop over vector lanes will become vector code (run after ``vectorize-loads-stores``)."""
    return all(vectorizes_as_loop(op) for op in module.walk() if _lane_loop(op))


# -- the rewrite ---------------------------------------------------------------------------------------


class _LoopVectorizer:
    """Replaces one loop over ``width`` lanes by the vector form of its body (see the module docstring)."""

    def __init__(self, loop: scf.ForOp):
        self.loop = loop
        self.iv = loop.body.block.args[0]
        width = _constant_int(loop.ub)
        assert width is not None
        self.width = width
        self.vectors: dict[SSAValue, SSAValue] = {}  # a value depending on the lane -> the vector of its lanes
        self.splats: dict[SSAValue, SSAValue] = {}  # a value the same in every lane -> its splat

    def _vector_type(self, element: Attribute) -> VectorType:
        return VectorType(element, [self.width])

    def _before_loop(self, op: Operation) -> SSAValue:
        Rewriter.insert_op(op, InsertPoint.before(self.loop))
        return op.results[0]

    def vector_of(self, value: SSAValue) -> SSAValue:
        """The vector of the lanes of ``value``."""
        if value is self.iv and value not in self.vectors:
            lanes = DenseIntOrFPElementsAttr.from_list(self._vector_type(IndexType()), list(range(self.width)))
            self.vectors[value] = self._before_loop(arith.ConstantOp(lanes))
        found = self.vectors.get(value, self.splats.get(value))
        if found is not None:
            return found
        owner = value.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, (IntegerAttr, FloatAttr)):
            dense = DenseIntOrFPElementsAttr.from_list(self._vector_type(value.type), [owner.value.value.data])
            splat = self._before_loop(arith.ConstantOp(dense))
        else:
            splat = self._before_loop(vector.BroadcastOp(value, self._vector_type(value.type)))
        self.splats[value] = splat
        return splat

    def can_run(self) -> bool:
        """Whether every op depending on the lane has a vector form (no apply_indexing is left)."""
        varying: set[SSAValue] = {self.iv}
        for op in self.loop.body.block.ops:
            if isinstance(op, scf.YieldOp) or not any(operand in varying for operand in op.operands):
                continue
            if not isinstance(op, (vector.ExtractOp, vector.InsertOp)) and not _is_elementwise(op):
                return False
            varying.update(op.results)
        return True

    def run(self) -> None:
        loop, block = self.loop, self.loop.body.block
        iter_args = block.args[1:]
        yield_op = block.last_op
        assert isinstance(yield_op, scf.YieldOp)
        unchanged = [value is arg for value, arg in zip(yield_op.arguments, iter_args)]
        for same, arg, init in zip(unchanged, iter_args, loop.iter_args):
            if same:  # the iter_arg keeps its initial value throughout
                arg.replace_all_uses_with(init)
        hoisted: list[Operation] = []
        for op in list(block.ops):
            if op is yield_op:
                break
            if not any(operand is self.iv or operand in self.vectors for operand in op.operands):
                op.detach()
                Rewriter.insert_op(op, InsertPoint.before(loop))
                hoisted.append(op)
            elif isinstance(op, vector.ExtractOp):
                self.vectors[op.result] = op.vector
            elif isinstance(op, vector.InsertOp):
                self.vectors[op.result] = self.vector_of(op.source)
            else:
                operands = [self.vector_of(operand) for operand in op.operands]
                new = vector_form(type(op)).create(
                    operands=operands, result_types=[self._vector_type(op.results[0].type)],
                    properties=dict(op.properties), attributes=dict(op.attributes))
                self.vectors[op.results[0]] = self._before_loop(new)
        for same, value, init, result in zip(unchanged, yield_op.arguments, loop.iter_args, loop.results):
            result.replace_all_uses_with(init if same else self.vectors[value])
        Rewriter.erase_op(loop)
        for op in reversed(hoisted):  # xDSL's dead code elimination keeps arith.extsi and arith.remui
            if not any(result.uses for result in op.results):
                Rewriter.erase_op(op)


def vectorize_lanes(module: ModuleOp) -> int:
    """Replaces every loop over vector lanes that vectorizes by vector ops; returns how many."""
    done = 0
    for op in [op for op in module.walk() if vectorizes_as_loop(op)]:
        vectorizer = _LoopVectorizer(op)  # type: ignore[arg-type]
        if vectorizer.can_run():
            vectorizer.run()
            done += 1
    if done:  # the scalar constants the splats replaced, the loops' bounds and initial vectors
        region_dce(module.body)
    return done


def remaining_lanes(module: ModuleOp) -> int:
    """How many scalar lanes are still read out of vectors (``vector.extract``): zero when all lanes became
    vector code."""
    return sum(1 for op in module.walk() if isinstance(op, vector.ExtractOp))


class VectorizeLanesPass(ModulePass):
    """Turns loops over vector lanes into vector ops (see the module docstring)."""

    name = "vectorize-lanes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        vectorize_lanes(op)
