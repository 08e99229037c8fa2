"""Expansion of the stateful ``rng`` into integer and float ops, as XLA's
``RngExpander`` (``xla/hlo/transforms/expanders/rng_expander.cc``), where
XLA:CPU runs it (before the ``rng-bit-generator`` expander).

Each ``rng(a, b)`` becomes ``call(key, state, a, b)`` of a computation made
once per (distribution, result shape, operand shapes):

- ``key`` is a u64 constant fixed at compile time: the module's next random
  value (an mt19937_64 seeded with 42, one per module, as ``HloModule``'s)
  xor the process's next random value (another mt19937_64 shared by every
  compilation, as XLA's ``GlobalRandomValue``). XLA's source seeds the process
  generator with 42; the XLA:CPU jaxlib ships draws from one seeded with 8,
  and xlapy follows what XLA:CPU does, so that the first module compiled in a
  process gets XLA:CPU's keys.
- ``state`` is ``rng-get-and-update-state`` with ``delta`` the number of
  32-bit words the result takes: a u64[2] 128-bit counter (low word first)
  that each execution of the instruction advances by ``delta``.
- The computation draws Philox4x32-10 bits from the key and counter
  (``PhiloxBitGenerator`` of ``xla/hlo/builder/lib/prng.cc``) and shapes them:
  uniform floats keep the top mantissa-width bits, scaled to [0, 1) and then
  to [a, b); uniform integers are ``a + (bits mod (b - a))`` (the modulo added
  as two halves, in the unsigned type); normals are Box-Muller pairs
  (``u1 = max(x0, 1e-7)``, ``sqrt(-2 log u1)`` times the sine and cosine of
  ``2 pi x1``) of uniforms drawn for the shape split in halves as the ThreeFry
  bits are, then ``a + b * z``.

f16 and bf16 results are drawn in f32 and converted (XLA's
``ConvertSmallFpRngToF32Rng``). Integer results narrower than 32 bits, and
other element types, have no expansion in XLA either: those ``rng`` stay, and
compiling them fails with a clear error.
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from xlapy.hlo.attributes import SliceDimension
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.op_expander_pass import ExpansionBuilder, OpExpanderPass, with_element_type
from xlapy.transforms.rng_bit_generator_expander import (
    Emitter,
    combine_halves,
    philox_numbers,
    place_before,
    threefry_split,
)

_DRAWN_IN_F32 = ("f16", "bf16")
_FLOATS = ("f32", "f64")
_INTEGERS = {"s32": "u32", "u32": "u32", "s64": "u64", "u64": "u64"}
_MANTISSA_BITS = {"f32": 23, "f64": 52}
_BITS_OF = {"f32": "u32", "f64": "u64"}
# Box-Muller's constants are single-precision literals in XLA, widened for f64.
_SMALLEST_U1 = float(np.float32(1.0e-7))
_TWO_PI = 2.0 * math.pi

MODULE_SEED = 42
PROCESS_SEED = 8


class MersenneTwister64:
    """The 64-bit Mersenne Twister (C++'s ``std::mt19937_64``), which XLA draws
    its rng keys from."""

    _N, _M = 312, 156
    _MASK = (1 << 64) - 1

    def __init__(self, seed: int) -> None:
        state = [seed & self._MASK]
        for i in range(1, self._N):
            previous = state[-1]
            state.append((6364136223846793005 * (previous ^ (previous >> 62)) + i) & self._MASK)
        self._state = state
        self._index = self._N
        self._lock = threading.Lock()

    def _twist(self) -> None:
        state, n, m = self._state, self._N, self._M
        for i in range(n):
            x = (state[i] & 0xFFFFFFFF80000000) | (state[(i + 1) % n] & 0x7FFFFFFF)
            shifted = x >> 1
            if x & 1:
                shifted ^= 0xB5026F5AA96619E9
            state[i] = state[(i + m) % n] ^ shifted
        self._index = 0

    def next(self) -> int:
        """The next 64-bit value."""
        with self._lock:
            if self._index >= self._N:
                self._twist()
            y = self._state[self._index]
            self._index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & self._MASK


# The process's generator, shared by every compilation (XLA's GlobalRandomValue).
PROCESS_VALUES = MersenneTwister64(PROCESS_SEED)
# Each module's own generator (XLA's HloModule::RandomNew64), made on first use.
_MODULE_VALUES: weakref.WeakKeyDictionary[HloModule, MersenneTwister64] = weakref.WeakKeyDictionary()
_MODULE_VALUES_LOCK = threading.Lock()


def module_random_value(module: HloModule) -> int:
    """The next value of ``module``'s own generator."""
    with _MODULE_VALUES_LOCK:
        values = _MODULE_VALUES.get(module)
        if values is None:
            values = _MODULE_VALUES[module] = MersenneTwister64(MODULE_SEED)
    return values.next()


def _array(element_type: str, dimensions: tuple[int, ...]) -> Shape:
    return Shape.array(element_type, dimensions).with_default_layout()


def _expandable(result_type: str, distribution: str) -> bool:
    if result_type in _DRAWN_IN_F32 or result_type in _FLOATS:
        return True
    return distribution == "rng_uniform" and result_type in _INTEGERS


def _float_constant(emit: Emitter, value: float, element_type: str) -> HloInstruction:
    constant = HloInstruction("constant", "constant", _array(element_type, ()))
    constant.literal = np.asarray(value, dtype=constant.shape.dtype)
    return emit.computation.add_instruction(constant)


def _scalar_like(emit: Emitter, like: HloInstruction, value: float) -> HloInstruction:
    constant = _float_constant(emit, value, like.shape.element_type)
    return emit.broadcast(constant, tuple(like.shape.dimensions)) if like.shape.rank else constant


def _philox_bits(emit: Emitter, key: HloInstruction, state: HloInstruction, unsigned: str,
                 dims: tuple[int, ...]) -> HloInstruction:
    """Philox bits of type ``unsigned`` and shape ``dims`` from the key and the
    u64[2] counter (low word, high word)."""
    count = int(np.prod(dims, dtype=np.int64))
    numbers = philox_numbers(emit, key, emit.state_word(state, 0), emit.state_word(state, 1), count, unsigned)
    return emit.add("reshape", _array(unsigned, dims), [numbers])


def _unit_floats(emit: Emitter, bits: HloInstruction, element_type: str) -> HloInstruction:
    """Uniform floats in [0, 1) from the top mantissa-width bits of ``bits``."""
    mantissa = _MANTISSA_BITS[element_type]
    width = 64 if bits.shape.element_type == "u64" else 32
    dims = tuple(bits.shape.dimensions)
    shift = emit.broadcast(emit.constant(width - mantissa, bits.shape.element_type), dims)
    values = emit.convert(emit.binary("shift-right-logical", bits, shift), element_type)
    return emit.binary("multiply", values, _scalar_like(emit, values, math.ldexp(1.0, -mantissa)))


def _uniform_float(emit: Emitter, key: HloInstruction, state: HloInstruction, low: HloInstruction,
                   high: HloInstruction, shape: Shape) -> HloInstruction:
    dims = tuple(shape.dimensions)
    values = _unit_floats(emit, _philox_bits(emit, key, state, _BITS_OF[shape.element_type], dims),
                          shape.element_type)
    span = emit.binary("subtract", high, low)
    scaled = emit.binary("multiply", values, emit.broadcast(span, dims) if dims else span)
    return emit.binary("add", scaled, emit.broadcast(low, dims) if dims else low)


def _uniform_integer(emit: Emitter, key: HloInstruction, state: HloInstruction, low: HloInstruction,
                     high: HloInstruction, shape: Shape) -> HloInstruction:
    dims = tuple(shape.dimensions)
    element_type = shape.element_type
    unsigned = _INTEGERS[element_type]

    def as_type(value: HloInstruction, target: str) -> HloInstruction:
        if value.shape.element_type == target:
            return value
        return emit.add("bitcast-convert", with_element_type(value.shape, target), [value])

    def spread(scalar: HloInstruction) -> HloInstruction:
        return emit.broadcast(scalar, dims) if dims else scalar

    bits = _philox_bits(emit, key, state, unsigned, dims)
    span = emit.binary("subtract", as_type(high, unsigned), as_type(low, unsigned))
    offset = emit.binary("remainder", bits, spread(span))
    half = emit.binary("shift-right-logical", offset, spread(emit.constant(1, unsigned)))
    rest = emit.binary("subtract", offset, half)
    return emit.binary("add", emit.binary("add", spread(low), as_type(half, element_type)),
                       as_type(rest, element_type))


def _normal(emit: Emitter, key: HloInstruction, state: HloInstruction, mean: HloInstruction,
            sigma: HloInstruction, shape: Shape) -> HloInstruction:
    dims = tuple(shape.dimensions)
    element_type = shape.element_type
    split, half = threefry_split(dims)
    pair_axis = split + 1 if dims else 0
    pair_dims = (*half[:pair_axis], 2, *half[pair_axis + 1:])
    uniforms = _unit_floats(emit, _philox_bits(emit, key, state, _BITS_OF[element_type], pair_dims), element_type)
    starts = [0] * len(pair_dims)
    halves = []
    for index in range(2):
        starts[pair_axis] = index
        limits = list(pair_dims)
        limits[pair_axis] = index + 1
        halves.append(emit.add("slice", _array(element_type, half), [uniforms],
                               {"slice": tuple(SliceDimension(s, e, 1) for s, e in zip(starts, limits))}))
    u1 = emit.binary("maximum", halves[0], _scalar_like(emit, halves[0], _SMALLEST_U1))
    angle = emit.binary("multiply", _scalar_like(emit, halves[1], _TWO_PI), halves[1])
    log = emit.add("log", u1.shape, [u1])
    radius = emit.add("sqrt", u1.shape, [emit.binary("multiply", _scalar_like(emit, u1, -2.0), log)])
    sine = emit.binary("multiply", emit.add("sine", angle.shape, [angle]), radius)
    cosine = emit.binary("multiply", emit.add("cosine", angle.shape, [angle]), radius)
    standard = combine_halves(emit, [sine, cosine], dims)
    scaled = emit.binary("multiply", emit.broadcast(sigma, dims) if dims else sigma, standard)
    return emit.binary("add", emit.broadcast(mean, dims) if dims else mean, scaled)


def _build(computation: HloComputation, distribution: str, shape: Shape, low_shape: Shape,
           high_shape: Shape) -> None:
    """Fills ``computation`` (key, state, a_or_mean, b_or_sigma) -> values."""
    emit = Emitter(computation)
    parameters = []
    for number, (name, parameter_shape) in enumerate(
            (("key", _array("u64", ())), ("state", _array("u64", (2,))), ("a_or_mean", low_shape),
             ("b_or_sigma", high_shape))):
        parameter = HloInstruction(name, "parameter", parameter_shape)
        parameter.parameter_number = number
        parameters.append(computation.add_instruction(parameter))
    key, state, low, high = parameters
    plain = _array(shape.element_type, tuple(shape.dimensions))
    if distribution == "rng_normal":
        result = _normal(emit, key, state, low, high, plain)
    elif shape.element_type in _FLOATS:
        result = _uniform_float(emit, key, state, low, high, plain)
    else:
        result = _uniform_integer(emit, key, state, low, high, plain)
    if result.shape != shape:  # the declared layout
        result = emit.add("copy", shape, [result])
    computation.root = result


class RngExpander(OpExpanderPass):
    """Replaces each ``rng`` of a type XLA expands by a call of a Philox
    computation on a compile-time key and ``rng-get-and-update-state``.
    ``process_values`` replaces the process-wide generator (a fresh one
    reproduces a fresh process)."""

    name = "rng-expander"

    def __init__(self, process_values: MersenneTwister64 | None = None) -> None:
        self._process_values = process_values if process_values is not None else PROCESS_VALUES
        self._computations: dict[tuple[str, str, str, str], HloComputation] = {}

    def matches(self, instruction: HloInstruction) -> bool:
        return (instruction.opcode == "rng" and instruction.shape.is_array
                and _expandable(instruction.shape.element_type, instruction.attr("distribution", "rng_uniform"))
                and all(o.shape.element_type == instruction.shape.element_type for o in instruction.operands))

    def run(self, module: HloModule) -> bool:
        self._computations = {}
        return super().run(module)

    def expand(self, instruction: HloInstruction, builder: ExpansionBuilder) -> HloInstruction:
        shape = instruction.shape
        operands = list(instruction.operands)
        narrow = shape.element_type in _DRAWN_IN_F32
        if narrow:
            shape = with_element_type(shape, "f32")
            operands = [builder.add("convert", with_element_type(o.shape, "f32"), [o]) for o in operands]
        distribution = instruction.attr("distribution", "rng_uniform")
        computation = self._computation(builder.computation, distribution, shape, operands)
        module = builder.computation.module
        assert module is not None, f"{builder.computation.name} is in no module"
        key = builder.scalar_constant(module_random_value(module) ^ self._process_values.next(), "u64")
        words = shape.element_count * (2 if shape.element_type in ("f64", "s64", "u64") else 1)
        state = builder.add("rng-get-and-update-state", _array("u64", (2,)), [], {"delta": str(words)})
        call = builder.computation.add_instruction(
            HloInstruction("call", "call", shape, [key, state, *operands], {"to_apply": computation.name},
                           [computation]), before=builder.before)
        return builder.add("convert", instruction.shape, [call]) if narrow else call

    def _computation(self, caller: HloComputation, distribution: str, shape: Shape,
                     operands: list[HloInstruction]) -> HloComputation:
        cache_key = (distribution, str(shape), str(operands[0].shape), str(operands[1].shape))
        module = caller.module
        assert module is not None, f"{caller.name} is in no module"
        cached = self._computations.get(cache_key)
        if cached is not None:
            place_before(module, cached, caller)
            return cached
        dims = "_".join(str(d) for d in shape.dimensions)
        kind = distribution.removeprefix("rng_")
        computation = HloComputation(unique_computation_name(
            module, f"rng_{kind}_{shape.element_type}_{dims}".rstrip("_")))
        computation.execution_thread = caller.execution_thread
        module.add_computation(computation)
        place_before(module, computation, caller)
        _build(computation, distribution, shape, operands[0].shape, operands[1].shape)
        self._computations[cache_key] = computation
        return computation
