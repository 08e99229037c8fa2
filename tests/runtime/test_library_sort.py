"""The sort and top-k library thunks: the comparators JAX emits (before and after XLA:CPU's passes) on any
dimension, several operands, stable or not, bit-exact against the interpreter and XLA:CPU; comparators with
no library form are refused when compiling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import UnimplementedError
from xlapy.frontends.jax import from_jax, optimized_from_jax


def _floats(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    # NaN of both signs, both zeros, infinities and repeated values.
    flat[:8] = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.5, 1.5]).astype(dtype)
    return rng.permutation(flat).reshape(shape)


def _ints(shape, seed=1):
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.int32)


PROGRAMS = [
    ("sort_rows", lambda x: jnp.sort(x, axis=-1), lambda: (_floats((5, 9)),)),
    ("sort_columns", lambda x: jnp.sort(x, axis=0), lambda: (_floats((9, 4)),)),
    ("sort_middle_bf16", lambda x: jnp.sort(x, axis=1), lambda: (_floats((2, 11, 3), ml_dtypes.bfloat16),)),
    ("argsort_descending", lambda x: jnp.argsort(x, axis=-1, descending=True), lambda: (_floats((4, 10)),)),
    ("unstable_ints", lambda x: jnp.sort(x, axis=-1, stable=False), lambda: (_ints((3, 12)),)),
    ("two_keys", lambda k, v: jax.lax.sort((k, v), dimension=1, num_keys=2),
     lambda: (_ints((4, 10)), _floats((4, 10)))),
    ("key_and_payload", lambda k, v: jax.lax.sort((k, v), dimension=0, num_keys=1),
     lambda: (_floats((10, 3)), _ints((10, 3)))),
    ("unsigned", lambda x: jnp.sort(x), lambda: (np.random.default_rng(2).integers(0, 2**32, 17, np.uint32),)),
    ("top_k", lambda x: jax.lax.top_k(x, 4), lambda: (_floats((3, 20)),)),
]


@pytest.mark.parametrize("optimised", [False, True], ids=["lowered", "xla_optimised"])
@pytest.mark.parametrize("name, function, make_arguments", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_jax_sorts_are_bit_exact(name, function, make_arguments, optimised):
    arguments = make_arguments()
    if optimised:
        # XLA:CPU's own module: its comparison expander's integer keys, its TopK custom call.
        module = optimized_from_jax(function, *arguments)
        executable = xlapy.compile(module, run_hlo_passes=False)
    else:
        module = from_jax(function, *arguments)
        executable = xlapy.compile(module)
    assert executable.summary.library_calls == 1
    got = executable(*arguments)
    assert_same(got, xlapy.evaluate(module, *arguments), exact_bits=True)
    assert_same(got, jax.jit(function)(*arguments), exact_bits=True)


def test_topk_op_orders_smallest_first_when_asked():
    module = xlapy.parse_hlo("""HloModule topk
ENTRY e { p = f32[2,7]{1,0} parameter(0)
          ROOT t = (f32[2,3]{1,0}, s32[2,3]{1,0}) topk(p), k=3, largest=false }""")
    x = _floats((2, 7))
    got = xlapy.compile(module, run_hlo_passes=False)(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True)


COMPARATOR_HEAD = """HloModule sorts
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
"""


@pytest.mark.parametrize("body, reason", [
    ("s = f32[] sine(a)\n  t = f32[] sine(b)\n  ROOT lt = pred[] compare(s, t), direction=LT",
     r"comparator op .*sine.* has no library form"),
    ("ROOT lt = pred[] compare(a, a), direction=LT", r"not a lexicographic LT/GT comparison"),
    ("ROOT lt = pred[] compare(a, b), direction=LE", r"not a lexicographic LT/GT comparison"),
])
def test_comparators_without_a_library_form_are_refused_when_compiling(body, reason):
    module = xlapy.parse_hlo(COMPARATOR_HEAD + f"""  {body}
}}
ENTRY e {{ p = f32[6]{{0}} parameter(0)
          ROOT s = f32[6]{{0}} sort(p), dimensions={{0}}, to_apply=less }}""")
    with pytest.raises(UnimplementedError, match=reason):
        xlapy.compile(module, run_hlo_passes=False)
