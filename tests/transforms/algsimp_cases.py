"""What the algebraic simplifier's tests share: the pass run to a fixed point
on a small entry computation, a FileCheck of the entry's root, and the
comparison with the interpreter on a whole program."""

from __future__ import annotations

from pathlib import Path

from tests.codegen.filecheck import filecheck
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.transforms.algebraic_simplifier import AlgebraicSimplifier
from xlapy.transforms.hlo_pass import HloPassFix


def simplify(parameters: str, body: str, computations: str = "") -> tuple[bool, str]:
    """Runs the pass to a fixed point on an entry computation ``e`` made of
    ``parameters`` and ``body`` (after ``computations``, the ones it calls);
    returns whether it changed and the module's text."""
    module = parse_module(f"HloModule m\n{computations}\nENTRY e {{\n  {parameters}\n  {body}\n}}\n")
    changed = HloPassFix(AlgebraicSimplifier()).run(module)
    verify(module)
    return changed, module.to_text()


def root_is(out: str, expected: str, tmp_path: Path) -> None:
    """The entry's root is ``expected`` (a FileCheck pattern)."""
    filecheck(out, f"CHECK: ENTRY %e\nCHECK: ROOT {expected}\n", tmp_path)


def assert_simplifier_preserves_values(text: str, seeds: tuple[int, ...] = (0, 1), *,
                                       special_floats: bool = False) -> HloModule:
    """``assert_pass_preserves_values`` for the simplifier run to a fixed point."""
    return assert_pass_preserves_values(HloPassFix(AlgebraicSimplifier()), text, seeds,
                                        special_floats=special_floats)
