"""`xlapy run` on the CPU backend, and the on-disk kernel cache."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

import xlapy
from xlapy.cli import main
from xlapy.runtime.kernel_cache import clear_memory_cache

SMALL_GELU = (Path(__file__).parents[2] / "examples" / "gelu.hlo").read_text().replace("6,512,4096", "2,8,64")


def test_run_compare_bench_and_dumps(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path / "cache"))
    hlo = tmp_path / "gelu.hlo"
    hlo.write_text(SMALL_GELU)
    dumps = tmp_path / "dumps"
    assert main(["run", str(hlo), "--compare", "--bench", "--repeat", "3", "--dump-to", str(dumps),
                 "--dump-pass-re", "emitter|unroll"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("fusion: bf16[2,8,64] [")
    assert out[1] == "compare fusion with the interpreter: max error 0 ulp"
    assert out[2].startswith("bench (cpu): median ") and out[2].endswith(" over 3 runs")
    # --dump-pass-re picks the kernel stages; the HLO dumps and the module's graph are written alongside.
    assert sorted(p.name for p in dumps.glob("*.mlir")) == ["fusion.00.fusion-emitter.mlir",
                                                            "fusion.07.unroll-loops.mlir"]
    assert "xla.loop" in (dumps / "fusion.00.fusion-emitter.mlir").read_text()


def test_run_reports_bad_options_in_one_line(tmp_path, capsys):
    hlo = tmp_path / "gelu.hlo"
    hlo.write_text(SMALL_GELU)
    assert main(["run", str(hlo), "--dump-to", str(tmp_path / "d"), "--dump-pass-re", "("]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad --dump-pass-re" in err
    assert main(["run", str(hlo), "--backend", "interpreter", "--compare"]) == 1
    assert "need --backend cpu" in capsys.readouterr().err


def test_unsupported_entry_op_is_one_line(tmp_path, capsys):
    hlo = tmp_path / "custom.hlo"
    hlo.write_text("""HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT d = f32[2,2] custom-call(a), custom_call_target="no_such_target"
}""")
    assert main(["run", str(hlo)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot run m: custom-call d" in err and "no_such_target" in err


def test_corrupt_cache_entries_are_discarded(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    module = xlapy.parse_hlo(SMALL_GELU)
    x = np.linspace(-3, 3, 2 * 8 * 64).reshape(2, 8, 64).astype(ml_dtypes.bfloat16)
    clear_memory_cache()
    expected = xlapy.compile(module)(x)
    (entry,) = tmp_path.glob("*.kernel")
    for damage in (lambda b: b[:-10], lambda b: b[:40] + bytes([b[40] ^ 0xFF]) + b[41:], lambda b: b"garbage"):
        entry.write_bytes(damage(entry.read_bytes()) if entry.exists() else b"garbage")
        clear_memory_cache()
        np.testing.assert_array_equal(xlapy.compile(module)(x), expected)
        # The damaged entry was replaced by a good one.
        assert entry.read_bytes().startswith(b"xlapy-kernel-2\n")


def test_disk_cache_is_used_after_the_memory_cache_is_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    module = xlapy.parse_hlo(SMALL_GELU)
    clear_memory_cache()
    xlapy.compile(module)
    (entry,) = tmp_path.glob("*.kernel")
    stamp = entry.stat().st_mtime_ns
    clear_memory_cache()
    from xlapy.runtime import kernel_cache

    calls = []
    real = kernel_cache._write
    monkeypatch.setattr(kernel_cache, "_write", lambda *a: calls.append(a) or real(*a))
    xlapy.compile(module)
    assert not calls and entry.stat().st_mtime_ns == stamp
