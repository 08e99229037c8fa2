"""The compilation pipeline of one fusion (XLA's emitter_base; docs/emitters.md):
emitter → MLIR passes → LLVM → native code, with the MLIR written after each
pass whose name matches the dump regex.

``PIPELINE`` lists the passes once, each step with the targets that run it and
its options there. The GPU runs XLA's passes. The CPU maps ``vector_index``
onto SIMD lanes: a loop over vector lanes that can become vector code stays
rolled and ``vectorize-lanes`` turns it into vector ops; the other lane loops
are unrolled. A fusion whose lanes would not all become vector code (gathers,
pad and concatenate with ``scf.if``, outputs that are not written as vectors)
is compiled again with one element per thread (``Device.scalar``), where
LLVM's loop vectorizer vectorizes the loop over threads instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from xlapy.codegen.emitters.concatenate import emit_concatenate_fusion, is_concatenate_fusion
from xlapy.codegen.emitters.in_place_dynamic_update_slice import (
    emit_in_place_dynamic_update_slice_fusion,
    in_place_updates,
)
from xlapy.codegen.emitters.input_slices import emit_input_slices_fusion, is_input_slices_fusion
from xlapy.codegen.emitters.loop import emit_loop_fusion
from xlapy.codegen.emitters.normalization import emit_normalization_fusion, is_normalization_fusion
from xlapy.codegen.emitters.reduction import emit_reduction_fusion, is_reduction_fusion
from xlapy.codegen.emitters.scatter import emit_scatter_fusion, is_scatter_fusion
from xlapy.codegen.emitters.transpose import emit_transpose_fusion, is_transpose_fusion
from xlapy.codegen.fusion_checks import check_output_dimensions
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.mlir_text import make_context, print_mlir
from xlapy.codegen.partitioner import computation_roots
from xlapy.codegen.passes.canonicalize import CanonicalizePass
from xlapy.codegen.passes.flatten_tensors import FlattenTensorsPass
from xlapy.codegen.passes.inline import InlinePass
from xlapy.codegen.passes.loop_invariant_code_motion import LoopInvariantCodeMotionPass
from xlapy.codegen.passes.lower_apply_indexing import LowerApplyIndexingPass
from xlapy.codegen.passes.lower_complex import LowerComplexPass
from xlapy.codegen.passes.lower_loops_to_scf import LowerLoopsToScfPass
from xlapy.codegen.passes.lower_tensors import LowerTensorsPass
from xlapy.codegen.passes.nontemporal_stores import NontemporalStoresPass
from xlapy.codegen.passes.prefetch_loads import PrefetchLoadsPass
from xlapy.codegen.passes.simplify_arith import SimplifyArithPass
from xlapy.codegen.passes.unroll_loops import UnrollLoopsPass
from xlapy.codegen.passes.vectorize_lanes import VectorizeLanesPass, lanes_vectorizable, remaining_lanes
from xlapy.codegen.passes.vectorize_loads_stores import VectorizeLoadsStoresPass
from xlapy.codegen.streaming import writes_program_result
from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo.ir import HloInstruction

EMITTER_STAGE = "fusion-emitter"


# On the CPU, lane loops that do not become vector ops are unrolled whatever their body's size (at most 64 lanes).
CPU_MAX_UNROLLED_COST = 1 << 20

ALL_TARGETS = frozenset({"cpu", "gpu"})


@dataclass(frozen=True)
class PassStep:
    """One step of the pipeline: the pass ``make(**options)`` on the ``targets`` (device names) that run it, with
    the options of a target in ``target_options`` (none elsewhere)."""

    make: Callable[..., ModulePass]
    targets: frozenset[str] = ALL_TARGETS
    target_options: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def create(self, target: str) -> ModulePass:
        return self.make(**self.target_options.get(target, {}))


# XLA's order: inline, loops to scf, fold the bounds checks, flatten, hoist loop invariants, vectorize, unroll,
# then to LLVM. The CPU
# unrolls only the lane loops that do not vectorize, lowers complex arithmetic to its parts (before
# ``canonicalize``, which would fold complex ops in Python), and turns the lanes into vector ops once the index
# arithmetic is lowered and simplified (before ``lower-tensors``), and writes large outputs it never reads with
# streaming stores (``nontemporal-stores``, once stores are LLVM stores), and prefetches ahead of the loads of the
# loops that ask for it (``prefetch-loads``).
PIPELINE: tuple[PassStep, ...] = (
    PassStep(InlinePass),
    PassStep(LowerLoopsToScfPass),
    PassStep(SimplifyArithPass),
    PassStep(FlattenTensorsPass),
    PassStep(LoopInvariantCodeMotionPass),
    PassStep(VectorizeLoadsStoresPass),
    PassStep(UnrollLoopsPass, target_options={"cpu": {"max_unrolled_cost": CPU_MAX_UNROLLED_COST}}),
    PassStep(LowerApplyIndexingPass),
    PassStep(LowerComplexPass, targets=frozenset({"cpu"})),
    PassStep(CommonSubexpressionElimination),
    PassStep(CanonicalizePass),
    PassStep(VectorizeLanesPass, targets=frozenset({"cpu"})),
    PassStep(LowerTensorsPass),
    PassStep(NontemporalStoresPass, targets=frozenset({"cpu"})),
    PassStep(PrefetchLoadsPass, targets=frozenset({"cpu"})),
)


def target_passes(target: str) -> list[ModulePass]:
    """The passes ``PIPELINE`` runs on ``target`` ("cpu" or "gpu"), in order."""
    if target not in ALL_TARGETS:
        raise UnimplementedError(f"no pass pipeline for target {target!r} (only {sorted(ALL_TARGETS)})")
    return [step.create(target) for step in PIPELINE if target in step.targets]


# Fused opcodes the CPU computes with a math library function (dozens of instructions).
_MATH_LIBRARY_OPCODES = frozenset({
    "atan2", "cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "power", "sine", "tan", "tanh",
})
# SIMD registers a thread's vector covers for a fusion with one result and at most one math library function.
WIDE_VECTOR_REGISTERS = 4


def vector_registers(fusion: HloInstruction) -> int:
    """How many SIMD registers a thread's vector covers on the CPU. One result computed with at most one math
    library function: a chain of dependent ops with few values live at once, so ``WIDE_VECTOR_REGISTERS``
    independent register-wide chains are interleaved to hide their latency (gelu: 15% faster in bf16). Otherwise
    one register: more live values would spill (14 results of transcendental functions: 1.5x slower with 4)."""
    computation = fusion.fused_computation
    functions = sum(1 for i in computation.instructions if i.opcode in _MATH_LIBRARY_OPCODES)
    return WIDE_VECTOR_REGISTERS if len(computation_roots(computation)) == 1 and functions <= 1 else 1


def device_passes(device: Device, program_result: bool = False) -> list[ModulePass]:
    """The passes of ``device``'s target; ``program_result``: the kernel writes results of the program, which
    `nontemporal-stores` streams from a smaller size on."""
    passes = target_passes(device.name)
    return [replace(p, program_result=True) if program_result and isinstance(p, NontemporalStoresPass) else p
            for p in passes]


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
        text = self.render(stage, module)
        if text is not None:
            self.write(fusion, number, stage, text)

    def render(self, stage: str, module: ModuleOp) -> str | None:
        """The text to dump after ``stage`` (None: the stage is not dumped)."""
        return print_mlir(module, map_aliases=True) + "\n" if self.pattern.search(stage) else None

    def write(self, fusion: str, number: int, stage: str, text: str) -> None:
        path = self.directory / f"{fusion}.{number:02d}.{stage}.mlir"
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            raise XlapyError(f"cannot write {path}: {error.strerror}") from None


# The emitters, by the name ``emitter_name`` gives (XLA's ``GetFusionEmitter`` chooses among its emitters alike).
EMITTERS: dict[str, Callable[[HloInstruction, Device, Sequence[int] | None], tuple[ModuleOp, LaunchDimensions]]] = {
    "loop": emit_loop_fusion,
    "in_place_dynamic_update_slice": emit_in_place_dynamic_update_slice_fusion,
    "scatter": emit_scatter_fusion,
    "input_slices": emit_input_slices_fusion,
    "concatenate": emit_concatenate_fusion,
    "transpose": emit_transpose_fusion,
    "reduction": emit_reduction_fusion,
    "normalization": emit_normalization_fusion,
}


# The emitters that write each output by a loop of its own (a reduction's side outputs, the slices of one input,
# each update written over its operand); the others walk the indices of the first output and write every output
# at them.
OUTPUTS_OF_ANY_DIMENSIONS = frozenset({"reduction", "input_slices", "in_place_dynamic_update_slice"})


def emitter_name(fusion: HloInstruction, slice_indices: Sequence[int] | None = None) -> str:
    """The emitter of ``fusion``'s kernel given the ``slice_indices`` of its buffers: the scatter emitter when the
    fused root is a scatter, the in-place dynamic-update-slice emitter when its outputs are updates written over
    operands passed in their slices, the input-slices emitter when its outputs are slices of different dimensions
    of one shape's arrays, the concatenate emitter when its hero is a concatenate, the normalization emitter when
    a row reduce is broadcast back into its roots, the reduction emitter when its hero is a reduce, the transpose
    emitter when its hero is a transpose it tiles, else the loop emitter."""
    if is_scatter_fusion(fusion):
        return "scatter"
    if in_place_updates(fusion, slice_indices) is not None:
        return "in_place_dynamic_update_slice"
    if is_input_slices_fusion(fusion):
        return "input_slices"
    if is_concatenate_fusion(fusion):
        return "concatenate"
    if is_normalization_fusion(fusion):
        return "normalization"
    if is_reduction_fusion(fusion):
        return "reduction"
    return "transpose" if is_transpose_fusion(fusion) else "loop"


@dataclass
class LoweredFusion:
    """A fusion lowered to the LLVM dialect, ready for a backend."""

    module: ModuleOp
    launch: LaunchDimensions


def lower_fusion(fusion: HloInstruction, device: Device, dump: Dumper | None = None,
                 passes: Callable[[], list[ModulePass]] | None = None,
                 slice_indices: Sequence[int] | None = None) -> LoweredFusion:
    """Emits ``fusion`` with its hero's emitter (``emitter_name``) and runs the pass pipeline
    (``passes``, by default the device's); on the CPU, with one element per
    thread when the lanes of vectors would not all become vector code.
    ``slice_indices`` (one per kernel buffer: operands, array constants,
    outputs) says which buffers the runtime passes as one slice: those become
    one pointer argument (None: every buffer has its own)."""
    kind = fusion.attr("kind")
    if kind not in ("kLoop", None):
        raise UnimplementedError(f"fusion {fusion.name} of kind {kind}: only the loop emitter exists")
    emitter = emitter_name(fusion, slice_indices)
    if emitter not in OUTPUTS_OF_ANY_DIMENSIONS:
        check_output_dimensions(fusion)
    attempts = [device]
    # The scatter emitter's kernel is serial, without vectors, and the transpose emitter's loops over a tile's rows:
    # nothing to fall back from; the normalization emitter sizes its vectors itself (its row reductions end in
    # scalar lanes).
    if passes is None and device.name == "cpu" and device.max_vector > 1 and \
            emitter not in ("scatter", "transpose", "normalization"):
        attempts = [device.widened(vector_registers(fusion)), device.scalar()]
    for i, attempt in enumerate(attempts):
        make_passes = passes if passes is not None else \
            lambda d=attempt: device_passes(d, program_result=writes_program_result(fusion))
        lowered = _lower(fusion, attempt, dump, make_passes, fallback=i + 1 < len(attempts),
                         slice_indices=slice_indices)
        if lowered is not None:
            return lowered
    raise AssertionError("the last attempt has no fallback")


def _lower(fusion: HloInstruction, device: Device, dump: Dumper | None, passes: Callable[[], list[ModulePass]],
           fallback: bool, slice_indices: Sequence[int] | None = None) -> LoweredFusion | None:
    """One run of the pipeline; None when ``fallback`` is set and the vector lanes do not all vectorize (the
    dumps are only written by the run that is kept)."""
    module, launch = EMITTERS[emitter_name(fusion, slice_indices)](fusion, device, slice_indices)
    if fallback and launch.vector_size == 1:
        return None  # no vectors (the element count is odd): the scalar device's launch
    context = make_context()
    stages = [(EMITTER_STAGE, None), *((p.name, p) for p in passes())]
    dumps: list[tuple[int, str, str]] = []
    for number, (stage, pass_) in enumerate(stages):
        if pass_ is not None:
            pass_.apply(context, module)
        if fallback and stage == VectorizeLoadsStoresPass.name and not lanes_vectorizable(module):
            return None
        if fallback and stage == VectorizeLanesPass.name and remaining_lanes(module):
            return None
        if dump is not None and (text := dump.render(stage, module)) is not None:
            dumps.append((number, stage, text))
    for number, stage, text in dumps:
        dump.write(_file_name(fusion.name), number, stage, text)  # type: ignore[union-attr]
    return LoweredFusion(module, launch)


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
