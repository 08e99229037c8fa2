"""The pass pipeline on the gelu fusion, stage by stage, as XLA's
docs/emitters.md shows it (its "Compilation pipeline" section; see
docs/emitters.md).

The module is emitted with XLA:GPU's launch configuration (128 threads, 4
elements a thread), as in XLA's dumps; every stage is written by the
pipeline's dumper and checked for the structure of XLA's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import xlapy
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import Dumper, lower_fusion
from xlapy.indexing import IndexingMap

GELU = (Path(__file__).parents[2] / "examples" / "gelu.hlo").read_text()


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("dumps")
    module = xlapy.parse_hlo(GELU)
    fusion = next(i for i in module.entry.instructions if i.opcode == "fusion")
    lower_fusion(fusion, Device.gpu(), Dumper.create(directory, None))
    files = sorted(directory.iterdir())
    assert [f.name.split(".")[1] for f in files] == [f"{i:02d}" for i in range(len(files))]
    return {f.name.split(".")[2]: f.read_text() for f in files}


def _ops(text: str) -> list[str]:
    """The op names of a dump, in order."""
    return re.findall(r"(?:=|^)\s*([a-z_]+\.[a-z_.]+)", text, re.MULTILINE)


def test_inliner_leaves_one_function_with_the_body_in_the_loop(stages):
    text = stages["inline"]
    assert text.count("func.func") == 1 and "xla.pure_call" not in text
    loop = text[text.index("xla.loop") + len("xla.loop"):]
    assert [op for op in _ops(loop) if op != "arith.constant"][:12] == [
        "tensor.extract", "arith.mulf", "arith.mulf", "arith.mulf", "arith.addf", "arith.mulf", "math.tanh",
        "arith.addf", "arith.mulf", "arith.mulf", "tensor.insert", "xla.yield"]


def test_a_function_called_twice_is_not_inlined():
    module = xlapy.parse_hlo("""HloModule m
f {
  p = f32[16,16] parameter(0)
  log = f32[16,16] log(p)
  t = f32[16,16] transpose(log), dimensions={1,0}
  ROOT add = f32[16,16] add(log, t)
}
ENTRY e {
  p = f32[16,16] parameter(0)
  ROOT r = f32[16,16] fusion(p), kind=kLoop, calls=f
}""")
    from xlapy.codegen.emitters.loop import emit_loop_fusion
    from xlapy.codegen.mlir_text import make_context, print_mlir
    from xlapy.codegen.passes.inline import InlinePass

    emitted, _ = emit_loop_fusion(module.entry.root, Device.gpu())
    InlinePass().apply(make_context(), emitted)
    text = print_mlir(emitted)
    # @f_log is called by @f (directly) and by @f_t: it stays; the others are inlined.
    assert re.findall(r"func\.func (?:private )?@(\w+)", text) == ["main", "f_log"]
    assert text.count("xla.pure_call @f_log") == 2


def test_loop_becomes_scf_for_with_the_bounds_check(stages):
    text = stages["lower-xla-loops-to-scf"]
    assert "xla.loop" not in text
    assert re.search(r"scf\.for %vector_index = %\w+ to %\w+ step %\w+ iter_args\(%\w+ = %output\)", text)
    for check in ("arith.cmpi sge, %thread_id_x", "arith.cmpi sle, %thread_id_x", "arith.cmpi sge, %block_id_x",
                  "arith.cmpi sle, %block_id_x", "scf.if %inbounds -> (tensor<6x512x4096xbf16>)", "} else {"):
        assert check in text
    assert "%dim0, %dim1, %dim2 = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%vector_index]" in text


def test_tensors_are_flattened_with_the_linear_map(stages):
    text = stages["flatten-tensors"]
    assert "6x512x4096" not in text and "tensor<12582912xbf16>" in text
    assert "scf.if" not in text  # the thread and block ranges decide the check (simplify-arith)
    line = text.splitlines()[0]
    found = IndexingMap.parse(line[line.index('"') + 1:line.rindex('"')])
    expected = IndexingMap.parse("(th_x, bl_x, vector_index) -> (th_x * 4 + bl_x * 512 + vector_index), "
                                 "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]")
    assert found == expected  # also printed as XLA's document prints it
    assert line.startswith('#map = #xla.indexing_map<"(th_x, bl_x, vector_index) -> '
                           '(th_x * 4 + bl_x * 512 + vector_index)')
    assert "tensor.extract %input[%" in text and "] : tensor<12582912xbf16>" in text


def test_loads_and_stores_are_vectorized_around_the_loop(stages):
    text = stages["vectorize-loads-stores"]
    read = text.index("vector.transfer_read %input[")
    loop = text.index("scf.for %vector_index")
    write = text.index("vector.transfer_write")
    assert read < loop < write
    assert "{in_bounds = [true]} : tensor<12582912xbf16>, vector<4xbf16>" in text
    assert "vector.extract" in text[loop:write] and "vector.insert" in text[loop:write]
    assert "tensor.extract" not in text and "tensor.insert" not in text
    assert "arith.constant dense<0.000000e+00> : vector<4xbf16>" in text


def test_the_vector_loop_is_unrolled(stages):
    text = stages["unroll-loops"]
    assert "scf.for" not in text
    assert text.count("math.tanh") == 4
    assert text.count("vector.extract") == 4 and text.count("vector.insert") == 4


def test_tensors_become_loads_and_stores_through_pointers(stages):
    text = stages["lower-tensors"]
    assert "func.func @main(%input: !llvm.ptr" in text and "%output: !llvm.ptr" in text
    assert "tensor<" not in text
    assert re.search(r"llvm\.getelementptr inbounds %input\[%\w+\] : \(!llvm\.ptr, i64\) -> !llvm\.ptr, bf16", text)
    assert re.search(r"llvm\.load %\w+ \{invariant, alignment = 2 : i64\} : !llvm\.ptr -> vector<4xbf16>", text)
    assert "llvm.store" in text
