"""Expansion of ``rng-bit-generator`` into integer ops, as XLA's
``RngBitGeneratorExpander`` (``xla/service/rng_bit_generator_expander.cc``):
the instruction becomes a ``call`` of a computation that takes the state and
returns (next state, bits), one computation per (algorithm, state shape, bits
shape). The computation is the Philox4x32-10 generator of
``xla/hlo/builder/lib/prng.cc`` (``PhiloxBitGenerator``); ``rng_default`` is
Philox too, the default XLA:CPU gives the expander.

The key is the low and high words of ``state[0]``; the 128-bit counter is
``state[1:3]`` for a ``u64[3]`` state and (``state[1]``, ``state[0]``) for a
``u64[2]`` one. Each block of four 32-bit words comes from counter + block
index; 32-bit and narrower bits take one word each (narrow types keep its low
bits), 64-bit bits join two. The next state advances the counter by the
number of blocks.

ThreeFry (``rng_three_fry``) is not expanded: those instructions are left as
they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type

_PHILOX_ALGORITHMS = ("rng_default", "rng_philox")
# The bits' element types the expansion makes: the unsigned word of each
# width, reinterpreted for the signed ones.
_UNSIGNED_OF = {"u8": "u8", "s8": "u8", "u16": "u16", "s16": "u16", "u32": "u32", "s32": "u32",
                "u64": "u64", "s64": "u64"}
_ROUNDS = 10
_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_INCREMENTS = (0x9E3779B9, 0xBB67AE85)


def _array(element_type: str, dimensions: tuple[int, ...]) -> Shape:
    return Shape.array(element_type, dimensions).with_default_layout()


class _Emitter:
    """Appends instructions to a computation being built."""

    def __init__(self, computation: HloComputation) -> None:
        self.computation = computation

    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction],
            attributes: dict[str, Any] | None = None) -> HloInstruction:
        return self.computation.add_instruction(HloInstruction(opcode, opcode, shape, operands, attributes))

    def constant(self, value: int, element_type: str) -> HloInstruction:
        constant = HloInstruction("constant", "constant", _array(element_type, ()))
        constant.literal = np.asarray(value, dtype=constant.shape.dtype)
        return self.computation.add_instruction(constant)

    def broadcast(self, scalar: HloInstruction, dims: tuple[int, ...]) -> HloInstruction:
        return self.add("broadcast", _array(scalar.shape.element_type, dims), [scalar], {"dimensions": ()})

    def binary(self, opcode: str, lhs: HloInstruction, rhs: HloInstruction) -> HloInstruction:
        return self.add(opcode, lhs.shape, [lhs, rhs])

    def convert(self, operand: HloInstruction, element_type: str) -> HloInstruction:
        return self.add("convert", with_element_type(operand.shape, element_type), [operand])

    def high_word(self, value: HloInstruction) -> HloInstruction:
        """The high 32 bits of u64 ``value`` as u32."""
        thirty_two = self.constant(32, "u64")
        if value.shape.rank:
            thirty_two = self.broadcast(thirty_two, tuple(value.shape.dimensions))
        return self.convert(self.binary("shift-right-logical", value, thirty_two), "u32")

    def state_word(self, state: HloInstruction, index: int) -> HloInstruction:
        word = self.add("slice", _array("u64", (1,)), [state],
                        {"slice": (SliceDimension(index, index + 1, 1),)})
        return self.add("reshape", _array("u64", ()), [word])

    def join(self, low: HloInstruction, high: HloInstruction) -> HloInstruction:
        """u64 words of u32 ``low`` and ``high`` halves."""
        dims = tuple(low.shape.dimensions)
        wide_high = self.convert(high, "u64")
        shifted = self.binary("shift-left", wide_high, self.broadcast(self.constant(32, "u64"), dims))
        return self.binary("or", self.convert(low, "u64"), shifted)


def _philox_rounds(emit: _Emitter, words: list[HloInstruction], key: list[HloInstruction]) -> list[HloInstruction]:
    """Ten Philox4x32 rounds on four u32[blocks] words with two u32[] key words."""
    dims = tuple(words[0].shape.dimensions)
    multipliers = [emit.broadcast(emit.constant(m, "u64"), dims) for m in _MULTIPLIERS]
    increments = [emit.constant(k, "u32") for k in _KEY_INCREMENTS]
    for round_index in range(_ROUNDS):
        products = [emit.binary("multiply", emit.convert(words[i], "u64"), multipliers[j])
                    for i, j in ((0, 0), (2, 1))]
        lows = [emit.convert(p, "u32") for p in products]
        highs = [emit.high_word(p) for p in products]
        keys = [emit.broadcast(k, dims) for k in key]
        words = [emit.binary("xor", emit.binary("xor", highs[1], words[1]), keys[0]), lows[1],
                 emit.binary("xor", emit.binary("xor", highs[0], words[3]), keys[1]), lows[0]]
        if round_index + 1 < _ROUNDS:
            key = [emit.binary("add", k, inc) for k, inc in zip(key, increments)]
    return words


def _interleave(emit: _Emitter, words: list[HloInstruction], count: int) -> HloInstruction:
    """Element i of each word array in turn, the first ``count`` of them, as a vector."""
    blocks = words[0].shape.dimensions[0]
    element_type = words[0].shape.element_type
    columns = [emit.add("reshape", _array(element_type, (blocks, 1)), [w]) for w in words]
    table = emit.add("concatenate", _array(element_type, (blocks, len(words))), columns, {"dimensions": (1,)})
    flat = emit.add("reshape", _array(element_type, (blocks * len(words),)), [table])
    if blocks * len(words) == count:
        return flat
    return emit.add("slice", _array(element_type, (count,)), [flat],
                    {"slice": (SliceDimension(0, count, 1),)})


def _build_philox(computation: HloComputation, state_shape: Shape, bits_shape: Shape) -> None:
    """Fills ``computation`` (state) -> (next state, bits) with the Philox generator."""
    emit = _Emitter(computation)
    state = HloInstruction("state", "parameter", state_shape)
    state.parameter_number = 0
    computation.add_instruction(state)
    state_size = state_shape.dimensions[0]
    dims = tuple(bits_shape.dimensions)
    count = int(np.prod(dims, dtype=np.int64))
    unsigned = _UNSIGNED_OF[bits_shape.element_type]
    wide = unsigned == "u64"
    blocks = -(-count * (2 if wide else 1) // 4)

    key_word = emit.state_word(state, 0)
    key = [emit.convert(key_word, "u32"), emit.high_word(key_word)]
    low = emit.state_word(state, 1)
    high = emit.state_word(state, 2) if state_size >= 3 else key_word
    high_plus_one = emit.binary("add", high, emit.constant(1, "u64"))

    # The counters of the blocks: (high, low) + block index, carrying into high.
    offsets = emit.add("iota", _array("u64", (blocks,)), [], {"iota_dimension": 0})
    low_start = emit.broadcast(low, (blocks,))
    counter_low = emit.binary("add", low_start, offsets)
    carried = emit.add("compare", _array("pred", (blocks,)), [counter_low, low_start], {"direction": "LT"})
    counter_high = emit.add("select", _array("u64", (blocks,)),
                            [carried, emit.broadcast(high_plus_one, (blocks,)), emit.broadcast(high, (blocks,))])
    counter = [emit.convert(counter_low, "u32"), emit.high_word(counter_low),
               emit.convert(counter_high, "u32"), emit.high_word(counter_high)]
    words = _philox_rounds(emit, counter, key)

    if wide:
        numbers = _interleave(emit, [emit.join(words[0], words[1]), emit.join(words[2], words[3])], count)
    else:
        numbers = _interleave(emit, words, count)
        if unsigned != "u32":  # narrow types keep the low bits of each word
            numbers = emit.convert(numbers, unsigned)
    bits = emit.add("reshape", _array(unsigned, dims), [numbers])
    if unsigned != bits_shape.element_type:
        bits = emit.add("bitcast-convert", _array(bits_shape.element_type, dims), [bits])
    if bits.shape != bits_shape:  # the declared layout
        bits = emit.add("copy", bits_shape, [bits])

    # The next state: the counter moved past the blocks used.
    new_low = emit.binary("add", low, emit.constant(blocks, "u64"))
    wrapped = emit.add("compare", _array("pred", ()), [new_low, low], {"direction": "LT"})
    next_words = [key_word, new_low]
    if state_size >= 3:
        next_words.append(emit.add("select", _array("u64", ()), [wrapped, high_plus_one, high]))
    pieces = [emit.add("reshape", _array("u64", (1,)), [w]) for w in next_words]
    next_state = emit.add("concatenate", _array("u64", (state_size,)), pieces, {"dimensions": (0,)})
    if next_state.shape != state_shape:
        next_state = emit.add("copy", state_shape, [next_state])
    computation.root = emit.add("tuple", Shape.make_tuple([state_shape, bits_shape]), [next_state, bits])


def _place_before(module: HloModule, callee: HloComputation, caller: HloComputation) -> None:
    """Moves ``callee`` before ``caller`` in the module, if it is after it
    (callees come before their callers)."""
    if module.computations.index(callee) > module.computations.index(caller):
        module.computations.remove(callee)
        module.computations.insert(module.computations.index(caller), callee)


class RngBitGeneratorExpander(OpExpanderPass):
    """Replaces each Philox (and default-algorithm) ``rng-bit-generator`` on a
    ``u64[2]`` or ``u64[3]`` state by a call of a computation of integer ops."""

    name = "rng-bit-generator-expander"

    def __init__(self) -> None:
        self._computations: dict[tuple[str, str, str], HloComputation] = {}

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "rng-bit-generator":
            return False
        if instruction.attr("algorithm", "rng_default") not in _PHILOX_ALGORITHMS:
            return False
        state = instruction.operands[0].shape
        bits = instruction.shape.tuple_shapes[1]
        return (state.element_type == "u64" and state.rank == 1 and state.dimensions[0] in (2, 3)
                and bits.element_type in _UNSIGNED_OF and bits.element_count > 0)

    def run(self, module: HloModule) -> bool:
        self._computations = {}
        return super().run(module)

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        computation = self._generator(builder.computation, instruction.operands[0].shape,
                                      instruction.shape.tuple_shapes[1])
        call = HloInstruction("call", "call", computation.root.shape, [instruction.operands[0]],
                              {"to_apply": computation.name}, [computation])
        return builder.computation.add_instruction(call, before=builder.before)

    def _generator(self, caller: HloComputation, state_shape: Shape, bits_shape: Shape) -> HloComputation:
        cache_key = ("philox", str(state_shape), str(bits_shape))
        cached = self._computations.get(cache_key)
        module = caller.module
        assert module is not None, f"{caller.name} is in no module"
        if cached is not None:
            _place_before(module, cached, caller)
            return cached
        dims = "_".join(str(d) for d in bits_shape.dimensions)
        computation = HloComputation(unique_computation_name(
            module, f"rng_philox_u64_{state_shape.dimensions[0]}_{bits_shape.element_type}_{dims}".rstrip("_")))
        computation.execution_thread = caller.execution_thread
        module.add_computation(computation)
        _place_before(module, computation, caller)
        _build_philox(computation, state_shape, bits_shape)
        self._computations[cache_key] = computation
        return computation
