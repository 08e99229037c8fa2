"""Producer-consumer loop fusion, as XLA:CPU's ``CpuInstructionFusion``
(``xla/service/cpu/cpu_instruction_fusion.cc`` on top of
``xla/service/instruction_fusion.cc``).

Each computation that runs as a sequence of thunks (the entry, while bodies
and conditions, conditional branches, ``call`` targets; never fused
computations, reducers, comparators or scatter combiners) is walked in reverse
post order, consumers before their producers. For a consumer, its operands
are tried latest-first; the first one that may be fused is cloned into the
consumer's ``kind=kLoop`` fusion (made from the consumer if it is not one
yet), the fusion goes back into the queue and its operands are tried again.
A producer left without users is removed.

The rules, XLA:CPU's unless said otherwise:

* Both sides are loop-fusible (``fusible_ops.can_be_loop_fused``: elementwise
  ops, maps included (elementwise for XLA's ``IsElementwise``), bitcast,
  broadcast, concatenate, dynamic-slice, dynamic-update-slice, gather, iota,
  pad, reduce, reshape, reverse, slice, transpose, as far as the loop emitter
  computes them) or the consumer is already a loop fusion. So
  dots, convolutions, sort, custom-calls, fft, control flow, random numbers,
  collectives, parameters, tuples and get-tuple-elements stay unfused. XLA:CPU
  also fuses small matrix-vector dots; xlapy leaves every dot to its library
  thunk.
* The producer is not the computation's root, not a fusion, has no side
  effect and returns an array; xlapy also leaves instructions with control
  dependencies in place.
* Constants: only (effectively) scalar ones are fused, and only into an
  existing fusion (no two-instruction fusion of a constant and one op).
  Broadcasts (of constants or anything else) are always duplicated into
  their users (``IsAlwaysDuplicable``), as are widening converts.
* Cost (``IsExpensive``, the CPU variant): a producer with several users is
  duplicated into each only when it is cheap (no transcendental, divide or
  remainder other than integer division by a constant, power, sqrt/rsqrt/cbrt,
  gather, reduce, reduce-window, f32-to-bf16 convert, ...). An expensive
  producer is not fused into a consumer that reads its elements more than once
  (``ReusesOperandElements``). Whether a consumer reuses an operand's elements
  is decided on xlapy's indexing maps (``xlapy/indexing``): it does when its
  output-to-operand map sends two points of its domain (range variables
  included, runtime variables held fixed) to one element, e.g. broadcast, the
  padding value of pad, reduce's initial value, overlapping reduce-window
  windows and gather's operand (whose indices may repeat; XLA counts gather as
  a permuting, non-reusing use). For a fusion the answer follows XLA's
  bookkeeping: an operand is reused when some path from it to the root passes
  a reusing use.
* A producer whose inputs are bigger than its output and that reads more than
  one large input (``EffectivelyAtMostUnary`` fails) is duplicated only if it
  can be fused into every consumer on every path
  (``ComputeGloballyUnfusible``).
* Code duplication (``FusionNodeIndexingEvaluation``): a producer is not fused
  when the fusion would compute it at more than 15 distinct indices per output
  element, nor when it would split the emitter's value cache
  (concatenate, pad, reduce, reduce-window, dynamic-update-slice) and be
  computed at more than one index or used more than once.
* Concatenate is not fused (as producer or consumer) when it has more than 8
  operands or concatenates along the minor-most dimension of a non-vector at
  least 64 bytes wide and 2 KiB in total (plain copies are faster); no more
  than 5 reduces go into one fusion, and a reduce does not fuse into a reduce
  that reads it as is (through reshapes, slices and concatenates: the halves
  of a tree reduction, as XLA:GPU keeps reductions apart); a
  dynamic-update-slice consumer does not
  take a non-elementwise producer that reads the buffer it updates in place
  (``ShouldFuseInPlaceOp``), except a (dynamic-)slice at the same offsets.
* Transposes are fused like any other data movement: XLA:CPU has no rule
  against a transposed (strided) read, and neither does xlapy.

Fusion parameters are the fusion's operands, one per distinct operand (an
operand read twice by the consumer is one parameter used twice). Fused
computations are named ``fused_computation``, ``fused_computation.1``, ...,
fusion instructions ``fusion``, ``fusion.1``, ...; every fusion made here has
``kind=kLoop`` (the hero a dedicated emitter would pick is not recorded in the
IR: ``fusion_hero.fusion_kind_of`` computes it).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.indexing.ops.op_indexing import op_output_to_input
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.call_graph import CONTROL_FLOW, CallGraph, unique_computation_name
from xlapy.transforms.fusible_ops import (
    CONCATENATE_HERO_MAX_OPERANDS,
    EmittablePredicate,
    can_be_loop_fused,
    is_elementwise,
    is_loop_emittable,
)
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import has_side_effect

# Opcodes XLA's ``IsExpensive`` (CPU variant) calls cheap; abs, sign, sine,
# cosine and tan only on real numbers, convert except f32 to bf16, divide and
# remainder only for integer division by a constant are handled apart.
_CHEAP = frozenset("""
add and bitcast bitcast-convert broadcast ceil clamp count-leading-zeros compare complex concatenate constant copy
copy-done copy-start dynamic-reshape dynamic-slice dynamic-update-slice floor get-tuple-element imag infeed iota
is-finite maximum minimum multiply negate not opt-barrier or outfeed pad partition-id popcnt real reduce-precision
replica-id reshape reverse round-nearest-afz round-nearest-even select shift-left shift-right-arithmetic
shift-right-logical slice stochastic-convert subtract transpose tuple xor
""".split())
_CHEAP_UNLESS_COMPLEX = frozenset({"abs", "sign", "sine", "cosine", "tan"})

# Ops after which the elemental emitter cannot reuse values computed before
# them (XLA's ``ElementalIrEmitter::OpInvalidatesCache``).
_INVALIDATES_CACHE = frozenset({"concatenate", "dot", "dynamic-update-slice", "pad", "reduce", "reduce-window"})

# Opcodes XLA's ``IsFusible`` refuses whatever their effects.
_NEVER_FUSIBLE = frozenset({"domain", "parameter", "while", "conditional", "call"})

ALLOWED_CODE_DUPLICATION = 15
MAX_CONCATENATE_OPERANDS = 8
MAX_REDUCTIONS_IN_FUSION = 5

# Reuse is a local property of an indexing map: a small window of its domain decides it.
_REUSE_WINDOW = 4


def _is_complex(shape: Shape) -> bool:
    return not shape.is_tuple and shape.element_type in ELEMENT_TYPES and ELEMENT_TYPES[shape.element_type].is_complex


def _is_integral(shape: Shape) -> bool:
    return not shape.is_tuple and shape.element_type in ELEMENT_TYPES and ELEMENT_TYPES[shape.element_type].is_integral


def _elements(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_elements(s) for s in shape.tuple_shapes)
    return int(np.prod(shape.dimensions, dtype=np.int64))


def _byte_width(shape: Shape) -> int:
    return ELEMENT_TYPES[shape.element_type].byte_width if shape.element_type in ELEMENT_TYPES else 1


def is_effective_scalar(shape: Shape) -> bool:
    return not shape.is_tuple and all(d == 1 for d in shape.dimensions)


def _is_constant_effective_scalar(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" and is_effective_scalar(instr.shape)


def is_expensive(instr: HloInstruction) -> bool:
    """XLA:CPU's ``CpuInstructionFusion::IsExpensive``."""
    opcode = instr.opcode
    if opcode in _CHEAP:
        return False
    if opcode in _CHEAP_UNLESS_COMPLEX:
        return _is_complex(instr.shape)
    if opcode == "convert":
        # f32 to bf16 rounds and checks for NaN; the other way is a shift.
        return instr.shape.element_type == "bf16" and instr.operands[0].shape.element_type == "f32"
    if opcode in ("divide", "remainder"):
        # Integer division by a constant becomes multiplies and shifts.
        divisor = instr.operands[1]
        by_constant = _is_constant_effective_scalar(divisor) or (
            divisor.opcode == "broadcast" and _is_constant_effective_scalar(divisor.operands[0]))
        return not (_is_integral(instr.shape) and by_constant)
    return True


def _reduced_again(consumer: HloInstruction, operand_index: int) -> bool:
    """Whether operand ``operand_index`` of ``consumer`` is reduced again, as is (by ``consumer`` or, through
    reshapes, slices and concatenates, by a reduce in its fusion): XLA:GPU keeps a reduction from fusing into
    another."""
    if consumer.opcode == "reduce":
        return True
    if consumer.opcode != "fusion":
        return False
    pending = [p for p in consumer.fused_computation.parameters if p.parameter_number == operand_index]
    while pending:
        for user in pending.pop().users:
            if user.opcode == "reduce":
                return True
            if user.opcode in ("reshape", "bitcast", "slice", "concatenate"):
                pending.append(user)
    return False


def is_fusible(instr: HloInstruction) -> bool:
    """XLA's ``HloInstruction::IsFusible``."""
    if instr.opcode in _NEVER_FUSIBLE:
        return False
    if instr.opcode in ("fusion", "map", "reduce", "reduce-window"):
        return True
    if instr.opcode == "rng":
        return len(instr.users) <= 1
    return not has_side_effect(instr)


def is_loop_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.attr("kind") == "kLoop"


# -- operand reuse ------------------------------------------------------------


def _map_reuses(indexing_map: IndexingMap, seen: set[tuple[int, ...]]) -> bool:
    """Whether ``indexing_map`` sends two points of a window of its domain
    (runtime variables fixed at their lower bound) to one element, or to an
    element in ``seen`` (the elements other maps of the same operand read)."""
    if indexing_map.is_undefined():
        return True
    if indexing_map.is_known_empty():
        return False

    def window(var: Variable) -> Variable:
        lower = var.bounds.lower
        return Variable(Interval(lower, min(var.bounds.upper, lower + _REUSE_WINDOW - 1)))

    fixed = [Variable(Interval(v.bounds.lower, v.bounds.lower)) for v in indexing_map.rt_vars]
    boxed = IndexingMap.from_exprs(indexing_map.results, [window(v) for v in indexing_map.dim_vars],
                                   [window(v) for v in indexing_map.range_vars], fixed, indexing_map.constraints)
    dims, symbols = boxed.box_arrays()
    variables = [*dims, *symbols]
    if variables:
        keep = boxed.contains_arrays(dims, symbols)
        dims, symbols = [d[keep] for d in dims], [s[keep] for s in symbols]
        count = int(keep.sum())
    else:
        count = 1
    if count == 0:
        return False
    if not indexing_map.results:
        points = [()] * count
    else:
        points = list(zip(*(np.asarray(r).tolist() for r in boxed.evaluate_arrays(dims, symbols))))
    distinct = set(points)
    if len(distinct) < len(points) or distinct & seen:
        return True
    seen |= distinct
    return False


def op_reuses_operand(instr: HloInstruction, operand_index: int) -> bool:
    """Whether computing every output element of the single op ``instr``
    reads some element of operand ``operand_index`` more than once."""
    operand = instr.operands[operand_index]
    if is_elementwise(instr) and operand.shape.dimensions == instr.shape.dimensions:
        return False
    outputs = len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1
    seen: set[tuple[int, ...]] = set()
    for output in range(outputs):
        maps = op_output_to_input(instr, output)[operand_index]
        for indexing_map in maps:
            if _map_reuses(indexing_map, seen):
                return True
    return False


class _ReuseCache:
    """The operands each consumer reuses, kept for fusions as XLA's
    ``UpdateReusedOperandsForFusion`` keeps them as instructions get fused."""

    def __init__(self) -> None:
        self._reused: dict[HloInstruction, set[HloInstruction]] = {}

    def reused_operands(self, instr: HloInstruction) -> set[HloInstruction]:
        found = self._reused.get(instr)
        if found is None:
            if instr.opcode == "fusion":
                found = {instr.operands[p.parameter_number] for p in _reused_fusion_parameters(instr)}
            else:
                found = {operand for k, operand in enumerate(instr.operands) if op_reuses_operand(instr, k)}
            self._reused[instr] = found
        return found

    def reuses(self, consumer: HloInstruction, operand_index: int) -> bool:
        return consumer.operands[operand_index] in self.reused_operands(consumer)

    def on_fused(self, producer: HloInstruction, fusion: HloInstruction, consumer: HloInstruction) -> None:
        reused = set(self.reused_operands(consumer))
        if producer in reused:
            reused.discard(producer)
            reused.update(producer.operands)
        else:
            reused |= self.reused_operands(producer)
        self._reused[fusion] = reused

    def forget(self, instr: HloInstruction) -> None:
        self._reused.pop(instr, None)


def _reused_fusion_parameters(fusion: HloInstruction) -> list[HloInstruction]:
    """The fused parameters some path to the root reads through a reusing use."""
    computation = fusion.fused_computation
    # reused_below[x]: x's value is read more than once per output element on some path to the root.
    reused_below: dict[HloInstruction, bool] = {}
    for instr in reversed(computation.post_order()):
        reused = any(reused_below.get(user, False) or op_reuses_operand(user, k)
                     for user in instr.users for k, o in enumerate(user.operands) if o is instr)
        reused_below[instr] = reused
    return [p for p in computation.parameters if reused_below.get(p, False)]


# -- code duplication ------------------------------------------------------------


def _same_dimensions_and_layout(a: Shape, b: Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return False
    return a.dimensions == b.dimensions and a.layout_or_default == b.layout_or_default


def _user_count(instr: HloInstruction) -> int:
    """XLA's count of real users: a fusion counts the users of its parameters for ``instr``."""
    count = 0
    for user in instr.users:
        if user.opcode == "fusion":
            count += sum(len(p.users) for p in user.fused_computation.parameters
                         if user.operands[p.parameter_number] is instr)
        else:
            count += 1
    return count


def code_duplication_too_high(fusion: HloInstruction, producer: HloInstruction) -> bool:
    """XLA's ``FusionNodeIndexingEvaluation::CodeDuplicationTooHigh`` for
    fusing ``producer`` (an operand of ``fusion``) into ``fusion``."""
    if producer.opcode == "broadcast":
        return False  # materialising a broadcast costs more than recomputing it
    computation = fusion.fused_computation
    indexing_users: dict[HloInstruction, set[HloInstruction]] = {computation.root: {fusion}}
    usage: dict[HloInstruction, int] = {fusion: 1}
    for instr in reversed(computation.post_order()):
        if instr.opcode == "parameter":
            continue
        users = indexing_users.get(instr, set())
        usage[instr] = sum(usage[u] for u in users)
        for operand in instr.operands:
            key = fusion.operands[operand.parameter_number] if operand.opcode == "parameter" else operand
            target = indexing_users.setdefault(key, set())
            # Same-shaped operands and transposes are read at the instruction's
            # own (permuted) index; any other op derives a new index.
            if instr.opcode == "transpose" or _same_dimensions_and_layout(operand.shape, instr.shape):
                target |= users
            else:
                target.add(instr)
    emitted = sum(usage[u] for u in indexing_users.get(producer, ()))
    if emitted > ALLOWED_CODE_DUPLICATION:
        return True
    return producer.opcode in _INVALIDATES_CACHE and (emitted > 1 or _user_count(producer) > 1)


# -- the global analysis ------------------------------------------------------------


def reachability(order: list[HloInstruction]) -> dict[HloInstruction, int]:
    """For each instruction, a bit set (over positions in ``order``) of the
    instructions it is reachable from, itself included."""
    position = {instr: k for k, instr in enumerate(order)}
    reach: dict[HloInstruction, int] = {}
    for k, instr in enumerate(order):
        bits = 1 << k
        for predecessor in (*instr.operands, *instr.control_predecessors):
            bits |= reach.get(predecessor, 0) if predecessor in position else 0
        reach[instr] = bits
    return reach


def effectively_at_most_unary(instr: HloInstruction) -> bool:
    """XLA's ``EffectivelyAtMostUnary``: at most one operand of the output's
    rank or more, broadcasts, iotas and scalar constants not counting."""
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    output_rank = max((_true_rank(s) for s in shapes if not s.is_tuple), default=0)
    large = 0
    for operand in instr.operands:
        if operand.opcode in ("broadcast", "iota") or _is_constant_effective_scalar(operand):
            continue
        if not operand.shape.is_tuple and _true_rank(operand.shape) >= output_rank:
            large += 1
    return large <= 1


def _true_rank(shape: Shape) -> int:
    return sum(1 for d in shape.dimensions if d != 1)


# -- the pass ------------------------------------------------------------


class InstructionFusion(HloPass):
    """XLA:CPU's producer-consumer loop fusion (see the module docstring).
    ``emittable`` says whether the loop emitter computes an instruction inside
    a fusion (default: ``fusible_ops.is_loop_emittable``); with
    ``may_duplicate=False`` no producer is copied into several consumers (as
    XLA:CPU runs it when multi-output fusion follows)."""

    name = "fusion"

    def __init__(self, *, may_duplicate: bool = True, emittable: EmittablePredicate | None = None) -> None:
        self.may_duplicate = may_duplicate
        self.emittable = emittable or is_loop_emittable
        self._reuse = _ReuseCache()

    # -- decisions --

    def can_be_loop_fused(self, instr: HloInstruction) -> bool:
        return can_be_loop_fused(instr, self.emittable)

    def should_fuse(self, consumer: HloInstruction, operand_index: int) -> bool:
        """XLA:CPU's ``ShouldFuse``: whether operand ``operand_index`` of
        ``consumer`` may be fused into it."""
        producer = consumer.operands[operand_index]
        computation = consumer.parent
        if producer.opcode == "constant" and not is_effective_scalar(producer.shape):
            return False
        if not self.can_be_loop_fused(producer) or producer.shape.is_tuple:
            return False
        if producer.control_predecessors or producer.control_successors:
            return False
        if consumer.opcode != "fusion":
            # A tuple-shaped consumer is a variadic reduce (``is_loop_emittable``): it takes producers as the
            # root of its fusion, as XLA fuses argmax's iota into its reduce.
            if not self.can_be_loop_fused(consumer):
                return False
            if consumer.control_predecessors or consumer.control_successors:
                return False
        elif not is_loop_fusion(consumer):
            return False
        if _inefficient_concatenate(producer) or _inefficient_concatenate(consumer):
            return False
        if is_expensive(producer) and self._reuse.reuses(consumer, operand_index):
            return False
        # InstructionFusion::ShouldFuse.
        if computation is not None and producer is computation.root:
            return False
        would_duplicate = not (len(producer.users) == 1 and producer.users[0] is consumer)
        always_duplicable = producer.opcode == "broadcast" or (
            producer.opcode == "convert" and byte_size(producer.operands[0].shape) < byte_size(producer.shape))
        if would_duplicate and (not self.may_duplicate or is_expensive(producer)) and not always_duplicable:
            return False
        if not _in_place_fusion_is_safe(producer, consumer):
            return False
        if consumer.opcode == "fusion" and producer.opcode == "reduce":
            reduces = sum(1 for i in consumer.fused_computation.instructions if i.opcode == "reduce")
            if reduces > MAX_REDUCTIONS_IN_FUSION:
                return False
        if producer.opcode == "reduce" and _reduced_again(consumer, operand_index):
            return False  # the halves of a tree reduction (tree_reduction_rewriter.py) stay separate kernels
        # No two-instruction fusion of a constant and one op.
        if producer.opcode == "constant" and consumer.opcode != "fusion":
            return False
        duplicates = self.may_duplicate and consumer.opcode == "fusion"
        return not (duplicates and code_duplication_too_high(consumer, producer))

    def _globally_unfusible(self, order: list[HloInstruction]) -> set[HloInstruction]:
        """XLA's ``ComputeGloballyUnfusible``: producers that would add memory
        traffic if duplicated, unless they fuse into every consumer on every path."""
        reach = reachability(order)
        position = {instr: k for k, instr in enumerate(order)}
        do_not_duplicate: set[HloInstruction] = set()
        cache: dict[tuple[HloInstruction, HloInstruction], bool] = {}

        def reaches(producer: HloInstruction, instr: HloInstruction) -> bool:
            return instr in reach and bool(reach[instr] >> position[producer] & 1)

        def on_all_paths(producer: HloInstruction, consumer: HloInstruction) -> bool:
            if consumer is producer:
                return True
            if not is_fusible(consumer):
                return False
            key = (producer, consumer)
            if key not in cache:
                result = True
                for k, operand in enumerate(consumer.operands):
                    if not reaches(producer, operand):
                        continue
                    if operand in do_not_duplicate or not self.should_fuse(consumer, k) \
                            or not on_all_paths(producer, operand):
                        result = False
                        break
                cache[key] = result
            return cache[key]

        for producer in reversed(order):
            if effectively_at_most_unary(producer):
                continue
            operands_size = sum(_elements(o.shape) for o in dict.fromkeys(producer.operands))
            if operands_size <= _elements(producer.shape):
                continue
            if is_fusible(producer) and all(on_all_paths(producer, user) for user in producer.users):
                continue
            do_not_duplicate.add(producer)
        return do_not_duplicate

    # -- the walk --

    def run(self, module: HloModule) -> bool:
        self._reuse = _ReuseCache()
        changed = False
        for computation in thunk_computations(module):
            changed |= self._run_on(module, computation)
        return changed

    def _run_on(self, module: HloModule, computation: HloComputation) -> bool:
        order = computation.post_order()
        do_not_duplicate = self._globally_unfusible(order) if self.may_duplicate else set()
        queue: list[HloInstruction | None] = list(order)
        index = {instr: k for k, instr in enumerate(queue)}
        changed = False
        while queue:
            instr = queue.pop()
            if instr is None:
                continue
            index.pop(instr, None)
            if not is_fusible(instr) and instr.opcode != "fusion":
                continue
            # Latest producers first, so that a value used both directly and
            # through another operand is not fused twice.
            candidates = sorted((k for k, o in enumerate(instr.operands) if o in index),
                                key=lambda k: index[instr.operands[k]], reverse=True)
            for k in candidates:
                operand = instr.operands[k]
                if not is_fusible(operand) or operand in do_not_duplicate or not self.should_fuse(instr, k):
                    continue
                fusion = self.fuse(module, operand, instr)
                changed = True
                index[fusion] = len(queue)
                queue.append(fusion)
                if not operand.users:
                    do_not_duplicate.discard(operand)
                    queue[index.pop(operand)] = None
                    self._reuse.forget(operand)
                    computation.remove_instruction(operand)
                if fusion is not instr:
                    do_not_duplicate.discard(instr)
                break
        return changed

    def fuse(self, module: HloModule, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        """Clone ``producer`` into ``consumer``'s loop fusion (made from
        ``consumer`` first unless it is a fusion); returns the fusion."""
        fusion = consumer if consumer.opcode == "fusion" else make_loop_fusion(module, consumer)
        self._reuse.on_fused(producer, fusion, consumer)
        if fusion is not consumer:
            self._reuse.forget(consumer)
        fuse_into(module, fusion, producer)
        return fusion


def byte_size(shape: Shape) -> int:
    return _elements(shape) * _byte_width(shape)


def _inefficient_concatenate(instr: HloInstruction) -> bool:
    """XLA:CPU keeps a concatenate with many operands, or a wide one along the
    minor-most dimension (plain copies beat branches in the inner loop), unfused.
    Not one the concatenate emitter takes (``CONCATENATE_HERO_MAX_OPERANDS``
    operands at most, as XLA:GPU's): it writes each operand in a loop of its own,
    without branches, so producers and an epilogue fuse into it as on the GPU (a
    concatenate of f32[2048,1024], b * 2 of f32[2048,512] and f32[2048,256]: one
    kernel moving 28 MB instead of two moving 36 MB)."""
    if instr.opcode != "concatenate" or len(instr.operands) <= CONCATENATE_HERO_MAX_OPERANDS:
        return False
    if len(instr.operands) > MAX_CONCATENATE_OPERANDS:
        return True
    shape = instr.shape
    if len(shape.dimensions) <= 1:
        return False
    dimension = instr.attr("dimensions")
    dimension = dimension[0] if isinstance(dimension, (list, tuple)) else dimension
    minor = shape.layout_or_default.minor_to_major[0]
    width = shape.dimensions[dimension] * _byte_width(shape)
    return dimension == minor and width >= 64 and byte_size(shape) >= 2048


def _in_place_fusion_is_safe(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """XLA's ``ShouldFuseInPlaceOp`` for dynamic-update-slice: the updated
    buffer is written in place, so no other operand may be that buffer, and a
    non-elementwise producer reading it must be a slice or dynamic-slice of
    the updated window."""
    dus = _single_dynamic_update_slice(consumer)
    if dus is None:
        return True
    buffer_index = _outer_operand_index(consumer, dus, 0)
    if buffer_index is None:
        return True
    buffer = consumer.operands[buffer_index]
    if sum(1 for o in consumer.operands if o is buffer) > 1:
        return False
    if is_elementwise(producer) or all(o is not buffer for o in producer.operands):
        return True
    if producer.opcode == "slice" and producer.shape == dus.operands[1].shape:
        starts = producer.attr("slice") or ()
        for k, start_operand in enumerate(dus.operands[2:]):
            real = _outer(consumer, start_operand)
            value = _constant_integer(real)
            if value is None or k >= len(starts) or starts[k].start != value or starts[k].stride != 1:
                return False
        return True
    if producer.opcode == "dynamic-slice" and producer.shape == dus.operands[1].shape:
        for ds_start, dus_start in zip(producer.operands[1:], dus.operands[2:]):
            real = _outer(consumer, dus_start)
            a, b = _constant_integer(ds_start), _constant_integer(real)
            if a != b or (a is None and ds_start is not real):
                return False
        return True
    return False


def _single_dynamic_update_slice(instr: HloInstruction) -> HloInstruction | None:
    if instr.opcode == "dynamic-update-slice":
        return instr
    if instr.opcode != "fusion":
        return None
    found = [i for i in instr.fused_computation.instructions if i.opcode == "dynamic-update-slice"]
    return found[0] if len(found) == 1 else None


def _outer(fusion: HloInstruction, value: HloInstruction) -> HloInstruction:
    """The instruction outside ``fusion`` that a fused parameter stands for."""
    if fusion.opcode == "fusion" and value.opcode == "parameter" and value.parent is fusion.fused_computation:
        return fusion.operands[value.parameter_number]
    return value


def _outer_operand_index(consumer: HloInstruction, dus: HloInstruction, k: int) -> int | None:
    if consumer is dus:
        return k
    value = dus.operands[k]
    return value.parameter_number if value.opcode == "parameter" else None


def _constant_integer(instr: HloInstruction) -> int | None:
    if instr.opcode != "constant" or instr.literal is None:
        return None
    try:
        return int(np.asarray(getattr(instr.literal, "array", instr.literal)).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        return None


# -- editing ------------------------------------------------------------


def thunk_computations(module: HloModule) -> list[HloComputation]:
    """The computations run as sequences of thunks, callees first: those only
    ever called as control flow (never fused, reducers, comparators, ...)."""
    graph = CallGraph(module)
    return [c for c in module.computation_post_order()
            if c.fusion_instruction is None and graph.context.get(id(c)) == CONTROL_FLOW]


def set_operands(instr: HloInstruction, operands: Iterable[HloInstruction]) -> None:
    """Replace every operand of ``instr``, keeping user lists in step."""
    for old in {id(o): o for o in instr.operands}.values():
        old.users.remove(instr)
    instr.operands = []
    for operand in operands:
        instr.append_operand(operand)


def make_loop_fusion(module: HloModule, instr: HloInstruction) -> HloInstruction:
    """Replace ``instr`` by a ``kind=kLoop`` fusion computing it, with one
    parameter per distinct operand; returns the fusion."""
    computation = instr.parent
    fused = HloComputation(unique_computation_name(module, "fused_computation"))
    fused.execution_thread = computation.execution_thread
    module.add_computation(fused)
    distinct = list({id(o): o for o in instr.operands}.values())
    parameters = {}
    for number, operand in enumerate(distinct):
        parameter = HloInstruction(f"param_{number}", "parameter", operand.shape)
        parameter.parameter_number = number
        parameters[id(operand)] = fused.add_instruction(parameter)
    clone = instr.clone([parameters[id(o)] for o in instr.operands], suffix="clone")
    clone.name = instr.name
    fused.root = fused.add_instruction(clone)
    fusion = HloInstruction("fusion", "fusion", instr.shape, distinct,
                            {"kind": "kLoop", "calls": fused.name}, [fused])
    fusion.sdy_sharding = instr.sdy_sharding
    if "sharding" in instr.attributes:
        fusion.attributes["sharding"] = instr.attributes["sharding"]
    fused.fusion_instruction = fusion
    computation.add_instruction(fusion, before=instr)
    instr.replace_all_uses_with(fusion)
    computation.remove_instruction(instr)
    return fusion


def fuse_into(module: HloModule, fusion: HloInstruction, producer: HloInstruction) -> HloInstruction:
    """Clone ``producer`` (an operand of ``fusion``) into the fused
    computation in place of its parameter; the producer's operands become
    operands of the fusion (each once). Returns the clone."""
    fused = fusion.fused_computation
    parameters = fused.parameters
    old = [p for p in parameters if fusion.operands[p.parameter_number] is producer]
    first_use = next((i for i in fused.instructions if any(o in old for o in i.operands)), None)
    operands = [o for k, o in enumerate(fusion.operands) if k not in {p.parameter_number for p in old}]
    kept = [p for p in parameters if p not in old]
    by_operand = {id(fusion.operands[p.parameter_number]): p for p in kept}
    clone_operands = []
    for operand in producer.operands:
        parameter = by_operand.get(id(operand))
        if parameter is None:
            parameter = HloInstruction(f"param_{len(kept)}", "parameter", operand.shape)
            fused.add_instruction(parameter, before=first_use)
            kept.append(parameter)
            operands.append(operand)
            by_operand[id(operand)] = parameter
        clone_operands.append(parameter)
    clone = producer.clone(clone_operands, suffix="clone")
    clone.name = producer.name
    fused.add_instruction(clone, before=first_use)
    for parameter in old:
        parameter.replace_all_uses_with(clone)
        fused.remove_instruction(parameter)
    # Parameter k stands for operand k.
    for number, parameter in enumerate(kept):
        parameter.parameter_number = number
    set_operands(fusion, operands)
    return clone
