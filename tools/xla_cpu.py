"""Run HLO text on XLA:CPU through jaxlib's private bindings of XLA (``jaxlib._hlo``,
``jax._src.lib``; they change between jaxlib releases, hence the bounded jax version in pyproject.toml).

The text is parsed by XLA's own HLO parser, converted to StableHLO, compiled
by the CPU client and executed on the first CPU device. Executables are cached
by text, so running one program on many inputs compiles it once; texts known
in advance can be compiled on background threads (``compile_ahead``), which
XLA does without holding the GIL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax._src import config as jax_config
from jax._src import xla_bridge
from jax._src.lib import _jax
from jax._src.lib import xla_client as xc
from jaxlib import _hlo


@dataclass(frozen=True)
class _Compiled:
    executable: Any
    parameter_dtypes: tuple[np.dtype, ...]
    result_shape: Any  # jaxlib Shape of the entry computation's result
    device: Any


def _leaf_count(shape: Any) -> int:
    return sum(_leaf_count(s) for s in shape.tuple_shapes()) if shape.is_tuple() else 1


_lock = threading.Lock()
_compiled: dict[str, Future[_Compiled]] = {}
_pool: ThreadPoolExecutor | None = None


def compile_on_xla_cpu(hlo_text: str) -> _Compiled:
    """Parse, convert and compile ``hlo_text`` with XLA:CPU (cached by text,
    errors included; a text being compiled on another thread is waited for)."""
    with _lock:
        future = _compiled.get(hlo_text)
        owner = future is None
        if owner:
            future = _compiled[hlo_text] = Future()
    if owner:
        try:
            future.set_result(_compile(hlo_text))
        except Exception as error:
            future.set_exception(error)
    return future.result()


def compile_ahead(hlo_texts: Iterable[str], workers: int | None = None) -> None:
    """Start compiling ``hlo_texts``, in order, on background threads."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2, thread_name_prefix="xla-compile")
        pool = _pool
    for text in hlo_texts:
        pool.submit(compile_on_xla_cpu, text)


def cancel_compile_ahead() -> None:
    """Drop the compilations ``compile_ahead`` has not started (the running ones finish)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def _compile(hlo_text: str) -> _Compiled:
    module = _hlo.hlo_module_from_text(hlo_text)
    computation = _hlo.XlaComputation(module.as_serialized_hlo_module_proto())
    program_shape = computation.program_shape()
    parameter_dtypes = []
    for shape in program_shape.parameter_shapes():
        if shape.is_tuple() or shape.is_token():
            raise NotImplementedError(f"entry parameters of shape {shape} are not supported")
        parameter_dtypes.append(np.dtype(shape.numpy_dtype()))
    mlir_text = _jax.mlir.xla_computation_to_mlir_module(computation)
    backend = xla_bridge.get_backend("cpu")
    device = backend.devices()[0]
    executable = backend.compile_and_load(mlir_text, xc.DeviceList((device,)), xc.CompileOptions())
    return _Compiled(executable, tuple(parameter_dtypes), program_shape.result_shape(), device)


def _unflatten(shape: Any, leaves: list[np.ndarray]) -> Any:
    if not shape.is_tuple():
        return leaves.pop(0)
    return tuple(_unflatten(s, leaves) for s in shape.tuple_shapes())


def run_on_xla_cpu(hlo_text: str, *args: Any) -> np.ndarray | tuple:
    """The value of the entry computation of ``hlo_text`` on ``args`` as
    computed by XLA:CPU: an array, or a (nested) tuple of arrays when the
    entry computation returns a tuple. Arguments are converted to the
    parameters' element types."""
    compiled = compile_on_xla_cpu(hlo_text)
    if len(args) != len(compiled.parameter_dtypes):
        raise TypeError(f"the module takes {len(compiled.parameter_dtypes)} arguments, got {len(args)}")
    with jax_config.enable_x64(True):
        buffers = [jax.device_put(np.asarray(a).astype(dtype, copy=False), compiled.device)
                   for a, dtype in zip(args, compiled.parameter_dtypes)]
        outputs = compiled.executable.execute(buffers)
        leaves = [np.asarray(o) for o in outputs]
    if len(leaves) != _leaf_count(compiled.result_shape):
        raise RuntimeError(f"XLA returned {len(leaves)} buffers for a result of shape {compiled.result_shape}")
    return _unflatten(compiled.result_shape, leaves)
