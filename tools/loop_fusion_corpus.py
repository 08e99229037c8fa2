"""The loop-fusion corpus: the modules of ``tests/codegen/data/loop_fusions``
(an entry computation around one kLoop fusion each) and GELU
(``examples/gelu.hlo``) in any element type and shape, with the check that
compiles a case for the CPU and compares it with the interpreter.

Shared by the code generator's tests and ``benchmarks/loop_fusion_vs_xla.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import xlapy
from tools.loop_fusion_compare import assert_within_ulps, random_arguments, ulp_tolerance

_REPO = Path(__file__).resolve().parents[1]
CORPUS = _REPO / "tests" / "codegen" / "data" / "loop_fusions"
GELU = _REPO / "examples" / "gelu.hlo"
GELU_SHAPE = "6,512,4096"
# The default test run's GELU: the example's innermost dimension, fewer rows.
GELU_SMALL_SHAPE = "6,16,4096"

# Corpus modules (by name prefix) the code generator is known to get wrong, with the reason; tests mark
# them xfail(strict=True) so that fixing them is noticed. None at the moment.
KNOWN_GAPS: dict[str, str] = {}


@dataclass(frozen=True)
class Case:
    name: str
    text: str

    def module(self) -> xlapy.HloModule:
        """A fresh module, so that compiling cannot change what the interpreter runs."""
        return xlapy.parse_hlo(self.text)


def gelu_text(element_type: str = "bf16", shape: str = GELU_SHAPE) -> str:
    """examples/gelu.hlo with its element type and shape replaced."""
    return GELU.read_text().replace("bf16", element_type).replace(GELU_SHAPE, shape)


def corpus_cases() -> list[Case]:
    """Every module of the corpus, by file name."""
    return [Case(path.stem, path.read_text()) for path in sorted(CORPUS.glob("*.hlo"))]


def gelu_cases(shape: str) -> list[Case]:
    """GELU in bf16 and in f32 at ``shape``."""
    return [Case(f"gelu_{t}_{shape.replace(',', 'x')}", gelu_text(t, shape)) for t in ("bf16", "f32")]


def single_fusion(params: list[str], fused_lines: list[str], result: str, extra: str = "") -> str:
    """A module whose entry computation calls one kLoop fusion of ``fused_lines``
    (instructions over parameters ``p0``, ``p1``, ... of shapes ``params``)."""
    fused_params = "\n".join(f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(params))
    entry_params = "\n".join(f"  e{i} = {shape} parameter({i})" for i, shape in enumerate(params))
    operands = ", ".join(f"e{i}" for i in range(len(params)))
    body = "\n".join(f"  {line}" for line in fused_lines)
    fusion = f"ROOT fusion = {result} fusion({operands}), kind=kLoop, calls=fused"
    return (f"HloModule unsupported\n{extra}\nfused {{\n{fused_params}\n{body}\n}}\n\n"
            f"ENTRY main {{\n{entry_params}\n  {fusion}\n}}\n")


def check_against_interpreter(case: Case, seeds: tuple[int, ...] = (0, 1)) -> None:
    """Compile ``case`` for the CPU once, then for each seed: run it on
    ``random_arguments``, compare with the interpreter within ``ulp_tolerance``,
    and check the arguments were left alone (raises AssertionError)."""
    module = case.module()
    tolerance = ulp_tolerance(module)
    executable = xlapy.compile(case.module(), backend="cpu")
    for seed in seeds:
        args = random_arguments(module, seed)
        before = [np.copy(a) for a in args]
        got = executable(*args)
        expected = xlapy.evaluate(module, *args)
        assert_within_ulps(got, expected, module, tolerance, context=f"{case.name} (seed {seed})")
        for i, (a, b) in enumerate(zip(args, before)):
            assert a.tobytes() == b.tobytes(), f"{case.name}: argument {i} was overwritten"
