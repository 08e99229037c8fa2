"""unroll-loops: the gelu IR of XLA's docs/emitters.md from its vectorized stage to its unrolled
stage, checked with FileCheck; nested loops,
bounds, trip counts and the size limits; and the values computed before and
after unrolling compared with xDSL's interpreter (arith/scf/func)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions

from tests.codegen.filecheck import filecheck
from xlapy.codegen import mlir_dialects
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.codegen.passes.unroll_loops import MAX_TRIP_COUNT, UnrollLoopsPass


def unroll(text: str) -> ModuleOp:
    module = parse_mlir(text)
    UnrollLoopsPass().apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    return module


def loops(module: ModuleOp) -> list[scf.ForOp]:
    return [op for op in module.walk() if isinstance(op, scf.ForOp)]


@register_impls
class _ArithFunctions(ArithFunctions):
    """xDSL's interpretation of arith, also for the arith ops parsed as xlapy's classes (xDSL's interpreter looks
    an op up by its exact class)."""

    @impl(mlir_dialects.CmpiOp)
    def run_vector_cmpi(self, interpreter, op, args):
        return self.run_cmpi(interpreter, op, args).values

    @impl(mlir_dialects.CmpfOp)
    def run_vector_cmpf(self, interpreter, op, args):
        return self.run_cmpf(interpreter, op, args).values

    @impl(mlir_dialects.SelectOp)
    def run_vector_select(self, interpreter, op, args):
        return self.run_select(interpreter, op, args).values

    @impl(mlir_dialects.IndexCastOp)
    def run_vector_index_cast(self, interpreter, op, args):
        return self.run_indexcast(interpreter, op, args).values


def run(module: ModuleOp, function: str, *args: int) -> tuple:
    interpreter = Interpreter(module)
    for functions in (_ArithFunctions(), ScfFunctions(), FuncFunctions()):
        interpreter.register_implementations(functions)
    return interpreter.call_op(function, args)


GELU_MAP = (
    '#map = #xla.indexing_map<"(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index),'
    ' domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">'
)

# The document's vectorized gelu made complete (constants and thread ids spelled out).
GELU_VECTORIZED = f"""
{GELU_MAP}
func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 0.000000e+00 : bf16
  %cst_1 = arith.constant 5.000000e-01 : bf16
  %cst_2 = arith.constant 1.000000e+00 : bf16
  %cst_3 = arith.constant 7.968750e-01 : bf16
  %cst_4 = arith.constant 4.467770e-02 : bf16
  %thread_id_x = gpu.thread_id x {{xla.range = [0 : index, 127 : index]}}
  %block_id_x = gpu.block_id x {{xla.range = [0 : index, 24575 : index]}}
  %vector_0 = arith.constant dense<0.000000e+00> : vector<4xbf16>
  %0 = xla.apply_indexing #map(%thread_id_x, %block_id_x, %c0)
  %2 = vector.transfer_read %input[%0], %cst {{in_bounds = [true]}} : tensor<12582912xbf16>, vector<4xbf16>
  %xla_loop:2 = scf.for %vector_index = %c0 to %c4 step %c1
      iter_args(%iter = %output, %iter_vector = %vector_0) -> (tensor<12582912xbf16>, vector<4xbf16>) {{
    %5 = vector.extract %2[%vector_index] : bf16 from vector<4xbf16>
    %6 = arith.mulf %5, %5 : bf16
    %7 = arith.mulf %6, %5 : bf16
    %8 = arith.mulf %7, %cst_4 : bf16
    %9 = arith.addf %5, %8 : bf16
    %10 = arith.mulf %9, %cst_3 : bf16
    %11 = math.tanh %10 : bf16
    %12 = arith.addf %11, %cst_2 : bf16
    %13 = arith.mulf %12, %cst_1 : bf16
    %14 = arith.mulf %5, %13 : bf16
    %15 = vector.insert %14, %iter_vector [%vector_index] : bf16 into vector<4xbf16>
    scf.yield %iter, %15 : tensor<12582912xbf16>, vector<4xbf16>
  }}
  %4 = vector.transfer_write %xla_loop#1, %output[%0] {{in_bounds = [true]}}
      : vector<4xbf16>, tensor<12582912xbf16>
  func.return %4 : tensor<12582912xbf16>
}}
"""


def _iteration_checks(i: int, previous: str) -> str:
    return f"""
CHECK: %[[X{i}:.*]] = vector.extract %[[READ]][%[[C{i}]]] : bf16 from vector<4xbf16>
CHECK-NEXT: arith.mulf %[[X{i}]], %[[X{i}]] : bf16
CHECK-COUNT-4: arith.
CHECK-NEXT: math.tanh
CHECK-COUNT-3: arith.
CHECK-NEXT: %[[V{i}:.*]] = vector.insert %{{{{.*}}}}, {previous} [%[[C{i}]]] : bf16 into vector<4xbf16>
"""


GELU_UNROLLED_CHECKS = (
    """
CHECK: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xbf16>
CHECK-NEXT: %[[BASE:.*]] = xla.apply_indexing #map(%thread_id_x, %block_id_x, %[[C0]])
CHECK-NEXT: %[[READ:.*]] = vector.transfer_read %input[%[[BASE]]]
CHECK-NOT: scf.for
"""
    + _iteration_checks(0, "%[[ZERO]]")
    + _iteration_checks(1, "%[[V0]]")
    + "CHECK: %[[C2:.*]] = arith.constant 2 : index\n"
    + _iteration_checks(2, "%[[V1]]")
    + "CHECK: %[[C3:.*]] = arith.constant 3 : index\n"
    + _iteration_checks(3, "%[[V2]]")
    + """
CHECK-NEXT: %[[W:.*]] = vector.transfer_write %[[V3]], %output[%[[BASE]]] {in_bounds = [true]}
CHECK-NEXT: func.return %[[W]] : tensor<12582912xbf16>
CHECK-NOT: scf.
"""
)


def test_vectorized_gelu_is_unrolled(tmp_path: Path) -> None:
    module = unroll(GELU_VECTORIZED)
    text = print_mlir(module, map_aliases=True)
    filecheck(text, GELU_UNROLLED_CHECKS, tmp_path)
    assert loops(module) == []
    assert text.count("math.tanh") == 4


NESTED = """
func.func @f(%x: i64) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%a = %x) -> (i64) {
    %s = scf.for %j = %c0 to %c3 step %c1 iter_args(%b = %a) -> (i64) {
      %k = arith.muli %i, %c3 : index
      %l = arith.addi %k, %j : index
      %li = arith.index_cast %l : index to i64
      %m = arith.muli %b, %li : i64
      %n = arith.addi %m, %li : i64
      scf.yield %n : i64
    }
    %t = arith.addi %s, %x : i64
    scf.yield %t : i64
  }
  func.return %r : i64
}
"""


def test_nested_loops_are_unrolled_innermost_first() -> None:
    before = parse_mlir(NESTED)
    module = unroll(NESTED)
    assert loops(module) == []
    text = print_mlir(module)
    # 2 outer × 3 inner copies of the inner body, and 2 copies of the outer addition.
    assert text.count("arith.index_cast") == 6
    assert text.count("arith.addi") == 6 * 2 + 2
    # The induction variables are the existing constants where there are some.
    assert text.count("arith.constant") == 4
    for x in (0, 1, 3, -7, 1 << 20):
        assert run(module, "f", x) == run(before, "f", x)


def test_bounds_and_step_other_than_zero_and_one() -> None:
    text = """
    func.func @f(%x: i64) -> i64 {
      %lb = arith.constant 2 : index
      %ub = arith.constant 9 : index
      %step = arith.constant 3 : index
      %r = scf.for %i = %lb to %ub step %step iter_args(%a = %x) -> (i64) {
        %ii = arith.index_cast %i : index to i64
        %b = arith.muli %a, %ii : i64
        %c = arith.addi %b, %ii : i64
        scf.yield %c : i64
      }
      func.return %r : i64
    }
    """
    before = parse_mlir(text)
    module = unroll(text)
    assert loops(module) == []
    printed = print_mlir(module)
    # Iterations 2, 5, 8.
    assert "%c5 = arith.constant 5 : index" in printed and "%c8 = arith.constant 8 : index" in printed
    assert printed.count("arith.index_cast") == 3
    for x in (0, 1, 5):
        assert run(module, "f", x) == run(before, "f", x) == (((x * 2 + 2) * 5 + 5) * 8 + 8,)


def test_loop_without_iterations_is_replaced_by_its_inits() -> None:
    module = unroll(
        """
        func.func @f(%x: i64) -> i64 {
          %c4 = arith.constant 4 : index
          %c1 = arith.constant 1 : index
          %r = scf.for %i = %c4 to %c1 step %c1 iter_args(%a = %x) -> (i64) {
            %b = arith.addi %a, %a : i64
            scf.yield %b : i64
          }
          func.return %r : i64
        }
        """
    )
    assert loops(module) == []
    assert "func.return %x : i64" in print_mlir(module)


def _counting_loop(trip_count: int, body: str = "") -> str:
    return f"""
    func.func @f(%x: f32) -> f32 {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cn = arith.constant {trip_count} : index
      %r = scf.for %i = %c0 to %cn step %c1 iter_args(%a = %x) -> (f32) {{
        %b = arith.addf %a, %x : f32
        {body}
        scf.yield %b : f32
      }}
      func.return %r : f32
    }}
    """


def test_loop_with_100_iterations_is_not_unrolled() -> None:
    text = _counting_loop(100)
    module = unroll(text)
    assert len(loops(module)) == 1
    assert print_mlir(module) == print_mlir(parse_mlir(text))


@pytest.mark.parametrize("trip_count", [1, 2, MAX_TRIP_COUNT])
def test_small_bodies_are_unrolled_up_to_the_trip_count_limit(trip_count: int) -> None:
    module = unroll(_counting_loop(trip_count))
    assert loops(module) == []
    assert print_mlir(module).count("arith.addf") == trip_count


def test_big_bodies_are_not_unrolled() -> None:
    # 64 iterations of a body with two tanh (20 each) is past the 2048 budget; 16 are not.
    body = "%t = math.tanh %b : f32\n%u = math.exp %t : f32"
    assert len(loops(unroll(_counting_loop(64, body)))) == 1
    assert loops(unroll(_counting_loop(16, body))) == []


def test_loop_with_a_loop_that_stays_is_not_unrolled() -> None:
    text = """
    func.func @f(%x: i64, %n: index) -> i64 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%a = %x) -> (i64) {
        %s = scf.for %j = %c0 to %n step %c1 iter_args(%b = %a) -> (i64) {
          %m = arith.addi %b, %b : i64
          scf.yield %m : i64
        }
        scf.yield %s : i64
      }
      func.return %r : i64
    }
    """
    module = unroll(text)
    assert len(loops(module)) == 2


def test_loop_with_dynamic_bounds_is_not_unrolled() -> None:
    text = """
    func.func @f(%x: i64, %n: index) -> i64 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x) -> (i64) {
        %b = arith.addi %a, %a : i64
        scf.yield %b : i64
      }
      func.return %r : i64
    }
    """
    assert len(loops(unroll(text))) == 1


def test_inner_loop_unrolled_inside_outer_loop_that_is_too_long() -> None:
    text = """
    func.func @f(%x: i64) -> i64 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c100 = arith.constant 100 : index
      %r = scf.for %i = %c0 to %c100 step %c1 iter_args(%a = %x) -> (i64) {
        %s = scf.for %j = %c0 to %c2 step %c1 iter_args(%b = %a) -> (i64) {
          %ji = arith.index_cast %j : index to i64
          %m = arith.addi %b, %ji : i64
          scf.yield %m : i64
        }
        scf.yield %s : i64
      }
      func.return %r : i64
    }
    """
    before = parse_mlir(text)
    module = unroll(text)
    (loop,) = loops(module)
    assert loop.ub.name_hint == "c100"
    assert run(module, "f", 5) == run(before, "f", 5) == (105,)


# A full reduction as vectorize-loads-stores leaves it: rows read as vectors, their lanes summed one by one.
ROWS_OF_LANES = """
func.func @f(%x: tensor<4096xf32>, %init: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %cst = arith.constant 0.000000e+00 : f32
  %r = scf.for %row = %c0 to %c64 step %c1 iter_args(%a = %init) -> (f32) {
    %base = arith.muli %row, %c64 : index
    %v = vector.transfer_read %x[%base], %cst {in_bounds = [true]} : tensor<4096xf32>, vector<64xf32>
    %s = scf.for %lane = %c0 to %c64 step %c1 iter_args(%b = %a) -> (f32) {
      %e = vector.extract %v[%lane] : f32 from vector<64xf32>
      %m = arith.addf %b, %e : f32
      scf.yield %m : f32
    }
    scf.yield %s : f32
  }
  func.return %r : f32
}
"""


def test_a_large_budget_unrolls_only_loops_over_vector_lanes() -> None:
    # The lanes' loop is unrolled under the CPU's budget; the loop over rows keeps the default budget, which its
    # 64 copies of 64 lanes exceed.
    module = parse_mlir(ROWS_OF_LANES)
    UnrollLoopsPass(max_unrolled_cost=1 << 20).apply(None, module)  # type: ignore[arg-type]
    verify_op(module)
    (loop,) = loops(module)
    assert loop.body.block.args[0].name_hint == "row"
    assert print_mlir(module).count("vector.extract") == 64
