"""Multi-output loop fusion, after XLA:CPU's ``CpuMultiOutputFusion``
(``xla/service/cpu/cpu_multi_output_fusion.cc`` on top of
``xla/service/multi_output_fusion.cc``; the producer-consumer part follows
``xla/service/gpu/transforms/multi_output_fusion.cc``).

Two kinds of fusion, in the computations that run as thunks:

* Producer-consumer: a loop-fusible producer (or single-output loop fusion)
  that instruction fusion kept out of its consumer because it has other users
  (an expensive value computed once) is fused into the consumer anyway and
  becomes an extra output of it, which the other users read through
  get-tuple-element. Done only when the consumer reads the producer at its
  own output index (the consumer's indexing map to that operand is the
  identity), so that the value is computed once per element and written out,
  not recomputed elsewhere.
* Sibling: two fusible instructions reading a common operand (not a scalar
  constant; an operand with at least two users, XLA's ``IsProfitableOperand``)
  become one fusion reading it once. The profit of a pair is the bytes of the
  operands they share; the best pair is fused first, then the search starts
  again.

Fusible (XLA's ``CpuMultiOutputFusion::IsFusible``): a loop fusion, or an
instruction the loop emitter computes (not a constant, parameter or dot),
outside fused computations. Both sides must write arrays of equal dimensions
(and layout): the loop emitter writes every output at one index. Neither may
reach the other through other instructions (the merged fusion would be a
cycle), nor have control dependencies, and neither may have 20 operands or more
(compile time). The merged fusion's root is a tuple of every output, its
parameters its distinct operands; it is named ``fusion`` (made unique) and
keeps ``kind=kLoop``.
"""

from __future__ import annotations

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.indexing.hlo_indexing import output_to_input_indexing
from xlapy.indexing.indexing_map import IndexingMap
from xlapy.shapes import Shape
from xlapy.transforms.fusible_ops import EmittablePredicate, is_loop_emittable
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.instruction_fusion import (
    byte_size,
    is_effective_scalar,
    is_loop_fusion,
    make_loop_fusion,
    reachability,
    set_operands,
    thunk_computations,
)

MAX_OPERANDS = 20


def _outputs(instr: HloInstruction) -> list[Shape]:
    return list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]


def element_shape(instr: HloInstruction) -> Shape | None:
    """The shape of each array ``instr`` writes (those of a multi-output fusion agree), or None."""
    outputs = _outputs(instr)
    if any(o.is_tuple for o in outputs):
        return None
    return outputs[0]


def _same_element_shape(a: HloInstruction, b: HloInstruction) -> bool:
    sa, sb = element_shape(a), element_shape(b)
    return (sa is not None and sb is not None and sa.dimensions == sb.dimensions
            and sa.layout_or_default == sb.layout_or_default)


class MultiOutputFusion(HloPass):
    """Sibling and producer-consumer multi-output fusion (see the module
    docstring); ``emittable`` as for ``InstructionFusion``."""

    name = "multi_output_fusion"

    def __init__(self, *, emittable: EmittablePredicate | None = None) -> None:
        self.emittable = emittable or is_loop_emittable

    def is_fusible(self, instr: HloInstruction) -> bool:
        if instr.control_predecessors or instr.control_successors or len(instr.operands) >= MAX_OPERANDS:
            return False
        if instr.opcode == "fusion":
            if not is_loop_fusion(instr):
                return False
            root = instr.fused_computation.root
            if root.opcode == "tuple":
                return all(u.opcode == "get-tuple-element" for u in instr.users) and element_shape(instr) is not None
            return root.opcode not in ("dot", "scatter") and not instr.shape.is_tuple
        if instr.opcode in ("constant", "parameter", "dot"):
            return False
        return self.emittable(instr)

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in thunk_computations(module):
            while self._producer_consumer(module, computation) or self._siblings(module, computation):
                changed = True
        return changed

    # -- producer-consumer --

    def _producer_consumer(self, module: HloModule, computation: HloComputation) -> bool:
        order = computation.post_order()
        reach = reachability(order)
        position = {instr: k for k, instr in enumerate(order)}
        for consumer in reversed(order):
            if not self.is_fusible(consumer) or (consumer.shape.is_tuple and consumer.opcode != "fusion"):
                continue
            for k, producer in enumerate(consumer.operands):
                if len(producer.users) < 2 or producer is computation.root or not self.is_fusible(producer):
                    continue
                if producer.shape.is_tuple or not _same_element_shape(producer, consumer):
                    continue
                if any(o is not producer and reach[o] >> position[producer] & 1 for o in consumer.operands):
                    continue  # another path from the producer into the consumer: fusing would make a cycle
                if not _reads_at_own_index(consumer, k):
                    continue
                _fuse_pair(module, consumer, producer)
                return True
        return False

    # -- siblings --

    def _siblings(self, module: HloModule, computation: HloComputation) -> bool:
        order = computation.post_order()
        reach = reachability(order)
        position = {instr: k for k, instr in enumerate(order)}
        best: tuple[int, int, HloInstruction, HloInstruction] | None = None
        for rank, shared in enumerate(order):
            if len(shared.users) < 2 or (shared.opcode == "constant" and is_effective_scalar(shared.shape)):
                continue
            users = [u for u in shared.users if u.parent is computation and self.is_fusible(u)]
            for i, first in enumerate(users):
                for second in users[i + 1:]:
                    if not _same_element_shape(first, second):
                        continue
                    if reach[second] >> position[first] & 1 or reach[first] >> position[second] & 1:
                        continue
                    profit = _profit(first, second)
                    if profit > 0 and (best is None or profit > best[0]):
                        best = (profit, -rank, first, second)
        if best is None:
            return False
        _fuse_pair(module, best[2], best[3])
        return True


def _fuse_pair(module: HloModule, target: HloInstruction, other: HloInstruction) -> None:
    """Make ``target`` and ``other`` (a producer of ``target``, or a sibling)
    loop fusions if they are not, then merge ``other`` into ``target``."""
    computation = target.parent
    target = target if target.opcode == "fusion" else make_loop_fusion(module, target)
    other = other if other.opcode == "fusion" else make_loop_fusion(module, other)
    _merge(target, other)
    computation.remove_instruction(other)
    module.computations.remove(other.fused_computation)
    _restore_order(computation)


def _profit(first: HloInstruction, second: HloInstruction) -> int:
    """Bytes of the operands the two read in common (XLA's ``GetProfit``)."""
    shared = {o for o in first.operands if len(o.users) >= 2
              and not (o.opcode == "constant" and is_effective_scalar(o.shape))}
    return sum(byte_size(o.shape) for o in dict.fromkeys(second.operands) if o in shared)


def _reads_at_own_index(consumer: HloInstruction, operand_index: int) -> bool:
    """Whether every output element of ``consumer`` reads operand
    ``operand_index`` at its own index, and only there."""
    operand = consumer.operands[operand_index]
    identity = IndexingMap.identity(operand.shape.dimensions)
    maps: set[IndexingMap] = set()
    for output in range(len(_outputs(consumer))):
        per_operand = output_to_input_indexing(consumer, output)
        for k, o in enumerate(consumer.operands):
            if o is operand:
                maps |= per_operand[k]
    return bool(maps) and all(m == identity or m.reads_its_own_indices() for m in maps)


def _roots(fusion: HloInstruction) -> list[HloInstruction]:
    root = fusion.fused_computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _get_tuple_element(fusion: HloInstruction, index: int) -> HloInstruction:
    gte = HloInstruction(f"get-tuple-element.{index}", "get-tuple-element", fusion.shape.tuple_shapes[index],
                         [fusion], {"index": index})
    computation = fusion.parent
    following = computation.instructions.index(fusion) + 1
    before = computation.instructions[following] if following < len(computation.instructions) else None
    return computation.add_instruction(gte, before=before)


def _make_multi_output(fusion: HloInstruction) -> None:
    """Give a single-output fusion a tuple root; its users read output 0."""
    fused = fusion.fused_computation
    root = fused.root
    if root.opcode == "tuple":
        return
    users = list(fusion.users)
    was_root = fusion.parent.root is fusion
    tuple_root = HloInstruction("tuple", "tuple", Shape.make_tuple([root.shape]), [root])
    fused.root = fused.add_instruction(tuple_root)
    fusion.shape = tuple_root.shape
    gte = _get_tuple_element(fusion, 0)
    for user in users:
        user.replace_operand_with(fusion, gte)
    if was_root:
        fusion.parent.root = gte


def _merge(target: HloInstruction, other: HloInstruction) -> None:
    """Move ``other``'s fused computation into ``target``, its outputs becoming
    extra outputs of ``target``. Where ``target`` reads ``other`` (a producer),
    it reads the moved computation's root instead. Users of ``other`` other
    than ``target`` read its outputs through get-tuple-element."""
    computation = target.parent
    fused = target.fused_computation
    _make_multi_output(target)
    operands = list(target.operands)
    parameters = sorted(fused.parameters, key=lambda p: p.parameter_number)
    by_operand = {id(o): p for o, p in zip(operands, parameters)}
    mapping: dict[HloInstruction, HloInstruction] = {}
    tuple_root = fused.root
    for instr in other.fused_computation.post_order():
        if instr.opcode == "parameter":
            outer = other.operands[instr.parameter_number]
            found = by_operand.get(id(outer))
            if found is None:
                found = HloInstruction(f"param_{len(operands)}", "parameter", outer.shape)
                found.parameter_number = len(operands)
                fused.add_instruction(found, before=tuple_root)
                operands.append(outer)
                parameters.append(found)
                by_operand[id(outer)] = found
            mapping[instr] = found
            continue
        if instr is other.fused_computation.root and instr.opcode == "tuple":
            continue
        clone = instr.clone([mapping[o] for o in instr.operands], suffix="clone")
        clone.name = instr.name
        mapping[instr] = fused.add_instruction(clone, before=tuple_root)
    offset = len(tuple_root.operands)
    other_roots = [mapping[value] for value in _roots(other)]
    for value in other_roots:
        tuple_root.append_operand(value)
    tuple_root.shape = Shape.make_tuple([o.shape for o in tuple_root.operands])
    target.shape = tuple_root.shape
    # A producer's value is now computed inside: its parameter goes.
    for k in reversed(range(len(operands))):
        if operands[k] is other:
            parameters[k].replace_all_uses_with(other_roots[0])
            fused.remove_instruction(parameters[k])
            del operands[k], parameters[k]
    for number, parameter in enumerate(parameters):
        parameter.parameter_number = number
    set_operands(target, operands)
    if other.shape.is_tuple:
        for user in list(other.users):
            user.attributes["index"] = offset + user.attr("index")
            user.replace_operand_with(other, target)
    else:
        users = list(other.users)
        was_root = computation.root is other
        gte = _get_tuple_element(target, offset)
        for user in users:
            user.replace_operand_with(other, gte)
        if was_root:
            computation.root = gte


def _restore_order(computation: HloComputation) -> None:
    """Keep the instruction list in an order where operands come first."""
    order = computation.post_order()
    reached = set(order)
    dead = [i for i in computation.instructions if i not in reached]
    computation.instructions[:] = [*order, *dead]
