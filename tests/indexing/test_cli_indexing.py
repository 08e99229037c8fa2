"""`xlapy indexing FILE.hlo [--instruction NAME] [--input-to-output]`."""

from xlapy.cli import main

FUSION = """HloModule m
f {
  p0 = f32[1000, 1000] parameter(0)
  transpose_p0 = f32[1000, 1000]{0, 1} transpose(p0), dimensions={1, 0}
  ROOT a0 = f32[1000, 1000] add(p0, transpose_p0)
}
ENTRY e {
  p = f32[1000, 1000] parameter(0)
  ROOT fusion = f32[1000, 1000] fusion(p), kind=kLoop, calls=f
}
"""

SLICE = """HloModule m
ENTRY e {
  p0 = f32[10, 20, 50] parameter(0)
  ROOT slice = f32[5, 3, 25] slice(f32[10, 20, 50] p0), slice={[5:10:1], [3:20:7], [0:50:2]}
}
"""


def run(tmp_path, capsys, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "m.hlo"
    path.write_text(text)
    code = main(["indexing", str(path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fusion_root_prints_composed_maps(tmp_path, capsys):
    code, out, _ = run(tmp_path, capsys, FUSION)
    assert code == 0
    assert out == (
        "operand id = 0 (p)\n"
        "(d0, d1) -> (d0, d1),\ndomain:\nd0 in [0, 999],\nd1 in [0, 999]\n"
        "(d0, d1) -> (d1, d0),\ndomain:\nd0 in [0, 999],\nd1 in [0, 999]\n"
    )


def test_named_instruction_and_input_to_output(tmp_path, capsys):
    code, out, _ = run(tmp_path, capsys, FUSION, "--instruction", "transpose_p0")
    assert code == 0
    assert out == "operand id = 0 (p0)\n(d0, d1) -> (d1, d0),\ndomain:\nd0 in [0, 999],\nd1 in [0, 999]\n"
    code, out, _ = run(tmp_path, capsys, SLICE, "--input-to-output")
    assert code == 0
    assert out == (
        "output id = 0\n(d0, d1, d2) -> (d0 - 5, (d1 - 3) floordiv 7, d2 floordiv 2),\ndomain:\n"
        "d0 in [5, 9],\nd1 in [3, 17],\nd2 in [0, 48],\n(d1 - 3) mod 7 in [0, 0],\nd2 mod 2 in [0, 0]\n"
    )


def test_errors_are_one_line(tmp_path, capsys):
    code, out, err = run(tmp_path, capsys, FUSION, "--instruction", "nope")
    assert (code, out) == (1, "")
    assert err == f"xlapy: error: {tmp_path / 'm.hlo'}: no instruction named 'nope'\n"
    code, _, err = run(tmp_path, capsys, SLICE, "--input-to-output", "--operand", "3")
    assert code == 1
    assert err == "xlapy: error: slice has 1 operands, no operand 3\n"
    code, _, err = run(tmp_path, capsys, "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(\n}\n")
    assert code == 1 and err.startswith("xlapy: error: ") and err.count("\n") == 1
