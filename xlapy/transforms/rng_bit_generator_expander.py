"""Expansion of ``rng-bit-generator`` into integer ops, as XLA's
``RngBitGeneratorExpander`` (``xla/hlo/transforms/expanders/rng_bit_generator_expander.cc``):
the instruction becomes a ``call`` of a computation that takes the state and
returns (next state, bits), one computation per (algorithm, state shape, bits
shape). The generators are those of ``xla/hlo/builder/lib/prng.cc``;
``rng_default`` is Philox, the default XLA:CPU gives the expander.

Philox4x32-10 (``PhiloxBitGenerator``): the key is the low and high words of
``state[0]``; the 128-bit counter is ``state[1:3]`` for a ``u64[3]`` state and
(``state[1]``, ``state[0]``) for a ``u64[2]`` one. Each block of four 32-bit
words comes from counter + block index; 32-bit and narrower bits take one word
each (narrow types keep its low bits), 64-bit bits join two. The next state
advances the counter by the number of blocks.

ThreeFry2x32-20 (``ThreeFryBitGenerator``, ``u64[2]`` states only): the key is
``state[0]``, the counter ``state[1]``. Element i of the bits (row-major,
dimensions of size 1 not counted) enciphers counter + i; 64-bit bits join the
two output words of each block. 32-bit and narrower bits use both output
words: one dimension (the first even one, else the largest) is split in
halves, the first words fill the first half and the second words the second,
with the halves interleaved along a new dimension of 2 right after the split
one (and the element past an odd size dropped). The next state advances the
counter by the number of blocks enciphered.

The pieces (``Emitter``, ``philox_numbers``) also serve the ``rng`` expander
(``rng_expander.py``), which draws its bits from Philox as well.
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
_THREEFRY = "rng_three_fry"
# The bits' element types the expansion makes: the unsigned word of each
# width, reinterpreted for the signed ones.
_UNSIGNED_OF = {"u8": "u8", "s8": "u8", "u16": "u16", "s16": "u16", "u32": "u32", "s32": "u32",
                "u64": "u64", "s64": "u64"}
_ROUNDS = 10
_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_INCREMENTS = (0x9E3779B9, 0xBB67AE85)
_THREEFRY_PARITY = 0x1BD11BDA
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _array(element_type: str, dimensions: tuple[int, ...]) -> Shape:
    return Shape.array(element_type, dimensions).with_default_layout()


class Emitter:
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


def _philox_rounds(emit: Emitter, words: list[HloInstruction], key: list[HloInstruction]) -> list[HloInstruction]:
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


def _interleave(emit: Emitter, words: list[HloInstruction], count: int) -> HloInstruction:
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


def philox_numbers(emit: Emitter, key_word: HloInstruction, low: HloInstruction, high: HloInstruction,
                   count: int, unsigned: str) -> HloInstruction:
    """``count`` Philox numbers of type ``unsigned`` (u8, u16, u32 or u64) as a
    vector, from the u64[] key and the 128-bit counter (``low``, ``high``): XLA's
    ``PhiloxRngBit32`` / ``PhiloxRngBitNarrow`` / ``PhiloxRngBit64`` without the
    next state (``philox_blocks`` blocks are used)."""
    blocks = philox_blocks(count, unsigned)
    key = [emit.convert(key_word, "u32"), emit.high_word(key_word)]
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
    if unsigned == "u64":
        return _interleave(emit, [emit.join(words[0], words[1]), emit.join(words[2], words[3])], count)
    numbers = _interleave(emit, words, count)
    if unsigned != "u32":  # narrow types keep the low bits of each word
        numbers = emit.convert(numbers, unsigned)
    return numbers


def philox_blocks(count: int, unsigned: str) -> int:
    """The Philox blocks (four 32-bit words each) ``count`` numbers of type ``unsigned`` take."""
    return -(-count * (2 if unsigned == "u64" else 1) // 4)


def _state_parameter(computation: HloComputation, state_shape: Shape) -> HloInstruction:
    state = HloInstruction("state", "parameter", state_shape)
    state.parameter_number = 0
    return computation.add_instruction(state)


def _finish(emit: Emitter, numbers: HloInstruction, next_words: list[HloInstruction], state_shape: Shape,
            bits_shape: Shape) -> None:
    """Makes the root (next state, bits) of a generator computation from the
    unsigned ``numbers`` (any shape with the bits' elements in row-major order)
    and the next state's u64[] or u64[1] words."""
    dims = tuple(bits_shape.dimensions)
    unsigned = numbers.shape.element_type
    bits = numbers if tuple(numbers.shape.dimensions) == dims else emit.add("reshape", _array(unsigned, dims),
                                                                           [numbers])
    if unsigned != bits_shape.element_type:
        bits = emit.add("bitcast-convert", _array(bits_shape.element_type, dims), [bits])
    if bits.shape != bits_shape:  # the declared layout
        bits = emit.add("copy", bits_shape, [bits])
    pieces = [w if w.shape.rank == 1 else emit.add("reshape", _array("u64", (1,)), [w]) for w in next_words]
    state_size = state_shape.dimensions[0]
    next_state = emit.add("concatenate", _array("u64", (state_size,)), pieces, {"dimensions": (0,)})
    if next_state.shape != state_shape:
        next_state = emit.add("copy", state_shape, [next_state])
    emit.computation.root = emit.add("tuple", Shape.make_tuple([state_shape, bits_shape]), [next_state, bits])


def _build_philox(computation: HloComputation, state_shape: Shape, bits_shape: Shape) -> None:
    """Fills ``computation`` (state) -> (next state, bits) with the Philox generator."""
    emit = Emitter(computation)
    state = _state_parameter(computation, state_shape)
    state_size = state_shape.dimensions[0]
    count = int(np.prod(bits_shape.dimensions, dtype=np.int64))
    unsigned = _UNSIGNED_OF[bits_shape.element_type]

    key_word = emit.state_word(state, 0)
    low = emit.state_word(state, 1)
    high = emit.state_word(state, 2) if state_size >= 3 else key_word
    numbers = philox_numbers(emit, key_word, low, high, count, unsigned)

    # The next state: the counter moved past the blocks used.
    new_low = emit.binary("add", low, emit.constant(philox_blocks(count, unsigned), "u64"))
    wrapped = emit.add("compare", _array("pred", ()), [new_low, low], {"direction": "LT"})
    next_words = [key_word, new_low]
    if state_size >= 3:
        high_plus_one = emit.binary("add", high, emit.constant(1, "u64"))
        next_words.append(emit.add("select", _array("u64", ()), [wrapped, high_plus_one, high]))
    _finish(emit, numbers, next_words, state_shape, bits_shape)


def _rotate_left(emit: Emitter, value: HloInstruction, distance: int) -> HloInstruction:
    dims = tuple(value.shape.dimensions)
    left = emit.binary("shift-left", value, emit.broadcast(emit.constant(distance, "u32"), dims))
    right = emit.binary("shift-right-logical", value, emit.broadcast(emit.constant(32 - distance, "u32"), dims))
    return emit.binary("or", left, right)


def _threefry_rounds(emit: Emitter, words: list[HloInstruction], key: list[HloInstruction]) -> list[HloInstruction]:
    """Twenty ThreeFry2x32 rounds on two u32 word arrays with two u32[] key words."""
    dims = tuple(words[0].shape.dimensions)
    parity = emit.constant(_THREEFRY_PARITY, "u32")
    schedule = [key[0], key[1], emit.binary("xor", emit.binary("xor", parity, key[0]), key[1])]
    x0 = emit.binary("add", words[0], emit.broadcast(schedule[0], dims))
    x1 = emit.binary("add", words[1], emit.broadcast(schedule[1], dims))
    for block in range(5):
        for distance in _THREEFRY_ROTATIONS[block % 2]:
            x0 = emit.binary("add", x0, x1)
            x1 = emit.binary("xor", x0, _rotate_left(emit, x1, distance))
        x0 = emit.binary("add", x0, emit.broadcast(schedule[(block + 1) % 3], dims))
        x1 = emit.binary("add", x1, emit.broadcast(schedule[(block + 2) % 3], dims))
        x1 = emit.binary("add", x1, emit.broadcast(emit.constant(block + 1, "u32"), dims))
    return [x0, x1]


def _threefry_counters(emit: Emitter, start: HloInstruction, dims: tuple[int, ...]) -> HloInstruction:
    """u64 counters of shape ``dims``: ``start`` plus each element's row-major
    position, dimensions of size 1 not counted."""
    counters = emit.broadcast(start, dims)
    stride = 1
    for axis in reversed(range(len(dims))):
        if dims[axis] < 2:
            continue
        positions = emit.add("iota", _array("u64", dims), [], {"iota_dimension": axis})
        if stride != 1:
            positions = emit.binary("multiply", positions, emit.broadcast(emit.constant(stride, "u64"), dims))
        counters = emit.binary("add", counters, positions)
        stride *= dims[axis]
    return counters


def threefry_split(dims: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """Where XLA's ``SplitShapeIntoHalves`` splits ``dims`` and the half shape:
    (the dimension split, the half's dimensions with a 1 after it); a scalar's
    half is (1,)."""
    if not dims:
        return 0, (1,)
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:  # the first of the largest
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    return split, (*dims[:split], -(-dims[split] // 2), 1, *dims[split + 1:])


def combine_halves(emit: Emitter, halves: list[HloInstruction], dims: tuple[int, ...]) -> HloInstruction:
    """XLA's ``CombineShapePair``: the two arrays of the half shape of ``dims``
    put together into an array of ``dims``."""
    element_type = halves[0].shape.element_type
    if not dims:
        return emit.add("reshape", _array(element_type, ()), [halves[0]])
    split, half = threefry_split(dims)
    joined_dims = (*half[:split + 1], 2, *half[split + 2:])
    joined = emit.add("concatenate", _array(element_type, joined_dims), halves, {"dimensions": (split + 1,)})
    even = (*dims[:split], 2 * half[split], *dims[split + 1:])
    result = emit.add("reshape", _array(element_type, even), [joined])
    if even != dims:
        result = emit.add("slice", _array(element_type, dims), [result],
                          {"slice": tuple(SliceDimension(0, d, 1) for d in dims)})
    return result


def _build_threefry(computation: HloComputation, state_shape: Shape, bits_shape: Shape) -> None:
    """Fills ``computation`` (state) -> (next state, bits) with the ThreeFry generator."""
    emit = Emitter(computation)
    state = _state_parameter(computation, state_shape)
    dims = tuple(bits_shape.dimensions)
    unsigned = _UNSIGNED_OF[bits_shape.element_type]

    key_word = emit.state_word(state, 0)
    key = [emit.convert(key_word, "u32"), emit.high_word(key_word)]
    start_vector = emit.add("slice", _array("u64", (1,)), [state], {"slice": (SliceDimension(1, 2, 1),)})
    start = emit.add("reshape", _array("u64", ()), [start_vector])
    block_dims = dims if unsigned == "u64" else threefry_split(dims)[1]
    counters = _threefry_counters(emit, start, block_dims)
    words = _threefry_rounds(emit, [emit.convert(counters, "u32"), emit.high_word(counters)], key)
    if unsigned == "u64":
        numbers = emit.join(words[0], words[1])
    else:
        numbers = combine_halves(emit, words, dims)
        if unsigned != "u32":  # narrow types keep the low bits of each word
            numbers = emit.convert(numbers, unsigned)
    blocks = int(np.prod(block_dims, dtype=np.int64))
    next_start = emit.binary("add", start_vector, emit.broadcast(emit.constant(blocks, "u64"), (1,)))
    _finish(emit, numbers, [key_word, next_start], state_shape, bits_shape)


def place_before(module: HloModule, callee: HloComputation, caller: HloComputation) -> None:
    """Moves ``callee`` before ``caller`` in the module, if it is after it
    (callees come before their callers)."""
    if module.computations.index(callee) > module.computations.index(caller):
        module.computations.remove(callee)
        module.computations.insert(module.computations.index(caller), callee)


class RngBitGeneratorExpander(OpExpanderPass):
    """Replaces each ``rng-bit-generator`` (Philox, default or ThreeFry) on a
    state XLA's generators read (``u64[2]``, or ``u64[3]`` for Philox) by a
    call of a computation of integer ops."""

    name = "rng-bit-generator-expander"

    def __init__(self) -> None:
        self._computations: dict[tuple[str, str, str], HloComputation] = {}

    def matches(self, instruction: HloInstruction) -> bool:
        if instruction.opcode != "rng-bit-generator":
            return False
        algorithm = instruction.attr("algorithm", "rng_default")
        sizes = (2,) if algorithm == _THREEFRY else (2, 3) if algorithm in _PHILOX_ALGORITHMS else ()
        state = instruction.operands[0].shape
        bits = instruction.shape.tuple_shapes[1]
        return (state.element_type == "u64" and state.rank == 1 and state.dimensions[0] in sizes
                and bits.element_type in _UNSIGNED_OF and bits.element_count > 0)

    def run(self, module: HloModule) -> bool:
        self._computations = {}
        return super().run(module)

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        algorithm = "threefry" if instruction.attr("algorithm", "rng_default") == _THREEFRY else "philox"
        computation = self._generator(builder.computation, algorithm, instruction.operands[0].shape,
                                      instruction.shape.tuple_shapes[1])
        call = HloInstruction("call", "call", computation.root.shape, [instruction.operands[0]],
                              {"to_apply": computation.name}, [computation])
        return builder.computation.add_instruction(call, before=builder.before)

    def _generator(self, caller: HloComputation, algorithm: str, state_shape: Shape,
                   bits_shape: Shape) -> HloComputation:
        cache_key = (algorithm, str(state_shape), str(bits_shape))
        cached = self._computations.get(cache_key)
        module = caller.module
        assert module is not None, f"{caller.name} is in no module"
        if cached is not None:
            place_before(module, cached, caller)
            return cached
        dims = "_".join(str(d) for d in bits_shape.dimensions)
        computation = HloComputation(unique_computation_name(
            module, f"rng_{algorithm}_u64_{state_shape.dimensions[0]}_{bits_shape.element_type}_{dims}".rstrip("_")))
        computation.execution_thread = caller.execution_thread
        module.add_computation(computation)
        place_before(module, computation, caller)
        (_build_threefry if algorithm == "threefry" else _build_philox)(computation, state_shape, bits_shape)
        self._computations[cache_key] = computation
        return computation
