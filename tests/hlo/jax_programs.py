"""Small JAX programs whose HLO (as JAX lowers it, and as XLA:CPU optimises
it) the HLO tests read. Each entry: name -> (function, example arguments)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

_rng = np.random.default_rng(0)


def _f32(*shape):
    return jnp.asarray(_rng.standard_normal(shape), jnp.float32)


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def layernorm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def attention(q, k, v):
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(q.shape[-1])
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, -1), v)


def conv_nhwc(x, w):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def loops(x):
    x = jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + i, x)
    return jax.lax.scan(lambda c, y: (c + y, c * y), 0.0, x)


def control(x, p):
    return jax.lax.cond(p > 0, jnp.sin, jnp.cos, x), jax.lax.switch(p, [jnp.sin, jnp.cos, jnp.tanh], x)


def gather_scatter(x, idx):
    return x[idx], x.at[idx].add(1.0), jnp.argsort(x[:, 0]), jax.lax.top_k(x[0], 2)


def integer_and_bf16(a, b):
    return (a * 3 + b) >> 1, (a.astype(jnp.bfloat16) * 1.5).astype(jnp.float32), jnp.cumsum(a), jnp.argmax(b)


def pooling(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), jnp.pad(x, 1)


PROGRAMS = {
    "mlp": (mlp, (_f32(4, 8), _f32(8, 16), _f32(16, 2))),
    "layernorm": (layernorm, (_f32(3, 16),)),
    "attention": (attention, (_f32(2, 4, 8), _f32(2, 5, 8), _f32(2, 5, 8))),
    "conv_nhwc": (conv_nhwc, (_f32(1, 6, 6, 3), _f32(3, 3, 3, 4))),
    "loops": (loops, (_f32(5),)),
    "control": (control, (_f32(4), jnp.int32(1))),
    "gather_scatter": (gather_scatter, (_f32(6, 3), jnp.array([0, 2, 5], jnp.int32))),
    "integer_and_bf16": (integer_and_bf16, (jnp.arange(6, dtype=jnp.int32), jnp.arange(6, dtype=jnp.int32) % 4)),
    "pooling": (pooling, (_f32(1, 4, 4, 2),)),
}


@functools.cache
def hlo_texts(name: str) -> tuple[str, str]:
    """(text as JAX lowers it, text of the XLA:CPU-optimised module)."""
    fn, args = PROGRAMS[name]
    lowered = jax.jit(fn).lower(*args)
    return lowered.as_text(dialect="hlo"), lowered.compile().as_text()
