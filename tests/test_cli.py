"""The `xlapy` command: `xlapy layout`, its SVG, and one-line errors."""

import io
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from xlapy.cli import main
from xlapy.shapes import linear_index, parse_shape
from xlapy.shapes.picture import LayoutPicture


def grid_rows(text: str) -> dict[int, list[str]]:
    """Cell texts per row label of the first grid printed by `xlapy layout`."""
    rows: dict[int, list[str]] = {}
    for line in text.split("\n\n")[1].splitlines():
        label, _, rest = line.partition(" ")
        if label.isdigit():
            rows[int(label)] = rest.replace("┃", " ").replace("│", " ").split()
    return rows


def test_layout_of_figure_2(capsys):
    assert main(["layout", "f32[4,8]{1,0:T(2,4)(2,1)}"]) == 0
    out = capsys.readouterr().out
    assert grid_rows(out)[3] == ["17", "19", "21", "23", "25", "27", "29", "31"]
    assert "light lines: second-level tiles" in out
    assert "  16: (2,0) (3,0) (2,1) (3,1) (2,2) (3,2) (2,3) (3,3)" in out


def test_layout_marks_padding_in_grid_and_buffer(capsys):
    assert main(["layout", "f32[5]{0:T(4)}"]) == 0
    out = capsys.readouterr().out
    assert grid_rows(out)[0] == ["0", "1", "2", "3", "4", "·", "·", "·"]
    assert "buffer elements: 8   padding slots: 3" in out
    assert "  4: (4) pad pad pad" in out
    assert out.count("·") == 3 + 1  # three padding cells, one in the legend


@pytest.mark.parametrize("text", [
    "f32[2,3,4]{2,1,0:T(*,2,4)}", "f32[3,4,5]{0,2,1:T(2,3)(2,1)}", "s8[2,2,3,5]{1,3,0,2:T(2,2)}", "f32[]",
    "f32[7]{0:T(4)}",
])
def test_picture_cells_are_the_linear_indices(text):
    shape = parse_shape(text)
    picture = LayoutPicture(shape, max_grids=100)
    for grid, point in zip(picture.grids(), np.ndindex(*[shape.dimensions[d] for d in picture.outer_dims])):
        for (r, c), offset in np.ndenumerate(grid.offsets):
            if grid.padding[r, c]:
                continue
            index = [0] * shape.rank
            for d, i in zip(picture.outer_dims, point):
                index[d] = i
            if picture.row_dim is not None:
                index[picture.row_dim] = r
            if picture.col_dim is not None:
                index[picture.col_dim] = c
            assert offset == linear_index(shape, index)


def test_large_shapes_are_cut_with_a_note(capsys):
    assert main(["layout", "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}", "--max-rows", "4",
                 "--max-cols", "4", "--max-grids", "2"]) == 0
    out = capsys.readouterr().out
    assert "[0, 0, :, :] (rows 0-3 of 1280; columns 0-3 of 16384)" in out
    assert "(2 of 8 slices shown)" in out
    assert grid_rows(out)[2] == ["256", "258", "260", "262"]


def test_svg(tmp_path, capsys):
    path = tmp_path / "layout.svg"
    assert main(["layout", "f32[3,5]{1,0:T(2,2)}", "--svg", str(path)]) == 0
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert texts[0] == "f32[3,5]{1,0:T(2,2)}"
    grid_labels = texts[1:1 + 24]  # 4x6 padded grid, row by row
    assert grid_labels[2 * 6 + 3] == "17"
    assert grid_labels.count(None) == 9  # padding cells carry no number
    assert len([line for line in root.iter(f"{ns}line") if line.get("stroke") == "#000"]) > 0
    assert capsys.readouterr().out.startswith("f32[3,5]{1,0:T(2,2)}")


BAD_SHAPES = [
    ("f32[3,5]{1,0:T(2,", "1:18:"),
    ("q32[3]", "1:1: unknown element type 'q32'"),
    ("f32[3,5]{1,1}", "1:12: minor_to_major {1,1} is not a permutation"),
    ("f32[3]{0:T(2,2)}", "1:14: tile (level 0) has 2 dimensions"),
    ("f32[3,5]{1,0:T(2,*)}", "1:18: '*' cannot be the most-minor tile dimension"),
    ("f32[-3]", "1:5: negative size -3"),
    ("(f32[3])", "is not an array shape"),
]


@pytest.mark.parametrize(("text", "where"), BAD_SHAPES)
def test_bad_shapes_exit_1_with_one_line(text, where, capsys):
    assert main(["layout", text]) == 1
    assert where in one_line_error(capsys)


# The same through a process of its own (``python -m xlapy.cli``): its exit status and both streams; one shape in
# the default run, the others with the slow tests.
@pytest.mark.parametrize(("text", "where"), [BAD_SHAPES[0], *(pytest.param(*case, marks=pytest.mark.slow)
                                                               for case in BAD_SHAPES[1:])])
def test_a_bad_shape_ends_the_process_with_status_1_and_one_line(text, where):
    result = subprocess.run([sys.executable, "-m", "xlapy.cli", "layout", text],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("xlapy: error: ")
    assert where in lines[0]


def test_unwritable_svg_is_a_clean_error(tmp_path, capsys):
    assert main(["layout", "f32[2]", "--svg", str(tmp_path / "missing" / "x.svg")]) == 1
    assert capsys.readouterr().err.startswith("xlapy: error: cannot write")


SMALL_MODULE = """HloModule small

ENTRY main {
  x = f32[4] parameter(0)
  i = s32[] parameter(1)
  d = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}
  two = f32[] constant(2)
  b = f32[2] broadcast(two), dimensions={}
  m = f32[2] multiply(d, b)
  ROOT out = (f32[2], s32[]) tuple(m, i)
}
"""


def test_run_on_given_inputs_saves_outputs(tmp_path, capsys):
    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    np.savez(tmp_path / "in.npz", x=np.array([1, 2, 3, 4], np.float32), i=np.int32(5))
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The start index 5 is clamped to 2, so the slice is [3, 4], doubled.
    assert lines[0].startswith("out{0}: f32[2] [6.0, 8.0] sum=14 crc32=")
    assert lines[1].startswith("out{1}: s32[] [5] sum=5 crc32=")
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["out0"], [6, 8])
        assert saved["out1"] == 5


def test_run_on_random_inputs_draws_indices_in_range(tmp_path, capsys):
    from xlapy.hlo.fake_arguments import index_bound, make_fake_arguments

    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    module = xlapy.parse_hlo(SMALL_MODULE)
    # A start index of f32[4] sliced by 2 is meaningful in [0, 2].
    assert index_bound(module.entry.parameters[1]) == 3
    assert index_bound(module.entry.parameters[0]) is None
    for seed in range(20):
        assert 0 <= make_fake_arguments(module, seed)[1] <= 2
    assert main(["run", str(hlo), "--backend", "interpreter", "--seed", "3"]) == 0
    x, i = make_fake_arguments(module, 3)
    expected = 2 * x[int(i):int(i) + 2]
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"out{{0}}: f32[2] [{expected[0]}, {expected[1]}]")


def test_run_reports_missing_inputs_in_one_line(tmp_path, capsys):
    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    np.savez(tmp_path / "in.npz", x=np.zeros(4, np.float32))
    assert main(["run", str(hlo), "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no array for parameter 1 (i)" in err


def test_run_example_gelu_matches_xla(capsys):
    from tools.xla_cpu import run_on_xla_cpu
    from xlapy.hlo.fake_arguments import make_fake_arguments

    example = Path(__file__).parents[1] / "examples" / "gelu.hlo"
    text = example.read_text().replace("6,512,4096", "6,8,64")
    module = xlapy.parse_hlo(text)
    (x,) = make_fake_arguments(module)
    got = xlapy.evaluate(module, x)
    assert_same(got, run_on_xla_cpu(text, x))  # measured: bit for bit (6 seeds)


def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("xlapy: error: ") and err.count("\n") == 1, err
    return err


MISDECLARED = """HloModule bad

ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[3] negate(p)
}
"""


@pytest.mark.parametrize("command", [["run"], ["run", "--backend", "interpreter"], ["indexing"]])
def test_run_and_indexing_verify_the_module(tmp_path, capsys, command):
    hlo = tmp_path / "bad.hlo"
    hlo.write_text(MISDECLARED)
    assert main([*command, str(hlo)]) == 1
    assert "instruction n: negate produces f32[4], but the instruction declares f32[3]" in one_line_error(capsys)


def test_no_verify_skips_the_verifier(tmp_path, capsys):
    hlo = tmp_path / "bad.hlo"
    hlo.write_text(MISDECLARED)
    # The maps follow the declared shape: the verifier is what catches it.
    assert main(["indexing", str(hlo), "--no-verify"]) == 0
    assert capsys.readouterr().out == "operand id = 0 (p)\n(d0) -> (d0),\ndomain:\nd0 in [0, 2]\n"


@pytest.mark.parametrize("argv", [
    ["run", "M", "--seed", "-1"],
    ["run", "M", "--repeat", "0", "--bench"],
    ["run", "M", "--max-while-iterations", "-2"],
    ["indexing", "M", "--output-id", "-1"],
    ["indexing", "M", "--operand", "-1", "--input-to-output"],
    ["layout", "f32[4]", "--max-grids", "-1"],
    ["layout", "f32[4]", "--max-rows", "-3"],
    ["layout", "f32[4]", "--max-cols", "0"],
    ["layout", "f32[4]", "--max-rows", "two"],
])
def test_bad_flag_values_are_one_line_errors(tmp_path, capsys, argv):
    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    argv = [str(hlo) if a == "M" else a for a in argv]
    assert main(argv) == 1
    err = one_line_error(capsys)
    flag = next(a for a in argv if a.startswith("--max") or a in ("--seed", "--repeat", "--output-id", "--operand"))
    assert f"argument {flag}: " in err


@pytest.mark.parametrize(("value", "message"), [
    ("\u0663", "expected an integer, got '\u0663'"),  # Arabic-Indic 3, which int() reads as 3
    ("\uff13", "expected an integer, got '\uff13'"),  # fullwidth 3
    ("1_0", "expected an integer, got '1_0'"), (" 3", "expected an integer"), ("0x3", "expected an integer"),
    ("9" * 5000, "integer too large"), ("9223372036854775808", "integer too large"),
])
def test_integer_flags_take_only_ascii_digits(capsys, value, message):
    assert main(["layout", "f32[4]", "--max-rows", value]) == 1
    err = one_line_error(capsys)
    assert "argument --max-rows: " in err and message in err, err


def test_integer_flags_read_ascii_digits():
    from xlapy.cli import _int_at_least

    assert [_int_at_least(0)(t) for t in ("+0001", "0", "9223372036854775807")] == [1, 0, 2**63 - 1]


@pytest.mark.parametrize(("argv", "message"), [
    (["indexing", "M", "--output-id", "2"], "out has 2 outputs, no output 2"),
    (["indexing", "M", "--instruction", "m", "--output-id", "1"], "m has 1 output, no output 1"),
    (["indexing", "M", "--input-to-output", "--operand", "2"], "out has 2 operands, no operand 2"),
    (["run", "M", "--max-while-iterations", "3"], "--max-while-iterations needs --backend interpreter"),
])
def test_out_of_range_ids_are_one_line_errors(tmp_path, capsys, argv, message):
    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    assert main([str(hlo) if a == "M" else a for a in argv]) == 1
    assert message in one_line_error(capsys)


def test_output_id_selects_the_output(tmp_path, capsys):
    hlo = tmp_path / "small.hlo"
    hlo.write_text(SMALL_MODULE)
    assert main(["indexing", str(hlo), "--output-id", "1"]) == 0
    # Output 1 of the tuple is operand 1 (i), read at its only index.
    assert capsys.readouterr().out == "operand id = 0 (m)\n\noperand id = 1 (i)\n() -> ()\n"


ENDLESS = """HloModule endless

cond {
  c = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body {
  b = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(b, one)
}

ENTRY main {
  p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=cond, body=body
}
"""


def test_max_while_iterations_stops_an_endless_loop(tmp_path, capsys):
    hlo = tmp_path / "endless.hlo"
    hlo.write_text(ENDLESS)
    assert main(["run", str(hlo), "--backend", "interpreter", "--max-while-iterations", "50"]) == 1
    assert "while w did not finish within max_while_iterations=50" in one_line_error(capsys)
    # A loop that ends within the limit runs.
    hlo.write_text(ENDLESS.replace("ROOT t = pred[] constant(true)",
                                   "ten = s32[] constant(10)\n  ROOT t = pred[] compare(c, ten), direction=LT"))
    np.savez(tmp_path / "in.npz", p=np.int32(0))
    assert main(["run", str(hlo), "--backend", "interpreter", "--max-while-iterations", "10",
                 "--inputs", str(tmp_path / "in.npz")]) == 0
    assert capsys.readouterr().out.startswith("w: s32[] [10] sum=10 ")


@pytest.mark.parametrize("command", [["run"], ["indexing"], ["sdy", "propagate"]])
def test_input_files_that_are_not_utf8_text_or_not_files(tmp_path, capsys, command):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0) \xff\xfe\n}\n")
    assert main([*command, str(bad)]) == 1
    assert f"{bad}:4:27: not UTF-8 text: byte 0xff at offset 49" in one_line_error(capsys)
    assert main([*command, str(tmp_path)]) == 1
    assert f"cannot read {tmp_path}: a directory" in one_line_error(capsys)
    assert main([*command, str(tmp_path / "missing.hlo")]) == 1
    assert "missing.hlo: No such file or directory" in one_line_error(capsys)
    fifo = tmp_path / "fifo.hlo"
    os.mkfifo(fifo)  # nobody writes to it: reading would block forever
    assert main([*command, str(fifo)]) == 1
    assert f"cannot read {fifo}: not a regular file" in one_line_error(capsys)


def test_huge_parameters_are_refused_before_allocating(tmp_path, capsys, monkeypatch):
    hlo = tmp_path / "huge.hlo"
    hlo.write_text("HloModule huge\n\nENTRY main {\n  p = f32[100000000000] parameter(0)\n"
                   "  ROOT n = f32[100000000000] negate(p)\n}\n")
    monkeypatch.setenv("XLAPY_MAX_BYTES", str(1 << 30))
    for backend in ("cpu", "interpreter"):
        assert main(["run", str(hlo), "--backend", backend]) == 1
        assert "needs 373 GiB (400000000000 bytes), more than the 1 GiB (1073741824 bytes) available" \
            in one_line_error(capsys)


def test_fake_arguments_check_their_size_first(monkeypatch):
    from xlapy.hlo.fake_arguments import make_fake_arguments

    module = xlapy.parse_hlo("HloModule m\n\nENTRY e {\n  a = c64[1000] parameter(0)\n"
                             "  ROOT n = c64[1000] negate(a)\n}\n")
    # c64: 8 bytes of value and two f64 draws (+ the complex128 sum) per element.
    monkeypatch.setenv("XLAPY_MAX_BYTES", str(1000 * 32 - 1))
    with pytest.raises(xlapy.XlapyError,
                       match=r"random arguments for a \(c64\[1000\]\{0\}\) needs 31.2 KiB \(32000 bytes\)"):
        make_fake_arguments(module)
    monkeypatch.setenv("XLAPY_MAX_BYTES", str(1000 * 32))
    assert make_fake_arguments(module)[0].shape == (1000,)


def test_layout_of_a_huge_shape_draws_only_what_it_shows(capsys):
    import tracemalloc

    tracemalloc.start()
    try:
        assert main(["layout", "f32[50000000,2,2]"]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out = capsys.readouterr().out
    assert "(8 of 50000000 slices shown)" in out
    assert "[7, :, :]" in out and "... (199999936 more slots)" in out
    assert peak < 8 << 20  # the array itself would be 800 MB, the slice indices 2 GB


def test_layout_with_no_grids(capsys):
    assert main(["layout", "f32[3,2,2]", "--max-grids", "0"]) == 0
    out = capsys.readouterr().out
    assert "(0 of 3 slices shown)" in out and "buffer (12 elements" in out


def test_multi_line_errors_are_joined_into_one(capsys, monkeypatch):
    import xlapy.cli

    def fails(args):
        raise xlapy.VerifyError("first line\n  second line")

    monkeypatch.setattr(xlapy.cli, "_layout", fails)
    assert main(["layout", "f32[2]"]) == 1
    assert one_line_error(capsys) == "xlapy: error: first line second line\n"


def test_deep_recursion_and_memory_exhaustion_name_the_input(tmp_path, capsys, monkeypatch):
    import xlapy.cli

    hlo = tmp_path / "m.hlo"
    hlo.write_text(SMALL_MODULE)
    for exception, message in ((RecursionError, "input nested too deeply"), (MemoryError, "out of memory")):
        def fails(*args, exception=exception, **kwargs):
            raise exception()

        monkeypatch.setattr(xlapy.cli, "_read_module", fails)
        assert main(["run", str(hlo)]) == 1
        assert one_line_error(capsys) == f"xlapy: error: {hlo}: {message}\n"


def test_usage_errors_exit_1_with_one_line():
    result = subprocess.run([sys.executable, "-m", "xlapy.cli", "run", "x.hlo", "--seed", "-1"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("xlapy: error: xlapy run: argument --seed: must be at least 0, got -1 "
                             "(see 'xlapy run --help')\n")


JAX_PROGRAM = """module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32> {jax.result_info = "result[0]"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.tanh %arg0 : tensor<2x3xf32>
    %1 = stablehlo.multiply %0, %arg1 : tensor<2x3xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %3 = stablehlo.add %1, %2 : tensor<2x3xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    return %3, %4 : tensor<2x3xf32>, tensor<f32>
  }
}
"""  # noqa: E501  (as jax.jit(f).lower(x, y).as_text() prints it)


@pytest.mark.parametrize("name", ["f.mlir", "f.txt"])
def test_run_takes_stablehlo_as_jax_lowers_it(tmp_path, capsys, name):
    import jax
    import jax.numpy as jnp

    def f(x, y):
        return jnp.tanh(x) * y + 1.0, x.sum()

    x = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2) / 3
    y = np.full((2, 3), 3, np.float32)
    assert jax.jit(f).lower(x, y).as_text().strip() == JAX_PROGRAM.strip()
    path = tmp_path / name  # by extension, or by content
    path.write_text(JAX_PROGRAM)
    np.savez(tmp_path / "in.npz", x, y)
    want = f(x, y)
    for backend in ("interpreter", "cpu"):
        assert main(["run", str(path), "--backend", backend, "--inputs", str(tmp_path / "in.npz"),
                     "--output", str(tmp_path / "out.npz")]) == 0
        assert capsys.readouterr().out.startswith("tuple{0}: f32[2,3] ")
        with np.load(tmp_path / "out.npz") as got:
            # tanh(x) * y + 1 cancels near zero: within 1.5 eps of the largest |tanh(x) * y| + 1, the magnitude
            # of its terms (measured: 0.83 eps, 16 ulps; 8 draws of x and y).
            terms = float(np.max(np.abs(np.tanh(x) * y) + 1))
            assert_same(got["out0"], np.asarray(want[0]), atol=1.5 * float(np.finfo(np.float32).eps) * terms)
            if backend == "interpreter":
                assert_same(got["out1"], np.asarray(want[1]))  # the sum: bit for bit (8 draws)
            else:  # six additions in the kernel's order: within 6 eps of the sum of the magnitudes
                assert_within_sum_of_magnitudes(got["out1"], np.asarray(want[1]), np.abs(x).sum(), 6)


def test_run_verifies_stablehlo(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(JAX_PROGRAM.replace("%3 = stablehlo.add %1, %2 : tensor<2x3xf32>",
                                        "%3 = stablehlo.add %1, %cst : (tensor<2x3xf32>, tensor<f32>) -> "
                                        "tensor<2x3xf32>"))
    assert main(["run", str(path), "--backend", "interpreter"]) == 1
    one_line_error(capsys)


SHARD_MAP = """module @jit_shard_map_psum attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<8x16xf32>) -> (tensor<4x16xf32> {jax.result_info = "result"}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x", "y"} (%arg1: tensor<4x16xf32>) {
      %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x16xf32>
      %2 = stablehlo.multiply %arg1, %1 : tensor<4x16xf32>
      sdy.return %2 : tensor<4x16xf32>
    } : (tensor<8x16xf32>) -> tensor<4x16xf32>
    return %0 : tensor<4x16xf32>
  }
}
"""  # noqa: E501  (JAX's shard_map, which leaves the replicated manual axis "y" out)


def test_sdy_propagate_reads_shard_map_by_default(tmp_path, capsys):
    path = tmp_path / "shard_map.mlir"
    path.write_text(SHARD_MAP)
    for extra in ([], ["--implicit-manual-replication"]):
        assert main(["sdy", "propagate", str(path), *extra]) == 0
        assert "manual_axes={\"x\", \"y\"}" in capsys.readouterr().out
    assert main(["sdy", "propagate", str(path), "--strict-manual-axes"]) == 1
    assert 'invariant 2: manual axis "y" must shard a dimension or be replicated in in_shardings[0]' \
        in one_line_error(capsys)
    assert main(["sdy", "propagate", str(path), "--strict-manual-axes", "--implicit-manual-replication"]) == 1
    assert "not allowed with argument --strict-manual-axes" in one_line_error(capsys)


def test_layout_refuses_pictures_too_large_to_draw(capsys):
    from xlapy.shapes.picture import MAX_CELLS

    assert main(["layout", "u8[100000,100000]{1,0:T(2,2)}", "--max-rows", "1000000"]) == 1
    assert f"would have {100000 * 32} cells in 1 grid, more than {MAX_CELLS}" in one_line_error(capsys)
    # Grids without cells (a dimension of size 0) cost their drawing too: a million of them are refused.
    assert main(["layout", "s32[50000000,4,0]", "--max-grids", "1000000"]) == 1
    assert f"would have 0 cells in 1000000 grids, more than {MAX_CELLS}" in one_line_error(capsys)


@pytest.mark.parametrize(("output", "message"), [("missing_dir/y.npz", "No such directory missing_dir"),
                                                 (".", "Is a directory")])
def test_an_output_that_cannot_be_written_is_refused_before_running(tmp_path, monkeypatch, capsys, output, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.hlo").write_text("HloModule m\nENTRY e { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }")
    assert main(["run", "m.hlo", "--backend", "interpreter", "--output", output]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"xlapy: error: cannot write {output}: {message}\n"


def test_sums_of_infinities_print_nan_without_a_warning(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m\nENTRY e { ROOT c = f32[2] constant({inf, -inf}) }")
    assert main(["run", str(path), "--backend", "interpreter"]) == 0
    out, err = capsys.readouterr()
    crc = zlib.crc32(np.array([np.inf, -np.inf], np.float32).tobytes())
    assert (out, err) == (f"c: f32[2] [inf, -inf] sum=nan crc32={crc:08x}\n", "")


# -- xlapy run on whole modules: HLO passes, dumps, progress and the compile summary ----------------------------

WHOLE_MODULE = """HloModule loop

cond {
  c = (s32[], f32[8]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(ci, n), direction=LT
}

body {
  b = (s32[], f32[8]) parameter(0)
  bi = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  next = s32[] add(bi, one)
  v = f32[8] get-tuple-element(b), index=1
  k = f32[] constant(1.5)
  kb = f32[8] broadcast(k), dimensions={}
  m = f32[8] multiply(v, kb)
  ROOT t = (s32[], f32[8]) tuple(next, m)
}

ENTRY main {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  s = f32[8] add(x, y)
  onef = f32[] constant(1)
  ones = f32[8] broadcast(onef), dimensions={}
  sum1 = f32[8] multiply(s, ones)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, sum1)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  r = f32[8] get-tuple-element(w), index=1
  ROOT out = f32[8] negate(r)
}
"""

SUMMARY = re.compile(r"compiled loop: \d+ kernels?, \d+ library calls?, [\d,]+ buffer bytes, \d+\.\d\d s")


def _parse_dot(path: Path):
    import warnings

    import pydot

    with warnings.catch_warnings():  # pydot 4 calls pyparsing's camelCase names, which pyparsing 3.3 deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        (graph,) = pydot.graph_from_dot_data(path.read_text())

    def clusters(g) -> set[str]:
        found = set()
        for sub in g.get_subgraphs():
            found.add(sub.get_name().strip('"'))
            found |= clusters(sub)
        return found

    return graph, clusters(graph)


def test_run_compiles_a_whole_module_as_xla_cpu_runs_it(tmp_path, capsys):
    from tools.xla_cpu import run_on_xla_cpu

    hlo = tmp_path / "loop.hlo"
    hlo.write_text(WHOLE_MODULE)
    x, y = (np.linspace(-2, 2, 8, dtype=np.float32), np.arange(8, dtype=np.float32) / 7)
    np.savez(tmp_path / "in.npz", x=x, y=y)
    dumps = tmp_path / "dumps"
    assert main(["run", str(hlo), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                 "--dump-to", str(dumps)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("out: f32[8] [")
    # stdout holds the results; the summary is one line on stderr (which is no terminal here: no progress).
    assert SUMMARY.fullmatch(err.rstrip("\n")) and err.count("\n") == 1, err
    with np.load(tmp_path / "out.npz") as saved:
        assert_same(saved["out0"], run_on_xla_cpu(WHOLE_MODULE, x, y))  # multiplies by 1.5: bit for bit
    names = sorted(p.name for p in dumps.iterdir())
    # The HLO after each pass that changed it, numbered in order and named after the pass: algsimp drops s * 1.
    assert [n for n in names if re.fullmatch(r"\d{4}\.[\w .-]+\.after_algsimp\.hlo", n)], names
    # The optimised module as a graph: each fusion a cluster named as its kernel dumps, the loop's
    # computations clusters too.
    optimized = xlapy.compile(xlapy.parse_hlo(WHOLE_MODULE)).module
    fusions = [i.name for i in optimized.instructions if i.opcode == "fusion"]
    graph, clusters = _parse_dot(dumps / "loop.optimized.dot")
    assert graph.get_type() == "digraph"
    (loop,) = [i for i in optimized.instructions if i.opcode == "while"]
    assert clusters == {f"cluster_{f}" for f in fusions} | {f"cluster_{c.name}" for c in loop.called_computations}
    for fusion in fusions:
        assert any(n.startswith(f"{fusion}.00.") and n.endswith(".mlir") for n in names), (fusion, names)


def test_disable_all_hlo_passes_runs_the_module_as_given(tmp_path, capsys):
    from tools.xla_cpu import run_on_xla_cpu

    hlo = tmp_path / "loop.hlo"
    hlo.write_text(WHOLE_MODULE)
    x, y = np.full(8, 0.25, np.float32), np.arange(8, dtype=np.float32)
    np.savez(tmp_path / "in.npz", x, y)
    dumps = tmp_path / "dumps"
    assert main(["run", str(hlo), "--disable-all-hlo-passes", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz"), "--dump-to", str(dumps)]) == 0
    capsys.readouterr()
    with np.load(tmp_path / "out.npz") as saved:
        assert_same(saved["out0"], run_on_xla_cpu(WHOLE_MODULE, x, y))
    assert not [p.name for p in dumps.iterdir() if ".after_" in p.name and p.name[:4].isdigit()]
    # Nothing fused: every instruction of the module as given is a node, and only the loop makes clusters.
    graph, clusters = _parse_dot(dumps / "loop.optimized.dot")
    assert clusters == {"cluster_cond", "cluster_body"}

    def nodes(g) -> set[str]:
        return {n.get_name().strip('"') for n in g.get_nodes() if n.get_name() != "node"}.union(
            *(nodes(sub) for sub in g.get_subgraphs()))

    assert nodes(graph) == {i.name for i in xlapy.parse_hlo(WHOLE_MODULE).instructions}


def test_disable_hlo_passes_skips_the_named_passes(tmp_path, capsys):
    hlo = tmp_path / "loop.hlo"
    hlo.write_text(WHOLE_MODULE)
    np.savez(tmp_path / "in.npz", np.ones(8, np.float32), np.ones(8, np.float32))
    outputs = []
    for disabled in ([], ["--disable-hlo-passes=algsimp,cse"]):
        dumps = tmp_path / f"dumps{len(disabled)}"
        assert main(["run", str(hlo), *disabled, "--dump-to", str(dumps), "--inputs", str(tmp_path / "in.npz")]) == 0
        outputs.append(capsys.readouterr().out)
        passes = {p.name.rsplit(".after_", 1)[1] for p in dumps.glob("*.after_*.hlo")}
        assert ("algsimp.hlo" in passes) == (not disabled), passes
    value = np.float32(2)
    for _ in range(10):
        value = value * np.float32(1.5)  # exact in f32 (3**10 < 2**24)
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith(f"out: f32[8] [{-value}, {-value}, ")


@pytest.mark.parametrize(("argv", "message"), [
    (["--disable-hlo-passes", "no-such-pass"], "no-such-pass"),
    (["--disable-hlo-passes", "cse,,dce"], "argument --disable-hlo-passes: expected pass names separated by commas"),
    (["--disable-hlo-passes=cse", "--disable-all-hlo-passes"], "not allowed with argument --disable-hlo-passes"),
    (["--disable-all-hlo-passes", "--backend", "interpreter"], "need --backend cpu"),
])
def test_bad_hlo_pass_options_are_one_line_errors(tmp_path, capsys, argv, message):
    hlo = tmp_path / "loop.hlo"
    hlo.write_text(WHOLE_MODULE)
    assert main(["run", str(hlo), *argv]) == 1
    assert message in one_line_error(capsys)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_once_a_compile_has_run_a_second():
    from xlapy.cli import _Progress

    now = [100.0]
    terminal = _Terminal()
    progress = _Progress(terminal, clock=lambda: now[0])
    progress("HLO passes")
    assert terminal.getvalue() == ""  # short compiles print nothing
    now[0] = 102.25
    progress("kernel 1/3: fusion.2")
    progress("kernel 2/3: fusion.3")
    assert terminal.getvalue() == ("\r\x1b[Kxlapy: compiling (2 s): kernel 1/3: fusion.2"
                                   "\r\x1b[Kxlapy: compiling (2 s): kernel 2/3: fusion.3")
    progress.close()
    assert terminal.getvalue().endswith("fusion.3\r\x1b[K")  # the line is cleared when the compile ends
    not_a_terminal = io.StringIO()
    progress = _Progress(not_a_terminal, clock=lambda: now[0])
    now[0] += 60
    progress("kernel 1/3: fusion.2")
    progress.close()
    assert not_a_terminal.getvalue() == ""


# A kernel choosing among four operands by the thread's column: the chain of branches becomes a switch, which
# LLVM's loop vectorizer does not widen.
CONCATENATE_FOUR = """HloModule concat4
ENTRY e {
  a = s32[12,1] parameter(0)
  b = s32[12,1] parameter(1)
  c = s32[12,1] parameter(2)
  d = s32[12,1] parameter(3)
  ROOT r = s32[12,4] concatenate(a, b, c, d), dimensions={1}
}
"""


def _run_in_a_process(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess:
    """``xlapy run --compare`` on ``text`` in a process of its own with an empty kernel cache (every kernel goes
    through LLVM, which writes its diagnostics to file descriptor 2, where capsys does not look)."""
    hlo = tmp_path / f"{name}.hlo"
    hlo.write_text(text)
    environment = {**os.environ, "XLAPY_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "xlapy.cli", "run", str(hlo), "--compare"], capture_output=True,
                          text=True, timeout=600, env=environment, cwd=tmp_path)


def _assert_only_the_summary_on_stderr(result: subprocess.CompletedProcess, module_name: str) -> None:
    assert result.returncode == 0, result.stderr
    summary = SUMMARY.pattern.replace("compiled loop:", f"compiled {module_name}:")
    assert re.fullmatch(summary, result.stderr.rstrip("\n")) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout.splitlines()[-1].endswith("with the interpreter: max error 0 ulp"), result.stdout


def test_a_compile_prints_nothing_but_its_summary_on_stderr(tmp_path):
    """No diagnostic of LLVM's comes out of a compile: a thread loop the vectorizer cannot widen once made it report
    its failure ("remark: ... loop not vectorized: ...") on stderr."""
    _assert_only_the_summary_on_stderr(_run_in_a_process(tmp_path, "concat4", CONCATENATE_FOUR), "concat4")


@pytest.mark.slow
def test_a_jax_program_compiles_with_nothing_but_its_summary_on_stderr(tmp_path):
    """The corpus program where LLVM's diagnostics showed: the gradient of a max pool."""
    from tools.jax_corpus import PROGRAMS
    from xlapy.frontends.jax import lowered_text

    fun, args = PROGRAMS["maxpool_grad"]
    result = _run_in_a_process(tmp_path, "maxpool_grad", lowered_text(fun, *args))
    _assert_only_the_summary_on_stderr(result, "jit_maxpool_grad")


def test_compare_measures_a_sum_in_another_order_against_the_largest_magnitude(tmp_path, capsys):
    # The kernel sums a row on 64 lanes, the interpreter in order: where the sum cancels, the ulps are many, the
    # error in epsilons of the largest magnitude is what rounding explains.
    hlo = tmp_path / "sum.hlo"
    hlo.write_text("""HloModule sum
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e { x = f32[64,4096] parameter(0)  zero = f32[] constant(0)
  ROOT s = f32[64] reduce(x, zero), dimensions={1}, to_apply=add }
""")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    x[1:, 2048:] = -x[1:, :2048]  # these rows sum to zero exactly; each order leaves its own rounding residue
    x[0] = np.abs(x[0])  # the largest magnitude
    np.savez(tmp_path / "in.npz", x)
    assert main(["run", str(hlo), "--compare", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    with np.load(tmp_path / "out.npz") as saved:
        got = saved["out0"]
    expected = xlapy.evaluate(xlapy.parse_hlo(hlo.read_text()), x)
    from xlapy.runtime.ulps import error_in_epsilons, max_ulp_difference

    epsilons = error_in_epsilons(got, expected)
    assert 0 < epsilons < 4096  # within gamma(n) of the sum of magnitudes, measured against the largest result
    assert line == (f"compare s with the interpreter: max error {max_ulp_difference(got, expected)} ulp "
                    f"({epsilons:.3g} ε of the largest magnitude)")
