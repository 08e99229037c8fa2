"""JAX programs on an 8-device mesh whose StableHLO (as ``jax.jit(...).lower(...).as_text()``
prints it, with Shardy's ``sdy.mesh`` / ``sdy.sharding`` / ``sdy.sharding_constraint`` /
``sdy.manual_computation``) the frontend tests read.

``PROGRAMS`` maps a name to a ``Program``: the function, example arguments, the
``jax.jit`` partition specs, and whether it is lowered with Shardy (``sdy``
attributes) or without (GSPMD's ``mhlo.sharding`` strings, ``custom_call
@Sharding``), so that evaluating the imported module can be compared with
running it in JAX.

Lowering with shardings needs 8 host devices. When JAX's backend is already
running with fewer (another test used JAX first), the texts are lowered in a
fresh process (``python -m tests.frontends.jax_programs``)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

lax = jax.lax
DEVICES = 8


def _can_use_8_devices() -> bool:
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_num_cpu_devices", DEVICES)
    return len(jax.devices("cpu")) >= DEVICES


@functools.cache
def mesh() -> Mesh:
    """A 2x4 mesh of the 8 host devices, axes "x" and "y"."""
    return Mesh(np.array(jax.devices("cpu")[:DEVICES]).reshape(2, 4), ("x", "y"))


@dataclass(frozen=True)
class Spec:
    """A ``PartitionSpec`` on ``mesh()``, turned into a ``NamedSharding`` only when lowering."""

    axes: tuple

    def sharding(self) -> NamedSharding:
        return NamedSharding(mesh(), P(*self.axes))


def named(*axes: Any) -> Spec:
    return Spec(axes)


def _sharding(value: Any) -> Any:
    if isinstance(value, Spec):
        return value.sharding()
    if isinstance(value, tuple):
        return tuple(_sharding(v) for v in value)
    return value


@dataclass
class Program:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    in_shardings: Any = None
    out_shardings: Any = None
    shardy: bool = True
    jit_options: dict[str, Any] = field(default_factory=dict)
    # The same computation without sharding annotations (which need the 8-device mesh), to run on one device.
    reference: Callable[..., Any] | None = None

    def jitted(self) -> Any:
        options = dict(self.jit_options)
        if self.in_shardings is not None:
            options["in_shardings"] = _sharding(self.in_shardings)
        if self.out_shardings is not None:
            options["out_shardings"] = _sharding(self.out_shardings)
        return jax.jit(self.fn, **options)


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _f32(name: str, *shape: int) -> np.ndarray:
    return _rng(name + str(shape)).standard_normal(shape).astype(np.float32)


# -- programs -----------------------------------------------------------------------------------


def matmul_bias_gelu(x, w, b):
    return jax.nn.gelu(x @ w + b)


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


def conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv_strided_nchw(x, w):
    return lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 2)), rhs_dilation=(1, 2),
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def fori_loop(x):
    return lax.fori_loop(0, 4, lambda i, c: c * 0.5 + i, x)


def cond(x, p):
    return lax.cond(p > 0, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) - 1.0, x)


def switch(x, i):
    return lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)


def scan(xs):
    return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(xs.shape[1:], xs.dtype), xs)


def sort(x, y):
    return jnp.sort(x, axis=-1), lax.sort((y, x[0]), num_keys=1)


def argmax(x):
    return jnp.argmax(x, axis=0), jnp.argmin(x, axis=1)


def gather_scatter(x, idx):
    return x[idx], x.at[idx].add(1.0), x.at[idx, 1].set(0.5)


def take_along_axis(x, idx):
    return jnp.take_along_axis(x, idx, axis=1)


def cumsum(x):
    return jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=1)


def dynamic_slice(x, i):
    return lax.dynamic_slice(x, (i, 0), (2, 4)), lax.dynamic_update_slice(x, jnp.ones((1, 4), x.dtype), (i, 0))


def concat_pad_slice_reverse(x, y):
    z = jnp.concatenate([x, y], axis=1)
    return jnp.pad(z, ((1, 2), (0, 3))), z[1:5:2, ::3], jnp.flip(z, axis=0), lax.pad(x, 0.0, ((1, -1, 1), (0, 0, 2)))


def transposes_reshapes(x):
    return x.reshape(4, 2, 8).transpose(2, 0, 1), x.T.reshape(-1), jnp.expand_dims(x, 1)


def sharding_constraint(x, w):
    y = x @ w
    y = lax.with_sharding_constraint(y, named("x", None).sharding())
    return jnp.tanh(y)


def shard_map_psum(x):
    return jax.shard_map(lambda a: lax.psum(a * 2.0, "x"), mesh=mesh(), in_specs=P("x", None),
                         out_specs=P(None, None))(x)


def sharding_constraint_then_shard_map(x):
    y = lax.with_sharding_constraint(jnp.sin(x), named("x", "y").sharding())
    return jax.shard_map(lambda a: a * 3.0, mesh=mesh(), in_specs=P("x", "y"), out_specs=P("x", "y"))(y)


def shard_map_collectives(x):
    def body(a):
        gathered = lax.all_gather(a, "y", axis=1, tiled=True)
        permuted = lax.ppermute(a, "x", [(0, 1), (1, 0)])
        scattered = lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True)
        return gathered.sum() + permuted + scattered.sum() + lax.pmax(a, "x")

    return jax.shard_map(body, mesh=mesh(), in_specs=P("x", "y"), out_specs=P("x", "y"), check_vma=False)(x)


def attention(q, k, v):
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, -1), v)


def mlp_grad(w, x):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)


def integer_ops(a, b):
    return (a * 3 + b) >> 1, a & b, a ^ b, jnp.abs(a - b), a // jnp.maximum(b, 1), lax.population_count(a)


def compare_select(x, y):
    return jnp.where(x > y, x, y), jnp.clip(x, -0.5, 0.5), jnp.isfinite(x / y), jnp.sign(x)


def reductions(x):
    return x.sum(0), x.max(1), x.min(), jnp.prod(x, axis=1), jnp.any(x > 0)


def pooling(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def bf16_convert(x, w):
    return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)


def large_constant(x):
    table = np.arange(128, dtype=np.float32).reshape(16, 8) / 7.0
    return x + table, jnp.asarray(np.array([1.5, -2.25, 3.0], np.float32)).sum()


def elementwise_math(x):
    return jnp.exp(x) + jnp.log1p(jnp.abs(x)) + jnp.sqrt(jnp.abs(x)) + jnp.expm1(x) - jnp.floor(x) + jnp.ceil(x)


def iota_broadcast(x):
    return x + jnp.arange(x.shape[1], dtype=x.dtype), jnp.eye(x.shape[0], dtype=x.dtype)


def while_loop(n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, 1))


def complex_math(re, im):
    z = lax.complex(re, im)
    return jnp.real(z * z), jnp.imag(z), jnp.abs(z)


def optimization_barrier(x, y):
    a, b = lax.optimization_barrier((jnp.sin(x), y * 2.0))
    return a + b, b


def top_k(x):
    return lax.top_k(x, 3), lax.top_k(x, 2, axis=0)


def broadcast_stretch(row, column):
    return lax.broadcast_in_dim(row, (3, 4, 5), (0, 2)) + lax.broadcast_in_dim(column, (3, 4, 5), (0, 1, 2))


def cond_captures(x, y, p):
    s = jnp.sum(x)
    return lax.cond(p > 0, lambda: x * s + y, lambda: jnp.maximum(x, y) - s), \
        lax.switch(p, [lambda: s, lambda: s * 2.0, lambda: -s])


def all_to_all(x):
    return jax.shard_map(lambda a: lax.all_to_all(a, "y", 0, 1, tiled=True), mesh=mesh(), in_specs=P(None, "y"),
                         out_specs=P("y", None), check_vma=False)(x)


def _build() -> dict[str, Program]:
    programs = {
        "matmul_bias_gelu": Program(matmul_bias_gelu, (_f32("a", 8, 16), _f32("b", 16, 32), _f32("c", 32)),
                                    (named("x", "y"), named("y", None), None), named(None, "y")),
        "softmax": Program(softmax, (_f32("s", 8, 12),), (named("x", None),), named("x", None)),
        "layer_norm": Program(layer_norm, (_f32("l", 8, 16), _f32("g", 16), _f32("h", 16)),
                              (named("x", None), named(), named()), named("x", None)),
        "conv": Program(conv, (_f32("c", 2, 8, 8, 3), _f32("w", 3, 3, 3, 4)), (named("x"), named()), named("x")),
        "conv_strided_nchw": Program(conv_strided_nchw, (_f32("n", 2, 3, 9, 7), _f32("o", 4, 3, 3, 2)),
                                     (named("x"), named()), None),
        "fori_loop": Program(fori_loop, (_f32("f", 8, 4),), (named("x", None),), None),
        "cond": Program(cond, (_f32("d", 8), np.int32(1)), (named("y"), named()), None),
        "switch": Program(switch, (_f32("s", 8), np.int32(2)), None, None),
        "scan": Program(scan, (_f32("sc", 5, 8),), (named(None, "y"),), None),
        "sort": Program(sort, (_f32("so", 4, 8), _f32("sp", 8)), (named("x", None), named()), None),
        "argmax": Program(argmax, (_f32("am", 8, 6),), (named("x", None),), None),
        "gather_scatter": Program(gather_scatter, (_f32("g", 8, 4), np.array([0, 3, 5, 7], np.int32)),
                                  (named("x", None), named()), None),
        "take_along_axis": Program(take_along_axis, (_f32("t", 8, 6), np.array(_rng("t").integers(0, 6, (8, 3)),
                                                                                  np.int32)), None, None),
        "cumsum": Program(cumsum, (_f32("cs", 8, 4),), (named(None, "y"),), None),
        "dynamic_slice": Program(dynamic_slice, (_f32("ds", 8, 4), np.int32(3)), (named("x", "y"), named()), None),
        "concat_pad_slice_reverse": Program(concat_pad_slice_reverse, (_f32("p", 8, 4), _f32("q", 8, 6)),
                                            (named("x", None), named("x", None)), None),
        "transposes_reshapes": Program(transposes_reshapes, (_f32("tr", 8, 8),), (named("x", "y"),), None),
        "sharding_constraint": Program(sharding_constraint, (_f32("sc", 8, 16), _f32("sw", 16, 8)),
                                       (named("x", "y"), named("y", None)), named(None, "y")),
        "shard_map_psum": Program(shard_map_psum, (_f32("sm", 8, 16),), None, None),
        "shard_map_collectives": Program(shard_map_collectives, (_f32("sc", 8, 16),), None, None),
        "sharding_constraint_then_shard_map": Program(sharding_constraint_then_shard_map, (_f32("st", 8, 16),),
                                                      (named("x", None),), None),
        "attention": Program(attention, (_f32("q", 2, 4, 8), _f32("k", 2, 6, 8), _f32("v", 2, 6, 8)),
                             (named("x"), named("x"), named("x")), named("x")),
        "mlp_grad": Program(mlp_grad, (_f32("mw", 8, 4), _f32("mx", 16, 8)), (named(None, "y"), named("x")), None),
        "integer_ops": Program(integer_ops, (np.arange(8, dtype=np.int32) * 7 - 20, np.arange(8, dtype=np.int32) % 3),
                               (named("y"), named("y")), None),
        "compare_select": Program(compare_select, (_f32("cx", 8, 4), _f32("cy", 8, 4)), (named("x"), named("x")),
                                  None),
        "reductions": Program(reductions, (_f32("r", 8, 6),), (named("x", None),), None),
        "pooling": Program(pooling, (_f32("po", 2, 8, 8, 4),), (named("x"),), None),
        "bf16_convert": Program(bf16_convert, (_f32("bx", 8, 16), _f32("bw", 16, 4)), (named("x"), named()), None),
        "large_constant": Program(large_constant, (_f32("lc", 16, 8),), (named("x", "y"),), None),
        "elementwise_math": Program(elementwise_math, (_f32("em", 8, 8),), (named("x", "y"),), named("x", "y")),
        "iota_broadcast": Program(iota_broadcast, (_f32("ib", 8, 8),), (named(None, "y"),), None),
        "while_loop": Program(while_loop, (np.int32(5),), None, None),
        "complex_math": Program(complex_math, (_f32("re", 8), _f32("im", 8)), (named("y"), named("y")), None),
        "optimization_barrier": Program(optimization_barrier, (_f32("ob", 8, 16), _f32("oc", 8, 16)),
                                        (named("x", None), named(None, "y")), None),
        "top_k": Program(top_k, (_f32("tk", 8, 6),), (named("x", None),), None),
        "broadcast_stretch": Program(broadcast_stretch, (_f32("br", 1, 5), _f32("bc", 3, 1, 1)), None, None),
        "cond_captures": Program(cond_captures, (_f32("cx", 8), _f32("cy", 8), np.int32(1)),
                                 (named("y"), named(), named()), None),
        "all_to_all": Program(all_to_all, (_f32("aa", 8, 16),), None, None),
        # Without Shardy: mhlo.sharding attributes, custom_call @Sharding and a function for the shard_map body.
        "sharding_constraint_gspmd": Program(sharding_constraint, (_f32("sg", 8, 16), _f32("sv", 16, 8)),
                                             (named("x", "y"), named("y", None)), named(None, "y"), shardy=False,
                                             reference=lambda x, w: jnp.tanh(x @ w)),
        "all_to_all_gspmd": Program(all_to_all, (_f32("ag", 8, 16),), None, None, shardy=False),
    }
    return programs


PROGRAMS: dict[str, Program] = _build()


def _unsharded() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """More programs JAX lowers to other ops (custom calls, chlo, callbacks, barriers), no shardings."""
    x = _f32("u", 8, 8)
    return {
        "random_bits": (lambda k: (jax.random.normal(k, (4,)), jax.random.randint(k, (2,), 0, 9)),
                        (jax.random.key(0),)),
        "linalg": (lambda a: (jnp.linalg.cholesky(a @ a.T + 8 * jnp.eye(8)), jnp.linalg.qr(a),
                              jax.scipy.linalg.solve_triangular(a + 8 * jnp.eye(8), a, lower=True)), (x,)),
        "fft": (lambda a: (jnp.fft.fft2(a), jnp.fft.irfft(jnp.fft.rfft(a))), (x,)),
        "top_k": (lambda a: lax.top_k(a, 3), (x,)),
        "approx_max_k": (lambda a: lax.approx_max_k(a, 2), (x,)),
        "checkpoint_grad": (jax.grad(jax.checkpoint(lambda a: jnp.sin(jnp.sin(a)).sum())), (x,)),
        "pure_callback": (lambda a: jax.pure_callback(lambda v: np.asarray(v) * 2,
                                                      jax.ShapeDtypeStruct(a.shape, a.dtype), a), (x,)),
        "erf_inv": (lambda a: jax.scipy.special.erfinv(jnp.tanh(a)), (x,)),
        "conv_transpose": (lambda a, w: lax.conv_transpose(a, w, (2, 2), "SAME",
                                                           dimension_numbers=("NHWC", "HWIO", "NHWC")),
                           (_f32("ct", 1, 4, 4, 2), _f32("cw", 3, 3, 2, 3))),
        "gather_modes": (lambda a, i: (a.at[i].get(mode="clip"), a.at[i].get(mode="fill", fill_value=0)),
                         (x, np.array([1, 9, -3], np.int32))),
        "special_constants": (lambda a: jnp.where(jnp.isnan(a), jnp.inf, -jnp.inf) + np.float32(1e-40) + a * (1 + 2j),
                              (x,)),
    }


UNSHARDED = _unsharded()


def unsharded_text(name: str) -> str:
    fn, args = UNSHARDED[name]
    return jax.jit(fn).lower(*args).as_text()


def _lower_all() -> dict[str, str]:
    from jax._src import config

    texts = {}
    for name, program in PROGRAMS.items():
        with config.use_shardy_partitioner(program.shardy):
            texts[name] = program.jitted().lower(*program.args).as_text()
    return texts


@functools.cache
def _texts() -> dict[str, str]:
    if _can_use_8_devices():
        return _lower_all()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "")
                                      + f" --xla_force_host_platform_device_count={DEVICES}").strip())
    output = subprocess.run([sys.executable, "-m", "tests.frontends.jax_programs"], cwd=root, env=env,
                            check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def lowered_text(name: str) -> str:
    """The StableHLO text JAX prints for the program."""
    return _texts()[name]


def jax_result(name: str) -> list[np.ndarray]:
    """The program's results (computed on one device: shardings do not change them)."""
    program = PROGRAMS[name]
    return [np.asarray(leaf) for leaf in jax.tree.leaves(jax.jit(program.reference or program.fn)(*program.args))]


if __name__ == "__main__":
    json.dump(_lower_all(), sys.stdout)
