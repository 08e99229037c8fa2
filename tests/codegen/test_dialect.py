"""The xla dialect: text round trips of IR like the loop and transpose emitter examples of XLA's
docs/emitters.md, attributes
built from IndexingMaps, ops built in Python, and every verifier error."""

import numpy as np
import pytest
from xdsl.dialects import arith, func, gpu, tensor
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IndexType, ModuleOp, TensorType, f32, i1
from xdsl.ir import Block, Region
from xdsl.utils.exceptions import VerifyException

import xlapy
from xlapy.codegen.dialect import (
    AllocateSharedOp,
    ApplyIndexingOp,
    BlockIdOp,
    IndexingMapAttr,
    LayoutAttr,
    LoopOp,
    PureCallOp,
    SyncThreadsOp,
    ThreadIdOp,
    YieldOp,
    get_range,
)
from xlapy.codegen.mlir_text import parse_mlir, print_mlir, verify_op
from xlapy.errors import ParseError, VerifyError
from xlapy.indexing import IndexingMap
from xlapy.shapes import ELEMENT_TYPES

GELU_MAP = (
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index), "
    "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]"
)

# The MLIR conversion of gelu in XLA's docs/emitters.md, with the prefix xla. (the map split over several
# string literals, as in the document).
GELU_AFTER_EMITTER = """
#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ("
 "bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index),"
 "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">

func.func @main(%input: tensor<6x512x4096xbf16> , %output: tensor<6x512x4096xbf16>)
   -> tensor<6x512x4096xbf16> {
 %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
 %block_id_x = gpu.block_id x {xla.range = [0 : index, 24575 : index]}

 %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2)
     in #map iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
   %pure_call = xla.pure_call @gelu(%input, %dim0, %dim1, %dim2)
      : (tensor<6x512x4096xbf16>, index, index, index) -> bf16
   %inserted = tensor.insert %pure_call into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
   xla.yield %inserted : tensor<6x512x4096xbf16>
 }
 return %xla_loop : tensor<6x512x4096xbf16>
}

func.func private @gelu(%arg0: tensor<6x512x4096xbf16>, %i: index, %j: index, %k: index) -> bf16 {
  %cst = arith.constant 5.000000e-01 : bf16
  %cst_0 = arith.constant 1.000000e+00 : bf16
  %cst_1 = arith.constant 7.968750e-01 : bf16
  %cst_2 = arith.constant 4.467770e-02 : bf16
  %extracted = tensor.extract %arg0[%i, %j, %k] : tensor<6x512x4096xbf16>
  %0 = arith.mulf %extracted, %extracted : bf16
  %1 = arith.mulf %0, %extracted : bf16
  %2 = arith.mulf %1, %cst_2 : bf16
  %3 = arith.addf %extracted, %2 : bf16
  %4 = arith.mulf %3, %cst_1 : bf16
  %5 = math.tanh %4 : bf16
  %6 = arith.addf %5, %cst_0 : bf16
  %7 = arith.mulf %6, %cst : bf16
  %8 = arith.mulf %extracted, %7 : bf16
  return %8 : bf16
}
"""

# The shape of the document's transpose emitter IR: shared memory, two loops, sync_threads, apply_indexing and a
# layout.
TRANSPOSE_EMITTER_IR = """
#map = #xla.indexing_map<"(d0, d1)[s0, s1] -> (d0 floordiv 32 + s0 * 4, d1 floordiv 6, (d1 mod 6) * 32 + d0 mod 32,"
  " d0 floordiv 32 + s0 * 4, 0, d0 mod 32), domain: d0 in [0, 127], d1 in [0, 959], s0 in [0, 7], s1 in [0, 0],"
  " (d1 mod 6) * 32 + d0 mod 32 in [0, 169]">
#map1 = #xla.indexing_map<"(d0, d1)[s0, s1] -> (d0 floordiv 32 + s0 * 4, d0 mod 32), domain: d0 in [0, 127],"
  " d1 in [0, 959], s0 in [0, 7], s1 in [0, 0]">
func.func @transpose(%arg0: tensor<20x160x170xf32>, %arg1: tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>>)
    -> tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>> {
  %thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}
  %block_id_x = gpu.block_id x {xla.range = [0 : index, 959 : index]}
  %shmem = xla.allocate_shared : tensor<32x1x33xf32>
  %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%i, %j]
      -> (%input_dim0, %input_dim1, %input_dim2, %shmem_dim0, %shmem_dim1, %shmem_dim2)
      in #map iter_args(%iter = %shmem) -> (tensor<32x1x33xf32>) {
    %extracted = tensor.extract %arg0[%input_dim0, %input_dim1, %input_dim2] : tensor<20x160x170xf32>
    %0 = math.exp %extracted : f32
    %inserted = tensor.insert %0 into %iter[%shmem_dim0, %shmem_dim1, %shmem_dim2] : tensor<32x1x33xf32>
    xla.yield %inserted : tensor<32x1x33xf32>
  }
  %synced_tensor = xla.sync_threads %xla_loop : tensor<32x1x33xf32>
  %xla_loop_0 = xla.loop (%thread_id_x, %block_id_x)[%i, %j] -> (%dim0, %dim1)
      in #map1 iter_args(%iter = %arg1) -> (tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>>) {
    %c0 = arith.constant 0 : index
    %a, %b = xla.apply_indexing #map1(%thread_id_x, %block_id_x)[%i, %j]
    %extracted = tensor.extract %synced_tensor[%a, %c0, %b] : tensor<32x1x33xf32>
    %2 = math.absf %extracted : f32
    %inserted = tensor.insert %2 into %iter[%b, %c0, %a] : tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>>
    xla.yield %inserted : tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>>
  }
  return %xla_loop_0 : tensor<170x160x20xf32, #xla.layout<[2, 1, 0]>>
}
"""


@pytest.mark.parametrize("text", [GELU_AFTER_EMITTER, TRANSPOSE_EMITTER_IR], ids=["gelu", "transpose"])
@pytest.mark.parametrize("aliases", [False, True])
def test_round_trip(text: str, aliases: bool) -> None:
    printed = print_mlir(parse_mlir(text), map_aliases=aliases)
    assert print_mlir(parse_mlir(printed), map_aliases=aliases) == printed


def test_gelu_prints_like_xlas_docs() -> None:
    printed = print_mlir(parse_mlir(GELU_AFTER_EMITTER), map_aliases=True)
    lines = [line.strip() for line in printed.splitlines()]
    assert lines[0] == f'#map = #xla.indexing_map<"{GELU_MAP}">'
    assert "%thread_id_x = gpu.thread_id x {xla.range = [0 : index, 127 : index]}" in lines
    assert "%block_id_x = gpu.block_id x {xla.range = [0 : index, 24575 : index]}" in lines
    assert (
        "%xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2) in #map "
        "iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {"
    ) in lines
    assert (
        "%pure_call = xla.pure_call @gelu(%input, %dim0, %dim1, %dim2) "
        ": (tensor<6x512x4096xbf16>, index, index, index) -> bf16"
    ) in lines
    assert "xla.yield %inserted : tensor<6x512x4096xbf16>" in lines


def test_parsed_objects() -> None:
    module = parse_mlir(GELU_AFTER_EMITTER)
    main = module.body.block.first_op
    assert isinstance(main, func.FuncOp)
    ops = list(main.body.block.ops)
    assert isinstance(ops[0], gpu.ThreadIdOp) and isinstance(ops[1], gpu.BlockIdOp)
    assert get_range(ops[0]) == (0, 127) and get_range(ops[1]) == (0, 24575)
    loop = ops[2]
    assert isinstance(loop, LoopOp)
    assert loop.indexing_map == IndexingMap.parse(GELU_MAP)
    assert [a.name_hint for a in loop.symbol_args] == ["vector_index"]
    assert [a.name_hint for a in loop.index_args] == ["dim0", "dim1", "dim2"]
    assert [a.name_hint for a in loop.iter_args] == ["iter"]
    assert list(loop.dims) == [ops[0].result, ops[1].result]
    assert list(loop.inits) == [main.body.block.args[1]]


def test_indexing_map_attr_from_map() -> None:
    indexing_map = IndexingMap.parse(GELU_MAP)
    attr = IndexingMapAttr(indexing_map)
    assert attr.indexing_map == indexing_map
    module = ModuleOp([])
    module.attributes["m"] = attr
    assert print_mlir(module).strip() == f'builtin.module attributes {{m = #xla.indexing_map<"{GELU_MAP}">}} {{\n}}'
    # The same map spelled differently parses to an equal attribute.
    spaced = GELU_MAP.replace(", domain", ",   domain").replace("[0, 3]", "[0,3]")
    reparsed = parse_mlir(f'builtin.module attributes {{m = #xla.indexing_map<"{spaced}">}} {{}}')
    assert reparsed.attributes["m"] == attr


def test_layout_attr() -> None:
    layout = LayoutAttr([0, 1])
    assert layout.minor_to_major == (0, 1)
    tensor_type = TensorType(f32, [2, 3], layout)
    module = ModuleOp([AllocateSharedOp(tensor_type)])
    printed = print_mlir(module)
    assert "xla.allocate_shared : tensor<2x3xf32, #xla.layout<[0, 1]>>" in printed
    shared = parse_mlir(printed).body.block.first_op
    assert isinstance(shared, AllocateSharedOp) and shared.result.type == tensor_type
    with pytest.raises(VerifyException, match="not a permutation"):
        LayoutAttr([0, 0])
    with pytest.raises(VerifyError, match="not a permutation"):
        parse_mlir("%s = xla.allocate_shared : tensor<2x3xf32, #xla.layout<[1, 1]>>")


def _index_args(count: int) -> Block:
    return Block(arg_types=[IndexType()] * count)


def test_build_loop_in_python() -> None:
    tensor_type = TensorType(f32, [4, 8])
    indexing_map = IndexingMap.parse("(d0)[s0] -> (d0, s0 * 2), domain: d0 in [0, 3], s0 in [0, 3]")
    block = Block(arg_types=[IndexType(), tensor_type])
    thread = ThreadIdOp("x", 3)
    loop = LoopOp([thread.result], indexing_map, [block.args[1]])
    body = loop.body.block
    value = arith.ConstantOp(FloatAttr(1.0, f32))
    insert = tensor.InsertOp(value.result, loop.iter_args[0], list(loop.index_args))
    body.add_ops([value, insert, YieldOp([insert.result])])
    block.add_ops([thread, loop, func.ReturnOp(loop.outs[0])])
    function = func.FuncOp("f", ([IndexType(), tensor_type], [tensor_type]), Region(block))
    module = ModuleOp([function])
    verify_op(module)
    printed = print_mlir(module)
    assert "gpu.thread_id x {xla.range = [0 : index, 3 : index]}" in printed
    assert (
        '%3 = xla.loop (%2)[%4] -> (%dim0, %dim1) in #xla.indexing_map<"(d0)[s0] -> (d0, s0 * 2), '
        'domain: d0 in [0, 3], s0 in [0, 3]"> iter_args(%iter = %1) -> (tensor<4x8xf32>) {'
    ) in printed
    assert print_mlir(parse_mlir(printed)) == printed


def test_build_other_ops() -> None:
    block = _index_args(2)
    indexing_map = IndexingMap.parse("(d0)[s0] -> (d0 + s0, d0 * 2), domain: d0 in [0, 3], s0 in [0, 1]")
    apply = ApplyIndexingOp([block.args[0]], [block.args[1]], indexing_map)
    shared = AllocateSharedOp(TensorType(f32, [2, 2]))
    sync = SyncThreadsOp([shared.result])
    callee = func.FuncOp("g", ([IndexType()], [IndexType()]), Region(_index_args(1)))
    callee.body.block.add_op(func.ReturnOp(callee.body.block.args[0]))
    call = PureCallOp("g", [apply.indices[0]], [IndexType()])
    block.add_ops([apply, shared, sync, call, func.ReturnOp()])
    module = ModuleOp([func.FuncOp("f", ([IndexType()] * 2, []), Region(block)), callee])
    verify_op(module)
    printed = print_mlir(module)
    assert (
        '%2, %3 = xla.apply_indexing #xla.indexing_map<"(d0)[s0] -> (d0 + s0, d0 * 2), '
        'domain: d0 in [0, 3], s0 in [0, 1]">(%0)[%1]'
    ) in printed
    assert "%4 = xla.allocate_shared : tensor<2x2xf32>" in printed
    assert "%5 = xla.sync_threads %4 : tensor<2x2xf32>" in printed
    assert "%6 = xla.pure_call @g(%2) : (index) -> index" in printed
    assert print_mlir(parse_mlir(printed)) == printed


def test_apply_indexing_without_symbols_has_no_brackets() -> None:
    text = """func.func @f(%a: index) -> index {
  %0 = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0 * 4), domain: d0 in [0, 9]">(%a)
  return %0 : index
}"""
    printed = print_mlir(parse_mlir(text))
    assert 'domain: d0 in [0, 9]">(%a)\n' in printed


def test_xdsl_id_ops_print_short() -> None:
    op = gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.Y))
    op.attributes["xla.range"] = ArrayAttr([])
    assert "gpu.thread_id y {xla.range = []}" in print_mlir(ModuleOp([op]))
    assert isinstance(BlockIdOp("z", 7), gpu.BlockIdOp)


# --- verifier errors ---

LOOP_HEAD = (
    'xla.loop (%d)[%s] -> (%i) in #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 3]">'
)


def _func(body: str, args: str = "%d: index, %t: tensor<4xf32>", results: str = "") -> str:
    return f"func.func @f({args}) {results} {{\n{body}\n  return\n}}"


def _verify_error(text: str) -> str:
    module = parse_mlir(text, verify=False)
    with pytest.raises(VerifyError) as info:
        verify_op(module)
    return str(info.value)


VERIFY_ERRORS = {
    "loop dims count": (
        _func(
            '%r = xla.loop (%d, %d)[%s] -> (%i) in #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], '
            's0 in [0, 3]"> iter_args(%it = %t) -> (tensor<4xf32>) {\n xla.yield %it : tensor<4xf32>\n}'
        ),
        "2 dimension operands, the map has 1 dimensions",
    ),
    "loop body argument count": (
        _func(
            '%r = xla.loop (%d)[%s] -> (%i, %k) in #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], '
            's0 in [0, 3]"> iter_args(%it = %t) -> (tensor<4xf32>) {\n xla.yield %it : tensor<4xf32>\n}'
        ),
        "the body has 4 arguments, expected 3",
    ),
    "loop yield types": (
        _func(
            f"%r = {LOOP_HEAD} iter_args(%it = %t) -> (tensor<4xf32>) {{\n"
            "  %c = arith.constant 0 : index\n  xla.yield %c : index\n}"
        ),
        "xla.yield types",
    ),
    "loop without yield": (
        _func(f"%r = {LOOP_HEAD} iter_args(%it = %t) -> (tensor<4xf32>) {{\n  %c = arith.constant 0 : index\n}}"),
        "arith.constant terminates block in single-block region but is not a terminator",
    ),
    "loop runtime variables": (
        _func(
            '%r = xla.loop (%d)[%s] -> (%i) in #xla.indexing_map<"(d0){rt0} -> (d0 + rt0), domain: d0 in [0, 3], '
            'rt0 in [0, 3]"> iter_args(%it = %t) -> (tensor<4xf32>) {\n xla.yield %it : tensor<4xf32>\n}'
        ),
        "runtime variables are not supported",
    ),
    "apply_indexing dims": (
        _func(
            '%r = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 + d1), domain: d0 in [0, 3], '
            'd1 in [0, 3]">(%d)'
        ),
        "1 dimension operands, the map has 2 dimensions",
    ),
    "apply_indexing symbols": (
        _func('%r = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0), domain: d0 in [0, 3]">(%d)[%d]'),
        "1 symbol operands, the map has 0 symbols",
    ),
    "pure_call missing callee": (_func("%r = xla.pure_call @nowhere(%d) : (index) -> index"), "no function @nowhere"),
    "pure_call operand types": (
        _func("%r = xla.pure_call @g(%d) : (index) -> index")
        + "\nfunc.func private @g(%x: i32) -> index {\n  %c = arith.constant 0 : index\n  return %c : index\n}",
        "operand types",
    ),
    "pure_call result types": (
        _func("%r = xla.pure_call @g(%d) : (index) -> i32")
        + "\nfunc.func private @g(%x: index) -> index {\n  return %x : index\n}",
        "result types",
    ),
    "yield outside loop": (
        "func.func @f(%d: index) {\n  scf.execute_region {\n    xla.yield %d : index\n  }\n  return\n}",
        "expects parent op 'xla.loop'",
    ),
    "allocate_shared dynamic": (_func("%s = xla.allocate_shared : tensor<?xf32>"), "static shape"),
}


@pytest.mark.parametrize("name", list(VERIFY_ERRORS))
def test_verify_errors(name: str) -> None:
    text, message = VERIFY_ERRORS[name]
    assert message in _verify_error(text)


def test_sync_threads_types_must_match() -> None:
    op = SyncThreadsOp([AllocateSharedOp(TensorType(f32, [2])).result])
    bad = SyncThreadsOp.build(operands=[list(op.tensors)], result_types=[[TensorType(i1, [2])]])
    with pytest.raises(VerifyError, match="differ from operand types"):
        verify_op(bad)


def test_pure_call_outside_a_module_is_not_checked() -> None:
    block = _index_args(1)
    call = PureCallOp("anything", [block.args[0]], [IndexType()])
    block.add_ops([call, func.ReturnOp()])
    verify_op(func.FuncOp("f", ([IndexType()], []), Region(block)))


def test_bad_map_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="indexing_map"):
        parse_mlir('builtin.module attributes {m = #xla.indexing_map<"(d0) -> (d0), domain: d1 in [0, 3]">} {}')


def test_loop_block_argument_types_and_result_types() -> None:
    init = AllocateSharedOp(TensorType(f32, [4]))
    indexing_map = IndexingMap.parse("(d0) -> (d0), domain: d0 in [0, 3]")
    dim = ThreadIdOp("x", 3)
    wrong_block = Block(arg_types=[f32, init.result.type])
    wrong_block.add_op(YieldOp([wrong_block.args[1]]))
    loop = LoopOp([dim.result], indexing_map, [init.result], Region(wrong_block))
    with pytest.raises(VerifyError, match="body argument #0 has type f32, expected index"):
        verify_op(loop)
    good = LoopOp([dim.result], indexing_map, [init.result])
    good.body.block.add_op(YieldOp([good.iter_args[0]]))
    verify_op(good)
    bad_results = LoopOp.build(
        operands=[[dim.result], [init.result]],
        result_types=[[TensorType(f32, [5])]],
        properties={"indexing_map": IndexingMapAttr(indexing_map)},
        regions=[good.body.clone()],
    )
    with pytest.raises(VerifyError, match="result types"):
        verify_op(bad_results)


def test_apply_indexing_result_count() -> None:
    block = _index_args(1)
    attr = IndexingMapAttr(IndexingMap.parse("(d0) -> (d0, d0 * 2), domain: d0 in [0, 3]"))
    op = ApplyIndexingOp.build(
        operands=[[block.args[0]], []], result_types=[[IndexType()]], properties={"indexing_map": attr}
    )
    with pytest.raises(VerifyError, match="1 results, the map has 2 results"):
        verify_op(op)


def test_vector_compares_and_selects_read_and_print_as_mlir_does() -> None:
    # The body as MLIR itself (jaxlib's) prints it: a vector compare gives vector<4xi1>, and a select on a
    # vector condition names the condition's type first.
    text = """builtin.module {
  func.func @f(%a: vector<4xf32>, %b: vector<4xf32>, %x: f32, %y: f32, %i: vector<4xi32>) -> (vector<4xf32>, f32) {
    %0 = arith.cmpf olt, %a, %b : vector<4xf32>
    %1 = arith.cmpi slt, %i, %i : vector<4xi32>
    %2 = arith.cmpf olt, %x, %y : f32
    %3 = arith.select %0, %a, %b : vector<4xi1>, vector<4xf32>
    %4 = arith.select %2, %x, %y : f32
    %5 = arith.select %2, %a, %b : vector<4xf32>
    func.return %3, %4 : vector<4xf32>, f32
  }
}
"""
    module = parse_mlir(text)
    assert print_mlir(module) == text
    ops = list(module.body.block.ops.first.body.block.ops)
    assert [str(op.results[0].type) for op in ops[:2]] == ["vector<4xi1>", "vector<4xi1>"]
    assert str(ops[2].results[0].type) == "i1"


def test_known_empty_maps_of_different_arities_are_different_attributes() -> None:
    # XLA prints both maps as "KNOWN EMPTY"; an attribute keeps what it needs to give each one back.
    one = IndexingMap.parse("(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, -1]")
    two = IndexingMap.parse("(d0, d1) -> (d0, d1), domain: d0 in [0, 3], d1 in [0, -1]")
    assert one.is_known_empty() and two.is_known_empty() and str(one) == str(two) == "KNOWN EMPTY"
    first, second = IndexingMapAttr(one), IndexingMapAttr(two)
    assert first != second
    for attr, expected in ((first, one), (second, two)):
        restored = attr.indexing_map
        assert restored.is_known_empty()
        assert (len(restored.dim_vars), len(restored.range_vars), len(restored.results)) == \
            (len(expected.dim_vars), len(expected.range_vars), len(expected.results))


def test_zero_element_fusions_of_different_arities_compile_one_after_the_other(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    texts = [
        """HloModule a
f { o = f32[1] parameter(0)  i = s8[0] parameter(1)
  ROOT g = f32[0] gather(o, i), offset_dims={0}, collapsed_slice_dims={}, start_index_map={}, index_vector_dim=0,
    slice_sizes={0} }
ENTRY e { o = f32[1] parameter(0)  i = s8[0] parameter(1)  ROOT r = f32[0] fusion(o, i), kind=kLoop, calls=f }
""",
        """HloModule b
f { o = f32[4,3,4] parameter(0)  i = u32[2,4,0,0,3] parameter(1)
  ROOT g = f32[2,4,0,0,3] gather(o, i), offset_dims={2}, collapsed_slice_dims={}, start_index_map={},
    operand_batching_dims={1,2}, start_indices_batching_dims={4,1}, index_vector_dim=2, slice_sizes={0,1,1} }
ENTRY e { o = f32[4,3,4] parameter(0)  i = u32[2,4,0,0,3] parameter(1)
  ROOT r = f32[2,4,0,0,3] fusion(o, i), kind=kLoop, calls=f }
""",
    ]
    for text in texts:
        module = xlapy.parse_hlo(text)
        arguments = [np.zeros(p.shape.dimensions, ELEMENT_TYPES[p.shape.element_type].dtype)
                     for p in module.entry.parameters]
        assert xlapy.compile(module, run_hlo_passes=False)(*arguments).size == 0
