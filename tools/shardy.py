"""Shardy (openxla/shardy) through jaxlib, which ships its passes and MLIR's
pass manager: the reference that xlapy's sharding propagation and sharding
rules are compared with, and the producer of the checked-in Shardy outputs
(``tools/regenerate_shardy_goldens.py``).

Two ways to run it:

* ``run_shardy(text, strategy)``, in this process: for programs Shardy is
  known to handle (a crash ends the caller's process).
* ``run_isolated(items)``, in child processes: Shardy crashes on some programs
  (a segfault, or an abort on a failed check), so each child reports every
  result as soon as it has it, and a new child carries on after a crash. The
  outcome of each program is Shardy's output or Shardy's own failure (the
  diagnostics it refused the program with, or the signal it crashed with).
  Anything else that goes wrong -- the child cannot start or import jaxlib,
  prints what the protocol does not allow, stops early, is killed from
  outside or stalls -- is a ``ShardyHarnessError`` carrying the child's
  stderr, never a program outcome.

The child is ``python -m tools.shardy`` (``serve``): it reads a JSON list of
``[text, pass pipeline]`` pairs on stdin and writes one JSON object a line:
``{"ready": true}`` once jaxlib is loaded, then for program ``i``
``{"start": i}`` followed by ``{"index": i, "output": text}`` or
``{"index": i, "refused": diagnostics}``.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Propagation strategy (as ``xlapy sdy propagate --strategy``) -> Shardy's pass.
PASSES = {
    "basic": "sdy-basic-propagate",
    "aggressive": "sdy-aggressive-propagate",
    "op-priority": "sdy-op-priority-propagate",
    "user-priority": "sdy-user-priority-propagate",
    "pipeline": "sdy-propagation-pipeline",
}

# Shardy's printer adds the StableHLO form of every mesh as a discardable
# attribute; it repeats the mesh, and the checked-in outputs leave it out.
_MESH_FORM = re.compile(r" \{stablehlo\.mesh = \{axes = \[[^\]]*\](, device_ids = [^}]*)?\}\}")

# Signals a process raises on itself when it crashes (as opposed to being
# killed from outside: SIGKILL, SIGTERM, SIGINT).
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})

STARTUP_TIMEOUT_S = 300.0  # importing jax on a busy machine
PROGRAM_TIMEOUT_S = 120.0  # the largest test program takes well under a second


class ShardyHarnessError(RuntimeError):
    """Shardy could not be run at all: a failure of the harness or of the
    environment, never an outcome of a program."""


@dataclass(frozen=True)
class Outcome:
    """Shardy's output for one program, or its own failure on it."""

    output: str | None = None
    failure: str | None = None  # "refused: <diagnostics>" or "crashed: <signal> ..."


def pipeline_text(strategy: str) -> str:
    """The pass pipeline of a propagation strategy, as MLIR's parser takes it."""
    return f"builtin.module({PASSES[strategy]})"


def without_mesh_forms(text: str) -> str:
    """``text`` without the ``stablehlo.mesh`` attributes Shardy's printer adds to meshes."""
    return _MESH_FORM.sub("", text)


def jax_environment(device_count: int | None = None) -> dict[str, str]:
    """The environment of a child process that runs jaxlib on the CPU (with
    ``device_count`` virtual devices, which must be set before JAX starts)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if device_count is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={device_count}"
    return env


def run_shardy(text: str, strategy: str = "pipeline") -> str:
    """``text`` (one MLIR module) as Shardy prints it after the pass of ``strategy``."""
    return run_passes(text, pipeline_text(strategy))


def run_passes(text: str, pipeline: str) -> str:
    """``text`` after the MLIR pass ``pipeline`` (in this process)."""
    import jax  # noqa: F401  (loads jaxlib's MLIR with the sdy and stablehlo dialects)
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir, passmanager

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(pipeline).run(module.operation)
        return str(module)


def populated_rule(stablehlo: str, conservative: bool = False) -> str:
    """The rule Shardy's ``sdy-populate-op-sharding-rules`` pass attaches to
    the op marked with the unit attribute ``xlapy.op``, or "none"."""
    import jax  # noqa: F401
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir, passmanager

    options = "{conservative-propagation=true}" if conservative else ""
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(stablehlo)
        passmanager.PassManager.parse(f"builtin.module(func.func(sdy-populate-op-sharding-rules{options}))").run(
            module.operation)
        found: list[str] = []

        def visit(op: Any) -> None:
            if "xlapy.op" in op.attributes:
                found.append(str(op.attributes["sdy.sharding_rule"]) if "sdy.sharding_rule" in op.attributes
                             else "none")
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        visit(inner.operation)

        visit(module.operation)
    if len(found) != 1:
        raise ValueError(f"expected one op marked xlapy.op, found {len(found)}")
    return found[0]


# -- programs in child processes ---------------------------------------------------------

CHILD_COMMAND = (sys.executable, "-m", "tools.shardy")


def run_isolated(items: Sequence[tuple[str, str]], command: Sequence[str] = CHILD_COMMAND,
                 startup_timeout: float = STARTUP_TIMEOUT_S,
                 program_timeout: float = PROGRAM_TIMEOUT_S) -> list[Outcome]:
    """Shardy's outcome for each (module text, strategy), in order; raises
    ``ShardyHarnessError`` when the children cannot give them."""
    work = [(text, pipeline_text(strategy)) for text, strategy in items]
    outcomes: list[Outcome] = []
    while len(outcomes) < len(work):
        outcomes.extend(_run_child(work, len(outcomes), command, startup_timeout, program_timeout))
    return outcomes


def _run_child(work: list[tuple[str, str]], first: int, command: Sequence[str], startup_timeout: float,
               program_timeout: float) -> list[Outcome]:
    """The outcomes one child gives, from program ``first`` on: up to the end,
    or up to and including the program it crashed on."""
    with tempfile.TemporaryFile("w+") as stdin, tempfile.TemporaryFile("w+") as stderr:
        json.dump(work[first:], stdin)
        stdin.seek(0)
        try:
            child = subprocess.Popen(list(command), cwd=ROOT, env=jax_environment(), stdin=stdin,
                                     stdout=subprocess.PIPE, stderr=stderr, text=True)
        except OSError as error:
            raise ShardyHarnessError(f"the Shardy child {list(command)} cannot start: {error}") from error
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            for line in child.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        outcomes: list[Outcome] = []
        started: int | None = None  # the program the child is on, counted from `first`
        ready = False

        def fail(problem: str) -> ShardyHarnessError:
            if child.poll() is None:
                child.kill()
            child.wait()
            stderr.seek(0)
            return ShardyHarnessError(f"the Shardy child {problem} (exit status {child.returncode}); its stderr:\n"
                                      f"{stderr.read()[-6000:]}")

        while True:
            timeout = program_timeout if ready else startup_timeout
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                doing = f"on program {first + started}" if started is not None else "between programs"
                raise fail(f"stalled: nothing for {timeout:.0f} s {doing if ready else 'while starting'}") from None
            if line is None:
                break
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                message = None
            if not isinstance(message, dict):
                raise fail(f"printed what is not a message: {line[:200]!r}")
            if not ready:
                if message != {"ready": True}:
                    raise fail(f"printed {line[:200]!r} instead of its ready message")
                ready = True
            elif started is None and message == {"start": len(outcomes)}:
                started = len(outcomes)
            elif started is not None and message.get("index") == started and (
                    (set(message) == {"index", "output"} and isinstance(message["output"], str))
                    or (set(message) == {"index", "refused"} and isinstance(message["refused"], str))):
                outcomes.append(Outcome(output=message["output"]) if "output" in message
                                else Outcome(failure=f"refused: {message['refused']}"))
                started = None
            else:
                raise fail(f"printed {line[:200]!r} out of turn (next program {first + len(outcomes)})")
        child.wait()
        code = child.returncode
        if not ready:
            raise fail("ended before it was ready")
        if started is None and first + len(outcomes) == len(work):
            return outcomes  # every program answered: how the process ends after that changes nothing
        crash = -code if code < 0 else None
        if started is not None and crash in CRASH_SIGNALS:
            stderr.seek(0)
            last = stderr.read().rsplit(f"tools.shardy: program {started}\n", 1)[-1]
            # what Shardy printed before it crashed (an LLVM error, a failed check) follows the signal
            outcomes.append(Outcome(failure=f"crashed: {_signal_name(crash)}\n{last[-3000:]}".rstrip()))
            return outcomes
        if crash is not None:
            raise fail(f"was killed by {_signal_name(crash)}")
        raise fail(f"ended with {len(work) - first - len(outcomes)} program(s) left")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def serve() -> None:
    """The child's side (see the module docstring)."""
    import jax  # noqa: F401
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir, passmanager

    work = json.load(sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    for index, (text, pipeline) in enumerate(work):
        print(f"tools.shardy: program {index}", file=sys.stderr, flush=True)
        print(json.dumps({"start": index}), flush=True)
        try:
            with jax_mlir.make_ir_context():
                module = ir.Module.parse(text)
                passmanager.PassManager.parse(pipeline).run(module.operation)
                result = {"index": index, "output": str(module)}
        except ir.MLIRError as error:  # the parser, verifier or a pass refused the program
            result = {"index": index, "refused": str(error)}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    serve()
