"""Shardy itself, in this process, as the oracle for xlapy's propagation:
jaxlib ships Shardy's passes, and MLIR's pass manager runs them on a module
parsed from text. ``run_shardy(text, strategy)`` returns the module as
Shardy prints it after the pass of that strategy (the same names as
``xlapy sdy propagate --strategy``)."""

from __future__ import annotations

PASSES = {
    "basic": "sdy-basic-propagate",
    "aggressive": "sdy-aggressive-propagate",
    "op-priority": "sdy-op-priority-propagate",
    "user-priority": "sdy-user-priority-propagate",
    "pipeline": "sdy-propagation-pipeline",
}


def run_shardy(text: str, strategy: str = "pipeline") -> str:
    """``text`` (one MLIR module) after Shardy's propagation with ``strategy``."""
    import jax  # noqa: F401  (loads jaxlib's MLIR with the sdy and stablehlo dialects)
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir, passmanager

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(f"builtin.module({PASSES[strategy]})").run(module.operation)
        return str(module)
