"""JAX programs on a 2x4 mesh of host devices (shard_map bodies with collectives,
sharding constraints) with JAX's own results, for checking that evaluating
their import on one device gives the global result.

JAX needs the 8 devices before its backend starts, so the programs are lowered
and run in a fresh process (``python -m tests.interpreter.sharded_programs OUT``),
which writes the StableHLO texts, the HLO that JAX exports with Shardy, the
arguments and JAX's results to ``OUT`` (an .npz file)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import zlib
from typing import Any

import numpy as np

DEVICES = 8


def _args(name: str, *shapes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return tuple(rng.standard_normal(s).astype(np.float32) for s in shapes)


def _programs() -> dict[str, tuple[Any, tuple[np.ndarray, ...]]]:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices("cpu")[:DEVICES]).reshape(2, 4), ("x", "y"))

    def smap(body, in_specs, out_specs, **options):
        return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **options)

    def psum_rows(x):
        return smap(lambda a: lax.psum(a * 2.0, "x"), P("x", None), P(None, None))(x)

    def collectives(x):
        def body(a):
            gathered = lax.all_gather(a, "y", axis=1, tiled=True)
            permuted = lax.ppermute(a, "x", [(0, 1), (1, 0)])
            scattered = lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True)
            return gathered.sum() + permuted + scattered.sum() + lax.pmax(a, "x")
        return smap(body, P("x", "y"), P("x", "y"), check_vma=False)(x)

    def all_to_all(x):
        return smap(lambda a: lax.all_to_all(a, "y", 0, 1, tiled=True), P(None, "y"), P("y", None),
                    check_vma=False)(x)

    def ring_and_index(x):
        def body(a):
            shifted = lax.ppermute(a, "y", [(i, (i + 1) % 4) for i in range(4)])
            return shifted * (lax.axis_index("y") + 1).astype(a.dtype) + lax.axis_index("x").astype(a.dtype)
        return smap(body, P("x", "y"), P("x", "y"))(x)

    def two_results_untiled_gather(x, y):
        def body(a, b):
            return lax.all_gather(a, "y"), lax.pmin(b, ("x", "y"))
        return smap(body, (P(None, "y"), P("x", "y")), (P(None, None, None), P("x", "y")), check_vma=False)(x, y)

    def loop_with_psum(x):
        def body(a):
            return lax.fori_loop(0, 3, lambda i, c: lax.psum(c, "y") * 0.25 + i, a)
        return smap(body, P(None, "y"), P(None, "y"), check_vma=False)(x)

    def constraint_then_manual(x, w):
        y = lax.with_sharding_constraint(jnp.sin(x) @ w, NamedSharding(mesh, P("x", "y")))
        z = smap(lambda a: a * 3.0 + lax.psum(a, "x"), P("x", "y"), P("x", "y"))(y)
        return jnp.tanh(lax.with_sharding_constraint(z, NamedSharding(mesh, P(None, "y"))))

    def partial_manual(x):
        return jax.shard_map(lambda a: lax.psum(a, "x") + 1.0, mesh=mesh, in_specs=P("x", None),
                             out_specs=P(None, None), axis_names={"x"})(x)

    return {
        "psum_rows": (psum_rows, _args("psum_rows", (8, 16))),
        "collectives": (collectives, _args("collectives", (8, 16))),
        "all_to_all": (all_to_all, _args("all_to_all", (8, 16))),
        "ring_and_index": (ring_and_index, _args("ring_and_index", (4, 8))),
        "two_results_untiled_gather": (two_results_untiled_gather, _args("two", (2, 8), (4, 8))),
        "loop_with_psum": (loop_with_psum, _args("loop_with_psum", (3, 8))),
        "constraint_then_manual": (constraint_then_manual, _args("constraint", (8, 6), (6, 8))),
        "partial_manual": (partial_manual, _args("partial_manual", (4, 8))),
    }


def _write(path: str) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", DEVICES)
    arrays: dict[str, np.ndarray] = {}
    texts: dict[str, dict[str, Any]] = {}
    for name, (fn, args) in _programs().items():
        lowered = jax.jit(fn).lower(*args)
        results = jax.tree.leaves(jax.jit(fn)(*args))
        texts[name] = {"stablehlo": lowered.as_text(), "hlo": lowered.compiler_ir(dialect="hlo").as_hlo_text(),
                       "args": len(args), "results": len(results)}
        for i, a in enumerate(args):
            arrays[f"{name}/arg{i}"] = np.asarray(a)
        for i, r in enumerate(results):
            arrays[f"{name}/result{i}"] = np.asarray(r)
    np.savez(path, texts=np.array(json.dumps(texts)), **arrays)


@functools.cache
def programs() -> dict[str, dict[str, Any]]:
    """name -> {"stablehlo", "hlo", "args", "results"} (texts and numpy arrays)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "programs.npz")
        subprocess.run([sys.executable, "-m", "tests.interpreter.sharded_programs", out], cwd=root, check=True,
                       capture_output=True, text=True, timeout=600)
        with np.load(out) as data:
            texts = json.loads(str(data["texts"]))
            return {name: {**entry, "args": [data[f"{name}/arg{i}"] for i in range(entry["args"])],
                           "results": [data[f"{name}/result{i}"] for i in range(entry["results"])]}
                    for name, entry in texts.items()}


if __name__ == "__main__":
    _write(sys.argv[1])
