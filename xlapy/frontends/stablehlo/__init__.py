"""StableHLO programs (with Shardy's shardings) as HLO modules, and back.

``parse_module`` reads MLIR text as JAX prints it (``jax.jit(f).lower(...).as_text()``)
or as Shardy's tests write it: a ``module`` (or bare top-level ops) of
``sdy.mesh`` declarations and ``func.func`` functions whose ops are StableHLO,
Shardy, ``func`` and ``chlo`` ops, in their pretty syntax or MLIR's generic one.
Each function becomes an ``HloComputation``, each region one too, each op an
``HloInstruction`` with the HLO opcode and attributes it stands for (see
``xlapy.frontends.stablehlo_ops``), and every Shardy sharding is set on the value
it belongs to (``instr.sdy_sharding``, ``computation.result_shardings``).

``print_module`` writes the module back as MLIR prints it: the text JAX printed
comes back byte for byte, other spellings in MLIR's canonical form, with the
shardings the IR has now.
"""

from __future__ import annotations

from xlapy.errors import ParseError
from xlapy.frontends.mlir_syntax import split_input_file
from xlapy.frontends.stablehlo.printer import Printer
from xlapy.frontends.stablehlo.reader import Reader
from xlapy.hlo import HloModule
from xlapy.hlo import verify as verify_hlo

__all__ = ["parse_module", "print_module", "split_input_file"]


def parse_module(text: str, source: str | None = None, first_line: int = 1,
                 implicit_manual_replication: bool = True, verify: bool = True) -> HloModule:
    """Import MLIR text into an HLO module, then check it: its meshes and
    shardings (``xlapy.sharding.verify``) and, unless ``verify`` is False (for
    speed, on text known to be valid), the module as the HLO verifier does
    (``xlapy.hlo.verify``), so that what is returned is safe to evaluate,
    compile or propagate. ``first_line`` is the line of the whole file the
    text starts on (for the chunks of ``split_input_file``).
    ``implicit_manual_replication``: accept manual computations whose in/out
    shardings leave out a manual axis (replicated, as Shardy and JAX's
    ``shard_map`` read them); False enforces invariant 2 strictly."""
    padded = "\n" * (first_line - 1) + text
    try:
        module = Reader(padded, source).parse()
    except RecursionError:
        raise ParseError("nesting too deep", first_line, 1, source) from None
    _verify(module, implicit_manual_replication, verify)
    return module


def _verify(module: HloModule, implicit_manual_replication: bool, verify: bool) -> None:
    from xlapy.sharding.verify import verify_module

    verify_module(module, implicit_manual_replication)
    if verify:
        verify_hlo(module)


def print_module(module: HloModule, rename: bool = False, locations: bool = True) -> str:
    """The module as MLIR text. SSA names are kept as they were read (values
    without one get fresh numbers); with ``rename`` they are renumbered the way
    MLIR's printer names them (``%0``, ``%cst_1``, ``%arg2``...). Without
    ``locations`` the ``loc(...)`` read are left out (as MLIR prints without debug info)."""
    return Printer(module, rename, locations).module_text()


