"""Compiled kernels, cached in memory and on disk.

The key is a fingerprint of everything the machine code depends on: the
fused computation's text, the fusion's operand and result shapes (with
layouts), the device, the host CPU and its features, the versions of xlapy
and LLVM, and the code generator's source. On disk (``$XLAPY_CACHE_DIR``, default ``~/.cache/xlapy``) an
entry is a header (a JSON line with the launch dimensions and the SHA-256 of
the object code) followed by the object code; an entry that does not read
back exactly is deleted and compiled again, never trusted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.printer import print_computation

_MAGIC = b"xlapy-kernel-1\n"


@dataclass
class CachedKernel:
    """A runnable kernel and how to launch it."""

    kernel: object  # xlapy.codegen.backends.cpu.CpuKernel
    launch: LaunchDimensions
    from_disk: bool = False


def cache_directory() -> Path:
    configured = os.environ.get("XLAPY_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "xlapy"


@functools.cache
def _code_generator_hash() -> str:
    """A hash of the code generator's source, so that a changed compiler never
    reuses kernels of an older one (even between releases)."""
    import xlapy.codegen

    root = Path(xlapy.codegen.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def fingerprint(fusion: HloInstruction, device: Device) -> str:
    import llvmlite.binding as llvm

    from xlapy import __version__

    features = llvm.get_host_cpu_features().flatten()
    parts = [
        __version__, _code_generator_hash(), ".".join(map(str, llvm.llvm_version_info)),
        llvm.get_host_cpu_name(), features, repr(device),
        print_computation(fusion.fused_computation), str(fusion.shape),
        ",".join(str(op.shape) for op in fusion.operands),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


_memory: dict[str, CachedKernel] = {}
_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forgets the kernels compiled in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()


def cached_kernel(key: str, build: Callable[[], tuple[bytes, LaunchDimensions]],
                  load: Callable[[bytes], object]) -> CachedKernel:
    """The kernel under ``key``: from memory, else from disk, else ``build()``
    (object code and launch dimensions) stored on disk, then ``load``ed."""
    with _lock:
        found = _memory.get(key)
    if found is not None:
        return found
    path = cache_directory() / f"{key}.kernel"
    entry = _read(path)
    if entry is not None:
        try:
            result = CachedKernel(load(entry[0]), entry[1], from_disk=True)
        except Exception:  # an object LLVM cannot load is as corrupt as a bad checksum
            _discard(path)
            entry = None
    if entry is None:
        code, launch = build()
        _write(path, code, launch)
        result = CachedKernel(load(code), launch)
    with _lock:
        _memory[key] = result
    return result


def _read(path: Path) -> tuple[bytes, LaunchDimensions] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("bad magic")
        header_end = data.index(b"\n", len(_MAGIC))
        header = json.loads(data[len(_MAGIC):header_end])
        code = data[header_end + 1:]
        if len(code) != header["size"] or hashlib.sha256(code).hexdigest() != header["sha256"]:
            raise ValueError("checksum mismatch")
        launch = LaunchDimensions(*header["launch"])
    except (ValueError, KeyError, TypeError):
        _discard(path)
        return None
    return code, launch


def _write(path: Path, code: bytes, launch: LaunchDimensions) -> None:
    header = {"size": len(code), "sha256": hashlib.sha256(code).hexdigest(),
              "launch": [launch.threads_per_block, launch.blocks, launch.vector_size]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written under a temporary name and renamed: readers never see half a file.
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            f.write(_MAGIC + json.dumps(header).encode() + b"\n" + code)
        os.replace(f.name, path)
    except OSError:
        pass  # an unwritable cache only costs compile time


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
