"""The `xlapy` command: `xlapy layout`, its SVG, and one-line errors."""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import xlapy
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


@pytest.mark.parametrize(("text", "where"), [
    ("f32[3,5]{1,0:T(2,", "1:18:"),
    ("q32[3]", "1:1: unknown element type 'q32'"),
    ("f32[3,5]{1,1}", "1:12: minor_to_major {1,1} is not a permutation"),
    ("f32[3]{0:T(2,2)}", "1:14: tile (level 0) has 2 dimensions"),
    ("f32[3,5]{1,0:T(2,*)}", "1:18: '*' cannot be the most-minor tile dimension"),
    ("f32[-3]", "1:5: negative size -3"),
    ("(f32[3])", "is not an array shape"),
])
def test_bad_shapes_exit_1_with_one_line(text, where):
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
    from tests.xla_cpu import run_on_xla_cpu
    from xlapy.hlo.fake_arguments import make_fake_arguments

    example = Path(__file__).parents[1] / "examples" / "gelu.hlo"
    text = example.read_text().replace("6,512,4096", "6,8,64")
    module = xlapy.parse_hlo(text)
    (x,) = make_fake_arguments(module)
    got = xlapy.evaluate(module, x)
    want = np.asarray(run_on_xla_cpu(text, x))
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -7, atol=2 ** -8)
