"""Random numbers: ``rng-bit-generator`` bit for bit as XLA expands it
(Philox4x32-10 and ThreeFry2x32-20 counter-based generators; the default
algorithm is Philox, as on XLA:CPU); ``rng-get-and-update-state`` as XLA:CPU's
thunk runs it (each instruction keeps a 128-bit counter that starts at
``RNG_STATE_INITIAL_VALUE``, returns it as u64[2], low word first, and advances
it by ``delta`` on every execution, across evaluations of its module); and the
stateful ``rng`` from the evaluator's seeded generator (its values are not
XLA's: those come from ``rng`` expanded, see ``xlapy/transforms/rng_expander.py``)."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.interpreter.numerics import dtype_of
from xlapy.interpreter.registry import rule

_U32, _U64 = np.uint32, np.uint64
_MASK32 = _U64(0xFFFFFFFF)

# XLA:CPU's first state (``kRngStateInitialValue`` of
# xla/backends/cpu/runtime/rng_state_thunk.cc): not zero, which would fail a
# chi-square test of the first numbers.
RNG_STATE_INITIAL_VALUE = 0x7012395
_STATE_MASK = (1 << 128) - 1


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) 32-bit words of uint64 ``x``."""
    return (x & _MASK32).astype(_U32), (x >> _U64(32)).astype(_U32)


def _join(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return low.astype(_U64) | (high.astype(_U64) << _U64(32))


def philox4x32(counter: list[np.ndarray], key: tuple[int, int]) -> list[np.ndarray]:
    """Ten rounds of Philox4x32 on four uint32 words with a two-word key."""
    k0, k1 = _U32(key[0]), _U32(key[1])
    x = list(counter)
    for _ in range(10):
        p0 = x[0].astype(_U64) * _U64(0xD2511F53)
        p1 = x[2].astype(_U64) * _U64(0xCD9E8D57)
        lo0, hi0 = _halves(p0)
        lo1, hi1 = _halves(p1)
        x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
        k0, k1 = k0 + _U32(0x9E3779B9), k1 + _U32(0xBB67AE85)
    return x


def _rotate_left(v: np.ndarray, distance: int) -> np.ndarray:
    return (v << _U32(distance)) | (v >> _U32(32 - distance))


def threefry2x32(words: tuple[np.ndarray, np.ndarray], key: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Twenty rounds of ThreeFry2x32."""
    ks = [_U32(key[0]), _U32(key[1]), _U32(0x1BD11BDA ^ key[0] ^ key[1])]
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    x0, x1 = words[0] + ks[0], words[1] + ks[1]
    for block in range(5):
        for rotation in rotations[4 * (block % 2): 4 * (block % 2) + 4]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, rotation) ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + _U32(block + 1)
    return x0, x1


def _philox(state: np.ndarray, count: int, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random words (64-bit if ``wide``) and the next state."""
    key = _halves(state[0])
    # The 128-bit counter: state[1:3] when there is room, else the state reversed.
    low, high = (state[1], state[2]) if state.size >= 3 else (state[1], state[0])
    words_needed = count * (2 if wide else 1)
    blocks = -(-words_needed // 4)
    offsets = np.arange(blocks, dtype=_U64)
    counter_low = low + offsets
    counter_high = np.where(counter_low < low, high + _U64(1), high).astype(_U64)
    out = philox4x32([*_halves(counter_low), *_halves(counter_high)], key)
    if wide:
        numbers = np.stack([_join(out[0], out[1]), _join(out[2], out[3])], axis=1).reshape(-1)
    else:
        numbers = np.stack(out, axis=1).reshape(-1)
    new_low = low + _U64(blocks)
    new_high = high + _U64(1) if new_low < low else high
    next_state = [state[0], new_low] + ([new_high] if state.size >= 3 else [])
    return numbers[:count], np.array(next_state, _U64)


def _threefry_counters(start: np.uint64, dims: tuple[int, ...]) -> np.ndarray:
    """XLA's ThreeFry inputs: the start plus each element's row-major position,
    where dimensions of size 1 do not count."""
    counters = np.full(dims, start, _U64)
    stride = 1
    for axis in reversed(range(len(dims))):
        if dims[axis] < 2:
            continue
        shape = [1] * len(dims)
        shape[axis] = dims[axis]
        counters = counters + np.arange(dims[axis], dtype=_U64).reshape(shape) * _U64(stride)
        stride *= dims[axis]
    return counters


def _threefry32(key: tuple[int, int], start: np.uint64, dims: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """32-bit words as XLA makes them: both outputs of each ThreeFry call are
    used, by splitting one dimension in halves."""
    if not dims:
        x0, _ = threefry2x32(_halves(_threefry_counters(start, (1,))), key)
        return x0.reshape(()), 1
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = [*dims[:split], -(-dims[split] // 2), 1, *dims[split + 1:]]
    half_dims = tuple(half)
    x0, x1 = threefry2x32(_halves(_threefry_counters(start, half_dims)), key)
    joined = np.concatenate([x0, x1], axis=split + 1)
    even = list(dims)
    even[split] = 2 * half[split]
    words = joined.reshape(even)[tuple(slice(0, d) for d in dims)]
    return words, int(np.prod(half_dims))


def _threefry(state: np.ndarray, dims: tuple[int, ...], wide: bool) -> tuple[np.ndarray, np.ndarray]:
    key = tuple(int(v) for v in _halves(state[0]))
    start = state[1]
    if wide:
        x0, x1 = threefry2x32(_halves(_threefry_counters(start, dims)), key)
        numbers, used = _join(x0, x1), int(np.prod(dims))
    else:
        numbers, used = _threefry32(key, start, dims)
    return numbers, np.array([state[0], start + _U64(used)], _U64)


@rule("rng-bit-generator")
def _rng_bit_generator(instr, operands, ev) -> tuple:
    state = np.asarray(operands[0])
    sizes = (2,) if instr.attr("algorithm", "rng_default") == "rng_three_fry" else (2, 3)
    # XLA's generators read their key and counter from a u64[2] (Philox: or u64[3]) state;
    # any other state has no defined bits.
    if state.dtype != _U64 or state.ndim != 1 or state.size not in sizes:
        raise UnimplementedError(f"rng-bit-generator {instr.name}: the interpreter runs states of u64[2]"
                                 f"{' or u64[3]' if 3 in sizes else ''}, not {instr.operands[0].shape}")
    data_shape = instr.shape.tuple_shapes[1]
    dims = tuple(data_shape.dimensions)
    dtype = dtype_of(data_shape.element_type)
    wide = dtype.itemsize == 8
    algorithm = instr.attr("algorithm", "rng_default")
    if algorithm == "rng_three_fry":
        numbers, next_state = _threefry(state, dims, wide)
    else:
        numbers, next_state = _philox(state, int(np.prod(dims)), wide)
    bits = np.asarray(numbers).reshape(dims)
    if dtype.itemsize < 4:  # narrow types keep the low bits of 32-bit words
        bits = bits.astype({1: np.uint8, 2: np.uint16}[dtype.itemsize])
    return (next_state, bits.view(dtype))


@rule("rng", "stablehlo.rng")
def _rng(instr, operands, ev) -> np.ndarray:
    # StableHLO's third operand holds the result's dimensions, which the shape has too.
    dims = instr.shape.dimensions
    a, b = (np.asarray(o).astype(np.float64) for o in operands[:2])
    if instr.attr("distribution") == "rng_normal":
        return ev.random.normal(a, b, dims)
    if dtype_of(instr.shape.element_type).kind in "iu":
        return ev.random.integers(int(a), int(b), dims)
    return ev.random.uniform(a, b, dims)


# The counter of each rng-get-and-update-state instruction evaluated so far.
_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def rng_state_words(state: int) -> np.ndarray:
    """A 128-bit counter as XLA stores it: u64[2], low word first."""
    return np.array([state & 0xFFFFFFFFFFFFFFFF, state >> 64], _U64)


@rule("rng-get-and-update-state")
def _rng_get_and_update_state(instr, operands, ev) -> np.ndarray:
    delta = int(instr.attr("delta", 0))
    with _STATES_LOCK:
        state = _STATES.get(instr, RNG_STATE_INITIAL_VALUE)
        _STATES[instr] = (state + delta) & _STATE_MASK
    return rng_state_words(state)
