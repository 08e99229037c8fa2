"""vectorize-lanes (the CPU pipeline): loops over vector lanes into vector ops,
checked with FileCheck; the loops that stay as they are; unroll-loops keeping
a CPU kernel's lane loops rolled; vectorize-loads-stores reading through
broadcasts (one element for every lane, or consecutive elements) and on pred
tensors; and the CPU dumps and results of vectorized loop fusions (gelu shows
vector.transfer_read and vector math, broadcasts and pred outputs vectorize,
corpus modules at vector-friendly shapes match the interpreter)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.dialects import scf, vector
from xdsl.dialects.builtin import ModuleOp

import xlapy
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_corpus import CORPUS, GELU, KNOWN_GAPS, Case, check_against_interpreter, gelu_text
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.unroll_loops import UnrollLoopsPass
from xlapy.codegen.passes.vectorize_lanes import VectorizeLanesPass, lanes_vectorizable, vectorize_lanes
from xlapy.codegen.passes.vectorize_loads_stores import VectorizeLoadsStoresPass
from xlapy.codegen.pipeline import CPU_MAX_UNROLLED_COST, lower_fusion, vector_registers


def vectorize(text: str) -> tuple[ModuleOp, int]:
    module = parse_mlir(text)
    loops = vectorize_lanes(module)
    verify_op(module)
    return module, loops


def loops(module: ModuleOp) -> list[scf.ForOp]:
    return [op for op in module.walk() if isinstance(op, scf.ForOp)]


# gelu's thread body on four lanes after vectorize-loads-stores, lower-apply-indexing, cse and canonicalize.
ROLLED = """
func.func @main(%input: tensor<64xbf16>, %output: tensor<64xbf16>) -> tensor<64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %half = arith.constant 5.000000e-01 : bf16
  %one = arith.constant 1.000000e+00 : bf16
  %zeros = arith.constant dense<0.000000e+00> : vector<4xbf16>
  %pad = arith.constant 0.000000e+00 : bf16
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %base = arith.muli %thread_id_x, %c4 : index
  %read = vector.transfer_read %input[%base], %pad {in_bounds = [true]} : tensor<64xbf16>, vector<4xbf16>
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %zeros)
      -> (tensor<64xbf16>, vector<4xbf16>) {
    %x = vector.extract %read[%i] : bf16 from vector<4xbf16>
    %t = math.tanh %x : bf16
    %a = arith.addf %t, %one : bf16
    %m = arith.mulf %a, %half : bf16
    %v = vector.insert %m, %acc [%i] : bf16 into vector<4xbf16>
    scf.yield %iter, %v : tensor<64xbf16>, vector<4xbf16>
  }
  %written = vector.transfer_write %r#1, %output[%base] {in_bounds = [true]} : vector<4xbf16>, tensor<64xbf16>
  func.return %written : tensor<64xbf16>
}
"""

ROLLED_CHECKS = """
CHECK:      %[[READ:.*]] = vector.transfer_read %input
CHECK-NEXT: %[[T:.*]] = math.tanh %[[READ]] : vector<4xbf16>
CHECK-NEXT: %[[ONES:.*]] = arith.constant dense<1.000000e+00> : vector<4xbf16>
CHECK-NEXT: %[[A:.*]] = arith.addf %[[T]], %[[ONES]] : vector<4xbf16>
CHECK-NEXT: %[[HALVES:.*]] = arith.constant dense<5.000000e-01> : vector<4xbf16>
CHECK-NEXT: %[[M:.*]] = arith.mulf %[[A]], %[[HALVES]] : vector<4xbf16>
CHECK-NEXT: %{{.*}} = vector.transfer_write %[[M]], %output[%{{.*}}] {in_bounds = [true]}
CHECK-NOT:  scf.for
CHECK-NOT:  vector.extract
CHECK-NOT:  vector.insert
"""


def test_lane_loop_becomes_vector_ops(tmp_path: Path):
    module, count = vectorize(ROLLED)
    assert count == 1
    text = print_mlir(module)
    filecheck(text, ROLLED_CHECKS, tmp_path)
    # The scalar constants the splats replaced and the loop's bounds are gone.
    assert "arith.constant 5.000000e-01 : bf16" not in text and "%c1 = " not in text


# Lanes computing with their own index (an iota), a value the same in every lane (a load at an index that does
# not depend on the lane) and an integer comparison with a select.
INDEX_LANES = """
func.func @main(%scale: tensor<16xf32>, %output: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = arith.constant dense<0.000000e+00> : vector<4xf32>
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %base = arith.muli %thread_id_x, %c4 : index
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %zeros)
      -> (tensor<64xf32>, vector<4xf32>) {
    %s = tensor.extract %scale[%thread_id_x] : tensor<16xf32>
    %j = arith.addi %base, %i : index
    %j64 = arith.index_cast %j : index to i64
    %f = arith.sitofp %j64 : i64 to f32
    %y = arith.mulf %f, %s : f32
    %last = arith.cmpi eq, %i, %c3 : index
    %z = arith.select %last, %zero, %y : f32
    %v = vector.insert %z, %acc [%i] : f32 into vector<4xf32>
    scf.yield %iter, %v : tensor<64xf32>, vector<4xf32>
  }
  %written = vector.transfer_write %r#1, %output[%base] {in_bounds = [true]} : vector<4xf32>, tensor<64xf32>
  func.return %written : tensor<64xf32>
}
"""

INDEX_LANES_CHECKS = """
CHECK:      %[[S:.*]] = tensor.extract %scale[%thread_id_x] : tensor<16xf32>
CHECK-NEXT: %[[BASES:.*]] = vector.broadcast %{{.*}} : index to vector<4xindex>
CHECK-NEXT: %[[LANE:.*]] = arith.constant dense<[0, 1, 2, 3]> : vector<4xindex>
CHECK-NEXT: %[[J:.*]] = arith.addi %[[BASES]], %[[LANE]] : vector<4xindex>
CHECK-NEXT: %[[J64:.*]] = arith.index_cast %[[J]] : vector<4xindex> to vector<4xi64>
CHECK-NEXT: %[[F:.*]] = arith.sitofp %[[J64]] : vector<4xi64> to vector<4xf32>
CHECK-NEXT: %[[SS:.*]] = vector.broadcast %[[S]] : f32 to vector<4xf32>
CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[F]], %[[SS]] : vector<4xf32>
CHECK-NEXT: %[[THREES:.*]] = arith.constant dense<3> : vector<4xindex>
CHECK-NEXT: %[[LAST:.*]] = arith.cmpi eq, %[[LANE]], %[[THREES]] : vector<4xindex>
CHECK-NEXT: %[[ZEROS:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
CHECK-NEXT: %[[Z:.*]] = arith.select %[[LAST]], %[[ZEROS]], %[[Y]] : vector<4xi1>, vector<4xf32>
CHECK-NEXT: vector.transfer_write %[[Z]], %output
"""


def test_lane_index_and_values_the_same_in_every_lane(tmp_path: Path):
    module, count = vectorize(INDEX_LANES)
    assert count == 1
    filecheck(print_mlir(module), INDEX_LANES_CHECKS, tmp_path)


def test_values_shared_by_several_outputs_are_computed_once(tmp_path: Path):
    """Two outputs of the same lane values (a multi-output fusion) share one vector."""
    text = ROLLED.replace("%r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %zeros)\n"
                          "      -> (tensor<64xbf16>, vector<4xbf16>) {",
                          "%r:3 = scf.for %i = %c0 to %c4 step %c1 iter_args(%iter = %output, %acc = %zeros, "
                          "%acc2 = %zeros)\n      -> (tensor<64xbf16>, vector<4xbf16>, vector<4xbf16>) {")
    text = text.replace("scf.yield %iter, %v : tensor<64xbf16>, vector<4xbf16>",
                        "%w = vector.insert %m, %acc2 [%i] : bf16 into vector<4xbf16>\n"
                        "    scf.yield %iter, %v, %w : tensor<64xbf16>, vector<4xbf16>, vector<4xbf16>")
    text = text.replace("  func.return %written", "  %second = vector.transfer_write %r#2, %written[%base] "
                        "{in_bounds = [true]} : vector<4xbf16>, tensor<64xbf16>\n  func.return %second")
    module, _ = vectorize(text)
    assert sum(op.name == "math.tanh" for op in module.walk()) == 1
    filecheck(print_mlir(module), """
CHECK:      %[[M:.*]] = arith.mulf %{{.*}} : vector<4xbf16>
CHECK-NEXT: %[[W:.*]] = vector.transfer_write %[[M]], %output
CHECK-NEXT: vector.transfer_write %[[M]], %[[W]]
""", tmp_path)


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
    %v = vector.insert %y, %acc [{position}] : f32 into vector<4xf32>
    scf.yield %iter, %v : tensor<64xf32>, vector<4xf32>
  }}
  %written = vector.transfer_write %r#1, %output[%base] {{in_bounds = [true]}} : vector<4xf32>, tensor<64xf32>
  func.return %written : tensor<64xf32>
}}
"""

_GATHER = "%j = arith.addi %base, %i : index\n    %y = tensor.extract %input[%j] : tensor<64xf32>"


@pytest.mark.parametrize(("body", "position", "expected"), [
    ("%y = math.exp %x : f32", "%i", True),
    ("%y = tensor.extract %input[%base] : tensor<64xf32>", "%i", True),  # the same element in every lane
    (_GATHER, "%i", False),
    ("%p = arith.cmpi eq, %i, %c0 : index\n"
     "    %y = scf.if %p -> (f32) {\n      scf.yield %x : f32\n    } else {\n      scf.yield %pad : f32\n    }",
     "%i", False),
    ("%y = math.exp %x : f32", "%c0", False),  # a lane that is not the loop's
])
def test_which_lane_loops_vectorize(body: str, position: str, expected: bool):
    text = LANE_LOOP.format(body=body, position=position)
    assert lanes_vectorizable(parse_mlir(text)) == expected
    module, count = vectorize(text)
    assert count == int(expected)
    assert bool(loops(module)) != expected


def test_pass_name_and_dialect_round_trip():
    assert VectorizeLanesPass.name == "vectorize-lanes"
    module, _ = vectorize(ROLLED)
    verify_op(parse_mlir(print_mlir(module)))  # the vector forms print and parse back


# -- unroll-loops on the CPU ------------------------------------------------------------------------


def _cpu_function(text: str) -> str:
    return text.replace("-> tensor<64xf32> {", '-> tensor<64xf32> attributes {xla.backend_kind = "cpu"} {', 1)


@pytest.mark.parametrize(("body", "cpu", "rolled"), [
    ("%y = math.exp %x : f32", True, True),
    ("%y = math.exp %x : f32", False, False),  # not a CPU kernel: XLA's unrolling
    (_GATHER, True, False),  # the lanes would not vectorize as a loop
])
def test_cpu_lane_loops_stay_rolled(body: str, cpu: bool, rolled: bool):
    text = LANE_LOOP.format(body=body, position="%i")
    module = parse_mlir(_cpu_function(text) if cpu else text)
    UnrollLoopsPass(max_unrolled_cost=CPU_MAX_UNROLLED_COST).apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    assert bool(loops(module)) == rolled


# -- vectorize-loads-stores: reads through broadcasts, pred tensors -----------------------------------

# A row vector (%row, along the lanes) and a column vector (%column, one element per row) broadcast to a 4x32
# output read 8 lanes at a time: the output's indices come from one apply_indexing, the operands' from others.
BROADCAST_READS = """
#map = #xla.indexing_map<"(d0)[s0] -> (d0 floordiv 4, (d0 mod 4) * 8 + s0), domain: d0 in [0, 15], s0 in [0, 7]">
#row = #xla.indexing_map<"(d0, d1) -> (d1), domain: d0 in [0, 3], d1 in [0, 31]">
#column = #xla.indexing_map<"(d0, d1) -> (d0), domain: d0 in [0, 3], d1 in [0, 31]">
#transposed = #xla.indexing_map<"(d0, d1) -> (d1 * 4 + d0), domain: d0 in [0, 3], d1 in [0, 31]">
#linear = #xla.indexing_map<"(d0, d1) -> (d0 * 32 + d1), domain: d0 in [0, 3], d1 in [0, 31]">
func.func @main(%row: tensor<32xf32>, %column: tensor<4xf32>, %matrix: tensor<128xf32>, %output: tensor<128xf32>)
    -> tensor<128xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 15 : index]}
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%iter = %output) -> (tensor<128xf32>) {
    %dim0, %dim1 = xla.apply_indexing #map(%thread_id_x)[%i]
    %j = xla.apply_indexing #row(%dim0, %dim1)
    %a = tensor.extract %row[%j] : tensor<32xf32>
    %k = xla.apply_indexing #column(%dim0, %dim1)
    %b = tensor.extract %column[%k] : tensor<4xf32>
    %t = xla.apply_indexing #transposed(%dim0, %dim1)
    %c = tensor.extract %matrix[%t] : tensor<128xf32>
    %sum = arith.addf %a, %b : f32
    %y = arith.addf %sum, %c : f32
    %o = xla.apply_indexing #linear(%dim0, %dim1)
    %inserted = tensor.insert %y into %iter[%o] : tensor<128xf32>
    scf.yield %inserted : tensor<128xf32>
  }
  func.return %r : tensor<128xf32>
}
"""

BROADCAST_READS_CHECKS = """
CHECK-DAG:  #[[ROW:.*]] = #xla.indexing_map<"(d0, vector_index) -> ((d0 mod 4) * 8 + vector_index)
CHECK-DAG:  #[[COLUMN:.*]] = #xla.indexing_map<"(d0) -> (d0 floordiv 4)
CHECK:      %[[ROW_BASE:.*]] = xla.apply_indexing #[[ROW]](%thread_id_x, %c0)
CHECK-NEXT: %[[PAD:.*]] = arith.constant 0.000000e+00 : f32
CHECK-NEXT: %[[ROW_READ:.*]] = vector.transfer_read %row[%[[ROW_BASE]]], %[[PAD]] {in_bounds = [true]}
CHECK-SAME: : tensor<32xf32>, vector<8xf32>
CHECK-NEXT: %[[K:.*]] = xla.apply_indexing #[[COLUMN]](%thread_id_x)
CHECK-NEXT: %[[B:.*]] = tensor.extract %column[%[[K]]] : tensor<4xf32>
CHECK:      scf.for %i = %c0 to %c8 step %c1
CHECK:      %[[A:.*]] = vector.extract %[[ROW_READ]][%i] : f32 from vector<8xf32>
CHECK-NEXT: %[[T:.*]] = xla.apply_indexing #{{.*}}(%dim0, %dim1)
CHECK-NEXT: %[[C:.*]] = tensor.extract %matrix[%[[T]]] : tensor<128xf32>
CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[A]], %[[B]] : f32
CHECK-NEXT: %[[Y:.*]] = arith.addf %[[SUM]], %[[C]] : f32
CHECK-NEXT: vector.insert %[[Y]], %iter_vector [%i] : f32 into vector<8xf32>
CHECK:      vector.transfer_write %{{.*}}, %output[%[[BASE:.*]]] {in_bounds = [true]} : vector<8xf32>, tensor<128xf32>
"""


def test_reads_through_broadcasts(tmp_path: Path):
    """The row vector's lanes are consecutive elements (a vector read), the column vector's lanes one element
    (read once, before the loop); the transposed read is a gather and stays in the loop."""
    module = parse_mlir(BROADCAST_READS)
    VectorizeLoadsStoresPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    filecheck(print_mlir(module, map_aliases=True), BROADCAST_READS_CHECKS, tmp_path)
    assert not lanes_vectorizable(module)  # the gather
    without_gather = parse_mlir(BROADCAST_READS.replace("%c = tensor.extract %matrix[%t] : tensor<128xf32>",
                                                        "%c = arith.constant 1.0 : f32"))
    VectorizeLoadsStoresPass().apply(None, without_gather)  # type: ignore[arg-type]
    assert lanes_vectorizable(without_gather)


def test_misaligned_row_reads_stay_in_the_loop():
    """With 8 lanes over rows of 12 elements a vector would straddle two rows: no vector read, no hoisting."""
    text = (BROADCAST_READS.replace("(d0 floordiv 4, (d0 mod 4) * 8 + s0)", "((d0 * 8 + s0) floordiv 12, (d0 * 8 + "
                                    "s0) mod 12)").replace("domain: d0 in [0, 15], s0", "domain: d0 in [0, 5], s0")
            .replace("d1 in [0, 31]", "d1 in [0, 11]").replace("tensor<32xf32>", "tensor<12xf32>")
            .replace("d0 * 32 + d1", "d0 * 12 + d1").replace("d1 * 4 + d0", "d0 * 12 + d1")
            .replace("tensor<128xf32>", "tensor<48xf32>").replace("[0 : index, 15 : index]", "[0 : index, 5 : index]"))
    module = parse_mlir(text)
    VectorizeLoadsStoresPass().apply(None, module)  # type: ignore[arg-type]
    reads = [op for op in module.walk() if op.name == "vector.transfer_read"]
    extracts = [op for op in module.walk() if op.name == "tensor.extract"]
    assert [str(op.operands[0].type) for op in reads] == ["tensor<48xf32>"]  # only the matrix, read linearly
    assert all(isinstance(op.parent_op(), scf.ForOp) for op in extracts) and len(extracts) == 2


def test_pred_tensors_are_read_and_written_as_vectors(tmp_path: Path):
    """pred (i1) vectors: lower-tensors loads and stores them as bytes."""
    text = """
    #map = #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 15], s0 in [0, 3]">
    func.func @f(%t: tensor<64xi1>, %out: tensor<64xi1>, %d: index) -> tensor<64xi1> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%iter = %out) -> (tensor<64xi1>) {
        %i = xla.apply_indexing #map(%d)[%s]
        %x = tensor.extract %t[%i] : tensor<64xi1>
        %y = tensor.insert %x into %iter[%i] : tensor<64xi1>
        scf.yield %y : tensor<64xi1>
      }
      func.return %r : tensor<64xi1>
    }
    """
    module = parse_mlir(text)
    VectorizeLoadsStoresPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    filecheck(print_mlir(module), """
CHECK: %[[READ:.*]] = vector.transfer_read %t[%{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<64xi1>, vector<4xi1>
CHECK: vector.extract %[[READ]][%s] : i1 from vector<4xi1>
CHECK: vector.insert %{{.*}}, %iter_vector [%s] : i1 into vector<4xi1>
CHECK: vector.transfer_write %{{.*}}, %out[%{{.*}}] {in_bounds = [true]} : vector<4xi1>, tensor<64xi1>
""", tmp_path)


# -- the CPU pipeline -----------------------------------------------------------------------------------


def _stages(dumps: Path) -> dict[str, str]:
    return {re.sub(r"^.*\.\d\d\.", "", p.stem): p.read_text() for p in sorted(dumps.glob("*.mlir"))}


def test_cpu_dump_of_gelu_shows_vectors(tmp_path: Path):
    """`--dump-to` on the CPU: gelu's lanes are read and written as vectors, the loop over them stays rolled (one
    scalar tanh) and becomes SIMD vector ops (tanh included) in vectorize-lanes."""
    dumps = tmp_path / "dumps"
    module = xlapy.parse_hlo(GELU.read_text())
    xlapy.compile(module, backend="cpu", dump_to=str(dumps))
    stages = _stages(dumps)
    names = [re.sub(r"^.*\.\d\d\.", "", p.stem) for p in sorted(dumps.glob("*.mlir"))]
    cpu_order = ["fusion-emitter", "vectorize-loads-stores", "unroll-loops", "lower-apply-indexing", "canonicalize",
                 "vectorize-lanes", "lower-tensors"]
    assert [n for n in names if n in cpu_order] == cpu_order
    lanes = Device.host().vector_bytes // 4 * vector_registers(module.entry.root)
    assert 'attributes {xla.backend_kind = "cpu"' in stages["fusion-emitter"]
    filecheck(stages["vectorize-loads-stores"], f"""
CHECK: vector.transfer_read %input[%{{{{.*}}}}], %{{{{.*}}}} {{in_bounds = [true]}}
CHECK-SAME: : tensor<12582912xbf16>, vector<{lanes}xbf16>
CHECK: scf.for %vector_index = %c0 to %c{lanes} step %c1
CHECK: vector.extract
CHECK: vector.insert
CHECK: vector.transfer_write
""", tmp_path)
    rolled = stages["unroll-loops"]
    assert "scf.for" in rolled and rolled.count("math.tanh") == 1
    filecheck(stages["vectorize-lanes"], f"""
CHECK:     %[[X:.*]] = vector.transfer_read %input
CHECK:     math.tanh %{{{{.*}}}} : vector<{lanes}xbf16>
CHECK:     vector.transfer_write
CHECK-NOT: vector.extract
CHECK-NOT: scf.for
""", tmp_path)
    assert "vector<" in stages["lower-tensors"]


def test_gpu_pipeline_is_unchanged():
    """The GPU lowers gelu with XLA's passes and 4 elements per thread: no vectorize-lanes, lanes unrolled."""
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
            cases.append(pytest.param(case, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason else case)
    return cases


@pytest.mark.parametrize("case", _vector_variant_cases(), ids=lambda c: c.name)
def test_vectorized_fusions_match_interpreter(case: Case):
    check_against_interpreter(case)


def _lowered(name: str, shape: tuple[str, str] | None = None):
    text = (CORPUS / f"{name}.hlo").read_text()
    if shape is not None:
        text = text.replace(*shape)
    module = xlapy.parse_hlo(text)
    return lower_fusion(next(i for i in module.entry.instructions if i.opcode == "fusion"), Device.host())


@pytest.mark.parametrize(("name", "shape"), [
    ("float_transcendental_f32", ("11,17", "16,24")),
    ("float_transcendental_bf16", ("11,17", "16,24")),
    ("integer_arithmetic", None),
    # reads through broadcasts: rows and columns
    ("broadcast_scalar_vector", None),
    ("large_256x1024", None),
    ("bias_add_row_f32", None),
    ("bias_add_row_bf16", None),
    # pred and sub-byte outputs
    ("compare_pred_output", None),
    ("sub_byte_one_bit", None),
    ("f8e4m3fn_arithmetic", None),
])
def test_elementwise_fusions_are_vectorized(name: str, shape: tuple[str, str] | None):
    lowered = _lowered(name, shape)
    assert lowered.launch.vector_size > 1
    assert not any(isinstance(op, (vector.ExtractOp, scf.ForOp)) for op in lowered.module.walk())


def test_vectors_of_a_broadcasting_fusion_stay_in_rows():
    """broadcast_scalar_vector writes rows of 96: 32 lanes (not the 64 of four registers), so that each vector
    reads one element of the column operand and consecutive elements of the row operand."""
    lowered = _lowered("broadcast_scalar_vector")
    assert lowered.launch.vector_size == 32
    reads = sorted(str(op.results[0].type) for op in lowered.module.walk() if op.name == "llvm.load")
    assert reads == ["f32", "f32", "vector<32xf32>", "vector<32xf32>"]  # scalar, column; row, matrix


# (transpose_2d_add, which also fell back, now goes to the transpose emitter: test_transpose_emitter.py.)
@pytest.mark.parametrize("name", ["gather_canonical", "pad_edges_constant", "concatenate_three"])
def test_gathers_and_control_flow_fall_back_to_one_element_per_thread(name: str):
    assert _lowered(name).launch.vector_size == 1


@pytest.mark.parametrize("element_type", ["bf16", "f32"])
def test_gelu_vector_width(element_type: str):
    """gelu computes one result with one transcendental function: its vectors cover several SIMD registers, and
    its lowering holds one tanh (on the vector), not one per lane."""
    module = xlapy.parse_hlo(gelu_text(element_type, "6,16,4096"))
    lowered = lower_fusion(module.entry.root, Device.host())
    simd_lanes = Device.host().vector_bytes // 4
    assert lowered.launch.vector_size == simd_lanes * vector_registers(module.entry.root)
    assert lowered.launch.threads_per_block * lowered.launch.vector_size == 1024
    assert sum(op.name == "math.tanh" for op in lowered.module.walk()) == 1
