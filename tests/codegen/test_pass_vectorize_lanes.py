"""vectorize-lanes (the CPU pipeline): unrolled lanes back into vector ops,
checked with FileCheck; bundles that are broadcast, made constant or packed;
the pre-unrolling test of which lane loops vectorize; and the CPU dumps and
results of vectorized loop fusions (gelu shows vector.transfer_read and
vector math, elementwise corpus modules at vector-friendly shapes match the
interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import vector
from xdsl.dialects.builtin import ModuleOp

import xlapy
from tests.codegen.filecheck import filecheck
from tests.codegen.test_loop_fusions import CORPUS, GELU, KNOWN_GAPS, Case, check_against_interpreter, gelu_text
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.vectorize_lanes import VectorizeLanesPass, lanes_vectorizable, vectorize_lanes
from xlapy.codegen.pipeline import lower_fusion, vector_registers


def vectorize(text: str) -> tuple[ModuleOp, int]:
    module = parse_mlir(text)
    packed = vectorize_lanes(module)
    verify_op(module)
    return module, packed


# Two lanes of gelu's body after unroll-loops, lower-apply-indexing, cse and canonicalize.
UNROLLED = """
func.func @main(%input: tensor<64xbf16>, %output: tensor<64xbf16>) -> tensor<64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %half = arith.constant 5.000000e-01 : bf16
  %one = arith.constant 1.000000e+00 : bf16
  %vector = arith.constant dense<0.000000e+00> : vector<2xbf16>
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 31 : index]}
  %c2 = arith.constant 2 : index
  %base = arith.muli %thread_id_x, %c2 : index
  %pad = arith.constant 0.000000e+00 : bf16
  %read = vector.transfer_read %input[%base], %pad {in_bounds = [true]} : tensor<64xbf16>, vector<2xbf16>
  %x0 = vector.extract %read[%c0] : bf16 from vector<2xbf16>
  %t0 = math.tanh %x0 : bf16
  %a0 = arith.addf %t0, %one : bf16
  %m0 = arith.mulf %a0, %half : bf16
  %v0 = vector.insert %m0, %vector [%c0] : bf16 into vector<2xbf16>
  %x1 = vector.extract %read[%c1] : bf16 from vector<2xbf16>
  %t1 = math.tanh %x1 : bf16
  %a1 = arith.addf %t1, %one : bf16
  %m1 = arith.mulf %a1, %half : bf16
  %v1 = vector.insert %m1, %v0 [%c1] : bf16 into vector<2xbf16>
  %written = vector.transfer_write %v1, %output[%base] {in_bounds = [true]} : vector<2xbf16>, tensor<64xbf16>
  func.return %written : tensor<64xbf16>
}
"""

UNROLLED_CHECKS = """
CHECK:      %[[HALF:.*]] = arith.constant 5.000000e-01 : bf16
CHECK-NEXT: %[[HALVES:.*]] = vector.broadcast %[[HALF]] : bf16 to vector<2xbf16>
CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : bf16
CHECK-NEXT: %[[ONES:.*]] = vector.broadcast %[[ONE]] : bf16 to vector<2xbf16>
CHECK:      %[[READ:.*]] = vector.transfer_read
CHECK-NEXT: %[[T:.*]] = math.tanh %[[READ]] : vector<2xbf16>
CHECK-NEXT: %[[A:.*]] = arith.addf %[[T]], %[[ONES]] : vector<2xbf16>
CHECK-NEXT: %[[M:.*]] = arith.mulf %[[A]], %[[HALVES]] : vector<2xbf16>
CHECK-NEXT: %{{.*}} = vector.transfer_write %[[M]], %output
CHECK-NOT:  vector.extract
CHECK-NOT:  vector.insert
"""


def test_unrolled_lanes_become_vector_ops(tmp_path: Path):
    module, packed = vectorize(UNROLLED)
    assert packed == 0
    filecheck(print_mlir(module), UNROLLED_CHECKS, tmp_path)


# Lanes computing index arithmetic with a constant per lane, a comparison and a select, and a load at each lane's
# own index (a gather: packed from scalars).
MIXED = """
func.func @main(%table: tensor<100xf32>, %output: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %zero = arith.constant 0.000000e+00 : f32
  %vector = arith.constant dense<0.000000e+00> : vector<2xf32>
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 3 : index]}
  %i0 = arith.addi %thread_id_x, %c0 : index
  %i1 = arith.addi %thread_id_x, %c1 : index
  %j0 = arith.muli %i0, %c7 : index
  %j1 = arith.muli %i1, %c7 : index
  %g0 = tensor.extract %table[%j0] : tensor<100xf32>
  %g1 = tensor.extract %table[%j1] : tensor<100xf32>
  %p0 = arith.cmpf ogt, %g0, %zero : f32
  %p1 = arith.cmpf ogt, %g1, %zero : f32
  %i0_64 = arith.index_cast %i0 : index to i64
  %i1_64 = arith.index_cast %i1 : index to i64
  %f0 = arith.sitofp %i0_64 : i64 to f32
  %f1 = arith.sitofp %i1_64 : i64 to f32
  %s0 = arith.select %p0, %g0, %f0 : f32
  %s1 = arith.select %p1, %g1, %f1 : f32
  %v0 = vector.insert %s0, %vector [%c0] : f32 into vector<2xf32>
  %v1 = vector.insert %s1, %v0 [%c1] : f32 into vector<2xf32>
  %base = arith.muli %thread_id_x, %c1 : index
  %written = vector.transfer_write %v1, %output[%base] {in_bounds = [true]} : vector<2xf32>, tensor<8xf32>
  func.return %written : tensor<8xf32>
}
"""

MIXED_CHECKS = """
CHECK:      %[[LANE:.*]] = arith.constant dense<[0, 1]> : vector<2xindex>
CHECK:      %[[TH:.*]] = vector.broadcast %thread_id_x : index to vector<2xindex>
CHECK:      %[[I:.*]] = arith.addi %[[TH]], %[[LANE]] : vector<2xindex>
CHECK:      %[[G0:.*]] = tensor.extract %table
CHECK:      %[[G1:.*]] = tensor.extract %table
CHECK-NEXT: %[[PACK0:.*]] = vector.broadcast %[[G0]] : f32 to vector<2xf32>
CHECK-NEXT: %[[G:.*]] = vector.insert %[[G1]], %[[PACK0]] [1] : f32 into vector<2xf32>
CHECK:      %[[P:.*]] = arith.cmpf ogt, %[[G]], %{{.*}} : vector<2xf32>
CHECK:      arith.index_cast %[[I]] : vector<2xindex> to vector<2xi64>
CHECK:      %[[F:.*]] = arith.sitofp %{{.*}} : vector<2xi64> to vector<2xf32>
CHECK-NEXT: %[[S:.*]] = arith.select %[[P]], %[[G]], %[[F]] : vector<2xf32>
CHECK:      vector.transfer_write %[[S]], %output
"""


def test_constants_broadcasts_and_packs(tmp_path: Path):
    module, packed = vectorize(MIXED)
    assert packed == 1  # the gathered loads
    filecheck(print_mlir(module), MIXED_CHECKS, tmp_path)
    cmpf = next(op for op in module.walk() if op.name == "arith.cmpf")
    assert str(cmpf.results[0].type) == "vector<2xi1>"


def test_shared_lanes_are_built_once(tmp_path: Path):
    """Two outputs of the same lane values (a multi-output fusion) share one vector."""
    text = UNROLLED.replace("  func.return %written : tensor<64xbf16>\n}", """
  %again = vector.insert %m0, %vector [%c0] : bf16 into vector<2xbf16>
  %again1 = vector.insert %m1, %again [%c1] : bf16 into vector<2xbf16>
  %second = vector.transfer_write %again1, %output[%base] {in_bounds = [true]} : vector<2xbf16>, tensor<64xbf16>
  func.return %written : tensor<64xbf16>
}""")
    module, _ = vectorize(text)
    assert sum(op.name == "math.tanh" for op in module.walk()) == 1
    filecheck(print_mlir(module), """
CHECK:      %[[M:.*]] = arith.mulf %{{.*}} : vector<2xbf16>
CHECK-NEXT: vector.transfer_write %[[M]], %output
CHECK-NEXT: vector.transfer_write %[[M]], %output
""", tmp_path)


def test_incomplete_chains_are_left_alone():
    """An insert chain that does not set every lane is not a seed."""
    text = UNROLLED.replace("%v1 = vector.insert %m1, %v0 [%c1]", "%v1 = vector.insert %m1, %v0 [%c0]")
    module, _ = vectorize(text)
    assert any(isinstance(op, vector.ExtractOp) for op in module.walk())
    assert not any(op.name == "math.tanh" and "vector" in str(op.results[0].type) for op in module.walk())


def test_pass_name_and_dialect_round_trip():
    assert VectorizeLanesPass.name == "vectorize-lanes"
    module, _ = vectorize(UNROLLED)
    again = parse_mlir(print_mlir(module))  # the vector forms print and parse back
    verify_op(again)


LANE_LOOP = """
func.func @main(%input: tensor<64xf32>, %output: tensor<64xf32>) -> tensor<64xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %pad = arith.constant 0.000000e+00 : f32
  %vector = arith.constant dense<0.000000e+00> : vector<4xf32>
  %thread_id_x = gpu.thread_id x {{xla.range = [0 : index, 15 : index]}}
  %base = arith.muli %thread_id_x, %c4 : index
  %read = vector.transfer_read %input[%base], %pad {{in_bounds = [true]}} : tensor<64xf32>, vector<4xf32>
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %vector)
      -> (tensor<64xf32>, vector<4xf32>) {{
    %x = vector.extract %read[%i] : f32 from vector<4xf32>
    {body}
    %v = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
    scf.yield %iter, %v : tensor<64xf32>, vector<4xf32>
  }}
  %written = vector.transfer_write %r#1, %output[%base] {{in_bounds = [true]}} : vector<4xf32>, tensor<64xf32>
  func.return %written : tensor<64xf32>
}}
"""


@pytest.mark.parametrize(("body", "expected"), [
    ("%y = math.exp %x : f32", True),
    ("%j = arith.addi %base, %i : index\n    %y = tensor.extract %input[%j] : tensor<64xf32>", False),
    ("%y = tensor.extract %input[%base] : tensor<64xf32>", True),  # the same element in every lane
    ("%p = arith.cmpi eq, %i, %c0 : index\n"
     "    %y = scf.if %p -> (f32) {\n      scf.yield %x : f32\n    } else {\n      scf.yield %pad : f32\n    }",
     False),
])
def test_which_lane_loops_vectorize(body: str, expected: bool):
    assert lanes_vectorizable(parse_mlir(LANE_LOOP.format(body=body))) == expected


# -- the CPU pipeline -----------------------------------------------------------------------------------


def test_cpu_dump_of_gelu_shows_vectors(tmp_path: Path):
    """`--dump-to` on the CPU: gelu's lanes are read and written as vectors, unrolled, and computed as SIMD
    vectors (tanh included) after vectorize-lanes."""
    dumps = tmp_path / "dumps"
    module = xlapy.parse_hlo(GELU.read_text())
    xlapy.compile(module, backend="cpu", dump_to=str(dumps))
    names = sorted(p.name for p in dumps.iterdir())
    assert [n.split(".")[2] for n in names] == [
        "fusion-emitter", "inline", "lower-xla-loops-to-scf", "simplify-arith", "flatten-tensors",
        "vectorize-loads-stores", "unroll-loops", "lower-apply-indexing", "cse", "canonicalize", "vectorize-lanes",
        "lower-tensors"]
    lanes = Device.host().vector_bytes // 4 * vector_registers(module.entry.root)
    read = (dumps / "fusion.05.vectorize-loads-stores.mlir").read_text()
    filecheck(read, f"""
CHECK: vector.transfer_read %input[%{{{{.*}}}}], %{{{{.*}}}} {{in_bounds = [true]}}
CHECK-SAME: : tensor<12582912xbf16>, vector<{lanes}xbf16>
CHECK: scf.for %vector_index = %c0 to %c{lanes} step %c1
CHECK: vector.extract
CHECK: vector.insert
CHECK: vector.transfer_write
""", tmp_path)
    unrolled = (dumps / "fusion.06.unroll-loops.mlir").read_text()
    assert "scf.for" not in unrolled and unrolled.count("math.tanh") == lanes
    vectorized = (dumps / "fusion.10.vectorize-lanes.mlir").read_text()
    filecheck(vectorized, f"""
CHECK:     %[[X:.*]] = vector.transfer_read %input
CHECK:     math.tanh %{{{{.*}}}} : vector<{lanes}xbf16>
CHECK:     vector.transfer_write
CHECK-NOT: vector.extract
""", tmp_path)
    assert "vector<" in (dumps / "fusion.11.lower-tensors.mlir").read_text()


def test_gpu_pipeline_is_unchanged():
    """The GPU lowers gelu with XLA's passes and 4 elements per thread: no vectorize-lanes."""
    module = xlapy.parse_hlo(GELU.read_text())
    lowered = lower_fusion(module.entry.root, Device.gpu())
    assert lowered.launch.vector_size == 4 and lowered.launch.threads_per_block == 128
    assert sum(op.name == "math.tanh" for op in lowered.module.walk()) == 4


def _vector_variant_cases() -> list:
    """Corpus modules on f32[11,17] (multi-output elementwise fusions of every float op) at 16x24: vectors of the
    full SIMD width, their lanes vectorized."""
    cases = []
    for path in sorted(CORPUS.glob("*.hlo")):
        text = path.read_text()
        if "11,17" in text:
            case = Case(f"{path.stem}_16x24", text.replace("11,17", "16,24"))
            reason = next((r for k, r in KNOWN_GAPS.items() if path.stem.startswith(k)), None)
            cases.append(pytest.param(case, marks=pytest.mark.xfail(reason=reason)) if reason else case)
    return cases


@pytest.mark.parametrize("case", _vector_variant_cases(), ids=lambda c: c.name)
def test_vectorized_fusions_match_interpreter(case: Case):
    check_against_interpreter(case)


@pytest.mark.parametrize("name", ["float_transcendental_f32", "float_transcendental_bf16", "integer_arithmetic"])
def test_elementwise_fusions_are_vectorized(name: str):
    text = (CORPUS / f"{name}.hlo").read_text().replace("11,17", "16,24")
    lowered = lower_fusion(xlapy.parse_hlo(text).entry.root, Device.host())
    assert lowered.launch.vector_size > 1
    assert not any(isinstance(op, vector.ExtractOp) for op in lowered.module.walk())


@pytest.mark.parametrize("name", ["gather_canonical", "pad_edges_constant", "concatenate_three", "transpose_2d_add"])
def test_gathers_and_control_flow_fall_back_to_one_element_per_thread(name: str):
    lowered = lower_fusion(xlapy.parse_hlo((CORPUS / f"{name}.hlo").read_text()).entry.root, Device.host())
    assert lowered.launch.vector_size == 1


@pytest.mark.parametrize("element_type", ["bf16", "f32"])
def test_gelu_vector_width(element_type: str):
    """gelu computes one result with one transcendental function: its vectors cover several SIMD registers."""
    module = xlapy.parse_hlo(gelu_text(element_type, "6,16,4096"))
    lowered = lower_fusion(module.entry.root, Device.host())
    simd_lanes = Device.host().vector_bytes // 4
    assert lowered.launch.vector_size == simd_lanes * vector_registers(module.entry.root)
    assert lowered.launch.threads_per_block * lowered.launch.vector_size == 1024
