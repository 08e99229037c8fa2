"""The compilation pipeline of one fusion (SPEC.md §4.7, XLA's emitter_base):
emitter → MLIR passes → LLVM → native code, with the MLIR written after each
pass whose name matches the dump regex."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from xlapy.codegen.emitters.loop import emit_loop_fusion
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.mlir_text import make_context, print_mlir
from xlapy.codegen.passes.flatten_tensors import FlattenTensorsPass
from xlapy.codegen.passes.inline import InlinePass
from xlapy.codegen.passes.lower_apply_indexing import LowerApplyIndexingPass
from xlapy.codegen.passes.lower_loops_to_scf import LowerLoopsToScfPass
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.passes.simplify_arith import SimplifyArithPass
from xlapy.codegen.passes.unroll_loops import UnrollLoopsPass
from xlapy.codegen.passes.vectorize_loads_stores import VectorizeLoadsStoresPass
from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo.ir import HloInstruction

EMITTER_STAGE = "fusion-emitter"


def default_passes() -> list[ModulePass]:
    """XLA's order: inline, loops to scf, fold the bounds checks, flatten, vectorize, unroll, then to LLVM."""
    return [
        InlinePass(),
        LowerLoopsToScfPass(),
        SimplifyArithPass(),
        FlattenTensorsPass(),
        VectorizeLoadsStoresPass(),
        UnrollLoopsPass(),
        LowerApplyIndexingPass(),
        CommonSubexpressionElimination(),
        CanonicalizePass(),
        LowerTensorsPass(),
    ]


@dataclass
class Dumper:
    """Writes ``<fusion>.<NN>.<stage>.mlir`` into ``directory`` for stages
    matching ``pattern`` (numbered over all stages, so names sort in order)."""

    directory: Path
    pattern: re.Pattern

    @staticmethod
    def create(directory: str | Path | None, pattern: str | None) -> Dumper | None:
        if directory is None:
            return None
        try:
            compiled = re.compile(pattern if pattern is not None else ".*")
        except re.error as error:
            raise XlapyError(f"bad --dump-pass-re {pattern!r}: {error}") from None
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise XlapyError(f"cannot create dump directory {directory}: {error.strerror}") from None
        return Dumper(path, compiled)

    def __call__(self, fusion: str, number: int, stage: str, module: ModuleOp) -> None:
        if not self.pattern.search(stage):
            return
        path = self.directory / f"{fusion}.{number:02d}.{stage}.mlir"
        try:
            path.write_text(print_mlir(module, map_aliases=True) + "\n", encoding="utf-8")
        except OSError as error:
            raise XlapyError(f"cannot write {path}: {error.strerror}") from None


@dataclass
class LoweredFusion:
    """A fusion lowered to the LLVM dialect, ready for a backend."""

    module: ModuleOp
    launch: LaunchDimensions


def lower_fusion(fusion: HloInstruction, device: Device, dump: Dumper | None = None,
                 passes: Callable[[], list[ModulePass]] = default_passes) -> LoweredFusion:
    """Emits ``fusion`` with its hero's emitter and runs the pass pipeline."""
    kind = fusion.attr("kind")
    if kind not in ("kLoop", None):
        raise UnimplementedError(f"fusion {fusion.name} of kind {kind}: only the loop emitter exists")
    module, launch = emit_loop_fusion(fusion, device)
    context = make_context()
    stages = [(EMITTER_STAGE, None), *((p.name, p) for p in passes())]
    for number, (stage, pass_) in enumerate(stages):
        if pass_ is not None:
            pass_.apply(context, module)
        if dump is not None:
            dump(_file_name(fusion.name), number, stage, module)
    return LoweredFusion(module, launch)


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
