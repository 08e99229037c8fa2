"""The concatenate, in-place dynamic-update-slice, scatter and input-slices emitters on the HLO programs of their
folders (``data/<emitter>/*.hlo``, as XLA keeps ``emitters/tests/<hero>/*.hlo``).

Each program is an entry computation around one fusion (after copies that put an updated operand in a buffer the
kernel may write over) written in f32, with ``// CHECK`` lines that FileCheck matches against the MLIR the
folder's emitter writes for it (on an AVX-512-sized device, so that they do not depend on the host). Every program
is compiled for the CPU and compared with the reference interpreter bit for bit, in every element type the
interpreter supports for arrays (f32 replaced by that type; not complex types where the program orders values),
on seeded random arguments rich in special values (``tools.loop_fusion_compare.random_arguments``): the heroes
move, compare and combine elements without rounding beyond the element type's own (a scatter's combiner rounds
each combination once, in the interpreter's order).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import WIDE_HOST, check_lines, kernel_thunks
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import assert_within_ulps, random_arguments
from xlapy.codegen.mlir_text import print_mlir
from xlapy.codegen.pipeline import EMITTERS, emitter_name
from xlapy.runtime.thunks.kernel import KernelThunk

DATA = Path(__file__).parent / "data"
HEROES = ("concatenate", "in_place_dynamic_update_slice", "scatter", "input_slices")
FILES = [path for hero in HEROES for path in sorted((DATA / hero).glob("*.hlo"))]
# The element types of arrays the interpreter computes with (sub-byte integers one per byte).
ELEMENT_TYPES = ("pred", "s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64", "f16",
                 "bf16", "f32", "f64", "c64", "c128", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
                 "f8e4m3b11fnuz", "f8e3m4", "f8e4m3", "f8e8m0fnu", "f4e2m1fn")

# The types of the default run besides f32 (one of each kind and width class): every program runs in f32, the type
# it is written in, and each of these in one program of each folder, the folder's programs in turn; the other
# pairs of program and type run with the slow tests.
DEFAULT_TYPES = ("pred", "s8", "u32", "s64", "bf16", "f64", "c128")
# Complex numbers have no order: programs with maximum or minimum exist only in the other types.
_ORDERED = re.compile(r"\b(maximum|minimum)\(")

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _runs_in(path: Path, element_type: str) -> bool:
    return element_type not in ("c64", "c128") or not _ORDERED.search(path.read_text())


def _default_run() -> set[tuple[Path, str]]:
    """The (program, type) pairs of the default run."""
    pairs = {(path, "f32") for path in FILES}
    for hero in HEROES:
        programs = itertools.cycle(sorted((DATA / hero).glob("*.hlo")))
        for element_type in DEFAULT_TYPES:
            path = next(programs)
            while not _runs_in(path, element_type):
                path = next(programs)
            pairs.add((path, element_type))
    return pairs


def _typed_cases() -> list:
    cases = []
    default_run = _default_run()
    for path in FILES:
        for element_type in ELEMENT_TYPES:
            if not _runs_in(path, element_type):
                continue
            marks = [] if (path, element_type) in default_run else [pytest.mark.slow]
            cases.append(pytest.param(path, element_type, marks=marks, id=f"{_name(path)}-{element_type}"))
    return cases


def _hero_kernel(executable: xlapy.Executable) -> KernelThunk:
    """The kernel of the entry's fusion (named ``fusion``); the copies before it are kernels of their own."""
    (thunk,) = [t for t in kernel_thunks(executable) if t.fusion.name == "fusion"]
    return thunk


def _in_type(text: str, element_type: str) -> str:
    """``text`` with its f32 arrays and scalars in ``element_type``."""
    return re.sub(r"\bf32\[", f"{element_type}[", text)


def test_every_hero_has_programs():
    assert all(len(list((DATA / hero).glob("*.hlo"))) >= 4 for hero in HEROES)


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_program_uses_its_emitter_and_matches_its_checks(path: Path, tmp_path):
    text = path.read_text()
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    thunk = _hero_kernel(executable)
    name = emitter_name(thunk.fusion, thunk.slice_indices)
    assert name == path.parent.name
    checks = check_lines(text)
    assert checks, f"{path.name} has no CHECK lines"
    module, _ = EMITTERS[name](thunk.fusion, WIDE_HOST, thunk.slice_indices)
    filecheck(print_mlir(module, map_aliases=True), checks, tmp_path)


@pytest.mark.parametrize(("path", "element_type"), _typed_cases())
def test_program_matches_the_interpreter(path: Path, element_type: str):
    text = _in_type(path.read_text(), element_type)
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    thunk = _hero_kernel(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == path.parent.name
    for seed in (0, 1):
        args = random_arguments(module, seed)
        assert_within_ulps(executable(*args), xlapy.evaluate(module, *args), module, 0,
                           context=f"{path.stem} in {element_type} (seed {seed})")


# Slices of equal dimensions: the loop emitter walks the common output shape and reads each slice's input at the
# output index plus the slice's start, so each input element is read once, and the outputs are written as vectors.
EQUAL_SLICES = """HloModule equal_slices
f { x = f32[10,64] parameter(0)  a = f32[5,64] slice(x), slice={[0:5], [0:64]}
    b = f32[5,64] slice(x), slice={[5:10], [0:64]}  ROOT t = (f32[5,64], f32[5,64]) tuple(a, b) }
ENTRY main { x = f32[10,64] parameter(0)  ROOT fusion = (f32[5,64], f32[5,64]) fusion(x), kind=kLoop, calls=f }
"""


def test_slices_of_equal_dimensions_keep_the_loop_emitter(tmp_path):
    module = xlapy.parse_hlo(EQUAL_SLICES)
    executable = xlapy.compile(xlapy.parse_hlo(EQUAL_SLICES), run_hlo_passes=False)
    thunk = _hero_kernel(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "loop"
    emitted, _ = EMITTERS["loop"](thunk.fusion, WIDE_HOST, thunk.slice_indices)
    filecheck(print_mlir(emitted, map_aliases=True), "\n".join([
        "// CHECK: xla.loop",
        "// CHECK-NOT: scf.if",
        "// CHECK-LABEL: func.func private @f(",
        "// CHECK: tensor.extract %x[%i0, %i1]",
        "// CHECK: %[[ROW:[^ ,]+]], %[[COLUMN:[^ ]+]] = xla.apply_indexing #{{.*}}(%i0, %i1)",
        "// CHECK: tensor.extract %x[%[[ROW]], %[[COLUMN]]]",
    ]), tmp_path)
    args = random_arguments(module, 0)
    assert_within_ulps(executable(*args), xlapy.evaluate(module, *args), module, 0)


# bf16 denormals are f32 denormals once widened: the extrema of two bf16 values must come back bit for bit, not
# flushed to zero (as AVX512-BF16's vcvtneps2bf16 would, were LLVM left to narrow the f32 maximum back to bf16).
BF16_EXTREMA = """HloModule bf16_extrema
max { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT c = bf16[] maximum(a, b) }
ENTRY main {
  a = bf16[256] parameter(0)  b = bf16[256] parameter(1)  i = s32[256,1] parameter(2)
  larger = bf16[256] maximum(a, b)  smaller = bf16[256] minimum(a, b)
  scattered = bf16[256] scatter(a, i, b), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=max
  ROOT t = (bf16[256], bf16[256], bf16[256]) tuple(larger, smaller, scattered)
}
"""


def test_bf16_extrema_keep_denormals():
    bits = np.array([0x0001, 0x8001, 0x007F, 0x807F, 0x0040, 0x0000, 0x8000, 0x3F80, 0xBF80, 0x0080, 0x8080],
                    np.uint16)
    rng = np.random.default_rng(0)
    a_bits, b_bits = rng.choice(bits, 256), rng.choice(bits, 256)
    permutation = rng.permutation(256)
    # Equal magnitudes of opposite signs would only test the order of signed zeros: every pair compared (an
    # element with the one beside it, an updated element with its update) is apart.
    for compared in (a_bits, a_bits[permutation]):
        b_bits[(compared & 0x7FFF) == (b_bits & 0x7FFF)] = 0x0002
    a, b = a_bits.view(ml_dtypes.bfloat16), b_bits.view(ml_dtypes.bfloat16)
    indices = permutation.astype(np.int32).reshape(256, 1)
    larger = np.maximum(a.astype(np.float32), b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    smaller = np.minimum(a.astype(np.float32), b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    scattered = a.copy()
    scattered[indices[:, 0]] = np.maximum(a[indices[:, 0]].astype(np.float32),
                                          b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    executable = xlapy.compile(xlapy.parse_hlo(BF16_EXTREMA))
    for got, want in zip(executable(a, b, indices), (larger, smaller, scattered)):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
