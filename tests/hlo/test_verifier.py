"""The HLO verifier and per-opcode shape inference.

Every module XLA and JAX produce verifies, and the shape inferred for each
instruction is the one XLA declared; broken programs (as text, or IR mutated
after parsing) are rejected with the computation, the instruction and the rule
in the message. XLA is asked about the same texts too: each
case states XLA's own reason for refusing it (or the signal XLA dies of, or why
XLA accepts it), and the test holds XLA to it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from signal import Signals

import numpy as np
import pytest

import xlapy
from tests.hlo.jax_programs import PROGRAMS, hlo_texts
from tests.hlo.xla import XlaAccepts, XlaDies, XlaRefuses, XlaVerdict, assert_xla_verdict
from tests.hlo.xla import xla_verdicts as xla_verdicts_of
from tools.oracles import require_jax
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule, parse_module
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.shape_rules.helpers import same_shape, show
from xlapy.hlo.shape_rules.inference import infer_shape, opcodes_without_rules
from xlapy.hlo.shape_rules.registry import SHAPE_RULES
from xlapy.hlo.verifier import verify
from xlapy.shapes import Shape

DATA = Path(__file__).parent / "data"
# tests/hlo/data: the hand-written modules of the text tests; data/verifier: JAX programs
# beyond tests/hlo/jax_programs.py (lowered and optimised by XLA:CPU, metadata dropped)
# and a module of valid instructions JAX does not emit on CPU.
MODULE_FILES = sorted(DATA.glob("*.hlo")) + sorted((DATA / "verifier").glob("*.hlo"))

def _jax_text(case: str) -> str:
    name, stage = case.rsplit(".", 1)
    return hlo_texts(name)[stage == "optimized"]


JAX_CASES = [f"{name}.{stage}" for name in sorted(PROGRAMS) for stage in ("lowered", "optimized")]


@functools.cache
def _module_of(source: str | Path) -> tuple[str, HloModule]:
    # Parsed once for all tests; the tests of the suite's modules do not mutate them.
    if isinstance(source, Path):
        return source.name.removesuffix(".hlo"), parse_module(source.read_text())
    return source, parse_module(_jax_text(source))


ALL_MODULES = [*JAX_CASES, *MODULE_FILES]


def _ids(source) -> str:
    return source.name if isinstance(source, Path) else source


# -- (a) what XLA and JAX produce verifies -------------------------------------------------

@pytest.mark.parametrize("source", ALL_MODULES, ids=_ids)
def test_modules_of_the_suite_verify(source):
    _, module = _module_of(source)
    verify(module)


@pytest.mark.parametrize("source", ALL_MODULES, ids=_ids)
def test_inferred_shapes_are_the_declared_ones(source):
    _, module = _module_of(source)
    mismatches = []
    for instr in module.instructions:
        inferred = infer_shape(instr)
        if not same_shape(inferred, instr.shape):
            mismatches.append(f"instruction {instr.name}: {instr.opcode} produces {show(inferred)}, "
                              f"but the instruction declares {show(instr.shape)}")
    assert mismatches == []


def test_the_modules_cover_the_common_opcodes():
    # The data above exercises the rules of every opcode JAX programs produce.
    seen = {i.opcode for source in ALL_MODULES for i in _module_of(source)[1].instructions}
    wanted = {
        "abs", "add", "after-all", "all-gather", "all-gather-done", "all-gather-start", "all-reduce",
        "all-reduce-done", "all-reduce-start", "all-to-all", "and", "atan2", "batch-norm-grad",
        "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call", "cbrt",
        "cholesky", "clamp", "collective-broadcast", "collective-permute", "collective-permute-done",
        "collective-permute-start", "compare", "complex", "concatenate", "conditional", "constant", "convert",
        "convolution", "copy", "copy-done", "copy-start", "custom-call", "divide", "domain", "dot",
        "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one",
        "fft", "floor", "fusion", "gather", "get-dimension-size", "get-tuple-element", "imag", "infeed", "iota",
        "is-finite", "log", "log-plus-one", "map", "maximum", "minimum", "multiply", "negate", "not", "or",
        "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "real", "recv", "recv-done", "reduce",
        "reduce-precision", "reduce-scatter", "reduce-window", "remainder", "replica-id", "reshape", "reverse",
        "rng", "rng-bit-generator", "round-nearest-even", "rsqrt", "scatter", "select", "select-and-scatter",
        "send", "send-done", "set-dimension-size", "shift-left", "shift-right-arithmetic", "shift-right-logical",
        "sign", "sine", "slice", "sort", "sqrt", "subtract", "tan", "tanh", "topk", "transpose",
        "triangular-solve", "tuple", "while", "xor",
    }
    assert wanted - seen == set()


def test_every_opcode_has_a_rule():
    assert opcodes_without_rules() == []
    assert set(OPCODES) <= set(SHAPE_RULES)


def test_infer_shape_without_a_rule_is_unimplemented(monkeypatch):
    instr = HloInstruction("p", "parameter", Shape("f32"))
    monkeypatch.delitem(SHAPE_RULES, "parameter")
    with pytest.raises(UnimplementedError, match="no shape rule for opcode parameter"):
        infer_shape(instr)


def test_verify_is_exported():
    assert xlapy.verify is verify
    assert xlapy.hlo.verify is verify


# -- (b) broken programs -------------------------------------------------------------------

# Called computations; their instruction names differ from the entry's (names are unique in a module).
_ADD = "add_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT sum = f32[] add(x, y)\n}\n"
_ADD_S32 = "add_s32 {\n  i = s32[] parameter(0)\n  j = s32[] parameter(1)\n  ROOT isum = s32[] add(i, j)\n}\n"
_LT = ("lt_f32 {\n  u = f32[] parameter(0)\n  v = f32[] parameter(1)\n"
       "  ROOT less = pred[] compare(u, v), direction=LT\n}\n")


def _hlo(body: str, computations: str = "", header: str = "") -> str:
    lines = "\n".join("  " + line.strip() for line in body.strip().splitlines())
    return f"HloModule m{header}\n\n{computations}\nENTRY main {{\n{lines}\n}}\n"


BROKEN_TEXTS = {
    "binary-dims": (_hlo("""
        a = f32[2] parameter(0)
        b = f32[3] parameter(1)
        ROOT add.3 = f32[2] add(a, b)"""),
        "computation main, instruction add.3: operands of add must have the same shape, got f32[2] and f32[3]",
        XlaRefuses("'stablehlo.add' op requires the same shape for all operands and results")),
    "binary-types": (_hlo("""
        a = f32[2] parameter(0)
        b = s32[2] parameter(1)
        ROOT m = f32[2] multiply(a, b)"""),
        "instruction m: operands of multiply must have the same element type, got f32[2] and s32[2]",
        XlaRefuses("'stablehlo.multiply' op requires compatible types for all operands and results")),
    "unary-declared": (_hlo("""
        a = f32[2] parameter(0)
        ROOT n = f32[3] negate(a)"""),
        "computation main, instruction n: negate produces f32[2], but the instruction declares f32[3]",
        XlaRefuses("'stablehlo.negate' op requires compatible types for all operands and results")),
    "unary-type": (_hlo("""
        a = s32[2] parameter(0)
        ROOT e = s32[2] exponential(a)"""),
        "instruction e: exponential needs floating-point or complex operands, got s32[2]",
        XlaRefuses("'stablehlo.exponential' op operand #0 must be ranked tensor of 4/6/8/16/32/64-bit float or "
                   "complex type")),
    "arity": (_hlo("""
        a = f32[2] parameter(0)
        ROOT n = f32[2] negate(a, a)"""),
        "computation main, instruction n: negate takes 1 operand, got 2",
        XlaRefuses("error: expects 1 operands, but has 2 operands")),
    "compare-result": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = f32[2] compare(a, a), direction=LT"""),
        "instruction c: compare produces pred[2], but the instruction declares f32[2]",
        XlaRefuses("'stablehlo.compare' op result #0 must be ranked tensor of bool values, but got "
                   "'tensor<2xf32>'")),
    "compare-direction": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = pred[2] compare(a, a), direction=LESS"""),
        "instruction c: compare direction must be one of EQ, GE, GT, LE, LT, NE, got LESS",
        XlaRefuses("expects comparison direction but sees: LESS")),
    "and-float": (_hlo("""
        a = f32[2] parameter(0)
        ROOT x = f32[2] and(a, a)"""),
        "instruction x: and needs pred or integral operands, got f32[2]",
        XlaRefuses("'stablehlo.and' op operand #0 must be ranked tensor of bool or 2/4/8/16/32/64-bit integer "
                   "values, but got 'tensor<2xf32>'")),
    "select-pred": (_hlo("""
        p = s32[2] parameter(0)
        a = f32[2] parameter(1)
        ROOT s = f32[2] select(p, a, a)"""),
        "instruction s: the predicate of select must be pred, got s32[2]",
        XlaRefuses("'stablehlo.select' op operand #0 must be ranked tensor of bool values, but got "
                   "'tensor<2xi32>'")),
    "select-pred-dims": (_hlo("""
        p = pred[3] parameter(0)
        a = f32[2] parameter(1)
        ROOT s = f32[2] select(p, a, a)"""),
        "instruction s: the predicate of select must be a scalar or have the dimensions of the values",
        XlaRefuses('loc("s"): requires the same shape for all operands')),
    "clamp-bounds": (_hlo("""
        lo = f32[3] parameter(0)
        a = f32[2] parameter(1)
        ROOT c = f32[2] clamp(lo, a, lo)"""),
        "instruction c: bounds of clamp must be scalars or have the operand's dimensions, got f32[3] for f32[2]",
        XlaRefuses("min shape [3] is not scalar and is not compatible to operand shape [2]")),
    "convert-complex": (_hlo("""
        a = c64[2] parameter(0)
        ROOT c = f32[2] convert(a)"""),
        "instruction c: convert cannot turn complex c64 into non-complex f32",
        XlaAccepts("StableHLO's convert may turn complex into real (keeping the real part), so the route "
                   "through StableHLO does not reach XLA's ShapeInference::InferConvertShape, which refuses it")),
    "bitcast-convert-narrow": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = f16[2] bitcast-convert(a)"""),
        "instruction c: bitcast-convert produces f16[2,2], but the instruction declares f16[2]",
        XlaRefuses("rank of smaller element type (1) should be 1 more than rank of larger element type (1)")),
    "bitcast-convert-wide": (_hlo("""
        a = s8[3] parameter(0)
        ROOT c = s32[] bitcast-convert(a)"""),
        "instruction c: bitcast-convert from s8[3] to s32 needs a minor dimension of size 4",
        XlaRefuses("requires compatible bit widths. Got: 'tensor<3xi8>' and 'tensor<i32>', but 8 * 3 != 32.")),
    "broadcast-size": (_hlo("""
        a = f32[3] parameter(0)
        ROOT b = f32[2,4] broadcast(a), dimensions={1}"""),
        "instruction b: broadcast maps operand dimension 0 (size 3) to result dimension 1 (size 4)",
        XlaRefuses("size of operand dimension 0 (3) is not equal to 1 or size of result dimension 1 (4)")),
    # StableHLO's broadcast_in_dim may do this (imported, it is accepted); HLO's broadcast may not.
    "broadcast-stretch": (_hlo("""
        a = f32[1,4] parameter(0)
        ROOT b = f32[3,4] broadcast(a), dimensions={0,1}"""),
        "instruction b: broadcast maps operand dimension 0 (size 1) to result dimension 0 (size 3) of f32[3,4]; "
        "the sizes must be equal; HLO's broadcast does not stretch a size-1 dimension",
        XlaAccepts("the route through StableHLO makes it a broadcast_in_dim, which may stretch; XLA's "
                   "ShapeVerifier::HandleBroadcast requires equal sizes")),
    "broadcast-rank": (_hlo("""
        a = f32[3] parameter(0)
        ROOT b = f32[3,4] broadcast(a), dimensions={}"""),
        "instruction b: dimensions={} of broadcast must name one result dimension for each of the 1 operand",
        XlaRefuses("broadcast_dimensions size (0) does not match operand rank (1)")),
    "reshape-count": (_hlo("""
        a = f32[2,3] parameter(0)
        ROOT r = f32[4] reshape(a)"""),
        "instruction r: reshape cannot change the number of elements: f32[2,3] has 6, f32[4] has 4",
        # XLA's parser CHECKs the element count while it builds the reshape.
        XlaDies(Signals.SIGABRT, "StaticExtentProduct(operand->shape()) shape: f32[4] operand: f32[2,3]")),
    "transpose-perm": (_hlo("""
        a = f32[2,3] parameter(0)
        ROOT t = f32[2,3] transpose(a), dimensions={0,0}"""),
        "instruction t: dimensions={0,0} of transpose must be a permutation of the 2 dimensions of f32[2,3]",
        XlaRefuses("attribute permutation must be a permutation of [0, 1] but got 0, 0")),
    "transpose-declared": (_hlo("""
        a = f32[2,3] parameter(0)
        ROOT t = f32[2,3] transpose(a), dimensions={1,0}"""),
        "instruction t: transpose produces f32[3,2], but the instruction declares f32[2,3]",
        XlaRefuses("'stablehlo.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return "
                   "type(s) of operation 'tensor<2x3xf32>'")),
    "slice-bounds": (_hlo("""
        a = f32[4] parameter(0)
        ROOT s = f32[5] slice(a), slice={[0:5]}"""),
        "instruction s: slice [0:5] of dimension 0 must satisfy 0 <= start <= limit <= 4",
        XlaRefuses("limit index 5 is larger than dimension size 4 in dimension 0")),
    "slice-stride": (_hlo("""
        a = f32[9] parameter(0)
        ROOT s = f32[4] slice(a), slice={[0:9:2]}"""),
        "instruction s: slice produces f32[5], but the instruction declares f32[4]",
        XlaRefuses("'stablehlo.slice' op inferred type(s) 'tensor<5xf32>' are incompatible with return type(s) "
                   "of operation 'tensor<4xf32>'")),
    "dynamic-slice-sizes": (_hlo("""
        a = f32[4,4] parameter(0)
        i = s32[] parameter(1)
        ROOT d = f32[5,1] dynamic-slice(a, i, i), dynamic_slice_sizes={5,1}"""),
        "instruction d: dynamic_slice_sizes={5,1} of dynamic-slice: size 5 of dimension 0 is not within the 4",
        XlaRefuses("has slice size 5 greater than dimension size 4 in dimension 0 of operand")),
    "dynamic-slice-index-count": (_hlo("""
        a = f32[4,4] parameter(0)
        i = s32[] parameter(1)
        ROOT d = f32[1,1] dynamic-slice(a, i), dynamic_slice_sizes={1,1}"""),
        "instruction d: dynamic-slice needs one start index per operand dimension: 2, got 1",
        XlaRefuses("was parsing 8:1: error: Wrong number of operands.")),
    "dynamic-slice-index-type": (_hlo("""
        a = f32[4] parameter(0)
        i = f32[] parameter(1)
        ROOT d = f32[1] dynamic-slice(a, i), dynamic_slice_sizes={1}"""),
        "instruction d: start index 0 of dynamic-slice must be an integral scalar, got f32[]",
        XlaRefuses("'stablehlo.dynamic_slice' op operand #1 must be variadic of 0D tensor of "
                   "2/4/8/16/32/64-bit integer values, but got 'tensor<f32>'")),
    "dynamic-update-slice-size": (_hlo("""
        a = f32[4] parameter(0)
        u = f32[5] parameter(1)
        i = s32[] parameter(2)
        ROOT d = f32[4] dynamic-update-slice(a, u, i)"""),
        "instruction d: the update f32[5] of dynamic-update-slice is larger than the operand f32[4] in dimension 0",
        XlaRefuses("expects size at dimension 0 of update to be in range [0, 4]. Got: 5.")),
    "concatenate-dims": (_hlo("""
        a = f32[2,3] parameter(0)
        b = f32[2,4] parameter(1)
        ROOT c = f32[4,3] concatenate(a, b), dimensions={0}"""),
        "instruction c: operands of concatenate must agree in element type and in every dimension but 0, "
        "got f32[2,3] and f32[2,4]",
        XlaRefuses("shapes of operand (0) and (1) are not compatible at non-concat index 1: (2, 3) != (2, 4)")),
    "pad-declared": (_hlo("""
        a = f32[6] parameter(0)
        z = f32[] constant(0)
        ROOT p = f32[13] pad(a, z), padding=0_1_1"""),
        "instruction p: pad produces f32[12], but the instruction declares f32[13]",
        XlaRefuses("'stablehlo.pad' op inferred type(s) 'tensor<12xf32>' are incompatible with return type(s) "
                   "of operation 'tensor<13xf32>'")),
    "pad-value": (_hlo("""
        a = f32[6] parameter(0)
        z = s32[] constant(0)
        ROOT p = f32[6] pad(a, z), padding=0_0"""),
        "instruction p: the padding value of pad must have the operand's element type, got s32[] for f32[6]",
        XlaRefuses("'stablehlo.pad' op requires the same element type for all operands and results")),
    "iota-dimension": (_hlo("""
        ROOT i = s32[4] iota(), iota_dimension=1"""),
        "instruction i: iota_dimension=1 is out of range for s32[4]",
        XlaRefuses("iota dimension cannot go beyond the output rank.")),
    "reduce-reducer-type": (_hlo("""
        a = f32[4,3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3] reduce(a, z), dimensions={0}, to_apply=add_s32""", _ADD_S32),
        "instruction r: to_apply computation add_s32 of reduce returns s32[], but its init value is f32[]",
        XlaRefuses("The element-type of reduction-region's result type at index 0 is expected to be promotable "
                   "from the op's corresponding init-value element-type: 'tensor<i32>' vs 'tensor<f32>'")),
    "reduce-dimensions": (_hlo("""
        a = f32[4,3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3] reduce(a, z), dimensions={2}, to_apply=add_f32""", _ADD),
        "instruction r: dimensions={2} of reduce: dimension 2 is out of range for f32[4,3] of rank 2",
        XlaRefuses("Out-of-bounds dimension 2, expected to be in range [0, 2)")),
    "reduce-declared": (_hlo("""
        a = f32[4,3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4] reduce(a, z), dimensions={0}, to_apply=add_f32""", _ADD),
        "instruction r: reduce produces f32[3], but the instruction declares f32[4]",
        XlaRefuses("'stablehlo.reduce' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) "
                   "of operation 'tensor<4xf32>'")),
    "reduce-init-scalar": (_hlo("""
        a = f32[4,3] parameter(0)
        z = f32[3] parameter(1)
        ROOT r = f32[3] reduce(a, z), dimensions={0}, to_apply=add_f32""", _ADD),
        "instruction r: init value 0 of reduce must be a scalar, got f32[3]",
        XlaRefuses("The shape of reduction-region's result type at index 0 differs from the op's corresponding "
                   "init-value type: 'tensor<f32>' vs 'tensor<3xf32>'")),
    "reduce-window-declared": (_hlo("""
        a = f32[4,6] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[2,2] reduce-window(a, z), window={size=2x2 stride=2x2}, to_apply=add_f32""", _ADD),
        "instruction r: reduce-window produces f32[2,3], but the instruction declares f32[2,2]",
        XlaRefuses("'stablehlo.reduce_window' op inferred type(s) 'tensor<2x3xf32>' are incompatible with "
                   "return type(s) of operation 'tensor<2x2xf32>'")),
    "reduce-window-rank": (_hlo("""
        a = f32[4,6] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[2] reduce-window(a, z), window={size=2 stride=2}, to_apply=add_f32""", _ADD),
        "instruction r: the window of reduce-window has 1 dimensions, the operand 2",
        XlaRefuses("expects window-dimensions size == input rank, but got window-dimensions size: 1 and input: "
                   "'tensor<4x6xf32>' with rank = 2.")),
    "select-and-scatter-source": (_hlo("""
        a = f32[4] parameter(0)
        s = f32[3] parameter(1)
        z = f32[] constant(0)
        ROOT r = f32[4] select-and-scatter(a, s, z), window={size=2 stride=2}, select=lt_f32, scatter=add_f32""",
        _ADD + _LT),
        "instruction r: the source of select-and-scatter must have one element per window, {2}, got f32[3]",
        XlaRefuses("expects source-type to be 'tensor<2xf32>', but got'tensor<3xf32>'")),
    "dot-contracting": (_hlo("""
        a = f32[7,2,3] parameter(0)
        b = f32[7,4,5] parameter(1)
        ROOT d = f32[7,2,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
            rhs_contracting_dims={1}"""),
        "instruction d: contracting dimensions of dot must have equal sizes: lhs dimension 2 of f32[7,2,3] is 3, "
        "rhs dimension 1 of f32[7,4,5] is 4",
        XlaRefuses("contracting dimension sizes must match for lhs/rhs")),
    "dot-declared": (_hlo("""
        a = f32[7,2,3] parameter(0)
        b = f32[7,3,5] parameter(1)
        ROOT d = f32[2,7,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
            rhs_contracting_dims={1}"""),
        "instruction d: dot produces f32[7,2,5], but the instruction declares f32[2,7,5]",
        XlaRefuses("inferred shape '[7, 2, 5]' is incompatible with return type of operation 'tensor<2x7x5xf32>'")),
    "dot-narrow-int": (_hlo("""
        a = s32[2,3] parameter(0)
        ROOT d = s8[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={1}"""),
        "instruction d: the result type s8 of dot must not be narrower than its operands' s32",
        XlaAccepts("StableHLO accepts any dot result type; XLA's dot inference (MaybeUpcast) refuses narrowing "
                   "an integral type")),
    "convolution-features": (_hlo("""
        x = f32[1,5,5,3] parameter(0)
        w = f32[3,3,4,8] parameter(1)
        ROOT c = f32[1,3,3,8] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f"""),
        "instruction c: input features (3) / feature_group_count (1) of convolution must equal the kernel's "
        "input features (4)",
        XlaRefuses("expects input feature dimension (3) / feature_group_count = kernel input feature dimension (4). "
                   "Got feature_group_count = 1.")),
    "convolution-declared": (_hlo("""
        x = f32[1,5,5,3] parameter(0)
        w = f32[3,3,3,8] parameter(1)
        ROOT c = f32[1,5,5,8] convolution(x, w), window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f"""),
        "instruction c: convolution produces f32[1,2,2,8], but the instruction declares f32[1,5,5,8]",
        XlaRefuses("inferred shape '[1, 2, 2, 8]' is incompatible with return type of operation "
                   "'tensor<1x5x5x8xf32>'")),
    "convolution-window": (_hlo("""
        x = f32[1,5,5,3] parameter(0)
        w = f32[3,3,3,8] parameter(1)
        ROOT c = f32[1,4,4,8] convolution(x, w), window={size=2x2}, dim_labels=b01f_01io->b01f"""),
        "instruction c: window size 2 of convolution in spatial dimension 0 must equal the kernel's 3",
        # StableHLO's convolution takes its window size from the kernel: XLA refuses the declared shape,
        # which is the one of a size-2 window, against the 3x3 of the kernel's.
        XlaRefuses("inferred shape '[1, 3, 3, 8]' is incompatible with return type of operation "
                   "'tensor<1x4x4x8xf32>'")),
    "gather-slice-sizes": (_hlo("""
        x = f32[6,3] parameter(0)
        i = s32[2,1] parameter(1)
        ROOT g = f32[2,4] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
            index_vector_dim=1, slice_sizes={1,4}"""),
        "instruction g: slice_sizes={1,4} of gather: size 4 of dimension 1 is not within the 3 of f32[6,3]",
        XlaRefuses("slice size (4) is out of bounds for operand dimension (3) at index 1")),
    "gather-declared": (_hlo("""
        x = f32[6,3] parameter(0)
        i = s32[2,1] parameter(1)
        ROOT g = f32[3,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
            index_vector_dim=1, slice_sizes={1,3}"""),
        "instruction g: gather produces f32[2,3], but the instruction declares f32[3,2]",
        XlaRefuses("'stablehlo.gather' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return "
                   "type(s) of operation 'tensor<3x2xf32>'")),
    "scatter-window": (_hlo("""
        x = f32[6,3] parameter(0)
        i = s32[2,1] parameter(1)
        u = f32[2,4] parameter(2)
        ROOT s = f32[6,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32""", _ADD),
        "instruction s: update window dimension 1 of f32[2,4] is larger than operand dimension 1 of f32[6,3]",
        XlaRefuses("For dimension 1, updates bound is 4, operand bound is 3.")),
    "sort-comparator": (_hlo("""
        a = f32[4] parameter(0)
        ROOT s = f32[4] sort(a), dimensions={0}, to_apply=add_f32""", _ADD),
        "instruction s: comparator add_f32 of sort must return pred[], returns f32[]",
        XlaRefuses("comparator must return tensor<i1> but got 'tensor<f32>'")),
    "while-condition": (_hlo("""
        a = f32[] parameter(0)
        ROOT w = f32[] while(a), condition=add_f32, body=neg""",
        _ADD + "neg {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"),
        "instruction w: condition add_f32 of while must take 1 parameter, takes 2",
        XlaRefuses("expect operands to be compatible with condition block arguments but got 'tensor<f32>' vs "
                   "'tensor<f32>', 'tensor<f32>'")),
    "while-body": (_hlo("""
        a = f32[] parameter(0)
        ROOT w = f32[] while(a), condition=positive, body=to_int""",
        "positive {\n  x = f32[] parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT p = pred[] compare(x, z), direction=GT\n}\n"
        "to_int {\n  x = f32[] parameter(0)\n  ROOT n = s32[] convert(x)\n}\n"),
        "instruction w: body to_int of while must return the loop state f32[], returns s32[]",
        XlaRefuses("expect operands to be compatible with body block return types but got 'tensor<f32>' vs "
                   "'tensor<i32>'")),
    "conditional-branches": (_hlo("""
        i = s32[] parameter(0)
        a = f32[] parameter(1)
        ROOT c = f32[] conditional(i, a, a), branch_computations={neg, to_int}""",
        "neg {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"
        "to_int {\n  x = f32[] parameter(0)\n  ROOT n = s32[] convert(x)\n}\n"),
        "instruction c: branches of conditional must return the same shape, neg returns f32[] and to_int "
        "returns s32[]",
        XlaRefuses("branch 0 and branch 1 have mismatched return types: 'tensor<f32>' vs 'tensor<i32>'")),
    "conditional-index": (_hlo("""
        i = f32[] parameter(0)
        ROOT c = f32[] conditional(i, i), branch_computations={neg}""",
        "neg {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"),
        "instruction c: the branch index of conditional must be pred[] or s32[], got f32[]",
        XlaRefuses("The first operand must be a scalar of PRED or S32")),
    "call-parameters": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = f32[] call(a, a), to_apply=add_f32""", _ADD),
        "instruction c: parameter 0 of to_apply computation add_f32 must be f32[2] to match call, got f32[]",
        XlaRefuses("'func.call' op operand type mismatch: expected operand type 'tensor<f32>', but provided "
                   "'tensor<2xf32>' for operand number 0")),
    "fusion-parameters": (_hlo("""
        a = f32[2] parameter(0)
        ROOT f = f32[2] fusion(a, a), kind=kLoop, calls=fused""",
        "fused {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n"),
        "instruction f: fused computation fused of fusion must take 2 parameters, takes 1",
        # XLA's verifier (ShapeVerifier::HandleFusion) refuses only more parameters than operands, so it
        # passes this module on, and XLA:CPU dies of it in layout assignment. xlapy asks for equal counts.
        XlaDies(Signals.SIGABRT, "Check failed: buffer != nullptr")),
    "fusion-missing-operand": (_hlo("""
        a = f32[2] parameter(0)
        ROOT f = f32[2] fusion(a), kind=kLoop, calls=fused""",
        "fused {\n  x = f32[2] parameter(0)\n  y = f32[2] parameter(1)\n  ROOT s = f32[2] add(x, y)\n}\n"),
        "instruction f: fused computation fused of fusion must take 1 parameter, takes 2",
        XlaRefuses("[hlo verifier]: Fused parameter count (2) is greater than the number of operands (1)")),
    "map-scalar": (_hlo("""
        a = f32[4] parameter(0)
        ROOT m = f32[4] map(a), dimensions={0}, to_apply=add_f32""", _ADD),
        "instruction m: to_apply computation add_f32 of map must take 1 parameter, takes 2",
        XlaRefuses("expects number of operands to match the arity of map computation, but got: 1 and 2")),
    "tuple-declared": (_hlo("""
        a = f32[2] parameter(0)
        ROOT t = (f32[2], f32[3]) tuple(a, a)"""),
        "instruction t: tuple produces (f32[2], f32[2]), but the instruction declares (f32[2], f32[3])",
        XlaRefuses("type of return operand 1 ('tensor<2xf32>') doesn't match function result type "
                   "('tensor<3xf32>') in function @main")),
    "get-tuple-element-index": (_hlo("""
        a = f32[2] parameter(0)
        t = (f32[2], f32[2]) tuple(a, a)
        ROOT g = f32[2] get-tuple-element(t), index=2"""),
        "instruction g: index=2 of get-tuple-element is out of range for (f32[2], f32[2])",
        # XLA's parser reads past the end of the tuple's element shapes.
        XlaDies(Signals.SIGSEGV)),
    "bitcast-bytes": (_hlo("""
        a = f32[6] parameter(0)
        ROOT b = f32[7] bitcast(a)"""),
        "instruction b: bitcast must keep the byte size: f32[6] has 24 bytes, f32[7] has 28",
        # XLA:CPU refuses every bitcast before layout assignment (a valid one too); its verifier checks a
        # bitcast's byte size only once layouts are assigned, which the route through jaxlib does not reach.
        XlaRefuses("Unexpected bitcast operation seen during layout assignment: %b.1 = f32[7]{0} bitcast")),
    "after-all-operand": (_hlo("""
        a = f32[2] parameter(0)
        ROOT t = token[] after-all(a)"""),
        "instruction t: operands of after-all must be tokens, operand 0 is f32[2]",
        XlaRefuses("'stablehlo.after_all' op operand #0 must be variadic of token, but got 'tensor<2xf32>'")),
    "partition-id-type": (_hlo("""
        ROOT p = s32[] partition-id()"""),
        "instruction p: partition-id produces u32[], but the instruction declares s32[]",
        # XLA's parser CHECKs the shape while it builds the instruction.
        XlaDies(Signals.SIGABRT, "HloInstruction partition-id must have a shape of u32[], but s32[] is specified")),
    "get-dimension-size-type": (_hlo("""
        a = f32[2] parameter(0)
        ROOT g = s64[] get-dimension-size(a), dimensions={0}"""),
        "instruction g: get-dimension-size produces s32[], but the instruction declares s64[]",
        XlaRefuses("'stablehlo.get_dimension_size' op result #0 must be ranked tensor of 32-bit signless "
                   "integer values, but got 'tensor<i64>'")),
    "topk-k": (_hlo("""
        a = f32[5] parameter(0)
        ROOT t = (f32[3], s32[3]) topk(a), k=2, largest=true"""),
        "instruction t: topk produces (f32[2], s32[2]), but the instruction declares (f32[3], s32[3])",
        XlaRefuses("'mhlo.topk' op inferred type(s) 'tensor<2xf32>', 'tensor<2xi32>' are incompatible with "
                   "return type(s) of operation 'tensor<3xf32>', 'tensor<3xi32>'")),
    "all-reduce-reducer": (_hlo("""
        a = s32[4] parameter(0)
        ROOT r = s32[4] all-reduce(a), replica_groups={}, to_apply=add_f32""", _ADD),
        "instruction r: to_apply computation add_f32 of all-reduce returns f32[], but its init value is s32[]",
        XlaRefuses("The element-type of reduction-region's result type at index 0 is expected to be promotable "
                   "from the op's corresponding init-value element-type: 'tensor<f32>' vs 'tensor<i32>'")),
    "all-gather-group": (_hlo("""
        a = f32[4] parameter(0)
        ROOT g = f32[12] all-gather(a), replica_groups={{0,1}}, dimensions={0}"""),
        "instruction g: all-gather produces f32[8], but the instruction declares f32[12]",
        XlaRefuses("subgroup_size == 1 || shard_count == subgroup_size shard_count = 3, subgroup_size = 2")),
    "reduce-precision-bits": (_hlo("""
        a = f32[4] parameter(0)
        ROOT r = f32[4] reduce-precision(a), exponent_bits=0, mantissa_bits=3"""),
        "instruction r: reduce-precision needs exponent_bits >= 1",
        XlaRefuses("attribute 'exponent_bits' failed to satisfy constraint: 32-bit signless integer "
                   "attribute whose value is positive")),
    "rng-bit-generator-state": (_hlo("""
        s = u64[2] parameter(0)
        ROOT r = (u64[3], u32[4]) rng-bit-generator(s), algorithm=rng_default"""),
        "instruction r: rng-bit-generator produces (u64[2], u32[4]), but the instruction declares (u64[3], u32[4])",
        XlaRefuses("output state shape must be compatible with initial state shape. Got: 'tensor<2xui64>' "
                   "and 'tensor<3xui64>'")),
    "parameter-gap": (_hlo("""
        a = f32[2] parameter(0)
        b = f32[2] parameter(2)
        ROOT s = f32[2] add(a, b)"""),
        "computation main: has 2 parameters, but none is number 1 (numbers used: [0, 2])",
        # XLA's parser CHECKs the numbers while it builds the computation.
        XlaDies(Signals.SIGABRT, "invalid parameter number. Expected [0, 2), got 2")),
    "parameter-twice": (_hlo("""
        a = f32[2] parameter(0)
        b = f32[2] parameter(0)
        ROOT s = f32[2] add(a, b)"""),
        "computation main, instruction b: parameter number 0 is also used by a",
        XlaRefuses("error: Duplicate parameter number 0")),
    "entry-layout": (_hlo("""
        a = f32[2] parameter(0)
        ROOT n = f32[2] negate(a)""", header=", entry_computation_layout={(f32[3]{0})->f32[2]{0}}"),
        "computation main, instruction a: entry_computation_layout gives parameter 0 the shape f32[3], "
        "but it is f32[2]",
        XlaAccepts("the route through StableHLO rebuilds the entry layout; XLA's "
                   "VerifyEntryComputationLayout checks it")),
    "callee-operand-shape": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = f32[2] call(a), to_apply=bad""",
        "bad {\n  x = f32[2] parameter(0)\n  y = f32[3] parameter(1)\n  ROOT s = f32[2] add(x, y)\n}\n"),
        "computation bad, instruction s: operands of add must have the same shape, got f32[2] and f32[3]",
        XlaRefuses('loc("s"): \'stablehlo.add\' op requires the same shape for all operands and results')),
    "dynamic-dimension": (_hlo("""
        a = f32[4] parameter(0)
        size = s32[] parameter(1)
        d = f32[<=4] set-dimension-size(a, size), dimensions={0}
        ROOT n = f32[4] negate(d)"""),
        "instruction n: negate produces f32[<=4], but the instruction declares f32[4]",
        XlaAccepts("XLA compares shapes ignoring dynamic dimensions (ShapeUtil::Compatible); xlapy checks "
                   "them, so this case is stricter than XLA by design")),
    "custom-call-target": (_hlo("""
        a = f32[2] parameter(0)
        ROOT c = f32[2] custom-call(a)"""),
        "instruction c: custom-call needs attribute custom_call_target",
        XlaRefuses("error: attribute custom_call_target is expected but not seen")),
    "fft-length": (_hlo("""
        a = f32[8] parameter(0)
        ROOT f = c64[4] fft(a), fft_type=RFFT, fft_length={8}"""),
        "instruction f: fft produces c64[5], but the instruction declares c64[4]",
        XlaRefuses("'stablehlo.fft' op inferred type(s) 'tensor<5xcomplex<f32>>' are incompatible with return "
                   "type(s) of operation 'tensor<4xcomplex<f32>>'")),
    "triangular-solve-sides": (_hlo("""
        a = f32[4,4] parameter(0)
        b = f32[3,4] parameter(1)
        ROOT t = f32[3,4] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE"""),
        "instruction t: the rows of b f32[3,4] must match the size of a f32[4,4] in triangular-solve",
        XlaRefuses("shared dimension of operands 'a' and 'b' must be compatible, but got 'tensor<4x4xf32>' "
                   "and 'tensor<3x4xf32>'")),
}


@pytest.mark.parametrize(("text", "message", "_xla"), BROKEN_TEXTS.values(), ids=BROKEN_TEXTS)
def test_broken_programs_are_rejected(text, message, _xla):
    module = parse_module(text)
    with pytest.raises(VerifyError) as error:
        verify(module)
    assert message in str(error.value)
    assert str(error.value).startswith("computation ")


@pytest.fixture(scope="module")
def xla_verdicts() -> dict[str, XlaVerdict]:
    require_jax()
    return dict(zip(BROKEN_TEXTS, xla_verdicts_of([text for text, _, _ in BROKEN_TEXTS.values()])))


# Every case, in the default run: XLA's verdicts on all of them take about 5 s (one child process, restarted
# after each of the few texts XLA dies on).
@pytest.mark.parametrize("case", BROKEN_TEXTS)
def test_xla_gives_the_stated_verdict(case, xla_verdicts):
    # XLA refuses the module for the stated reason, or dies of the stated signal (it has no error
    # for the module), or accepts it where the route through jaxlib does not reach XLA's rule.
    assert_xla_verdict(xla_verdicts[case], BROKEN_TEXTS[case][2])


# -- (c) broken IR, built or rewritten programmatically -----------------------------------------

_BASE = _hlo("""
    a = f32[2] parameter(0)
    b = f32[2] parameter(1)
    s = f32[2] add(a, b)
    n = f32[2] negate(s)
    ROOT m = f32[2] multiply(n, a)""", _ADD)


def _instr(module: HloModule, name: str) -> HloInstruction:
    return next(i for i in module.instructions if i.name == name)


def _cycle(module: HloModule) -> None:
    _instr(module, "s").replace_operand(0, _instr(module, "n"))


def _self_operand(module: HloModule) -> None:
    _instr(module, "n").replace_operand(0, _instr(module, "n"))


def _no_root(module: HloModule) -> None:
    module.entry.root = None


def _foreign_root(module: HloModule) -> None:
    module.entry.root = _instr(module, "sum")


def _duplicate_name(module: HloModule) -> None:
    _instr(module, "n").name = "s"


def _duplicate_across_computations(module: HloModule) -> None:
    _instr(module, "sum").name = "m"


def _foreign_operand(module: HloModule) -> None:
    _instr(module, "n").replace_operand(0, _instr(module, "x"))


def _operand_not_added(module: HloModule) -> None:
    stray = HloInstruction("stray", "negate", Shape("f32", (2,)), [_instr(module, "a")])
    _instr(module, "n").replace_operand(0, stray)


def _callee_not_in_module(module: HloModule) -> None:
    callee = HloComputation("elsewhere")
    x = HloInstruction("ex", "parameter", Shape("f32", (2,)))
    x.parameter_number = 0
    callee.add_instruction(x)
    callee.root = x
    call = HloInstruction("c", "call", Shape("f32", (2,)), [_instr(module, "a")], {"to_apply": "elsewhere"}, [callee])
    module.entry.add_instruction(call)


def _recursive_call(module: HloModule) -> None:
    add = module.computation("add_f32")
    call = HloInstruction("again", "call", Shape("f32"), [_instr(module, "x"), _instr(module, "y")],
                          {"to_apply": "add_f32"}, [add])
    add.add_instruction(call)


def _no_entry(module: HloModule) -> None:
    module.entry.is_entry = False


def _two_entries(module: HloModule) -> None:
    module.computation("add_f32").is_entry = True


def _parameter_renumbered(module: HloModule) -> None:
    _instr(module, "b").parameter_number = 0


def _parameter_number_missing(module: HloModule) -> None:
    _instr(module, "b").parameter_number = None


def _constant_literal(module: HloModule) -> None:
    c = HloInstruction("c", "constant", Shape("f32", (3,)))
    c.literal = np.zeros((2,), np.float32)
    module.entry.add_instruction(c)


def _wrong_arity(module: HloModule) -> None:
    _instr(module, "n").append_operand(_instr(module, "a"))


def _users_out_of_sync(module: HloModule) -> None:
    _instr(module, "a").users.remove(_instr(module, "s"))


def _parent_mismatch(module: HloModule) -> None:
    _instr(module, "n").parent = module.computation("add_f32")


def _shape_mutated(module: HloModule) -> None:
    _instr(module, "s").shape = Shape("f32", (3,))


def _opcode_mutated(module: HloModule) -> None:
    _instr(module, "n").opcode = "frobnicate"


def _listed_twice(module: HloModule) -> None:
    module.entry.instructions.append(_instr(module, "n"))


def _negative_dimension(module: HloModule) -> None:
    _instr(module, "b").shape = Shape("f32", (-2,))


BROKEN_IR = {
    "cycle": (_cycle, "computation main has a cycle through"),
    "self-operand": (_self_operand, "computation main has a cycle through n"),
    "no-root": (_no_root, "computation main: has no ROOT instruction"),
    "foreign-root": (_foreign_root, "computation main: the ROOT sum is not an instruction of the computation"),
    "duplicate-name": (_duplicate_name, "computation main, instruction s: the name s is already used earlier "
                                        "in the same computation"),
    "duplicate-name-across": (_duplicate_across_computations,
                              "computation main, instruction m: the name m is already used in computation add_f32"),
    "foreign-operand": (_foreign_operand, "computation main, instruction n: operand 0 (x) is not in this "
                                          "computation but in computation add_f32"),
    "operand-not-added": (_operand_not_added, "computation main, instruction n: operand 0 (stray) is not in this "
                                              "computation but in no computation"),
    "callee-not-in-module": (_callee_not_in_module, "computation main, instruction c: calls computation elsewhere, "
                                                    "which is not in the module"),
    "recursive-call": (_recursive_call, "computation add_f32: calls itself: add_f32 -> add_f32"),
    "no-entry": (_no_entry, "module m has no entry computation"),
    "two-entries": (_two_entries, "module m has 2 entry computations: add_f32, main"),
    "parameter-renumbered": (_parameter_renumbered, "computation main, instruction b: parameter number 0 is also "
                                                    "used by a"),
    "parameter-number-missing": (_parameter_number_missing, "computation main, instruction b: parameter number "
                                                            "None is not a non-negative integer"),
    "constant-literal": (_constant_literal, "computation main, instruction c: the literal of constant has "
                                           "dimensions [2], but the instruction declares f32[3]"),
    "arity": (_wrong_arity, "computation main, instruction n: negate takes 1 operand, got 2"),
    "users-out-of-sync": (_users_out_of_sync, "computation main, instruction s: uses a, but is missing from its "
                                              "users"),
    "parent": (_parent_mismatch, "computation main, instruction n: is listed in this computation, but its parent "
                                 "is computation add_f32"),
    "shape-mutated": (_shape_mutated, "computation main, instruction s: add produces f32[2], but the instruction "
                                      "declares f32[3]"),
    "unknown-opcode": (_opcode_mutated, "computation main, instruction n: unknown opcode frobnicate"),
    "listed-twice": (_listed_twice, "computation main, instruction n: is listed twice in the computation"),
    "negative-dimension": (_negative_dimension, "computation main, instruction b: declares an invalid shape "
                                                "f32[-2]: negative size -2 for dimension 0"),
}


@pytest.mark.parametrize(("mutate", "message"), BROKEN_IR.values(), ids=BROKEN_IR)
def test_broken_ir_is_rejected(mutate, message):
    module = parse_module(_BASE)
    verify(module)  # valid before the mutation
    mutate(module)
    with pytest.raises(VerifyError) as error:
        verify(module)
    assert message in str(error.value)


def test_ir_built_by_hand_verifies():
    f32 = Shape("f32", (2,))
    computation = HloComputation("main")
    a = computation.add_instruction(HloInstruction("a", "parameter", f32))
    a.parameter_number = 0
    n = computation.add_instruction(HloInstruction("n", "negate", f32, [a]))
    computation.root = n
    module = HloModule("built")
    module.add_computation(computation, entry=True)
    verify(module)
    n.replace_all_uses_with(a)  # a rewrite: the root moves to the parameter
    computation.remove_instruction(n)
    verify(module)
    assert module.entry.root is a
