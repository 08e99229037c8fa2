"""`xlapy run --inputs` / `--output`: arrays bound to parameters by name (or in
order when unnamed), every element type read and written as itself, and
untrusted files refused with one line before anything large is allocated."""

import io
import os
import struct
import warnings
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tools.compare import assert_same
from xlapy.cli import main
from xlapy.errors import XlapyError
from xlapy.runtime.array_files import npy_header, read_arguments, write_arrays
from xlapy.shapes import ELEMENT_TYPES, parse_shape

SUBTRACT = """HloModule sub

ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT d = f32[3] subtract(a, b)
}
"""

A = np.array([10, 20, 30], np.float32)
B = np.array([1, 2, 3], np.float32)


def run_subtract(tmp_path, capsys, module=SUBTRACT, **arrays):
    hlo = tmp_path / "sub.hlo"
    hlo.write_text(module)
    np.savez(tmp_path / "in.npz", **arrays)
    code = main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")])
    out, err = capsys.readouterr()
    return code, out, err


def saved_output(tmp_path) -> np.ndarray:
    with np.load(tmp_path / "out.npz") as saved:
        return saved["out0"]


def test_arrays_bind_by_name_whatever_their_order(tmp_path, capsys):
    code, _, _ = run_subtract(tmp_path, capsys, b=B, a=A)
    assert code == 0
    np.testing.assert_array_equal(saved_output(tmp_path), [9, 18, 27])


def test_arrays_bind_by_arg_position_names(tmp_path, capsys):
    code, _, _ = run_subtract(tmp_path, capsys, arg1=B, arg0=A)
    assert code == 0
    np.testing.assert_array_equal(saved_output(tmp_path), [9, 18, 27])


def test_unnamed_arrays_bind_in_order(tmp_path, capsys):
    hlo = tmp_path / "sub.hlo"
    hlo.write_text(SUBTRACT)
    np.savez(tmp_path / "in.npz", A, B)  # arr_0, arr_1
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")]) == 0
    np.testing.assert_array_equal(saved_output(tmp_path), [9, 18, 27])


def test_renamed_parameter_is_an_error_naming_parameters_and_keys(tmp_path, capsys):
    # Binding by file order would silently compute a - b with the arrays of another program.
    renamed = SUBTRACT.replace("b = f32[3] parameter(1)", "b.1 = f32[3] parameter(1)").replace("(a, b)", "(a, b.1)")
    code, out, err = run_subtract(tmp_path, capsys, renamed, b=B, a=A)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "no array for parameter 1 (b.1)" in err
    assert "no parameter for array b " in err
    assert "the file has b, a" in err and "the parameters are a, b.1" in err
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize(("arrays", "message"), [
    ({"a": A}, "no array for parameter 1 (b)"),
    ({"a": A, "b": B, "c": B}, "no parameter for array c "),
    ({"a": A, "arr_1": B}, "no array for parameter 1 (b); no parameter for array arr_1"),
    ({"a": A, "arg0": A, "b": B}, "two arrays for parameter 0 (a): a and arg0"),
    ({"arr_0": A}, "1 unnamed arrays (arr_0) for 2 parameters (a, b)"),
    ({"arr_0": A, "arr_2": B}, "2 unnamed arrays (arr_0, arr_2)"),
])
def test_arrays_that_do_not_match_the_parameters(tmp_path, capsys, arrays, message):
    code, out, err = run_subtract(tmp_path, capsys, **arrays)
    assert code == 1 and out == ""
    assert err.startswith("xlapy: error: ") and err.count("\n") == 1
    assert message in err


def test_wrong_shape_is_refused_before_reading(tmp_path, capsys):
    code, _, err = run_subtract(tmp_path, capsys, a=A, b=np.zeros((3, 1), np.float32))
    assert code == 1
    assert "array b (float32[3, 1]) for parameter 1 (b) has shape [3, 1], expected f32[3]" in err


def test_output_is_written_at_exactly_the_given_path(tmp_path, capsys):
    hlo = tmp_path / "sub.hlo"
    hlo.write_text(SUBTRACT)
    np.savez(tmp_path / "in.npz", a=A, b=B)
    target = tmp_path / "out.txt"
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(target)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["in.npz", "out.txt", "sub.hlo"]
    with np.load(target) as saved:
        np.testing.assert_array_equal(saved["out0"], [9, 18, 27])


EXTENSION_TYPES = ["bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e3m4",
                   "f8e4m3", "f8e8m0fnu", "f4e2m1fn", "s4", "u4", "s2", "u2", "s1", "u1", "pred", "c64", "s64", "u8"]


def sample(element_type: str) -> np.ndarray:
    """Values every type holds exactly."""
    dtype = ELEMENT_TYPES[element_type].dtype
    if dtype.kind == "c":
        return np.array([1 + 2j, -0.5j], dtype)
    if element_type.startswith(("s", "u", "pred")):
        return np.array([0, 1, 0, 1, 1, 0]).astype(dtype)
    return np.array([0, 1, 0.5, 2, 0, 1]).astype(dtype)


@pytest.mark.parametrize("element_type", EXTENSION_TYPES)
def test_every_element_type_round_trips_as_itself(tmp_path, element_type):
    array = sample(element_type)
    write_arrays(str(tmp_path / "y.npz"), {"x": array})
    shape = parse_shape(f"{element_type}[{array.size}]")
    (read,) = read_arguments(str(tmp_path / "y.npz"), [("x", shape)])
    assert read.dtype == array.dtype
    assert read.tobytes() == array.tobytes()
    # np.load reads the file as the ml_dtypes type too (ml_dtypes is imported).
    with np.load(tmp_path / "y.npz") as loaded:
        assert loaded["x"].dtype == array.dtype
        assert loaded["x"].tobytes() == array.tobytes()


@pytest.mark.parametrize("element_type", ["bf16", "f8e4m3fn", "s4", "f4e2m1fn"])
def test_raw_bytes_from_np_savez_take_the_parameter_type(tmp_path, element_type):
    array = sample(element_type)
    np.savez(tmp_path / "in.npz", x=array)  # numpy writes these types as raw bytes ('|V2', '|V1')
    with np.load(tmp_path / "in.npz") as loaded:
        assert loaded["x"].dtype.kind == "V"
    (read,) = read_arguments(str(tmp_path / "in.npz"), [("x", parse_shape(f"{element_type}[{array.size}]"))])
    assert read.dtype == array.dtype and read.tobytes() == array.tobytes()
    # Raw bytes of another width than the parameter's element are refused.
    with pytest.raises(XlapyError, match=r"raw \d-byte values .* for a f32 parameter"):
        read_arguments(str(tmp_path / "in.npz"), [("x", parse_shape(f"f32[{array.size}]"))])


def test_bf16_output_feeds_the_next_run(tmp_path, capsys):
    module = """HloModule double

ENTRY main {
  x = bf16[4] parameter(0)
  ROOT y = bf16[4] add(x, x)
}
"""
    hlo = tmp_path / "double.hlo"
    hlo.write_text(module)
    x = np.array([1.5, -3, 0.0078125, 100], ml_dtypes.bfloat16)
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "y.npz")]) == 0
    # out0 of one run is the (unnamed) argument of the next.
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(tmp_path / "y.npz"),
                 "--output", str(tmp_path / "z.npz")]) == 0
    with np.load(tmp_path / "z.npz") as saved:
        assert saved["out0"].dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(saved["out0"].astype(np.float32), [6, -12, 0.03125, 400])
    assert capsys.readouterr().out.splitlines()[-1].startswith("y: bf16[4] [6.0, -12.0, 0.03125, 400.0]")


def test_readme_gelu_example_runs_on_bf16_inputs_as_xla_does(tmp_path, capsys):
    from tools.xla_cpu import run_on_xla_cpu

    example = Path(__file__).parents[1] / "examples" / "gelu.hlo"
    text = example.read_text().replace("6,512,4096", "2,4,8")
    hlo = tmp_path / "gelu.hlo"
    hlo.write_text(text)
    x = np.linspace(-4, 4, 64).reshape(2, 4, 8).astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "in.npz", x)
    for backend in ("interpreter", "cpu"):
        assert main(["run", str(hlo), "--backend", backend, "--inputs", str(tmp_path / "in.npz"),
                     "--output", str(tmp_path / f"{backend}.npz")]) == 0
        with np.load(tmp_path / f"{backend}.npz") as saved:
            got = saved["out0"]
        assert got.dtype == ml_dtypes.bfloat16
        assert_same(got, run_on_xla_cpu(text, x))  # measured: bit for bit on both backends (6 inputs)


def npz_with_member(path: Path, member: bytes, name: str = "x.npy") -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, member)


def npy(descr: str, shape: tuple, data: bytes = b"", text: str | None = None) -> bytes:
    text = text or repr({"descr": descr, "fortran_order": False, "shape": shape})
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode() + data


CODE_HEADER = "{'descr': __import__('os').getcwd(), 'fortran_order': False, 'shape': (3,)}"
BAD_FILES = {
    "empty": (lambda p: p.write_bytes(b""), "an empty file"),
    "not a zip": (lambda p: p.write_bytes(b"hello, world\n" * 10), "not an .npz (zip) archive"),
    "plain npy": (lambda p: p.write_bytes(npy("<f4", (3,), A.tobytes())), "is a single .npy array"),
    "truncated": (lambda p: _truncated(p), "cannot read"),
    "pickle": (lambda p: np.savez(p, x=np.array([{"a": 1}, None], dtype=object)), "holds object values"),
    "strings": (lambda p: np.savez(p, x=np.array(["ab", "cd"])), "holds <U2 values"),
    "bytes": (lambda p: np.savez(p, x=np.array([b"ab"])), "holds |S2 values"),
    "structured": (lambda p: np.savez(p, x=np.zeros(3, [("a", "<f4"), ("b", "<i4")])), "holds records"),
    "datetime": (lambda p: np.savez(p, x=np.zeros(3, "datetime64[s]")), "holds datetime64[s] values"),
    "long double": (lambda p: np.savez(p, x=np.zeros(3, np.longdouble)), "which no XLA element type has"),
    "huge header v2": (lambda p: npz_with_member(p, b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0)),
                       "header of 4294967280 bytes"),
    "header of code": (lambda p: npz_with_member(p, npy("", (), text=CODE_HEADER)), "unreadable .npy header"),
    "nested header": (lambda p: npz_with_member(p, b"\x93NUMPY\x02\x00" + struct.pack("<I", 60000)
                                                + b"[" * 30000 + b"]" * 30000), "unreadable .npy header"),
    "negative shape": (lambda p: npz_with_member(p, npy("<f4", (-3,))), "bad shape (-3,)"),
    "missing data": (lambda p: npz_with_member(p, npy("<f4", (3,), b"\0" * 5)), "truncated: the data needs 12"),
    "not npy member": (lambda p: npz_with_member(p, b"hello", "x.txt"), "member x.txt: not an .npy array"),
    "bad magic": (lambda p: npz_with_member(p, b"\x93NUMPZ\x01\x00" + b"\0" * 20), "bad magic"),
    "unknown version": (lambda p: npz_with_member(p, b"\x93NUMPY\x09\x00" + b"\0" * 20), "version 9.0"),
    "duplicate member": (lambda p: _duplicated(p), "member x.npy: appears twice in the archive"),
    "directory": (lambda p: p.mkdir(), "a directory"),
    "fifo": (lambda p: os.mkfifo(p), "not a regular file"),
    "missing": (lambda p: None, "No such file or directory"),
}


def _duplicated(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("x.npy", npy("<f4", (3,), A.tobytes()))
            archive.writestr("x.npy", npy("<f4", (3,), B.tobytes()))


def _truncated(path: Path) -> None:
    np.savez(path, x=A)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_input_files_are_one_line_errors(tmp_path, capsys, case):
    make, message = BAD_FILES[case]
    hlo = tmp_path / "one.hlo"
    hlo.write_text("HloModule one\n\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT y = f32[3] negate(x)\n}\n")
    inputs = tmp_path / "in.npz"
    make(inputs)
    assert main(["run", str(hlo), "--backend", "interpreter", "--inputs", str(inputs)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("xlapy: error: ") and err.count("\n") == 1
    assert message in err


def test_a_huge_declared_member_is_refused_before_allocating(tmp_path, monkeypatch):
    # Matching the parameter's shape, but more than the memory limit allows.
    npz_with_member(tmp_path / "in.npz", npy("<f4", (1 << 20,), b"\0" * 16))
    monkeypatch.setenv("XLAPY_MAX_BYTES", str(1 << 20))
    with pytest.raises(XlapyError, match=r"reading x \(float32\[1048576\]\) .* needs 4 MiB \(4194304 bytes\), "
                                         r"more than the 1 MiB \(1048576 bytes\) available"):
        read_arguments(str(tmp_path / "in.npz"), [("x", parse_shape("f32[1048576]"))])
    # And a shape that is not the parameter's is refused whatever its size.
    npz_with_member(tmp_path / "big.npz", npy("<f4", (1 << 40,)))
    with pytest.raises(XlapyError, match=r"has shape \[1099511627776\], expected f32\[4\]"):
        read_arguments(str(tmp_path / "big.npz"), [("x", parse_shape("f32[4]"))])


def test_a_zip_bomb_member_reads_only_the_declared_bytes(tmp_path):
    # The member claims 3 floats but decompresses to 8 MiB: only 12 bytes are read.
    with zipfile.ZipFile(tmp_path / "in.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", npy("<f4", (3,), np.array([1, 2, 3], "<f4").tobytes() + b"\0" * (8 << 20)))
    (x,) = read_arguments(str(tmp_path / "in.npz"), [("x", parse_shape("f32[3]"))])
    np.testing.assert_array_equal(x, [1, 2, 3])


def test_big_endian_and_fortran_order_are_read_as_values(tmp_path):
    values = np.arange(6, dtype=">i4").reshape(2, 3)
    np.savez(tmp_path / "in.npz", x=values, y=np.asfortranarray(values.astype(np.float64)))
    x, y = read_arguments(str(tmp_path / "in.npz"), [("x", parse_shape("s32[2,3]")), ("y", parse_shape("f64[2,3]"))])
    assert x.dtype == np.int32 and y.dtype == np.float64
    np.testing.assert_array_equal(x, [[0, 1, 2], [3, 4, 5]])
    np.testing.assert_array_equal(y, [[0, 1, 2], [3, 4, 5]])


def test_header_written_is_numpys():
    for array in (np.zeros((2, 3), np.float32), np.array(True), np.zeros(0, np.complex64)):
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(array))
        assert npy_header(array) == buffer.getvalue()


def test_token_parameters_take_no_array(tmp_path):
    np.savez(tmp_path / "in.npz", x=A)
    assert read_arguments(str(tmp_path / "in.npz"), [("t", parse_shape("token[]")), ("x", parse_shape("f32[3]"))]
                          )[0] == ()


def test_tuple_parameters_are_refused(tmp_path):
    np.savez(tmp_path / "in.npz", p=A)
    with pytest.raises(XlapyError, match=r"parameter 0 \(p\) is a tuple"):
        read_arguments(str(tmp_path / "in.npz"), [("p", parse_shape("(f32[3], f32[3])"))])
