"""The transpose emitter: fusions whose hero is a transpose that moves the minor dimension are written tile by
tile (one tile of the output per block), staged through the block's shared tile. Results are compared with the
reference interpreter bit for bit (each op here rounds once, in both), the tiles' indexing maps are checked to move
every element once, and every program of ``data/transpose`` (one fusion each, as XLA keeps
``emitters/tests/transpose/*.hlo``) has its emitted MLIR checked by FileCheck and is run against the interpreter
in every element type its ``// TYPES:`` line names (the default run in a few of each width and kind, the slow
tests in all)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import exact_values, kernel_thunks, only_fusion
from tests.codegen.filecheck import filecheck
from tools.compare import assert_same
from xlapy.codegen.backends.cpu import CpuKernel
from xlapy.codegen.dialect import LoopOp
from xlapy.codegen.emitters import transpose as transpose_emitter
from xlapy.codegen.emitters.transpose import (
    TILE,
    emit_transpose_fusion,
    shared_tile_sizes,
    tile_sizes,
    transpose_hero,
    uses_shared_tile,
)
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import print_mlir
from xlapy.codegen.pipeline import Dumper, emitter_name, lower_fusion
from xlapy.errors import VerifyError
from xlapy.runtime.kernel_cache import clear_memory_cache
from xlapy.shapes import ELEMENT_TYPES, parse_shape


def _transposed_shape(shape: str, permutation: tuple[int, ...], layout: str = "") -> str:
    parsed = parse_shape(shape)
    dims = [parsed.dimensions[p] for p in permutation]
    return f"{parsed.element_type}[{','.join(map(str, dims))}]{layout}"


# A lone transpose in a fusion of its own.
TRANSPOSE = """HloModule transpose
f {{ x = {shape} parameter(0)  ROOT t = {out} transpose(x), dimensions={{{perm}}} }}
ENTRY e {{ p = {shape} parameter(0)  ROOT fusion = {out} fusion(p), kind=kLoop, calls=f }}
"""


def _transpose_module(shape: str, permutation: tuple[int, ...], out_layout: str = "") -> xlapy.HloModule:
    return xlapy.parse_hlo(TRANSPOSE.format(shape=shape, out=_transposed_shape(shape, permutation, out_layout),
                                            perm=",".join(map(str, permutation))))


def _check_transpose_emitter(module: xlapy.HloModule, *args: np.ndarray) -> None:
    executable = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "transpose"
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


@pytest.mark.parametrize(("shape", "permutation"), [
    ("f32[64,64]", (1, 0)),           # whole tiles
    ("f32[100,70]", (1, 0)),          # partial tiles along both dimensions
    ("f32[3,40,50]", (0, 2, 1)),      # 021
    ("f32[20,3,40]", (2, 1, 0)),      # 210
    ("f32[40,50,2]", (1, 0, 2)),      # 102 with a minor dimension of 8 bytes
    ("f32[33,1,17]", (2, 1, 0)),      # a unit dimension
    ("f32[4,18,5,20]", (2, 3, 0, 1)), # dimensions that move together (2-D once normalized)
])
def test_transposes(shape: str, permutation: tuple[int, ...]) -> None:
    _check_transpose_emitter(_transpose_module(shape, permutation), exact_values(shape, 1))


# Three widths in the default run, the other types with the slow tests (the programs below run in more).
@pytest.mark.parametrize("element_type", [
    "s8", "bf16", "f64", *(pytest.param(t, marks=pytest.mark.slow) for t in ("pred", "f16", "s64", "u32"))])
def test_element_types(element_type: str) -> None:
    shape = f"{element_type}[37,45]"
    _check_transpose_emitter(_transpose_module(shape, (1, 0)), exact_values(shape, 2))


@pytest.mark.parametrize(("shape", "permutation"), [
    ("f32[5,24,40]", (0, 2, 1)), ("f32[20,3,40]", (2, 1, 0)), ("s8[70,90]", (1, 0)), ("f32[33,1,17]", (2, 1, 0)),
])
def test_the_two_loops_move_every_element_once_through_the_tile(shape: str, permutation: tuple[int, ...]) -> None:
    """Evaluating the maps of the shared-tile form: in each block, the first loop stores every element of the
    operand's tile once into the shared tile, and the second loop writes every output element once, read from the
    slot of the shared tile that holds the operand element the transpose puts there."""
    fusion = only_fusion(_transpose_module(shape, permutation))
    module_op, launch = emit_transpose_fusion(fusion, Device.host(), shared_tile=True)
    main = next(op for op in module_op.ops if op.sym_name.data == "main")
    read, write = [op.indexing_map_attr.indexing_map for op in main.walk() if isinstance(op, LoopOp)]
    rank = len(permutation)
    written = []
    for bl in range(launch.blocks):
        tile: dict[tuple[int, ...], tuple[int, ...]] = {}
        for th, s in itertools.product(range(launch.threads_per_block), range(64)):
            if s <= read.range_vars[0].bounds.upper and read.contains([th, bl], [s]):
                *operand_index, row, column = read.evaluate([th, bl], [s])
                assert (row, column) not in tile
                tile[(row, column)] = tuple(operand_index)
            if s <= write.range_vars[0].bounds.upper and write.contains([th, bl], [s]):
                *output_index, row, column = write.evaluate([th, bl], [s])
                written.append((tuple(output_index), (row, column), bl))
        for output_index, slot, block in written:
            if block == bl:
                assert tile[slot] == tuple(output_index[permutation.index(k)] for k in range(rank))
    dims = fusion.shape.dimensions
    assert sorted(w[0] for w in written) == list(itertools.product(*(range(d) for d in dims)))


# A prologue on the transposed operand (convert, exp-free arithmetic), an epilogue with an operand read at the
# output's indices, and a side output computed from the transpose too.
PROLOGUE_EPILOGUE = """HloModule prologue_epilogue
f { x = f16[48,3,40] parameter(0)  y = f32[40,3,48] parameter(1)  c = f32[] constant(0.5)
    xf = f32[48,3,40] convert(x)  n = f32[48,3,40] negate(xf)  t = f32[40,3,48] transpose(n), dimensions={2,1,0}
    cb = f32[40,3,48] broadcast(c), dimensions={}  m = f32[40,3,48] multiply(t, cb)
    ROOT a = f32[40,3,48] add(m, y) }
ENTRY e { p = f16[48,3,40] parameter(0)  q = f32[40,3,48] parameter(1)
          ROOT fusion = f32[40,3,48] fusion(p, q), kind=kLoop, calls=f }
"""

SIDE_OUTPUT = """HloModule side_output
f { x = bf16[30,70] parameter(0)  t = bf16[70,30] transpose(x), dimensions={1,0}  e = bf16[70,30] abs(t)
    ROOT r = (bf16[70,30], bf16[70,30]) tuple(t, e) }
ENTRY e { p = bf16[30,70] parameter(0)
          ROOT fusion = (bf16[70,30], bf16[70,30]) fusion(p), kind=kLoop, calls=f }
"""


def test_a_prologue_and_an_epilogue_reading_another_operand() -> None:
    module = xlapy.parse_hlo(PROLOGUE_EPILOGUE)
    _check_transpose_emitter(module, exact_values("f16[48,3,40]", 3), exact_values("f32[40,3,48]", 4))


def test_a_side_output() -> None:
    _check_transpose_emitter(xlapy.parse_hlo(SIDE_OUTPUT), exact_values("bf16[30,70]", 5))


@pytest.mark.parametrize(("shape", "permutation", "out_layout", "emitter"), [
    ("f32[64,48]{0,1}", (1, 0), "{0,1}", "transpose"),      # both column-major: a transpose in memory too
    ("f32[64,48]{0,1}", (1, 0), "{1,0}", "transpose"),      # the same bytes in another order
    ("f32[36,5,40]{2,1,0}", (2, 1, 0), "{1,0,2}", "transpose"),
    ("f32[36,5,40]{1,2,0}", (0, 2, 1), "{2,0,1}", "loop"),  # a minor dimension of 5: not tiled
])
def test_layouts_other_than_the_default(shape: str, permutation: tuple[int, ...], out_layout: str,
                                        emitter: str) -> None:
    module = _transpose_module(shape, permutation, out_layout)
    args = (exact_values(shape.split("{")[0], 6),)
    executable = xlapy.compile(module, run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion) == emitter
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_a_lone_transpose_through_the_whole_pipeline() -> None:
    module = xlapy.parse_hlo("HloModule lone\nENTRY e { p = f32[4,50,70] parameter(0)\n"
                             "  ROOT t = f32[4,70,50] transpose(p), dimensions={0,2,1} }")
    args = (exact_values("f32[4,50,70]", 7),)
    executable = xlapy.compile(module)
    assert [emitter_name(t.fusion, t.slice_indices) for t in kernel_thunks(executable)] == ["transpose"]
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_tiles() -> None:
    # A cache line of 64 bytes along the output's minor dimension, TILE along the dimension read from the
    # operand's minor dimension, 1 along the others (at most each dimension).
    hero = only_fusion(_transpose_module("f32[64,256,256]", (2, 1, 0))).fused_computation.root
    assert tile_sizes(hero) == [TILE, 1, 16]
    hero = only_fusion(_transpose_module("bf16[64,256,256]", (0, 2, 1))).fused_computation.root
    assert tile_sizes(hero) == [1, TILE, 32]
    hero = only_fusion(_transpose_module("f32[64,20,256]", (0, 2, 1))).fused_computation.root
    assert tile_sizes(hero) == [1, TILE, 16]
    hero = only_fusion(_transpose_module("f32[64,256,20]", (0, 2, 1))).fused_computation.root
    assert tile_sizes(hero) == [1, 20, 16]
    # The minor dimension stays in place (8 bytes): whole along it, tiles along the two others.
    hero = only_fusion(_transpose_module("f32[40,50,2]", (1, 0, 2))).fused_computation.root
    assert tile_sizes(hero) == [TILE, TILE, 2]


@pytest.mark.parametrize("fused", [
    # The roots have other dimensions than the transpose: the loop emitter.
    "x = f32[40,48] parameter(0)  t = f32[48,40] transpose(x), dimensions={1,0}  ROOT r = f32[1920] reshape(t)",
    # The minor dimension stays in place and is wide: not a tiled transpose.
    "x = f32[40,48,16] parameter(0)  ROOT t = f32[48,40,16] transpose(x), dimensions={1,0,2}",
])
def test_fusions_the_loop_emitter_writes(fused: str) -> None:
    shape = "f32[40,48]" if "reshape" in fused else "f32[40,48,16]"
    out = fused.split("ROOT r = " if "reshape" in fused else "ROOT t = ")[1].split(" ")[0]
    module = xlapy.parse_hlo(f"HloModule m\nf {{ {fused} }}\nENTRY e {{ p = {shape} parameter(0)\n"
                             f"  ROOT fusion = {out} fusion(p), kind=kLoop, calls=f }}")
    fusion = only_fusion(module)
    assert emitter_name(fusion) == "loop" and transpose_hero(fusion) is None
    with pytest.raises(VerifyError, match="not a transpose fusion"):
        emit_transpose_fusion(fusion, Device.host())
    args = (exact_values(shape, 8),)
    assert_same(xlapy.compile(module, run_hlo_passes=False)(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_shared_tiles() -> None:
    # 32x32 elements of 4 bytes or more; a cache line of the small types along both dimensions.
    hero = only_fusion(_transpose_module("f32[64,256,256]", (2, 1, 0))).fused_computation.root
    assert shared_tile_sizes(hero) == [TILE, 1, TILE]
    hero = only_fusion(_transpose_module("s8[64,256,256]", (0, 2, 1))).fused_computation.root
    assert shared_tile_sizes(hero) == [1, 64, 64]
    hero = only_fusion(_transpose_module("f64[20,256]", (1, 0))).fused_computation.root
    assert shared_tile_sizes(hero) == [TILE, 20]


@pytest.mark.parametrize(("shape", "permutation", "shared"), [
    ("f32[40,1030]", (1, 0), True),         # rows of 4120 bytes: staged through the shared tile
    ("f32[30,2,1024]", (2, 1, 0), True),    # planes of 8 KiB
    ("f32[3,64,96]", (0, 2, 1), False),     # rows of 384 bytes: read across in the first-level cache
])
def test_the_form_follows_the_distance_between_the_rows_read(shape: str, permutation: tuple[int, ...],
                                                            shared: bool) -> None:
    module = _transpose_module(shape, permutation)
    assert uses_shared_tile(only_fusion(module)) == shared
    _check_transpose_emitter(module, exact_values(shape, 9))


def test_a_102_transpose_uses_the_direct_form() -> None:
    # Its rows stay whole: the direct form reads and writes them contiguously.
    assert not uses_shared_tile(only_fusion(_transpose_module("f32[40,50,2]", (1, 0, 2))))


def test_a_102_transpose_of_wide_rows_copies_whole_rows_as_vectors(tmp_path: Path) -> None:
    """A 102 transpose of 1 KiB rows is a loop fusion (not tiled): each thread's vector is a piece of one row,
    read and written contiguously, so the lanes become SIMD loads and stores (no lane extracted, no choice)."""
    module = _transpose_module("f32[16,32,256]", (1, 0, 2))
    fusion = only_fusion(module)
    assert emitter_name(fusion) == "loop" and transpose_hero(fusion) is None
    lowered = lower_fusion(fusion, Device.host(), Dumper.create(tmp_path, "vectorize-lanes"))
    assert 256 % lowered.launch.vector_size == 0 and lowered.launch.vector_size > 1
    (dump,) = tmp_path.glob("*.vectorize-lanes.mlir")
    text = dump.read_text()
    assert "vector.transfer_read" in text and "vector.transfer_write" in text
    assert "vector.extract" not in text and "scf.if" not in text
    args = (exact_values("f32[16,32,256]", 11),)
    assert_same(xlapy.compile(module, run_hlo_passes=False)(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_a_102_transpose_into_a_layout_that_keeps_the_bytes_in_place_is_one_copy() -> None:
    """JAX's lowering gives ``x.transpose(1, 0, 2)`` the result layout ``{2,0,1}``: the transposed array has the
    operand's bytes in the operand's order, and the kernel is a plain copy of each range of blocks (LLVM makes the
    loop a ``memcpy``), equal to the interpreter's transpose."""
    module = _transpose_module("f32[16,32,256]", (1, 0, 2), "{2,0,1}")
    fusion = only_fusion(module)
    kernel = CpuKernel.compile(lower_fusion(fusion, Device.host()).module)
    assert "llvm.memcpy" in kernel.llvm_ir
    args = (exact_values("f32[16,32,256]", 12),)
    assert_same(xlapy.compile(module, run_hlo_passes=False)(*args), xlapy.evaluate(module, *args), exact_bits=True)


# --- the programs of data/transpose ---

PROGRAMS = Path(__file__).parent / "data" / "transpose"
# Every element type the interpreter computes with.
ELEMENT_TYPE_NAMES = [t for t in ELEMENT_TYPES if t not in ("token", "tuple", "opaque")]


def _element_types(text: str) -> list[str]:
    """The element types a program runs in: its ``// TYPES:`` line (``all``: every type), else its own."""
    match = re.search(r"^// TYPES: (.*)$", text, re.MULTILINE)
    if match is None:
        return [""]
    names = match.group(1).split()
    return ELEMENT_TYPE_NAMES if names == ["all"] else names


def _in_type(text: str, element_type: str) -> str:
    """The program with its f32 (or s8) arrays in ``element_type`` ("": unchanged)."""
    if not element_type:
        return text
    return re.sub(r"\b(f32|s8)\[", f"{element_type}[", text)


# The types the default run keeps for the programs of several types (the others run with the slow tests): each
# program in sub-byte, byte and wider types, and between the two programs of every type, each storage width
# (1, 2, 4, 8, 16, 32, 64 and 128 bits) and each kind of type (pred, signed, unsigned, 4-, 8-, 16-, 32- and 64-bit
# float, complex).
DEFAULT_RUN_TYPES = {
    "transpose_10": {"s1", "s4", "f8e4m3fn", "bf16", "f32", "c128"},
    "transpose_021": {"u1", "s2", "f4e2m1fn", "pred", "f16", "f64"},
    "transpose_210": {"s4", "f32", "c128"},
    "packed_s8": {"s8", "s4"},
    "layouts": {"f32", "c64"},
    "unit_dimension": {"f32", "c128"},
}


def _program_cases() -> list:
    cases = []
    for path in sorted(PROGRAMS.glob("*.hlo")):
        default_run = DEFAULT_RUN_TYPES.get(path.stem)
        for element_type in _element_types(path.read_text()):
            marks = [pytest.mark.slow] if default_run is not None and element_type not in default_run else []
            cases.append(pytest.param(path, element_type, marks=marks, id=f"{path.stem}-{element_type or 'own'}"))
    return cases


def test_the_folder_has_programs_of_each_pattern() -> None:
    names = {p.stem for p in PROGRAMS.glob("*.hlo")}
    assert {"transpose_10", "transpose_021", "transpose_102", "transpose_210", "epilogue", "side_outputs",
            "packed_s8", "layouts"} <= names
    for stem, types in DEFAULT_RUN_TYPES.items():
        assert types <= set(_element_types((PROGRAMS / f"{stem}.hlo").read_text())), stem


@pytest.fixture
def shared_tile_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The shared-tile form for every transpose that moves the minor dimension, whatever the distance between the
    rows it reads (the programs are small), with kernels compiled afresh under it and forgotten afterwards (the
    kernel cache's key does not cover the patched threshold)."""
    monkeypatch.setattr(transpose_emitter, "SHARED_TILE_MIN_ROW_BYTES", 0)
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path / "kernel_cache"))
    clear_memory_cache()
    yield
    clear_memory_cache()


@pytest.mark.usefixtures("shared_tile_everywhere")
@pytest.mark.parametrize("path", sorted(PROGRAMS.glob("*.hlo")), ids=lambda p: p.stem)
def test_program_emitted_mlir(path: Path, tmp_path: Path) -> None:
    text = path.read_text()
    fusion = only_fusion(xlapy.parse_hlo(text))
    module_op, _ = emit_transpose_fusion(fusion, Device.host())
    checks = "\n".join(line[3:] for line in text.splitlines() if line.startswith("// CHECK"))
    filecheck(print_mlir(module_op), checks, tmp_path)


@pytest.mark.usefixtures("shared_tile_everywhere")
@pytest.mark.parametrize(("path", "element_type"), _program_cases())
def test_program_against_the_interpreter(path: Path, element_type: str) -> None:
    module = xlapy.parse_hlo(_in_type(path.read_text(), element_type))
    fusion = only_fusion(module)
    assert uses_shared_tile(fusion) == ("102" not in path.stem)
    args = [exact_values(str(p.shape), 10 + i) for i, p in enumerate(fusion.operands)]
    _check_transpose_emitter(module, *args)
