"""Shardy itself as the oracle for propagation: JAX programs with shardings
are compiled by XLA:CPU over 8 virtual devices, and XLA's Shardy pass dumps
the module before and after its propagation pipeline
(``shardy/<module>/01.before_propagation.mlir`` and ``02.after_propagation.mlir``).

The device count must be set before JAX starts, so the programs run in a
child process (``python -m tests.sharding.shardy_reference OUT_DIR``), which
writes ``NAME.before.mlir`` and ``NAME.after.mlir`` per program.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from tools.shardy import ROOT, ShardyHarnessError, jax_environment

DEVICE_COUNT = 8
CORPUS_TIMEOUT_S = 1200.0  # compiling the catalogue takes under a minute

# The catalogue's program names, known without starting JAX (tests are
# parametrized over them at collection time; generate() checks they agree).
PROGRAMS: tuple[str, ...] = (
    "elementwise", "elementwise_backward", "dot", "dot_contracting", "dot_batch", "mlp", "reduce", "reduce_max_keep",
    "argmax", "reshape_merge", "reshape_split", "reshape_subaxis", "reshape_backward", "transpose", "broadcast",
    "broadcast_backward", "concatenate", "concatenate_other_dim", "concatenate_three_shardings",
    "dot_result_on_contracting_axis", "dot_general_result_on_contracting_axis", "slice", "pad", "layernorm",
    "attention", "while",
    "cond", "constraint", "constraint_conflict", "conflict", "conflict_dims", "mesh3", "manual_computation",
    "sharding_group", "iota_add", "cumsum", "sort", "gather", "dynamic_slice", "reverse", "dot_batch_both",
    "dot_batch_conflict", "dot_general_multi_batch", "reduce_multi", "reduce_multi_sharded", "reshape_subaxis_merge",
    "reshape_subaxis_backward", "reshape_subaxis_split_backward", "broadcast_size1", "broadcast_size1_backward",
    "transpose_reshape", "reshape_transpose", "concatenate_sharded_dim", "concatenate_backward", "pad_sharded",
    "pad_interior", "slice_sharded", "slice_backward", "scatter", "scatter_add", "scatter_sharded_indices",
    "scatter_add_sharded_indices", "while_two_carries", "shard_map_free_axis", "shard_map_nested",
    "constraint_unconstrained", "constraint_unconstrained_open",
)


def _programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """name -> (function, example arguments, jit keyword arguments)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    mesh3 = Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("a", "b", "c"))

    def spec(*axes: Any, on: Any = mesh) -> NamedSharding:
        return NamedSharding(on, P(*axes))

    def f32(*shape: int) -> Any:
        return jnp.ones(shape, jnp.float32)

    def constrain(x: Any, *axes: Any) -> Any:
        return jax.lax.with_sharding_constraint(x, spec(*axes))

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        return jax.nn.relu(x @ w1) @ w2

    def layernorm(x: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)

    def attention(q: Any, k: Any, v: Any) -> Any:
        scores = jnp.einsum("bqd,bkd->bqk", q, k)
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, -1), v)

    def fori(x: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * 2.0, x)

    def cond(x: Any, p: Any) -> Any:
        return jax.lax.cond(p > 0, jnp.sin, jnp.cos, x)

    def shard_map_body(x: Any) -> Any:
        from jax import shard_map

        body = shard_map(lambda a: jnp.sin(a) * 2.0, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None),
                         axis_names={"x"})
        return jnp.cos(body(x))

    def shard_alike(x: Any, y: Any) -> Any:
        from jax.experimental.shard_alike import shard_alike as alike

        a, b = alike(x + 1.0, y * 2.0)
        return a, b

    def two_carries(x: Any, y: Any) -> Any:
        return jax.lax.fori_loop(0, 2, lambda i, c: (c[0] * 2.0 + c[1], jnp.tanh(c[1])), (x, y))

    def shard_map_free_axis(x: Any, w: Any) -> Any:
        from jax import shard_map

        # manual over "y" only; "x" stays free inside the body
        body = shard_map(lambda a, b: a @ b, mesh=mesh, in_specs=(P(None, "y"), P("y", None)),
                         out_specs=P(None, None), axis_names={"y"}, check_vma=False)
        return body(x, w) * 2.0

    def shard_map_nested(x: Any) -> Any:
        from jax import shard_map

        def outer(a: Any) -> Any:
            inner = shard_map(lambda b: jnp.sin(b), in_specs=P(None, "y"), out_specs=P(None, "y"),
                              axis_names={"y"})
            return inner(a * 2.0) + 1.0

        body = shard_map(outer, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None), axis_names={"x"})
        return body(x)

    def scatter(a: Any, i: Any, u: Any) -> Any:
        return a.at[i].set(u)

    unconstrained = P.UNCONSTRAINED
    s = spec
    return {
        "elementwise": (lambda a, b: jnp.tanh(a) + b, (f32(8, 16), f32(8, 16)),
                        dict(in_shardings=(s("x", "y"), None))),
        "elementwise_backward": (lambda a, b: jnp.exp(a) * b, (f32(8, 16), f32(8, 16)),
                                 dict(out_shardings=s("y", "x"))),
        "dot": (lambda a, b: a @ b, (f32(8, 16), f32(16, 32)), dict(in_shardings=(s("x", None), s(None, "y")))),
        "dot_contracting": (lambda a, b: a @ b, (f32(8, 16), f32(16, 32)),
                            dict(in_shardings=(s(None, "x"), s("x", "y")))),
        "dot_batch": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (f32(4, 8, 16), f32(4, 16, 8)),
                      dict(in_shardings=(s("x", "y", None), None))),
        "mlp": (mlp, (f32(8, 16), f32(16, 32), f32(32, 4)), dict(in_shardings=(s("x", None), s(None, "y"), None))),
        "reduce": (lambda a: jnp.sum(a, axis=1), (f32(8, 16, 4),), dict(in_shardings=(s("x", "y", None),))),
        "reduce_max_keep": (lambda a: a - a.max(-1, keepdims=True), (f32(8, 16),),
                            dict(in_shardings=(s("x", "y"),))),
        "argmax": (lambda a: jnp.argmax(a, axis=0), (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "reshape_merge": (lambda a: a.reshape(32, 4) * 2.0, (f32(8, 4, 4),), dict(in_shardings=(s("x", "y", None),))),
        "reshape_split": (lambda a: a.reshape(8, 4, 2) + 1.0, (f32(32, 2),), dict(in_shardings=(s(("x", "y"), None),))),
        "reshape_subaxis": (lambda a: a.reshape(2, 16) + 1.0, (f32(32,),), dict(in_shardings=(s("y"),))),
        "reshape_backward": (lambda a: (a * 2.0).reshape(4, 32), (f32(16, 8),), dict(out_shardings=s("x", "y"))),
        "transpose": (lambda a: jnp.transpose(a, (2, 0, 1)) * 3.0, (f32(8, 4, 16),),
                      dict(in_shardings=(s("x", None, "y"),))),
        "broadcast": (lambda a, b: a[None, :] + b, (f32(16), f32(8, 16)), dict(in_shardings=(s("y"), None))),
        "broadcast_backward": (lambda a: jnp.broadcast_to(a, (8, 16)) * 2.0, (f32(16),),
                               dict(out_shardings=s("x", "y"))),
        "concatenate": (lambda a, b: jnp.concatenate([a, b], axis=1), (f32(8, 16), f32(8, 8)),
                        dict(in_shardings=(s("x", "y"), None))),
        "concatenate_other_dim": (lambda a, b: jnp.concatenate([a, b], axis=0), (f32(8, 16), f32(8, 16)),
                                  dict(in_shardings=(s(None, "y"), s("x", None)))),
        "concatenate_three_shardings": (lambda a, b, c: jnp.concatenate([a, b, c], axis=1),
                                        (f32(8, 16), f32(8, 16), f32(8, 16)),
                                        dict(in_shardings=(s("x", "y"), s("y", None), s(None, "x")))),
        "dot_result_on_contracting_axis": (lambda a, b: a @ b, (f32(8, 16), f32(16, 32)),
                                           dict(in_shardings=(s(None, "x"), s("x", None)),
                                                out_shardings=s("x", None))),
        "dot_general_result_on_contracting_axis": (
            lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (f32(4, 8, 16), f32(4, 16, 32)),
            dict(in_shardings=(s(None, None, "y"), s(None, "y", None)), out_shardings=s(None, None, "y"))),
        "slice": (lambda a: a[2:6, ::2] + 1.0, (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "pad": (lambda a: jnp.pad(a, ((1, 1), (0, 0))), (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "layernorm": (layernorm, (f32(8, 32),), dict(in_shardings=(s("x", "y"),))),
        "attention": (attention, (f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16)),
                      dict(in_shardings=(s("x", None, "y"), None, None))),
        "while": (fori, (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "cond": (cond, (f32(8, 16), jnp.int32(1)), dict(in_shardings=(s("x", None), None))),
        "constraint": (lambda a: jnp.sin(constrain(a * 2.0, "x", None)) + 1.0, (f32(8, 16),), {}),
        "constraint_conflict": (lambda a: jnp.sin(constrain(a * 2.0, None, "x")), (f32(8, 16),),
                                dict(in_shardings=(s("x", None),))),
        "conflict": (lambda a, b: a + b, (f32(8, 16), f32(8, 16)), dict(in_shardings=(s("x", None), s("y", None)))),
        "conflict_dims": (lambda a, b: a + b.T, (f32(8, 16), f32(16, 8)),
                          dict(in_shardings=(s("x", "y"), s("x", "y")))),
        "mesh3": (lambda a, b: (a @ b).sum(0), (f32(8, 16), f32(16, 8)),
                  dict(in_shardings=(spec("a", ("b", "c"), on=mesh3), None))),
        "manual_computation": (shard_map_body, (f32(8, 16),), dict(in_shardings=(s(None, "y"),))),
        "sharding_group": (shard_alike, (f32(8, 16), f32(8, 16)), dict(in_shardings=(s("x", "y"), None))),
        "iota_add": (lambda a: a + jnp.arange(16.0), (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "cumsum": (lambda a: jnp.cumsum(a, axis=1), (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "sort": (lambda a: jnp.sort(a, axis=1), (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "gather": (lambda a, i: a[i], (f32(8, 16), jnp.arange(4)), dict(in_shardings=(s(None, "y"), None))),
        "dynamic_slice": (lambda a, i: jax.lax.dynamic_slice_in_dim(a, i, 4, axis=0), (f32(8, 16), jnp.int32(2)),
                          dict(in_shardings=(s("x", "y"), None))),
        "reverse": (lambda a: jnp.flip(a, 1) * 2.0, (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "dot_batch_both": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (f32(4, 8, 16), f32(4, 16, 8)),
                           dict(in_shardings=(s("x", None, "y"), s("x", "y", None)))),
        "dot_batch_conflict": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (f32(4, 8, 16), f32(4, 16, 8)),
                               dict(in_shardings=(s("x", None, None), s("y", None, None)))),
        "dot_general_multi_batch": (lambda a, b: jnp.einsum("abij,abjk->abik", a, b),
                                    (f32(2, 4, 8, 16), f32(2, 4, 16, 8)),
                                    dict(in_shardings=(s(None, "y", None, None), s("x", None, None, None)))),
        "reduce_multi": (lambda a: jnp.sum(a, axis=(0, 2)), (f32(8, 16, 4),),
                         dict(in_shardings=(s("x", "y", None),))),
        "reduce_multi_sharded": (lambda a: jnp.max(a, axis=(1, 2)), (f32(8, 16, 4),),
                                 dict(in_shardings=(s(None, "x", "y"),))),
        "reshape_subaxis_merge": (lambda a: a.reshape(2, 16) + 1.0, (f32(4, 8),), dict(in_shardings=(s("y", None),))),
        "reshape_subaxis_backward": (lambda a: (a * 2.0).reshape(32), (f32(2, 16),), dict(out_shardings=s("y"))),
        "reshape_subaxis_split_backward": (lambda a: (a * 2.0).reshape(2, 4, 4), (f32(32,),),
                                           dict(out_shardings=s(None, "y", None))),
        # JAX lowers a size-1 broadcast_in_dim to an identity broadcast, a reshape and a broadcast
        "broadcast_size1": (lambda a: jax.lax.broadcast_in_dim(a, (8, 16), (0, 1)) * 2.0, (f32(1, 16),),
                            dict(in_shardings=(s(None, "y"),))),
        "broadcast_size1_backward": (lambda a: jax.lax.broadcast_in_dim(a, (8, 16), (0, 1)) + 1.0, (f32(8, 1),),
                                     dict(out_shardings=s("x", "y"))),
        "transpose_reshape": (lambda a: jnp.transpose(a, (1, 0, 2)).reshape(16, 16) * 2.0, (f32(4, 4, 16),),
                              dict(in_shardings=(s("x", "y", None),))),
        "reshape_transpose": (lambda a: jnp.transpose(a.reshape(4, 2, 16), (2, 0, 1)) + 1.0, (f32(8, 16),),
                              dict(in_shardings=(s("x", "y"),))),
        "concatenate_sharded_dim": (lambda a, b: jnp.concatenate([a, b], axis=0) * 2.0, (f32(8, 16), f32(8, 16)),
                                    dict(in_shardings=(s("x", "y"), s("x", "y")))),
        "concatenate_backward": (lambda a, b: jnp.concatenate([a * 2.0, b], axis=1), (f32(8, 16), f32(8, 16)),
                                 dict(out_shardings=s("x", "y"))),
        "pad_sharded": (lambda a: jnp.pad(a * 2.0, ((0, 0), (2, 6))), (f32(8, 16),),
                        dict(in_shardings=(s("x", "y"),))),
        "pad_interior": (lambda a: jax.lax.pad(a, 0.0, ((1, 1, 1), (0, 0, 0))), (f32(8, 16),),
                         dict(in_shardings=(s("x", "y"),))),
        "slice_sharded": (lambda a: a[:, 4:12] * 2.0, (f32(8, 16),), dict(in_shardings=(s("x", "y"),))),
        "slice_backward": (lambda a: (a * 2.0)[:, 4:12], (f32(8, 16),), dict(out_shardings=s("x", "y"))),
        "scatter": (scatter, (f32(8, 16), jnp.arange(4), f32(4, 16)), dict(in_shardings=(s("x", "y"), None, None))),
        "scatter_add": (lambda a, i, u: a.at[i].add(u), (f32(8, 16), jnp.arange(4), f32(4, 16)),
                        dict(in_shardings=(None, None, s(None, "y")))),
        "scatter_sharded_indices": (scatter, (f32(8, 16), jnp.arange(4), f32(4, 16)),
                                    dict(in_shardings=(None, s("x"), None))),
        "scatter_add_sharded_indices": (lambda a, i, u: a.at[i].add(u), (f32(8, 16), jnp.arange(4), f32(4, 16)),
                                        dict(in_shardings=(None, s("x"), None))),
        "while_two_carries": (two_carries, (f32(8, 16), f32(8, 16)), dict(in_shardings=(s("x", None), s(None, "y")))),
        "shard_map_free_axis": (shard_map_free_axis, (f32(8, 16), f32(16, 32)),
                                dict(in_shardings=(s("x", "y"), None))),
        "shard_map_nested": (shard_map_nested, (f32(8, 16),), {}),
        "constraint_unconstrained": (lambda a: jnp.sin(constrain(a * 2.0, "x", unconstrained)), (f32(8, 16),),
                                     dict(in_shardings=(s(None, "y"),))),
        "constraint_unconstrained_open": (lambda a: jnp.exp(constrain(a + 1.0, unconstrained, "y")) * 2.0,
                                          (f32(8, 16),), {}),
    }


def generate(out_dir: pathlib.Path) -> None:
    """Write NAME.before.mlir / NAME.after.mlir / NAME.reshards.mlir (after the
    explicit reshards that end Shardy's pipeline) for every program (child process)."""
    import jax

    programs = _programs()
    if tuple(programs) != PROGRAMS:
        raise SystemExit(f"PROGRAMS is out of date: {sorted(set(programs) ^ set(PROGRAMS))}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, (fn, args, jit_kwargs) in programs.items():
        dump = out_dir / f"dump_{name}"
        jax.jit(fn, **jit_kwargs).lower(*args).compile(
            compiler_options={"xla_dump_to": str(dump), "xla_dump_hlo_pass_re": "shardy-xla"})
        (module_dir,) = [d for d in (dump / "shardy").iterdir() if d.is_dir()]
        for stage, suffix in (("01.before_propagation", "before"), ("02.after_propagation", "after"),
                              ("03.after_minimal_partitioner_with_global_shapes", "reshards")):
            (out_dir / f"{name}.{suffix}.mlir").write_text((module_dir / f"{stage}.mlir").read_text())


def reference_corpus(out_dir: pathlib.Path) -> dict[str, tuple[str, str, str]]:
    """name -> (module before Shardy's propagation, module after it, module after
    the explicit reshards), produced by XLA:CPU in a child process."""
    command = [sys.executable, "-m", "tests.sharding.shardy_reference", str(out_dir)]
    try:
        child = subprocess.run(command, cwd=ROOT, env=jax_environment(DEVICE_COUNT), capture_output=True, text=True,
                               timeout=CORPUS_TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr or ""
        raise ShardyHarnessError(f"the reference programs took over {CORPUS_TIMEOUT_S:.0f} s:\n"
                                 f"{stderr[-4000:]}") from error
    if child.returncode != 0:
        raise ShardyHarnessError(f"the reference programs failed (exit status {child.returncode}):\n"
                                 f"{child.stderr[-4000:]}")
    names = sorted(p.name[: -len(".before.mlir")] for p in out_dir.glob("*.before.mlir"))
    return {n: tuple((out_dir / f"{n}.{stage}.mlir").read_text() for stage in ("before", "after", "reshards"))
            for n in names}


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]))
