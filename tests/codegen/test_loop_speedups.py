"""Kernels that used to fall back to one element per thread and now run on SIMD vectors.

Concatenate fusions: the concatenate emitter (``emitters/concatenate.py``) writes each operand's slice of the
output with its own loop, ``simplify-arith`` folds the operand choice from the ranges of the loop's indices
(``xla.apply_indexing`` results), and the slices are read and written as whole vectors. Results are compared bit
for bit with the interpreter: a concatenation moves elements, and the elementwise ops around it round each
element once in both.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import make_context, parse_mlir, print_mlir
from xlapy.codegen.passes.simplify_arith import SimplifyArithPass
from xlapy.codegen.pipeline import Dumper, emitter_name, lower_fusion

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _concatenate(shapes: list[str], result: str, dimension: int, dtype: str = "f32") -> str:
    operands = ", ".join(f"p{i}" for i in range(len(shapes)))
    return single_fusion([f"{dtype}{s}" for s in shapes],
                         [f"ROOT c = {dtype}{result} concatenate({operands}), dimensions={{{dimension}}}"],
                         f"{dtype}{result}")


# Operands moved as they are, along the minor and the major dimension, in another layout, with slices whose
# offsets are not a multiple of the widest vector, with an empty operand, and in bf16.
PLAIN = {
    "minor": _concatenate(["[64,1024]", "[64,512]", "[64,256]"], "[64,1792]", 1),
    "major": _concatenate(["[3,256]", "[5,256]"], "[8,256]", 0),
    "column_major": _concatenate(["[128,64]{0,1}", "[64,64]{0,1}"], "[192,64]{0,1}", 0),
    "narrow_offsets": _concatenate(["[64,100]", "[64,28]", "[64,4]"], "[64,132]", 1),
    "empty_operand": _concatenate(["[64,96]", "[64,0]", "[64,32]"], "[64,128]", 1),
    "bf16": _concatenate(["[32,128]", "[32,64]"], "[32,192]", 1, "bf16"),
    "three_d": _concatenate(["[4,16,32]", "[4,8,32]", "[4,40,32]", "[4,64,32]"], "[4,128,32]", 1),
}

# A prologue on one operand and an epilogue on the concatenation (the root function computes both per element).
WITH_ELEMENTWISE = single_fusion(
    ["f32[64,256]", "f32[64,128]", "f32[384]"],
    ["two = f32[] constant(2)",
     "twos = f32[64,128] broadcast(two), dimensions={}",
     "scaled = f32[64,128] multiply(p1, twos)",
     "c = f32[64,384] concatenate(p0, scaled), dimensions={1}",
     "row = f32[64,384] broadcast(p2), dimensions={1}",
     "ROOT sum = f32[64,384] add(c, row)"],
    "f32[64,384]")

# One value read through two maps: it roots a function of its own, which every loop's copy calls.
SHARED_OPERAND = single_fusion(
    ["f32[64,128]"],
    ["n = f32[64,128] negate(p0)",
     "r = f32[64,128] reverse(n), dimensions={1}",
     "ROOT c = f32[64,256] concatenate(n, r), dimensions={1}"],
    "f32[64,256]")


def _arguments(module: xlapy.HloModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for parameter in module.entry.parameters:
        shape = parameter.shape
        dtype = ml_dtypes.bfloat16 if shape.element_type == "bf16" else np.float32
        values = rng.standard_normal(shape.dimensions).astype(dtype)
        args.append(values)
    return args


def _assert_same_as_interpreter(text: str) -> None:
    module = xlapy.parse_hlo(text)
    args = _arguments(module)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(*args)
    expected = np.asarray(xlapy.evaluate(module, *args))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def _after_vectorize_lanes(text: str, tmp_path) -> str:
    fusion = xlapy.parse_hlo(text).entry.root
    lower_fusion(fusion, Device.host(), Dumper.create(tmp_path, "vectorize-lanes"))
    (dump,) = tmp_path.glob("*.vectorize-lanes.mlir")
    return dump.read_text()


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_concatenations_are_bit_exact(name: str):
    _assert_same_as_interpreter(PLAIN[name])


@pytest.mark.parametrize("name", ["minor", "major", "column_major", "narrow_offsets", "three_d"])
def test_concatenations_are_written_as_vectors_without_choosing_an_operand(name: str, tmp_path):
    text = PLAIN[name]
    assert emitter_name(xlapy.parse_hlo(text).entry.root) == "concatenate"
    lowered = _after_vectorize_lanes(text, tmp_path)
    assert "vector.transfer_write" in lowered and "vector.transfer_read" in lowered
    assert "scf.if" not in lowered and "vector.extract" not in lowered


def test_prologue_and_epilogue_are_computed_in_every_slice(tmp_path):
    assert emitter_name(xlapy.parse_hlo(WITH_ELEMENTWISE).entry.root) == "concatenate"
    _assert_same_as_interpreter(WITH_ELEMENTWISE)
    lowered = _after_vectorize_lanes(WITH_ELEMENTWISE, tmp_path)
    assert "scf.if" not in lowered and "vector.extract" not in lowered
    assert lowered.count("arith.mulf") == 1 and lowered.count("arith.addf") == 2


def test_a_value_read_through_two_maps_is_exact():
    assert emitter_name(xlapy.parse_hlo(SHARED_OPERAND).entry.root) == "concatenate"
    _assert_same_as_interpreter(SHARED_OPERAND)


def test_operands_sharing_too_small_a_divisor_keep_the_loop_emitter():
    text = _concatenate(["[3,5]", "[3,7]"], "[3,12]", 1)
    assert emitter_name(xlapy.parse_hlo(text).entry.root) == "loop"
    _assert_same_as_interpreter(text)


# -- simplify-arith through apply_indexing ------------------------------------------------------------------------

_SLICE_LOOP = """
#map = #xla.indexing_map<"(th_x)[s0] -> (th_x * 16 + s0 + 32), domain: th_x in [0, 3], s0 in [0, 15]">
func.func @main(%t: tensor<4x96xf32>) -> f32 {
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %limit = arith.constant LIMIT : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %v = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> (f32) {
    %i = xla.apply_indexing #map(%thread_id_x)[%v]
    %below = arith.cmpi slt, %i, %limit : index
    %x = scf.if %below -> (f32) {
      %one = arith.constant 1.0 : f32
      scf.yield %one : f32
    } else {
      %two = arith.constant 2.0 : f32
      scf.yield %two : f32
    }
    %s = arith.addf %acc, %x : f32
    scf.yield %s : f32
  }
  func.return %r : f32
}
"""


def _simplified(limit: int) -> str:
    module = parse_mlir(_SLICE_LOOP.replace("LIMIT", str(limit)))
    SimplifyArithPass().apply(make_context(), module)
    return print_mlir(module)


def test_comparisons_of_apply_indexing_results_fold_by_the_maps_range():
    # The index ranges over [32, 95]: below 96 always, below 32 never; below 64 depends on the thread.
    always = _simplified(96)
    assert "scf.if" not in always and "arith.cmpi" not in always and "1.000000e+00" in always
    never = _simplified(32)
    assert "scf.if" not in never and "arith.cmpi" not in never and "2.000000e+00" in never
    assert "scf.if" in _simplified(64)
