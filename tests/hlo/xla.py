"""XLA's own HLO parser and printer, its conversions between HLO and StableHLO,
and XLA:CPU running a StableHLO module, through jaxlib (private API; kept here only)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from jaxlib import _hlo


def xla_reprint(text: str) -> str:
    """Parse ``text`` with XLA and print it back with ``HloModule::ToString``
    (large constants in full, as xlapy prints them)."""
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    return _hlo.hlo_module_from_text(text).to_string(options)


def without_stack_frames(text: str) -> str:
    """The computations of a module text; XLA renumbers stack frames when it prints."""
    body = text.split("\n\n\n")[-1] if "\nFileNames" in text else text.split("\n\n", 1)[1]
    return re.sub(r"stack_frame_id=\d+", "stack_frame_id=_", body)


def hlo_to_mlir(text: str) -> str:
    """The MLIR XLA converts HLO ``text`` to (StableHLO, with ``mhlo`` ops
    where StableHLO has none, e.g. ``mhlo.topk``), with locations."""
    from jax._src.lib import _jax

    module = _hlo.hlo_module_from_text(text)
    return _jax.mlir.xla_computation_to_mlir_module(_hlo.XlaComputation(module.as_serialized_hlo_module_proto()))


def mlir_to_hlo(text: str) -> str:
    """The HLO text XLA converts a StableHLO module (without Shardy ops) to."""
    from jax._src.lib import _jax

    return _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False).as_hlo_text()


def run_mlir_on_xla_cpu(text: str, *args: Any) -> list[np.ndarray]:
    """The results of a StableHLO module's ``main`` on ``args``, compiled and
    run by XLA:CPU on one device."""
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    backend = xla_bridge.get_backend("cpu")
    device = backend.devices()[0]
    executable = backend.compile_and_load(text, xla_client.DeviceList((device,)), xla_client.CompileOptions())
    buffers = [jax.device_put(np.asarray(a), device) for a in args]
    return [np.asarray(o) for o in executable.execute(buffers)]
