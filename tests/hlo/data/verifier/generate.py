"""Writes the `<program>.lowered.hlo` / `<program>.optimized.hlo` modules of this
directory: JAX programs whose HLO (as JAX lowers it, and as XLA:CPU optimises
it) uses ops and attributes tests/hlo/jax_programs.py does not reach. Metadata
and stack frames are dropped to keep the files small.

    python tests/hlo/data/verifier/generate.py
"""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_rng = np.random.default_rng(1)


def _f32(*shape):
    return jnp.asarray(_rng.standard_normal(shape), jnp.float32)


def linalg(a, b):
    spd = a @ a.T + 4 * jnp.eye(4)
    chol = jnp.linalg.cholesky(spd)
    x = jax.scipy.linalg.solve_triangular(chol, b, lower=True)
    y = lax.linalg.triangular_solve(chol, b.T, left_side=False, lower=True)
    return chol, x, y


def spectral(x):
    c = jnp.fft.fft(x.astype(jnp.complex64))
    return (jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=8), jnp.fft.ifft2(c.reshape(2, 4)), jnp.real(c),
            jnp.imag(c), jnp.abs(c), jnp.angle(c))


def numerics(x, i):
    as_u16 = lax.bitcast_convert_type(x, jnp.uint16)
    return (jnp.isfinite(x), lax.reduce_precision(x, 5, 10), lax.bitcast_convert_type(x, jnp.int32),
            lax.bitcast_convert_type(x, jnp.uint8), lax.bitcast_convert_type(as_u16, jnp.float32),
            lax.population_count(i), jnp.remainder(x, 1.5), jnp.arctan2(x, x + 1), jnp.expm1(x),
            jnp.log1p(jnp.abs(x)), jnp.round(x), jnp.floor(x), jnp.sign(i), jnp.cbrt(x), lax.erf(x), jnp.tan(x),
            lax.complex(x, x), ~i, i << 2, lax.shift_right_logical(i, 1), jnp.clip(x, -1.0, 1.0),
            jnp.where(x > 0, x, 0.0), lax.select(True, x, x), x.astype(jnp.bfloat16), jnp.maximum(i, 3), x ** 2.5)


def rng(seed):
    return jax.random.uniform(jax.random.key(0), (3, 4)), jax.random.bits(jax.random.key(1), (5,), jnp.uint32)


def reductions(x):
    def add_mul(a, b):
        return a[0] + b[0], a[1] * b[1]

    return (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.max(x, axis=(0,)), jnp.cumsum(x, axis=0),
            jnp.cumprod(x, axis=1), lax.reduce((x, x), (0.0, 1.0), add_mul, (1,)), jnp.sort(x, axis=0),
            lax.sort((x[0], x[1], x[2]), num_keys=2), jnp.logaddexp.reduce(x, axis=0), jnp.var(x))


def pool_grad(x):
    def max_pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME").sum()

    def dilated_sum(x):
        return lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0)),
                                 base_dilation=(1, 2, 1, 1), window_dilation=(1, 1, 2, 1)).sum()

    return jax.grad(max_pool)(x), jax.grad(dilated_sum)(x)


def convs(x, w, wd):
    def dilated(x, w):
        return lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (2, 2)), lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                        dimension_numbers=("NCHW", "OIHW", "NHWC")).sum()

    def grouped(k):
        return lax.conv_general_dilated(x, k, (1, 1), "SAME", feature_group_count=4).sum()

    grads = jax.grad(dilated, argnums=(0, 1))(x, w)
    depthwise = lax.conv_general_dilated(x, wd, (1, 1), "SAME", feature_group_count=4,
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
    conv1d = lax.conv_general_dilated(x[:, :, :, 0], w[:, :, :, 0], (1,), "VALID",
                                      dimension_numbers=("NCH", "OIH", "NCH"))
    return grads, depthwise, conv1d, jax.grad(grouped)(wd)  # the last has batch_group_count


def indexing(x, i, u):
    return (lax.dynamic_update_slice(x, u, (i, 1)), lax.dynamic_slice(x, (i, i), (2, 3)),
            x[jnp.array([[0, 1], [2, 0]]), 1:], x.at[jnp.array([1, 3]), :].set(0.0).at[:, jnp.array([0])].mul(2.0),
            jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1), jax.vmap(lambda r, k: r[k])(x, jnp.arange(4)),
            jnp.concatenate([x, x[:1]], 0), jnp.flip(x, (0, 1)), jnp.pad(x, ((1, 2), (0, 3)), constant_values=1.0),
            x[::2, 1::2], jnp.tile(x[0], (2, 1)))


def batched_gather(x, idx):
    # vmapped indexing: gather and scatter with batching dimensions.
    return jax.vmap(lambda a, j: a[j])(x, idx), jax.vmap(lambda a, j: a.at[j].add(1.0))(x, idx)


def control2(x, n):
    loop = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))
    branch = lax.cond(n > 2, lambda a: (a, a + 1), lambda a: (a * 2, a), x)
    return loop, branch, lax.map(jnp.sin, x), jnp.vectorize(lambda a: a + 1)(x)


def sizes(x):
    return (lax.top_k(x, 3), jnp.linalg.norm(x), jnp.einsum("ij,jk->ik", x.reshape(2, 3), x.reshape(3, 2)),
            jnp.einsum("i,i->", x, x), jnp.outer(x, x))


PROGRAMS = {
    "linalg": (linalg, (_f32(4, 4), _f32(4, 3))),
    "spectral": (spectral, (_f32(8),)),
    "numerics": (numerics, (_f32(2, 3), jnp.arange(6, dtype=jnp.int32).reshape(2, 3))),
    "rng": (rng, (jnp.int32(0),)),
    "reductions": (reductions, (_f32(3, 4),)),
    "pool_grad": (pool_grad, (_f32(1, 5, 6, 2),)),
    "convs": (convs, (_f32(2, 4, 7, 6), _f32(3, 4, 3, 2), _f32(8, 1, 3, 3))),
    "indexing": (indexing, (_f32(4, 5), jnp.int32(1), _f32(2, 2))),
    "batched_gather": (batched_gather, (_f32(3, 4), jnp.array([0, 3, 1], jnp.int32))),
    "control2": (control2, (_f32(3), jnp.int32(4))),
    "sizes": (sizes, (_f32(6),)),
}

_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _compact(text: str) -> str:
    text = re.sub(r", metadata=\{[^{}]*\}", "", text)
    blocks = text.split("\n\n")
    return "\n\n".join(b for b in blocks if b.strip().split("\n")[0] not in _SECTIONS)


def main() -> None:
    out = Path(__file__).parent
    for name, (fn, args) in PROGRAMS.items():
        lowered = jax.jit(fn).lower(*args)
        (out / f"{name}.lowered.hlo").write_text(_compact(lowered.as_text(dialect="hlo")))
        (out / f"{name}.optimized.hlo").write_text(_compact(lowered.compile().as_text()))


if __name__ == "__main__":
    main()
