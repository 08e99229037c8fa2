# ruff: noqa: E501  (the IR lines of XLA's docs/emitters.md are longer than the code's limit)
"""XLA's docs/emitters.md: its partitioning, indexing and MLIR conversion
examples and the checks derived from them (see docs/emitters.md).

The pass pipeline on gelu, stage by stage, is in tests/xla_doc_examples/test_pipeline.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import xlapy
from xlapy.codegen.emitters.loop import emit_loop_fusion
from xlapy.codegen.launch import Device, loop_launch_dimensions, thread_id_to_output_map
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.codegen.partitioner import partition
from xlapy.indexing import IndexingMap
from xlapy.indexing.ops import op_output_to_input

GELU = (Path(__file__).parents[2] / "examples" / "gelu.hlo").read_text()


def _gelu_fusion():
    module = xlapy.parse_hlo(GELU)
    return next(i for i in module.entry.instructions if i.opcode == "fusion")


def test_log_transpose_add_is_three_functions_of_one_instruction():
    module = xlapy.parse_hlo("""HloModule m
f {
  param = f32[20,20] parameter(0)
  log = f32[20,20] log(param)
  transpose = f32[20,20] transpose(log), dimensions={1,0}
  ROOT add = f32[20,20] add(log, transpose)
}
ENTRY e {
  p = f32[20,20] parameter(0)
  ROOT r = f32[20,20] fusion(p), kind=kLoop, calls=f
}""")
    subgraphs = partition(module.computation("f")).subgraphs
    assert [[i.name for i in s.instructions] for s in subgraphs] == [["add"], ["transpose"], ["log"]]


def test_transpose_reads_its_operand_through_the_output_to_input_map():
    module = xlapy.parse_hlo("""HloModule m
ENTRY e {
  p = f32[20,40] parameter(0)
  ROOT t = f32[40,20] transpose(p), dimensions={1,0}
}""")
    (transpose_map,) = op_output_to_input(module.entry.root)[0]
    assert [str(r) for r in transpose_map.results] == ["d1", "d0"]


def test_gelu_launch_dimensions_and_thread_map():
    fusion = _gelu_fusion()
    launch = loop_launch_dimensions(fusion.shape, Device.gpu())
    assert (launch.threads_per_block, launch.blocks, launch.vector_size) == (128, 24576, 4)
    assert launch.threads_per_block * launch.vector_size * launch.blocks == 6 * 512 * 4096 == 12582912
    expected = IndexingMap.parse(
        "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
        "(bl_x mod 8) * 512 + th_x * 4 + vector_index), "
        "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]")
    assert thread_id_to_output_map(launch, fusion.shape) == expected


def test_gelu_thread_map_is_the_row_major_linear_index():
    """Derived check: the map's row-major linear index is 512·bl_x + 4·th_x + vector_index."""
    fusion = _gelu_fusion()
    indexing_map = thread_id_to_output_map(loop_launch_dimensions(fusion.shape, Device.gpu()), fusion.shape)
    rng = np.random.default_rng(0)
    for th, bl, v in zip(rng.integers(0, 128, 200), rng.integers(0, 24576, 200), rng.integers(0, 4, 200)):
        d0, d1, d2 = indexing_map.evaluate((int(th), int(bl)), (int(v),))
        assert (d0 * 512 + d1) * 4096 + d2 == 512 * bl + 4 * th + v


def _normalized(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


def test_gelu_ir_after_mlir_conversion():
    module, _ = emit_loop_fusion(_gelu_fusion(), Device.gpu())
    text = print_mlir(module, map_aliases=True)
    lines = _normalized(text)
    assert lines[0].startswith('#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, '
                               '(bl_x floordiv 8) mod 512, ')
    assert lines[0].endswith('domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">')
    body = "\n".join(lines[1:])
    assert """func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>) -> tensor<6x512x4096xbf16> {
%thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
%block_id_x = gpu.block_id x {xla.range = [0 : index, 24575 : index]}
%xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2) in #map iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
%pure_call = xla.pure_call @gelu(%input, %dim0, %dim1, %dim2) : (tensor<6x512x4096xbf16>, index, index, index) -> bf16
%inserted = tensor.insert %pure_call into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
xla.yield %inserted : tensor<6x512x4096xbf16>
}
func.return %xla_loop : tensor<6x512x4096xbf16>
}""" in body
    gelu = body[body.index("func.func private @gelu"):]
    assert _normalized(gelu) == _normalized("""func.func private @gelu(%param: tensor<6x512x4096xbf16>, %i0: index, %i1: index, %i2: index) -> bf16 {
%0 = arith.constant 5.000000e-01 : bf16
%1 = arith.constant 1.000000e+00 : bf16
%2 = arith.constant 7.968750e-01 : bf16
%3 = arith.constant 4.467770e-02 : bf16
%4 = tensor.extract %param[%i0, %i1, %i2] : tensor<6x512x4096xbf16>
%5 = arith.mulf %4, %4 : bf16
%6 = arith.mulf %5, %4 : bf16
%7 = arith.mulf %6, %3 : bf16
%8 = arith.addf %4, %7 : bf16
%9 = arith.mulf %8, %2 : bf16
%10 = math.tanh %9 : bf16
%11 = arith.addf %10, %1 : bf16
%12 = arith.mulf %11, %0 : bf16
%13 = arith.mulf %4, %12 : bf16
func.return %13 : bf16
}
}""")
    # The dump reads back as the same module.
    assert print_mlir(parse_mlir(text), map_aliases=True) == text


def test_gelu_bf16_constants_are_rounded_hlo_constants():
    """Derived check: 0.79785 → 0.796875 and 0.044708 → 0.044677734375 in bf16."""
    import ml_dtypes

    assert float(np.float32(0.79785).astype(ml_dtypes.bfloat16)) == 0.796875
    assert float(np.float32(0.044708).astype(ml_dtypes.bfloat16)) == 0.044677734375
    assert math.isclose(0.044677734375, 4.467770e-02, rel_tol=1e-6)
