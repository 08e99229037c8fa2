"""The HLO passes XLA:CPU runs before code generation, in its order
(``CpuCompiler::RunHloPassesThroughLayoutAssn`` and
``RunHloPassesAfterLayoutAssn`` in ``xla/service/cpu/cpu_compiler.cc``),
made of the passes xlapy has.

The pipelines keep XLA's names and nesting: ``sharding-removal``, ``HLO passes
through layout assignment`` (with the fixed-point ``simplification`` and
``post_scatter_expansion_simplification`` pipelines around the scatter
expanders), ``HLO passes after layout assignment`` (with the fixed-point
``simplification after layout assignment``), so a dump names each pass after
the pipeline that ran it, as XLA's ``--xla_dump_hlo_pass_re`` does.

Left out as they do not apply: SPMD partitioning and Shardy (one partition),
sub-byte packing, shape and literal canonicalisation (pooling of XLA's
objects), oneDNN/YNNPACK rewrites and library fusions, the fusion emitters'
wrapper and scatter simplifier, the scatter expander (XLA:CPU with its fusion
emitters compiles scatters with its scatter emitter, as xlapy does), dynamic
shapes (dynamic padder, dynamic-dimension simplifier, dynamic index splitter),
float normalisation, operand upcasting, result casting and f16 dots in f32 (the emitters compute each type themselves),
collectives (all-to-all decomposer, all-reduce promotion and combiner),
parallel-task assignment, input/output buffer aliasing and small-while-loop
hoisting (XLA's thunk runtime only).

Not in xlapy yet, so not run: the sharding remover, batch-dot
simplification, convolution group conversion and canonicalisation, the
linear-algebra expanders (Cholesky, QR, eigh, triangular solve),
conditional-to-select, the top-k decomposer and rewriter, the while-loop
simplifier's other rewrites (see
``while_loop_simplifier.py``), bitcast-dtypes and optimisation-barrier
expansion.

Where XLA:CPU runs its ``TreeReductionRewriter`` (reductions into windows of 32
elements, for precision), xlapy runs the split of XLA:GPU's pass of that name
(``tree_reduction_rewriter.py``): reductions with few outputs become
independent rows for the thread pool.

XLA:CPU runs multi-output fusion only behind an option that is off by default
(``options::UseMultiOutputFusion``), and then fuses without duplicating
producers; here it runs (``disabled=("multi_output_fusion",)`` skips it), so
the fusion pass does not duplicate either. ``disabled`` takes pass or pipeline
names (XLA's ``--xla_disable_hlo_passes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloModule
from xlapy.hlo.verifier import verify
from xlapy.transforms.algebraic.registry import SimplifierOptions
from xlapy.transforms.algebraic_simplifier import AlgebraicSimplifier
from xlapy.transforms.batched_gather_scatter_normalizer import BatchedGatherScatterNormalizer
from xlapy.transforms.batchnorm_expander import BatchNormExpander
from xlapy.transforms.call_inliner import CallInliner
from xlapy.transforms.comparison_expander import ComparisonExpander
from xlapy.transforms.conditional_canonicalizer import ConditionalCanonicalizer
from xlapy.transforms.conditional_simplifier import ConditionalSimplifier
from xlapy.transforms.copy_insertion import CopyInsertion
from xlapy.transforms.cse import HloCSE
from xlapy.transforms.dce import HloDCE
from xlapy.transforms.dot_decomposer import DotDecomposer
from xlapy.transforms.flatten_call_graph import FlattenCallGraph
from xlapy.transforms.gather_expander import GatherExpander
from xlapy.transforms.gather_simplifier import GatherSimplifier
from xlapy.transforms.hlo_constant_folding import HloConstantFolding
from xlapy.transforms.hlo_pass import HloPass, HloPassFix, HloPassPipeline
from xlapy.transforms.instruction_fusion import InstructionFusion
from xlapy.transforms.layout_assignment import LayoutAssignment
from xlapy.transforms.logistic_expander import LogisticExpander
from xlapy.transforms.map_inliner import MapInliner
from xlapy.transforms.multi_output_fusion import MultiOutputFusion
from xlapy.transforms.normalization_fusion import NormalizationFusion
from xlapy.transforms.reshape_mover import ReshapeMover
from xlapy.transforms.rng_bit_generator_expander import RngBitGeneratorExpander
from xlapy.transforms.rng_expander import RngExpander
from xlapy.transforms.select_and_scatter_expander import SelectAndScatterExpander
from xlapy.transforms.sort_simplifier import SortSimplifier
from xlapy.transforms.stochastic_convert_decomposer import StochasticConvertDecomposer
from xlapy.transforms.transpose_folding import TransposeFolding
from xlapy.transforms.tree_reduction_rewriter import TreeReductionRewriter
from xlapy.transforms.tuple_simplifier import TupleSimplifier
from xlapy.transforms.while_loop_constant_sinking import WhileLoopConstantSinking
from xlapy.transforms.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
from xlapy.transforms.while_loop_simplifier import WhileLoopSimplifier
from xlapy.transforms.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator
from xlapy.transforms.zero_sized_hlo_elimination import ZeroSizedHloElimination

PIPELINE_NAME = "cpu-compiler"

def _simplification(name: str) -> HloPass:
    """XLA's ``CreateSimplificationPipeline``, run to a fixed point."""
    return HloPassFix(HloPassPipeline(name, [
        AlgebraicSimplifier(),
        SortSimplifier(),
        HloDCE(),
        GatherExpander(GatherExpander.ELIMINATE_SIMPLE_GATHERS),
        GatherSimplifier(),  # XLA runs it when it compiles with the fusion emitters, as xlapy does
        TreeReductionRewriter(),  # XLA:CPU's is the reduce-window form; this is XLA:GPU's split, for the cores
        ZeroSizedHloElimination(),
        WhileLoopInvariantCodeMotion(),
        TupleSimplifier(),
        WhileLoopConstantSinking(),
        WhileLoopSimplifier(),
        HloDCE(),
        ReshapeMover(),
        HloConstantFolding(),
        ConditionalSimplifier(),
    ]))


def _through_layout_assignment() -> HloPassPipeline:
    return HloPassPipeline("HLO passes through layout assignment", [
        BatchedGatherScatterNormalizer(),
        DotDecomposer(),
        RngExpander(),
        RngBitGeneratorExpander(),
        ZeroSizedHloElimination(),
        MapInliner(),
        ComparisonExpander(),
        StochasticConvertDecomposer(),
        CallInliner(single_call_site=True),
        DotDecomposer(),
        BatchNormExpander(),
        LogisticExpander(),
        ConditionalCanonicalizer(),
        _simplification("simplification"),
        SelectAndScatterExpander(),
        # No ScatterExpander: with its fusion emitters (jax's default) XLA:CPU leaves scatters to the scatter
        # emitter, as xlapy does (``scatter_expander.py`` stays available as a pass of its own).
        _simplification("post_scatter_expansion_simplification"),
        TransposeFolding(),
        HloCSE(is_layout_sensitive=False),
        TupleSimplifier(),
        WhileLoopTripCountAnnotator(),
        FlattenCallGraph(),
        LayoutAssignment(),
    ])


def _after_layout_assignment() -> HloPassPipeline:
    return HloPassPipeline("HLO passes after layout assignment", [
        # Chains of normalization diamonds (softmax, layer norm) first, as XLA:GPU's softmax rewriter runs before
        # its priority fusion: the fusion passes would cut them at each reduce.
        NormalizationFusion(),
        # XLA duplicates producers into several consumers only without multi-output fusion.
        InstructionFusion(may_duplicate=False),
        MultiOutputFusion(),
        TupleSimplifier(),
        TupleSimplifier(),  # XLA's second one follows the all-reduce combiner
        HloPassFix(HloPassPipeline("simplification after layout assignment", [
            AlgebraicSimplifier(SimplifierOptions(is_layout_sensitive=True)),
            HloDCE(),
            HloCSE(is_layout_sensitive=True),
        ])),
        HloDCE(),
        CopyInsertion(),
        HloDCE(),
    ])


def _names(hlo_pass: HloPass) -> Iterator[str]:
    yield hlo_pass.name
    nested = hlo_pass.inner if isinstance(hlo_pass, HloPassFix) else hlo_pass
    if isinstance(nested, HloPassPipeline):
        for inner in nested.passes:
            yield from _names(inner)


def cpu_hlo_pipeline(disabled: Iterable[str] = (), dump_to: str | Path | None = None, *,
                     verify_each: bool = False) -> HloPassPipeline:
    """XLA:CPU's passes as one pipeline. ``disabled`` names passes (or nested
    pipelines) to skip; a name no pass has is an ``XlapyError`` listing the
    known ones. ``dump_to`` writes the module before the passes and after each
    pass that changed it (``NNNN.<pipeline>.after_<pass>.hlo``)."""
    disabled = tuple(disabled)
    pipeline = HloPassPipeline(PIPELINE_NAME, [
        HloPassPipeline("sharding-removal", [FlattenCallGraph(), HloDCE()]),
        _through_layout_assignment(),
        _after_layout_assignment(),
    ], disabled=disabled, verify_each=verify_each, dump_to=dump_to)
    known = sorted({name for hlo_pass in pipeline.passes for name in _names(hlo_pass)})
    unknown = [name for name in disabled if name not in known]
    if unknown:
        raise XlapyError(f"unknown HLO pass{'es' if len(unknown) > 1 else ''} {', '.join(unknown)} to disable; "
                         f"the CPU pipeline has: {', '.join(known)}")
    return pipeline


def optimize(module: HloModule, disabled: Iterable[str] = (), dump_to: str | Path | None = None, *,
             verify_each: bool = False) -> None:
    """Runs XLA:CPU's passes on ``module`` in place, then verifies it."""
    cpu_hlo_pipeline(disabled, dump_to, verify_each=verify_each).run(module)
    verify(module)
