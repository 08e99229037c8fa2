"""rng-bit-generator: bit for bit what XLA:CPU produces, for every algorithm."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlapy

ALGORITHMS = [jax.lax.RandomAlgorithm.RNG_DEFAULT, jax.lax.RandomAlgorithm.RNG_PHILOX,
              jax.lax.RandomAlgorithm.RNG_THREE_FRY]
SHAPES = [((7,), jnp.uint32), ((3, 5), jnp.uint32), ((3, 1, 5), jnp.uint32), ((), jnp.uint32),
          ((5,), jnp.uint8), ((3,), jnp.uint16), ((9,), jnp.float32)]
KEYS = {"small_key": np.array([1, 2, 3, 4], np.uint32),
        "carrying_key": np.array([0x12345678, 0xDEADBEEF, 0xFFFFFFFF, 0xFFFFFFFF], np.uint32)}
# The default run: every algorithm in every element type and in three dimensions, on the key whose words carry
# into the next; the other cases run with the slow tests.
DEFAULT_SHAPES = {(3, 1, 5), (5,), (3,), (9,)}


def _cases() -> list:
    return [pytest.param(algorithm, shape, dtype, key, id=f"{key_name}-{shape}-{np.dtype(dtype)}-{algorithm.name}",
                         marks=[] if key_name == "carrying_key" and shape in DEFAULT_SHAPES else [pytest.mark.slow])
            for key_name, key in KEYS.items() for shape, dtype in SHAPES for algorithm in ALGORITHMS]


@pytest.mark.parametrize(("algorithm", "shape", "dtype", "key"), _cases())
def test_rng_bit_generator_matches_xla(algorithm, shape, dtype, key):
    if dtype == jnp.float32:  # random float bits: bitcast of the u32 words
        def fn(k):
            state, bits = jax.lax.rng_bit_generator(k, shape, dtype=jnp.uint32, algorithm=algorithm)
            return state, jax.lax.bitcast_convert_type(bits, jnp.float32)
    else:
        def fn(k):
            return jax.lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=algorithm)
    lowered = jax.jit(fn).lower(key)
    module = xlapy.parse_hlo(lowered.as_text(dialect="hlo"))
    got = xlapy.evaluate(module, key)
    want = lowered.compile()(key)
    for g, w in zip(got, want):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


def test_a_state_xla_has_no_bits_for_is_refused():
    # MLIR accepts any state type for the DEFAULT algorithm; XLA's generators read u64[2] or u64[3].
    from xlapy.frontends.stablehlo import parse_module

    module = parse_module("""func.func @main(%arg0: tensor<4x8xi32>) -> tensor<2x2xui32> {
  %0:2 = stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT
      : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<2x2xui32>)
  return %0#1 : tensor<2x2xui32>
}""")
    with pytest.raises(xlapy.UnimplementedError, match=r"u64\[2\] or u64\[3\], not s32\[4,8\]"):
        xlapy.evaluate(module, np.zeros((4, 8), np.int32))
