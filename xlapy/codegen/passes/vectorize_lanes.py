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

- an ``scf.for`` nested in the loop whose bounds are the same in every lane (a reduction's loop): the same loop,
  with the iter_args that differ from lane to lane carried as vectors and its body in vector form; a
  ``vector.extract`` of the lane out of a vector read in it (the same in every lane) is that vector.

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
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
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


def _is_scalar(type_: Attribute) -> bool:
    return not isinstance(type_, (VectorType, TensorType))


def _varying_values(loop: scf.ForOp) -> set[SSAValue] | None:
    """The values of ``loop``'s body (nested loops included) that differ from lane to lane, when every op
    depending on the lane is elementwise, index arithmetic (apply_indexing, lowered to elementwise ops later), a lane
    read out of a vector that is the same in every lane, a ``vector.insert`` at the lane into a vector iter_arg of
    ``loop``, or an ``scf.for`` whose bounds are the same in every lane (a reduction's loop: its iter_args that
    differ from lane to lane become vectors) with such a body, and nothing else is stored; None otherwise."""
    block = loop.body.block
    varying: set[SSAValue] = {block.args[0]}
    return varying if _scan_block(block, loop, varying, top=True) else None


def _scan_block(block: Block, loop: scf.ForOp, varying: set[SSAValue], top: bool) -> bool:
    """Adds the values of ``block`` that differ from lane to lane to ``varying``; False when one cannot be a
    vector (see ``_varying_values``)."""
    iv = loop.body.block.args[0]
    for op in block.ops:
        if isinstance(op, scf.YieldOp):
            continue
        if isinstance(op, scf.ForOp):
            if not _scan_nested_loop(op, loop, varying):
                return False
            continue
        if op.regions or isinstance(op, tensor.InsertOp):
            return False  # control flow, or a store that is not a vector
        if not any(operand in varying for operand in op.operands):
            continue
        if isinstance(op, vector.ExtractOp):
            source = op.vector
            if source in varying or source.owner is loop.body.block:
                return False  # only reads of vectors that are the same in every lane (not the loop's iter_args)
            if source.type != VectorType(op.result.type, [_constant_int(loop.ub)]) or not _at(op, iv):
                return False
        elif isinstance(op, vector.InsertOp):
            if not top or op.dest.owner is not block or not _at(op, iv):
                return False  # only the lanes of an iter_arg
        elif not (_is_elementwise(op) or isinstance(op, ApplyIndexingOp)):
            return False  # a gather (tensor.extract at a lane's index), ...
        varying.update(op.results)
    return True


def _scan_nested_loop(nested: scf.ForOp, loop: scf.ForOp, varying: set[SSAValue]) -> bool:
    """A loop nested in the lane loop: its bounds must be the same in every lane; an iter_arg differs from lane to
    lane when its initial value or the value its body yields does (found by iterating to a fixed point)."""
    if any(v in varying for v in (nested.lb, nested.ub, nested.step)):
        return False
    body = nested.body.block
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    marked = {arg for arg, init in zip(body.args[1:], nested.iter_args) if init in varying}
    while True:
        trial = varying | marked
        if not _scan_block(body, loop, trial, top=False):
            return False
        grown = marked | {arg for arg, value in zip(body.args[1:], yield_op.arguments) if value in trial}
        if grown == marked:
            break
        marked = grown
    if not all(_is_scalar(arg.type) for arg in marked):
        return False  # a tensor or vector carried lane by lane
    varying |= trial
    varying.update(result for result, arg in zip(nested.results, body.args[1:]) if arg in marked)
    return True


def _all_values(op: Operation) -> list[SSAValue]:
    values: list[SSAValue] = []
    for inner in op.walk():
        values += inner.results
        for region in inner.regions:
            for block in region.blocks:
                values += block.args
    return values


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
    return _lane_loop(op) and _varying_values(op) is not None and _iter_args_set_lane_by_lane(op)  # type: ignore[arg-type]


def _around_lane_loops(loop: scf.ForOp) -> bool:
    """Whether ``loop`` is an ordinary loop around lane loops (the concatenate emitter's loop over a work item's
    vectors): no lane of a vector is at its induction variable, and it holds loops."""
    iv = loop.body.block.args[0]
    for op in loop.walk():
        if isinstance(op, (vector.ExtractOp, vector.InsertOp)) and any(p is iv for p in op.get_mixed_position()):
            return False
    return any(_lane_loop(op) for op in loop.walk() if op is not loop)


def lanes_vectorizable(module: ModuleOp) -> bool:
    """Whether every loop over vector lanes will become vector code (run after ``vectorize-loads-stores``); the
    loops nested in one (a reduction's) become vector code with it."""
    return all(vectorizes_as_loop(op) for op in _outermost_lane_loops(module))


def _outermost_lane_loops(op: Operation) -> list[Operation]:
    if _lane_loop(op) and (vectorizes_as_loop(op) or not _around_lane_loops(op)):
        return [op]
    return [loop for region in op.regions for block in region.blocks for nested in block.ops
            for loop in _outermost_lane_loops(nested)]


# -- the rewrite ---------------------------------------------------------------------------------------


class _LoopVectorizer:
    """Replaces one loop over ``width`` lanes by the vector form of its body (see the module docstring)."""

    def __init__(self, loop: scf.ForOp, varying: set[SSAValue]):
        self.loop = loop
        self.iv = loop.body.block.args[0]
        width = _constant_int(loop.ub)
        assert width is not None
        self.width = width
        self.varying = varying
        self.vectors: dict[SSAValue, SSAValue] = {}  # a value depending on the lane -> the vector of its lanes
        self.splats: dict[SSAValue, SSAValue] = {}  # a value the same in every lane -> its splat
        self.nested_blocks: set[Block] = set()  # the bodies of the vector forms of nested loops

    def _vector_type(self, element: Attribute) -> VectorType:
        return VectorType(element, [self.width])

    def _before_loop(self, op: Operation, point: InsertPoint | None = None) -> SSAValue:
        Rewriter.insert_op(op, point if point is not None else InsertPoint.before(self.loop))
        return op.results[0]

    def _splat_point(self, value: SSAValue) -> InsertPoint | None:
        """Where the splat of ``value`` goes: right after it when a nested loop's vector form defines it (it
        dominates every use there), else before the loop (None)."""
        owner = value.owner
        block = owner if isinstance(owner, Block) else owner.parent_block()
        if block not in self.nested_blocks:
            return None
        return InsertPoint.at_start(block) if isinstance(owner, Block) else InsertPoint.after(owner)

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
            splat = self._before_loop(vector.BroadcastOp(value, self._vector_type(value.type)),
                                      self._splat_point(value))
        self.splats[value] = splat
        return splat

    def can_run(self) -> bool:
        """Whether every op depending on the lane has a vector form (no apply_indexing is left)."""
        for op in self.loop.body.walk():
            if op is self.loop or isinstance(op, (scf.YieldOp, scf.ForOp)):
                continue
            if not any(result in self.varying for result in op.results):
                continue
            if not isinstance(op, (vector.ExtractOp, vector.InsertOp)) and not _is_elementwise(op):
                return False
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
        self._move_block(block, InsertPoint.before(loop), hoisted)
        for same, value, init, result in zip(unchanged, yield_op.arguments, loop.iter_args, loop.results):
            result.replace_all_uses_with(init if same else self.vectors[value])
        Rewriter.erase_op(loop)
        for op in reversed(hoisted):  # xDSL's dead code elimination keeps arith.extsi and arith.remui
            if not any(result.uses for result in op.results):
                Rewriter.erase_op(op)

    def _is_varying(self, op: Operation) -> bool:
        if isinstance(op, scf.ForOp):
            return any(value in self.varying for value in _all_values(op))
        return any(result in self.varying for result in op.results)

    def _move_block(self, block: Block, point: InsertPoint, hoisted: list[Operation]) -> None:
        """Puts the vector form of ``block``'s ops at ``point``; the ops the same in every lane move there as they
        are."""
        for op in list(block.ops):
            if isinstance(op, scf.YieldOp):
                break
            if not self._is_varying(op):
                op.detach()
                Rewriter.insert_op(op, point)
                if block is self.loop.body.block:
                    hoisted.append(op)
            elif isinstance(op, scf.ForOp):
                self._nested_loop(op, point, hoisted)
            elif isinstance(op, vector.ExtractOp):
                self.vectors[op.result] = op.vector
            elif isinstance(op, vector.InsertOp):
                self.vectors[op.result] = self.vector_of(op.source)
            else:
                operands = [self.vector_of(operand) for operand in op.operands]
                new = vector_form(type(op)).create(
                    operands=operands, result_types=[self._vector_type(op.results[0].type)],
                    properties=dict(op.properties), attributes=dict(op.attributes))
                self.vectors[op.results[0]] = self._before_loop(new, point)

    def _nested_loop(self, nested: scf.ForOp, point: InsertPoint, hoisted: list[Operation]) -> None:
        """The vector form of a loop nested in the lane loop: the same bounds, its iter_args that differ from lane
        to lane carried as vectors."""
        body = nested.body.block
        args = body.args[1:]
        lanes = [arg in self.varying for arg in args]
        inits = [self.vector_of(init) if lane else init for lane, init in zip(lanes, nested.iter_args)]
        new_body = Block(arg_types=[body.args[0].type, *(value.type for value in inits)])
        self.nested_blocks.add(new_body)
        for before, after in zip(body.args, new_body.args):
            after.name_hint = before.name_hint
        new = scf.ForOp(nested.lb, nested.ub, nested.step, inits, Region(new_body))
        Rewriter.insert_op(new, point)
        body.args[0].replace_all_uses_with(new_body.args[0])
        for lane, arg, new_arg in zip(lanes, args, new_body.args[1:]):
            if lane:
                self.vectors[arg] = new_arg
            else:
                arg.replace_all_uses_with(new_arg)
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        self._move_block(body, InsertPoint.at_end(new_body), hoisted)
        yielded = [self.vector_of(value) if lane else value for lane, value in zip(lanes, yield_op.arguments)]
        new_body.add_op(scf.YieldOp(*yielded))
        for lane, result, new_result in zip(lanes, nested.results, new.results):
            new_result.name_hint = result.name_hint
            if lane:
                self.vectors[result] = new_result
            else:
                result.replace_all_uses_with(new_result)


def _in_module(op: Operation, module: ModuleOp) -> bool:
    return module.is_ancestor(op)


def vectorize_lanes(module: ModuleOp) -> int:
    """Replaces every loop over vector lanes that vectorizes by vector ops; returns how many."""
    done = 0
    for op in [op for op in module.walk() if vectorizes_as_loop(op)]:
        varying = _varying_values(op) if _in_module(op, module) else None  # not in a loop rewritten already
        if varying is None:
            continue
        vectorizer = _LoopVectorizer(op, varying)  # type: ignore[arg-type]
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
