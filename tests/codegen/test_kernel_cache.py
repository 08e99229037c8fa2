"""The on-disk kernel cache: an entry is used only when it is exactly what was compiled for the same key; any
other file under an entry's name is discarded and the kernel compiled again, without hanging or crashing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.codegen.launch import Device
from xlapy.runtime import kernel_cache
from xlapy.runtime.kernel_cache import clear_memory_cache

BINARY = """HloModule m
f {{ a = f32[64] parameter(0)  b = f32[64] parameter(1)  ROOT r = f32[64] {op}(a, b) }}
ENTRY e {{ x = f32[64] parameter(0)  y = f32[64] parameter(1)
  ROOT fusion = f32[64] fusion(x, y), kind=kLoop, calls=f }}
"""
X = np.arange(64, dtype=np.float32)
Y = np.full(64, 3, np.float32)
EXPECTED = {"add": X + Y, "subtract": X - Y}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    clear_memory_cache()
    yield tmp_path
    clear_memory_cache()


def _compile_and_check(op: str) -> None:
    clear_memory_cache()
    result = xlapy.compile(xlapy.parse_hlo(BINARY.format(op=op)))(X, Y)
    np.testing.assert_array_equal(result, EXPECTED[op])


def _entry(directory: Path) -> Path:
    (entry,) = directory.glob("*.kernel")
    return entry


def _split(data: bytes) -> tuple[bytes, dict, bytes]:
    """magic, header, object code of a well-formed entry."""
    magic_end = data.index(b"\n") + 1
    header_end = data.index(b"\n", magic_end)
    return data[:magic_end], json.loads(data[magic_end:header_end]), data[header_end + 1:-32]


def _forge(magic: bytes, header: dict | bytes, code: bytes) -> bytes:
    """An entry with a correct checksum around whatever it is given."""
    body = magic + (header if isinstance(header, bytes) else json.dumps(header).encode()) + b"\n" + code
    return body + hashlib.sha256(body).digest()


def test_the_entry_of_another_fusion_is_not_run(cache):
    _compile_and_check("add")
    add_entry = _entry(cache)
    add_bytes = add_entry.read_bytes()
    add_entry.unlink()
    _compile_and_check("subtract")
    subtract_entry = _entry(cache)
    subtract_bytes = subtract_entry.read_bytes()
    subtract_entry.write_bytes(add_bytes)  # add's valid entry under subtract's name
    _compile_and_check("subtract")
    assert subtract_entry.read_bytes() == subtract_bytes  # discarded and written again
    # The header records the key, which is what tells the two entries apart.
    assert _split(subtract_bytes)[1]["key"] == subtract_entry.stem != add_entry.stem


def test_edited_headers_are_discarded_and_recompiled(cache):
    _compile_and_check("add")
    entry = _entry(cache)
    good = entry.read_bytes()
    magic, header, code = _split(good)
    threads, blocks, vector = header["launch"]
    magic_end = len(magic)
    edits = [
        # Unchecked edits: the checksum covers the header.
        good.replace(json.dumps(header["launch"]).encode(), json.dumps([threads, max(1, blocks // 2), vector])
                     .encode()),
        good[:magic_end] + b"{" + good[magic_end + 1:],
        good[:-1],
        # Forged with a correct checksum: the launch must still fit the kernel and cover the output.
        _forge(magic, {**header, "launch": [threads, blocks + 1, vector]}, code),
        _forge(magic, {**header, "launch": [max(1, threads // 2), blocks, vector]}, code),
        _forge(magic, {**header, "launch": [0, 0, 0]}, code),
        _forge(magic, {**header, "launch": ["1", None, 2.5]}, code),
        _forge(magic, {**header, "launch": [1 << 70, 1, 1]}, code),
        _forge(magic, {**header, "size": len(code) + 1}, code),
        _forge(magic, {k: v for k, v in header.items() if k != "key"}, code),
        _forge(magic, [header], code),
        _forge(magic, b"[" * 100000, code),
        _forge(magic, b"\xff\xfe", code),
        _forge(b"xlapy-kernel-1\n", header, code),  # an older format
    ]
    for damaged in edits:
        entry.write_bytes(damaged)
        _compile_and_check("add")
        assert entry.read_bytes() == good


def _forged_objects(code: bytes) -> list[bytes]:
    elf_header_end = 64
    return [
        b"garbage",
        b"\x7fELF" + bytes(60),
        code[:len(code) // 2],
        code[:elf_header_end] + bytes(len(code) - elf_header_end),
        code[:4] + bytes([1]) + code[5:],  # 32-bit class
        code[:18] + (3).to_bytes(2, "little") + code[20:],  # another machine
        code[:40] + (len(code) - 8).to_bytes(8, "little") + code[48:],  # section headers past the end
        bytes(b ^ 0x55 for b in code),
    ]


def test_bad_object_code_under_a_valid_header_does_not_crash(tmp_path):
    """In a child process: LLVM's linker aborts the process on malformed objects, so they must never reach it."""
    script = textwrap.dedent(f"""
        import hashlib, json, os, sys
        import numpy as np, xlapy
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_kernel_cache import BINARY, EXPECTED, X, Y, _entry, _forge, _forged_objects, _split
        from xlapy.runtime.kernel_cache import clear_memory_cache
        from pathlib import Path
        cache = Path(os.environ["XLAPY_CACHE_DIR"])
        module = xlapy.parse_hlo(BINARY.format(op="add"))
        xlapy.compile(module)
        entry = _entry(cache)
        good = entry.read_bytes()
        magic, header, code = _split(good)
        for bad in _forged_objects(code):
            entry.write_bytes(_forge(magic, {{**header, "size": len(bad)}}, bad))
            clear_memory_cache()
            np.testing.assert_array_equal(xlapy.compile(module)(X, Y), EXPECTED["add"])
            assert entry.read_bytes() == good
        print("ok")
    """)
    env = {**os.environ, "XLAPY_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_entries_that_are_not_small_regular_files_are_not_read(cache, kind):
    _compile_and_check("add")
    entry = _entry(cache)
    good = entry.read_bytes()
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "dev-zero":
        entry.symlink_to("/dev/zero")
    elif kind == "directory":
        entry.mkdir()
    else:
        with open(entry, "wb") as f:  # sparse: no disk used
            f.truncate(kernel_cache.MAX_ENTRY_BYTES + 1)
    _compile_and_check("add")  # neither hangs nor reads gigabytes
    if kind != "directory":  # a directory cannot be replaced by a file; the kernel is compiled anyway
        assert entry.is_file() and not entry.is_symlink() and entry.read_bytes() == good
    assert not list(cache.glob("*.tmp"))


def _fusion():
    module = xlapy.parse_hlo(BINARY.format(op="add"))
    return next(i for i in module.entry.instructions if i.opcode == "fusion")


@pytest.mark.parametrize("name", ["source_hash", "toolchain", "host_cpu", "host_cores"])
def test_each_input_of_the_key_changes_it(monkeypatch, name):
    fusion, device = _fusion(), Device.host()
    before = kernel_cache.fingerprint(fusion, device)
    monkeypatch.setattr(kernel_cache, name, lambda: "something else")
    assert kernel_cache.fingerprint(fusion, device) != before


def test_device_options_and_fusion_change_the_key():
    fusion, device = _fusion(), Device.host()
    key = kernel_cache.fingerprint(fusion, device, "a")
    assert kernel_cache.fingerprint(fusion, device, "b") != key
    assert kernel_cache.fingerprint(fusion, device.scalar(), "a") != key
    other = next(i for i in xlapy.parse_hlo(BINARY.format(op="subtract")).entry.instructions if i.opcode == "fusion")
    assert kernel_cache.fingerprint(other, device, "a") != key
    assert kernel_cache.fingerprint(fusion, device, "a") == key


def test_fusions_that_differ_only_in_names_share_a_key():
    renamed = _fusion()
    for instr in renamed.fused_computation.instructions:
        instr.name = f"{instr.name}.renamed"
    renamed.fused_computation.name = "another_name"
    device = Device.host()
    assert kernel_cache.fingerprint(renamed, device, "a") == kernel_cache.fingerprint(_fusion(), device, "a")


def test_a_changed_input_rebuilds_the_kernel(cache, monkeypatch):
    _compile_and_check("add")
    writes = []
    real = kernel_cache._write
    monkeypatch.setattr(kernel_cache, "_write", lambda *a: writes.append(a) or real(*a))
    _compile_and_check("add")
    assert not writes  # from disk
    monkeypatch.setattr(kernel_cache, "toolchain", lambda: "llvm 99")
    _compile_and_check("add")
    assert len(writes) == 1 and len(list(cache.glob("*.kernel"))) == 2


def test_the_source_hash_covers_every_file_of_the_package(tmp_path):
    import xlapy as package

    root = Path(package.__file__).parent
    assert kernel_cache.source_hash.__wrapped__() == kernel_cache.tree_hash(root)  # uncached: as of now
    for part in ("codegen", "indexing", "hlo", "shapes", "runtime"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "a.py").write_text("x = 1\n")
    before = kernel_cache.tree_hash(tmp_path)
    for part in ("codegen", "indexing", "hlo", "shapes", "runtime"):
        (tmp_path / part / "a.py").write_text("x = 2\n")
        after = kernel_cache.tree_hash(tmp_path)
        assert after != before
        before = after
    (tmp_path / "indexing" / "a.py").rename(tmp_path / "indexing" / "b.py")
    assert kernel_cache.tree_hash(tmp_path) != before


def test_only_refused_object_code_is_recompiled_a_failing_check_is_not_hidden(cache):
    """An entry that its check refuses with an XlapyError is rebuilt; any other exception is a bug and
    propagates."""
    from xlapy.codegen.launch import LaunchDimensions
    from xlapy.errors import VerifyError

    launch = LaunchDimensions(1, 1, 1)
    builds = []

    def build():
        builds.append(1)
        return b"code", launch

    def load(code):
        return code

    kernel_cache.cached_kernel("k", build, load)
    assert len(builds) == 1 and (cache / "k.kernel").is_file()

    def refuse(kernel, launch):
        raise VerifyError("does not fit")

    clear_memory_cache()
    with pytest.raises(VerifyError, match="does not fit"):  # the rebuilt kernel is refused too
        kernel_cache.cached_kernel("k", build, load, refuse)
    assert len(builds) == 2

    assert not (cache / "k.kernel").exists()  # the refused entry is gone
    clear_memory_cache()
    kernel_cache.cached_kernel("k", build, load)
    assert len(builds) == 3

    def broken(kernel, launch):
        raise TypeError("a bug in the check")

    clear_memory_cache()
    with pytest.raises(TypeError, match="a bug in the check"):
        kernel_cache.cached_kernel("k", build, load, broken)
    # The entry was read and kept, not silently discarded and rebuilt.
    assert len(builds) == 3 and (cache / "k.kernel").is_file()
