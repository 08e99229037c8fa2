"""XLA's own HLO parser and printer, its conversions between HLO and StableHLO,
XLA:CPU running a StableHLO module, and XLA's verdict on (possibly invalid) HLO
texts, through jaxlib's private bindings of XLA (as ``tools/xla_cpu.py`` runs HLO
text on XLA:CPU and ``tools/shardy.py`` runs Shardy)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from signal import Signals
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


# -- XLA's verdict on HLO texts, in a child process ----------------------------------------

# Parses each text of a JSON list on stdin with XLA, converts it to StableHLO (whose ops check
# their operand and result types) and compiles it for CPU (which runs XLA's HloVerifier first).
# Prints one JSON line before and one after each text; a text XLA aborts on has only the first.
_VERDICT_WORKER = """
import json, sys
import jax
from jax._src.lib import xla_client
from jaxlib import _hlo

devices = xla_client.DeviceList(tuple(jax.devices("cpu")[:1]))
for index, text in enumerate(json.load(sys.stdin)):
    if index < int(sys.argv[1]):
        continue
    print(json.dumps([index, "start"]), flush=True)
    try:
        module = _hlo.hlo_module_from_text(text)
        stablehlo = xla_client._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        devices[0].client.compile_and_load(stablehlo, devices, xla_client.CompileOptions())
        print(json.dumps([index, "ok"]), flush=True)
    except Exception as e:
        print(json.dumps([index, "error", str(e) or type(e).__name__]), flush=True)
"""


class XlaHarnessError(RuntimeError):
    """The child process that asks XLA could not do so (not XLA's verdict on a text)."""


@dataclass(frozen=True)
class XlaVerdict:
    """What XLA made of one HLO text: accepted it, refused it with an error, or
    killed its process with a signal (a failed CHECK aborts, a bad access faults)."""

    error: str | None = None  # XLA's error message, whitespace collapsed
    signal: int | None = None  # the signal that ended XLA's process
    stderr: str = ""  # what XLA printed before it died (its failed CHECK), stack frames dropped

    @property
    def accepted(self) -> bool:
        return self.error is None and self.signal is None

    def __str__(self) -> str:
        if self.signal is not None:
            return f"XLA died of {Signals(self.signal).name}: {self.stderr or '(nothing printed)'}"
        return f"XLA refuses it: {self.error}" if self.error is not None else "XLA accepts it"


def _without_stack_frames(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines()]
    return " ".join(line for line in lines if line and not line.startswith("@") and "stack trace" not in line)


def xla_verdicts(texts: Sequence[str], timeout: float = 600) -> list[XlaVerdict]:
    """XLA's verdict on each HLO text. XLA aborts on some invalid modules, so it
    runs in a child process, restarted after the text it died on. A child that
    fails in any other way raises ``XlaHarnessError``."""
    verdicts: list[XlaVerdict] = []
    payload = json.dumps(list(texts))
    while len(verdicts) < len(texts):
        first = len(verdicts)
        run = subprocess.run([sys.executable, "-c", _VERDICT_WORKER, str(first)], input=payload,
                             capture_output=True, text=True, timeout=timeout)
        started = None
        for line in run.stdout.splitlines():
            index, outcome, *error = json.loads(line)
            if outcome == "start":
                started = index
            elif index == len(verdicts):
                verdicts.append(XlaVerdict(error=" ".join(error[0].split())) if error else XlaVerdict())
        if len(verdicts) == len(texts):
            break
        if run.returncode >= 0 or started != len(verdicts):
            raise XlaHarnessError(f"the XLA child process ended (exit {run.returncode}) without a verdict on text "
                                  f"{len(verdicts)} and not while XLA read it: {run.stderr[-2000:]}")
        verdicts.append(XlaVerdict(signal=-run.returncode, stderr=_without_stack_frames(run.stderr)))
    return verdicts


@dataclass(frozen=True)
class XlaRefuses:
    """XLA refuses the text with an error that contains ``reason``."""

    reason: str


@dataclass(frozen=True)
class XlaDies:
    """XLA has no error for the text: its process dies of ``signal`` after
    printing ``reason`` (a failed CHECK; empty when it prints nothing)."""

    signal: Signals
    reason: str = ""


@dataclass(frozen=True)
class XlaAccepts:
    """XLA accepts the text; ``why`` says why xlapy refuses it anyway (a rule
    of XLA's that the route through jaxlib does not reach, or xlapy's stricter one)."""

    why: str


XlaExpectation = XlaRefuses | XlaDies | XlaAccepts


def assert_xla_verdict(verdict: XlaVerdict, expected: XlaExpectation) -> None:
    """Fail unless XLA's verdict is the expected one, for the expected reason."""
    if isinstance(expected, XlaAccepts):
        assert verdict.accepted, f"expected XLA to accept it ({expected.why}); {verdict}"
    elif isinstance(expected, XlaRefuses):
        assert verdict.error is not None and expected.reason in verdict.error, \
            f"expected XLA to refuse it with {expected.reason!r}; {verdict}"
    else:
        assert verdict.signal == expected.signal and expected.reason in verdict.stderr, \
            f"expected XLA to die of {expected.signal.name} after {expected.reason!r}; {verdict}"
