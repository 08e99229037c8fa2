"""A corpus of JAX programs: the reference interpreter is checked against JAX
on them, and whole-program compilation against the interpreter (they cover
every opcode a single-device JAX program lowers to that the interpreter runs).

``PROGRAMS`` maps a name to ``(function, example arguments)``; the arguments
are numpy arrays drawn from a generator seeded by the program's name, so each
program's inputs do not depend on the others. Results match bit for bit
except in the programs ``TOLERANCES`` names, each with the reason and the
measured difference.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from tools.compare import is_float

lax = jax.lax


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _normal(rng: np.random.Generator, *shape: int, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _complex_normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


# -- neural-network building blocks ----------------------------------------


def mlp(x, w1, b1, w2, b2):
    return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def layernorm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


def softmax(x):
    return jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=0)


def attention(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    causal = jnp.tril(jnp.ones((q.shape[2], k.shape[2]), bool))
    scores = jnp.where(causal, scores, -1e9)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v)


def conv2d_nhwc(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv2d_nchw(x, w):
    return lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 2)), dimension_numbers=("NCHW", "OIHW", "NCHW"))


def conv2d_grouped_dilated(x, w):
    # 4 input channels in 2 groups; dilated kernel and dilated input (a transposed convolution).
    grouped = lax.conv_general_dilated(x, w, (1, 1), "VALID", rhs_dilation=(2, 1), feature_group_count=2,
                                       dimension_numbers=("NHWC", "HWIO", "NHWC"))
    transposed = lax.conv_general_dilated(x[..., :2], w[:, :, :2, :], (1, 1), ((1, 1), (2, 2)), lhs_dilation=(2, 2),
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return grouped, transposed


def conv1d_depthwise(x, w):
    return lax.conv_general_dilated(x, w, (1,), "SAME", feature_group_count=x.shape[1],
                                    dimension_numbers=("NCH", "OIH", "NCH"))


def transformer_block(x, wq, wk, wv, wo, w1, w2):
    def norm(h):
        mean = h.mean(-1, keepdims=True)
        return (h - mean) * lax.rsqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-6)

    h = norm(x)
    heads = 2
    b, s, d = x.shape

    def split(t):
        return t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)

    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    scores = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d // heads)), axis=-1)
    attended = (scores @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    x = x + attended @ wo
    return x + jax.nn.gelu(norm(x) @ w1, approximate=True) @ w2


def erf_gelu(x):
    return jax.nn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=True), lax.erf(x), jax.nn.silu(x)


def logsumexp(x):
    return jax.nn.logsumexp(x, axis=1), jax.nn.logsumexp(x * 100.0)


def mlp_grad(params, x, y):
    def loss(p):
        w1, b1, w2 = p
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 - y) ** 2)

    return jax.value_and_grad(loss)(params)


# -- control flow -----------------------------------------------------------


def scan_rnn(h0, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()

    return lax.scan(step, h0, xs)


def fori_loop(x):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.5 + jnp.sin(c) * i, x)


def while_loop(n):
    # Collatz steps until 1, counted for each start value.
    def cond(state):
        value, _ = state
        return jnp.any(value != 1)

    def body(state):
        value, steps = state
        active = value != 1
        nxt = jnp.where(value % 2 == 0, value // 2, 3 * value + 1)
        return jnp.where(active, nxt, value), steps + active.astype(jnp.int32)

    return lax.while_loop(cond, body, (n, jnp.zeros_like(n)))


def cond_switch(x, p, i):
    a = lax.cond(p > 0, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) - 1.0, x)
    b = lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh, lambda v: v * v], x)
    return a, b


def dynamic_slice_loop(x):
    def body(i, acc):
        window = lax.dynamic_slice(x, (i, 0), (2, x.shape[1]))
        return lax.dynamic_update_slice(acc, window * (i + 1.0), (i * 2 % 5, 1))

    return lax.fori_loop(0, x.shape[0], body, jnp.zeros((6, x.shape[1] + 2), x.dtype))


# -- gathers, scatters, sorting ---------------------------------------------


def gathers(x, idx, idx2d):
    return x[idx], jnp.take_along_axis(x, idx2d, axis=1), x[idx[:2], 1:3], jnp.take(x, idx, axis=1, mode="clip")


def scatters(x, idx, updates):
    return (x.at[idx].add(updates), x.at[idx].set(updates), x.at[idx].max(updates), x.at[idx].min(updates),
            x.at[idx, 1].mul(2.0), x.at[::2].set(0.0))


def segment_sum(values, segments):
    return jax.ops.segment_sum(values, segments, num_segments=4), jax.ops.segment_max(values, segments, num_segments=4)


def sorting(x, keys, values):
    return (jnp.sort(x, axis=-1), jnp.argsort(x, axis=0), lax.top_k(x, 3), lax.sort((keys, values), num_keys=1),
            jnp.sort(x, axis=-1, descending=True))


def cumulative(x, n):
    return jnp.cumsum(x, 0), jnp.cumprod(x, 1), lax.cummax(x, 1), lax.cummin(x, 0), jnp.cumsum(n)


def argmax_argmin(x):
    return jnp.argmax(x, 0), jnp.argmin(x, 1), jnp.argmax(x.reshape(-1))


# -- windows ----------------------------------------------------------------


def pooling(x):
    max_pool = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    avg_pool = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
    return max_pool, avg_pool


def maxpool_grad(x):
    def pool_sum(v):
        return lax.reduce_window(v, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()

    return jax.grad(pool_sum)(x)


# -- integer programs --------------------------------------------------------


def integer_bits(a, b):
    shift = b & 7
    return ((a << shift) ^ (a >> shift), a & b, a | ~b, lax.population_count(a),
            lax.shift_right_logical(a, shift), (a.astype(jnp.uint32) >> 3).astype(jnp.int32))


def count_leading_zeros(a):
    return lax.clz(a), lax.clz(a.astype(jnp.uint8)), lax.clz(a.astype(jnp.int16))


def integer_division(a, b):
    b = jnp.where(b == 0, 1, b)
    return a // b, a % b, lax.div(a, b), lax.rem(a, b), jnp.abs(a), jnp.sign(b), a * b + 7


def hashing(x):
    # murmur3 finaliser and a polynomial hash, in uint32 arithmetic that wraps.
    h = x.astype(jnp.uint32)
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    h = h ^ (h >> 16)
    poly = lax.fori_loop(0, x.shape[0], lambda i, acc: acc * jnp.uint32(31) + h[i], jnp.uint32(7))
    return h, poly, h % jnp.uint32(1000)


def modular_arithmetic(a, b):
    m = 97
    return (a * b) % m, jnp.remainder(a - b, m), jnp.fmod(a - b, m), (a**3) % m


# -- narrow floats -----------------------------------------------------------


def bf16_matmul(a, b):
    return a @ b, jnp.dot(a, b, preferred_element_type=jnp.float32)


def bf16_layernorm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + jnp.bfloat16(1e-5))


def f16_ops(x, y):
    return x * y + x, jnp.exp(x), x / (y + 4.0), jnp.maximum(x, y), (x.astype(jnp.float32) + 1).astype(jnp.float16)


def fp8_convert(x):
    e4 = x.astype(jnp.float8_e4m3fn)
    e5 = x.astype(jnp.float8_e5m2)
    return e4.astype(jnp.float32), e5.astype(jnp.float32), (e4.astype(jnp.float32) * 2).astype(jnp.float8_e4m3fn)


# -- array manipulation ------------------------------------------------------


def one_hot(labels, logits):
    oh = jax.nn.one_hot(labels, logits.shape[-1])
    return oh, -(oh * jax.nn.log_softmax(logits)).sum(-1)


def einsums(a, b, c):
    return (jnp.einsum("ij,jk->ik", a, b), jnp.einsum("ij->ji", a), jnp.einsum("ii->i", a[:, :4]),
            jnp.einsum("bij,bjk->bik", c, c.transpose(0, 2, 1)), jnp.einsum("ij,ij->", a, a),
            jnp.einsum("i,j->ij", a[0], b[:, 0]), jnp.einsum("bij->b", c))


def where_clip(x, y):
    return jnp.where(x > y, x, y * 2), jnp.clip(x, -0.5, 0.5), jnp.where(jnp.isnan(x), 0.0, x), lax.clamp(-1.0, y, 1.0)


def reductions(x):
    return (x.sum((0, 2)), x.max((1, 2)), x.min(0), x.prod(2), x.mean(), jnp.all(x > -2, axis=1),
            jnp.any(x > 2, axis=(0, 1)), jnp.std(x, axis=2))


def reshape_transpose(x):
    y = x.reshape(2, 3, 4, 5).transpose(3, 1, 0, 2).reshape(5, 24)
    z = jnp.concatenate([y[:, ::-1], y[:, 2:10:3]], axis=1)
    return jnp.pad(z, ((1, 2), (0, 3))), lax.rev(x, (0,)), jnp.tile(x[:2, :3], (2, 2)), jnp.repeat(x[0, :4], 3)


def pad_slice(x):
    return (lax.pad(x, 0.0, ((1, -1, 1), (-2, 2, 2))), x[1:5:2, ::3], jnp.roll(x, 2, axis=1),
            lax.dynamic_slice(x, (4, 9), (3, 3)))


def vmapped(x, w):
    def per_example(v):
        return jnp.tanh(w @ v).sum() * v

    return jax.vmap(per_example)(x), jax.vmap(jnp.outer)(x, x)


def random_threefry(seed):
    key = jax.random.key(seed)
    k1, k2, k3 = jax.random.split(key, 3)
    return (jax.random.bits(k1, (8,), jnp.uint32), jax.random.uniform(k2, (4, 3)), jax.random.normal(k3, (6,)),
            jax.random.randint(k1, (5,), 0, 10), jax.random.permutation(k2, 8))


def special_functions(x):
    p = jnp.abs(x) + 0.1
    return (jnp.log1p(p), jnp.expm1(x), jax.scipy.special.gammaln(p), jnp.arctan2(x, p), jnp.cbrt(x),
            lax.logistic(x), jnp.tan(x * 0.5), jnp.round(x * 3), jnp.floor(x), jnp.ceil(x), lax.is_finite(x / x))


def nan_handling(x):
    return jnp.nanmax(x, 0), jnp.nansum(x, 1), jnp.maximum(x, 0.0), jnp.minimum(x, x[::-1]), jnp.sort(x[0])


def reduce_precision(x):
    return lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10), lax.reduce_precision(x, 8, 7)


def complex_math(re, im):
    z = lax.complex(re, im)
    return jnp.abs(z), (z * z + 1).real, jnp.exp(z * 0.1).imag, jnp.angle(z), (z / (z + 2)).real


def power_rounding(x, y):
    # power, round-half-away-from-zero and an optimisation barrier, which JAX lowers to HLO ops of their own.
    p = jnp.abs(x) + 0.1
    kept = lax.optimization_barrier(x)
    return jnp.power(p, y), lax.round(x * 4, lax.RoundingMethod.AWAY_FROM_ZERO), kept * 2, jnp.power(x, 3)


def fourier(x, z):
    # Each jnp.fft function lowers to a call of a computation holding one fft.
    return jnp.fft.fft(z), jnp.fft.ifft(z), jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=x.shape[-1])


def random_rbg(seed):
    # The "rbg" key: bits from rng-bit-generator (XLA's default algorithm, Philox on CPU) rather than threefry.
    key = jax.random.key(seed, impl="rbg")
    return jax.random.bits(key, (3, 5), jnp.uint32), jax.random.uniform(key, (4,))


def collectives_one_device(x):
    # Collectives over a one-device mesh: each device's data is the whole array, so every collective returns
    # its operand (summed, gathered or permuted among one participant).
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("i",))

    def per_device(v):
        return (lax.psum(v, "i"), lax.all_gather(v, "i"), lax.ppermute(v, "i", [(0, 0)]),
                lax.axis_index("i"), lax.psum_scatter(v, "i", tiled=True))

    spec, replicated = jax.sharding.PartitionSpec("i"), jax.sharding.PartitionSpec()
    return jax.shard_map(per_device, mesh=mesh, in_specs=spec, out_specs=(spec, spec, spec, replicated, spec),
                         check_vma=False)(x)


# -- linear algebra: the LAPACK (and jaxlib) custom calls JAX emits on the CPU ----------------------------


def eigen_decompositions(a, z):
    # geev (real and complex, right and left vectors) and gees (with and without Schur vectors), batched.
    w, v = jnp.linalg.eig(a)
    left = lax.linalg.eig(z, compute_left_eigenvectors=True)
    schur_form, schur_vectors = lax.linalg.schur(a)
    schur_form_only = lax.linalg.schur(z, compute_schur_vectors=False)
    return w, v, left, jnp.linalg.eigvals(z[0]), schur_form, schur_vectors, schur_form_only


def matrix_reductions(a, z):
    # gehrd and orgqr (Hessenberg form with Q), sytrd and hetrd (tridiagonal form), gesvd (the QR-iteration SVD),
    # geqp3 (column-pivoted QR) and geqrf with ormqr (a product with Q).
    hermitian = z + jnp.conj(jnp.swapaxes(z, -1, -2))
    return (jax.scipy.linalg.hessenberg(a[0], calc_q=True), lax.linalg.hessenberg(z),
            lax.linalg.tridiagonal(a + jnp.swapaxes(a, -1, -2), lower=True),
            lax.linalg.tridiagonal(hermitian, lower=False),
            lax.linalg.svd(a, algorithm=lax.linalg.SvdAlgorithm.QR, full_matrices=False),
            lax.linalg.svd(z[:, :, :3], algorithm=lax.linalg.SvdAlgorithm.QR, compute_uv=False),
            jax.scipy.linalg.qr(a[1, :, :3], pivoting=True), jax.scipy.linalg.qr_multiply(z[0, :, :3], z[1, :2]))


def tridiagonal_solves(dl, d, du, b):
    # gtsv, and jaxlib's own solver that perturbs tiny pivots (here a singular system: the second row is zero).
    singular = jnp.zeros_like(d).at[:, 0].set(1.0)
    complex_dl, complex_du, complex_b = (v.astype(jnp.complex64) for v in (dl, du, b))
    return (lax.linalg.tridiagonal_solve(dl, d, du, b),
            lax.linalg.tridiagonal_solve(dl * singular, d * singular, du * singular, b, perturb_singular=True),
            lax.linalg.tridiagonal_solve(complex_dl, d + 1j * du, complex_du, complex_b, perturb_singular=True))


def _build() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    programs: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}

    def add(fn: Callable[..., Any], make_args: Callable[[np.random.Generator], tuple[Any, ...]],
            name: str | None = None) -> None:
        name = name or fn.__name__
        programs[name] = (fn, make_args(_rng(name)))

    f32 = _normal
    add(mlp, lambda r: (f32(r, 4, 8), f32(r, 8, 16), f32(r, 16), f32(r, 16, 3), f32(r, 3)))
    add(layernorm, lambda r: (f32(r, 3, 16), f32(r, 16), f32(r, 16)))
    add(softmax, lambda r: (f32(r, 4, 7, scale=3.0),))
    add(attention, lambda r: (f32(r, 1, 2, 5, 8), f32(r, 1, 2, 5, 8), f32(r, 1, 2, 5, 8)))
    add(conv2d_nhwc, lambda r: (f32(r, 2, 6, 6, 3), f32(r, 3, 3, 3, 4)))
    add(conv2d_nchw, lambda r: (f32(r, 1, 3, 7, 6), f32(r, 4, 3, 3, 2)))
    add(conv2d_grouped_dilated, lambda r: (f32(r, 1, 7, 5, 4), f32(r, 2, 2, 2, 6)))
    add(conv1d_depthwise, lambda r: (f32(r, 2, 3, 9), f32(r, 3, 1, 4)))
    add(transformer_block, lambda r: (f32(r, 2, 5, 8), *(f32(r, 8, 8, scale=0.3) for _ in range(4)),
                                      f32(r, 8, 16, scale=0.3), f32(r, 16, 8, scale=0.3)))
    add(erf_gelu, lambda r: (f32(r, 64, scale=3.0),))
    add(logsumexp, lambda r: (f32(r, 3, 9, scale=4.0),))
    add(mlp_grad, lambda r: ((f32(r, 5, 6), f32(r, 6), f32(r, 6, 2)), f32(r, 8, 5), f32(r, 8, 2)))
    add(scan_rnn, lambda r: (f32(r, 4), f32(r, 6, 4), f32(r, 4, 4, scale=0.5)))
    add(fori_loop, lambda r: (f32(r, 5),))
    add(while_loop, lambda r: (r.integers(1, 30, 6).astype(np.int32),))
    add(cond_switch, lambda r: (f32(r, 4), np.int32(-1), np.int32(3)))
    add(dynamic_slice_loop, lambda r: (f32(r, 5, 3),))
    add(gathers, lambda r: (f32(r, 6, 5), np.array([5, 0, 2, 2], np.int32),
                            r.integers(0, 5, (6, 3)).astype(np.int32)))
    add(scatters, lambda r: (f32(r, 6, 3), np.array([4, 0, 4, 1], np.int32), f32(r, 4, 3)))
    add(segment_sum, lambda r: (f32(r, 10), np.array([0, 0, 1, 3, 3, 3, 1, 0, 2, 3], np.int32)))
    add(sorting, lambda r: (np.round(f32(r, 4, 6), 1), r.integers(0, 4, 9).astype(np.int32), f32(r, 9)))
    add(cumulative, lambda r: (f32(r, 4, 5), r.integers(-5, 5, 7).astype(np.int32)))
    add(argmax_argmin, lambda r: (np.round(f32(r, 5, 4), 0),))
    add(pooling, lambda r: (f32(r, 2, 6, 5, 3),))
    add(maxpool_grad, lambda r: (f32(r, 1, 4, 6, 2),))
    add(integer_bits, lambda r: (r.integers(-(2**31), 2**31, 32, dtype=np.int64).astype(np.int32),
                                 r.integers(-(2**31), 2**31, 32, dtype=np.int64).astype(np.int32)))
    add(count_leading_zeros, lambda r: (np.concatenate([r.integers(-(2**31), 2**31, 12, dtype=np.int64),
                                                        [0, 1, -1, 2**31 - 1]]).astype(np.int32),))
    add(integer_division, lambda r: (np.concatenate([r.integers(-100, 100, 20), [-(2**31), 2**31 - 1, -7, 7]]).astype(
        np.int32), np.concatenate([r.integers(-9, 9, 20), [-1, -1, 2, -2]]).astype(np.int32)))
    add(hashing, lambda r: (r.integers(0, 2**31, 16).astype(np.int32),))
    add(modular_arithmetic, lambda r: (r.integers(-1000, 1000, 12).astype(np.int32),
                                       r.integers(-1000, 1000, 12).astype(np.int32)))
    add(bf16_matmul, lambda r: (f32(r, 4, 16, dtype=ml_dtypes.bfloat16), f32(r, 16, 5, dtype=ml_dtypes.bfloat16)))
    add(bf16_layernorm, lambda r: (f32(r, 3, 32, dtype=ml_dtypes.bfloat16),))
    add(f16_ops, lambda r: (f32(r, 24, dtype=np.float16), f32(r, 24, dtype=np.float16)))
    add(fp8_convert, lambda r: (f32(r, 32, scale=50.0),))
    add(one_hot, lambda r: (np.array([0, 3, 1, 4, 7], np.int32), f32(r, 5, 6)))
    add(einsums, lambda r: (f32(r, 4, 5), f32(r, 5, 3), f32(r, 2, 3, 4)))
    add(where_clip, lambda r: (np.concatenate([f32(r, 10), [np.nan, np.inf]]).astype(np.float32), f32(r, 12)))
    add(reductions, lambda r: (f32(r, 3, 4, 5),))
    add(reshape_transpose, lambda r: (f32(r, 6, 20),))
    add(pad_slice, lambda r: (f32(r, 6, 10),))
    add(vmapped, lambda r: (f32(r, 3, 4), f32(r, 4, 4)))
    add(random_threefry, lambda r: (np.int32(42),))
    add(special_functions, lambda r: (np.concatenate([f32(r, 20), [0.0, -0.0]]).astype(np.float32),))
    add(nan_handling, lambda r: (np.where(r.random((4, 5)) < 0.2, np.nan, f32(r, 4, 5)).astype(np.float32),))
    add(reduce_precision, lambda r: (f32(r, 16, scale=1e3),))
    add(complex_math, lambda r: (f32(r, 8), f32(r, 8)))
    add(power_rounding, lambda r: (f32(r, 12), f32(r, 12)))
    add(fourier, lambda r: (f32(r, 2, 8), (f32(r, 3, 6) + 1j * f32(r, 3, 6)).astype(np.complex64)))
    add(random_rbg, lambda r: (np.int32(7),))
    add(collectives_one_device, lambda r: (f32(r, 6, 2),))
    c64 = _complex_normal
    add(eigen_decompositions, lambda r: (f32(r, 2, 4, 4), c64(r, 2, 4, 4)))
    add(matrix_reductions, lambda r: (f32(r, 2, 4, 4), c64(r, 2, 4, 4)))
    add(tridiagonal_solves, lambda r: (f32(r, 2, 5), f32(r, 2, 5) + 3, f32(r, 2, 5), f32(r, 2, 5, 3)))
    return programs


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = _build()

@dataclass(frozen=True)
class Tolerance:
    """How far the interpreter's float results may be from JAX's: within ``ulps`` units in the last place,
    or, for the ``outputs`` listed (every output when None), within ``epsilons_of_largest`` machine
    epsilons of the output's largest magnitude. That absolute bound is for results summing terms that can
    cancel: their rounding errors scale with the terms, so results near zero lose their relative accuracy
    in XLA's summation order as in any other."""

    ulps: int = 0
    epsilons_of_largest: float = 0
    outputs: tuple[int, ...] | None = None

    def keywords(self, index: int, expected: np.ndarray) -> dict[str, float]:
        """``tools.compare.assert_same``'s tolerance keywords for output ``index``, expected to be ``expected``."""
        atol = 0.0
        applies = self.outputs is None or index in self.outputs
        float_like = expected.dtype.kind == "c" or is_float(expected.dtype)
        if self.epsilons_of_largest and applies and float_like and expected.size:
            magnitudes = np.abs(expected.astype(np.complex128))
            largest = float(np.max(magnitudes, where=np.isfinite(magnitudes), initial=0))
            atol = self.epsilons_of_largest * float(ml_dtypes.finfo(expected.real.dtype).eps) * largest
        return {"ulps": self.ulps, "atol": atol}


# The measured figures are the largest over the lowered, optimised and StableHLO-imported modules and
# 6 to 8 draws of each program's arguments. Where the interpreter sums in another order than XLA (dots,
# convolutions, reductions, loops carrying sums):
_SUMS = {
    "attention": Tolerance(epsilons_of_largest=2),  # measured: 1.18 eps of the largest (3072 ulps near zero)
    "conv1d_depthwise": Tolerance(epsilons_of_largest=1.5),  # measured: 0.96 (324 ulps)
    # Measured: 0.99 (128 ulps); the transposed convolution's sums of two products differ by an ulp between fused
    # multiply-adds (XLA:CPU's Eigen, the interpreter's BLAS) and generated code's products rounded first.
    "conv2d_grouped_dilated": Tolerance(epsilons_of_largest=1.5),
    "conv2d_nchw": Tolerance(epsilons_of_largest=2),  # measured: 1.07 (1152 ulps)
    "conv2d_nhwc": Tolerance(epsilons_of_largest=2),  # measured: 1.40 (8192 ulps)
    "fori_loop": Tolerance(epsilons_of_largest=0.4),  # measured: 0.22 (64 ulps)
    "fourier": Tolerance(epsilons_of_largest=1),  # measured: 0.78 (8 ulps)
    "layernorm": Tolerance(epsilons_of_largest=2),  # measured: 1.53 (117 ulps)
    "mlp": Tolerance(epsilons_of_largest=3),  # measured: 2.15 (352 ulps)
    # The loss to 1 ulp; the gradients, sums over the batch: 3.24 eps of the largest (678 ulps).
    "mlp_grad": Tolerance(ulps=1, epsilons_of_largest=4, outputs=(1, 2, 3)),
    "scan_rnn": Tolerance(epsilons_of_largest=2),  # measured: 1.65 (18 ulps)
    "transformer_block": Tolerance(epsilons_of_largest=3),  # measured: 1.70 (10240 ulps)
    "vmapped": Tolerance(epsilons_of_largest=2, outputs=(0,)),  # measured: 1.35 (32 ulps)
    # Shorter sums, whose results stayed within a few ulps:
    "bf16_matmul": Tolerance(ulps=1),  # measured: 1 ulp (the f32 result; the bf16 one bit for bit)
    "einsums": Tolerance(ulps=4),  # measured: 4 ulps
    "one_hot": Tolerance(ulps=1),  # measured: 1 ulp
    "pooling": Tolerance(ulps=1),  # measured: 1 ulp
    "reductions": Tolerance(ulps=4),  # measured: 4 ulps
}
# Where XLA's approximations of transcendental functions differ from the interpreter's by a few ulps:
_FUNCTIONS = {
    "bf16_layernorm": Tolerance(ulps=1),  # measured: 1 ulp (compiled code; the interpreter matches JAX exactly)
    "complex_math": Tolerance(ulps=1),  # measured: 1 ulp
    # 1 + tanh(...) cancels for large negative x in the approximate gelu: 0.64 eps of the largest there.
    "erf_gelu": Tolerance(ulps=3, epsilons_of_largest=1, outputs=(1,)),  # measured: 3 ulps elsewhere
    "logsumexp": Tolerance(ulps=1),  # measured: 1 ulp
    "softmax": Tolerance(ulps=1),  # measured: 1 ulp (the sum's order; exp is XLA:CPU's own)
    # lgamma near its zeros at 1 and 2: 4.44 eps of the largest (65536 ulps); the other functions 3 ulps.
    "special_functions": Tolerance(ulps=3, epsilons_of_largest=6, outputs=(2,)),
}
# x * y + x in f16: XLA:CPU keeps the product in f32 (excess precision) where HLO rounds it to f16, and
# the sum cancels near y = -1.
_WIDER = {"f16_ops": Tolerance(ulps=6)}  # measured: 6 ulps

TOLERANCES: dict[str, Tolerance] = {**_SUMS, **_FUNCTIONS, **_WIDER}


@functools.cache
def jax_result(name: str) -> Any:
    """The result of the jitted program on its example arguments, as numpy values."""
    fn, args = PROGRAMS[name]
    return jax.tree.map(np.asarray, jax.jit(fn)(*args))


def flat_arguments(name: str) -> list[Any]:
    """The example arguments flattened the way the lowered module takes its parameters."""
    return jax.tree.leaves(PROGRAMS[name][1])
