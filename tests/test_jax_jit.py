"""``xlapy.frontends.jax.jit``: JAX programs compiled and run by xlapy, compared with ``jax.jit`` (XLA:CPU).

Layering: ``jit`` compiles with ``xlapy.compile``, which lives in the runtime, above the frontends. Rather
than moving the decorator to a top-level module (and reaching it from ``xlapy.frontends.jax`` by an upward
import), the JAX frontend module as a whole sits at the layer of the ``xlapy`` package: the documented
exception ``MODULE_LAYERS`` in ``tests/test_import_graph.py``. Nothing below that layer imports it, so
``from_jax`` and ``jit`` keep one home and there is no cycle.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlapy
from tools import jax_corpus
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from xlapy.frontends.jax import JitFunction, jit


def _arrays(*shapes: tuple[int, ...], seed: int = 0, dtype=np.float32) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def test_an_elementwise_program_matches_jax_jit():
    (x,) = _arrays((4, 33))
    x *= 2
    got = jit(gelu)(x)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (4, 33)
    # The contraction of multiply-adds differs from XLA:CPU's in the last bits (tanh is XLA:CPU's own), and
    # 1 + tanh(u) cancels for negative x: within 1.5 eps of the magnitudes of the terms,
    # 0.5 |x| (1 + |tanh(u)|) (measured: 1.0 eps; 8 draws).
    u = 0.7978845608 * (x.astype(np.float64) + 0.044715 * x.astype(np.float64) ** 3)
    assert_within_sum_of_magnitudes(got, np.asarray(jax.jit(gelu)(x)), 0.5 * np.abs(x) * (1 + np.abs(np.tanh(u))), 1.5)


def test_a_matmul_matches_jax_jit():
    def affine(x, w, b):
        return x @ w + b

    x, w, b = _arrays((5, 24), (24, 7), (7,), seed=7)
    got = jit(affine)(x, w, b)
    # Any order of the 24 additions (and a contracted multiply-add) rounds within 24 eps of the sum of the
    # magnitudes of the terms.
    magnitudes = np.abs(x).astype(np.float64) @ np.abs(w) + np.abs(b)
    assert_within_sum_of_magnitudes(got, np.asarray(jax.jit(affine)(x, w, b)), magnitudes, 24)


# Programs of the JAX corpus with loops, conditionals, sorts, scans and integer arithmetic, whose results
# xlapy computes as XLA:CPU does (measured: bit for bit).
@pytest.mark.parametrize("name", ["while_loop", "cond_switch", "sorting", "cumulative", "integer_bits"])
def test_corpus_programs_match_jax_jit(name):
    fun, args = jax_corpus.PROGRAMS[name]
    got = jit(fun)(*args)
    want = jax_corpus.jax_result(name)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    assert all(isinstance(leaf, np.ndarray) for leaf in jax.tree.leaves(got))
    assert_same(got, want, exact_bits=True)


def test_pytrees_in_and_out_follow_jax():
    def f(params, x, scale):
        return {"y": params["w"] + params["b"], "pair": (params["w"] - x, x * scale)}

    w, b, x = _arrays((3, 5), (3, 5), (3, 5), seed=1)
    params = {"w": w, "b": jnp.asarray(b)}  # numpy and JAX arrays alike, and a Python number
    got = jit(f)(params, x, 2.0)
    want = jax.jit(f)(params, x, 2.0)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w_ in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert isinstance(g, np.ndarray)
        assert_same(g, np.asarray(w_))


def test_one_compile_per_signature():
    def f(x, y):
        return (x - y) * 2

    jitted = jit(f)
    assert isinstance(jitted, JitFunction) and jitted.__name__ == "f"
    a, b = _arrays((2, 3), (2, 3), seed=2)
    first = jitted.compiled(a, b)
    assert isinstance(first, xlapy.Executable)
    assert jitted.compiled(b, a) is first  # same shapes and dtypes: the same executable
    (c,) = _arrays((4,), seed=3)
    assert jitted.compiled(c, c) is not first
    ints = a.astype(np.int32), b.astype(np.int32)
    assert jitted.compiled(*ints) is not first
    assert_same(jitted(*ints), np.asarray(jax.jit(f)(*ints)))
    assert_same(jitted(c, c[::-1]), np.asarray(jax.jit(f)(c, c[::-1])))


def test_static_arguments_by_position_and_name():
    def f(x, repeats, *, negate):
        y = jnp.tile(x, repeats)
        return -y if negate else y

    (x,) = _arrays((3,), seed=4)
    jitted = jit(f, static_argnums=1, static_argnames="negate")
    reference = jax.jit(f, static_argnums=1, static_argnames="negate")
    for repeats, negate in ((2, False), (3, False), (3, True)):
        assert_same(jitted(x, repeats, negate=negate), np.asarray(reference(x, repeats, negate=negate)))
    # A static argument named in static_argnums is static when passed by keyword too.
    assert_same(jitted(x, repeats=2, negate=True), -np.tile(x, 2))
    with pytest.raises(xlapy.XlapyError, match="static argument is not hashable"):
        jitted(x, [2], negate=False)


def test_decorator_forms_and_compile_options(tmp_path):
    @jit
    def double(x):
        return x + x

    @jit(dump_to=str(tmp_path / "dumps"))
    def triple(x):
        return 3 * x

    (x,) = _arrays((8,), seed=5)
    assert_same(double(x), x + x)
    assert_same(triple(x), np.float32(3) * x)
    assert any((tmp_path / "dumps").iterdir())  # the keyword went to xlapy.compile
    with pytest.raises(xlapy.XlapyError, match="jit takes a function"):
        jit(3)
    with pytest.raises(xlapy.XlapyError, match=r"jit\(double\): Argument 'two' of type .* is not a valid JAX type"):
        double("two")


def test_outputs_are_fresh_arrays():
    @jit
    def identity(x):
        return x, x

    (x,) = _arrays((4,), seed=6)
    first, second = identity(x)
    first[0] = 100
    assert second[0] == x[0] and x[0] != 100
