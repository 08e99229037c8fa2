"""Compiled kernels, cached in memory and on disk.

The key is a fingerprint of everything the machine code depends on: the
fused computation's text, the fusion's operand and result shapes (with
layouts), which of its buffers are passed as one slice, whether it writes
results of the program (``codegen/streaming.py``), the device, the
compile options, the host CPU, its features and cores, the versions of LLVM,
llvmlite and xDSL, and the source of the whole xlapy package (the code
generator uses its IR, indexing, shapes and more).

On disk (``$XLAPY_CACHE_DIR``, default ``~/.cache/xlapy``) an entry is

    magic line | header (one JSON line: key, launch dimensions, code size) | object code | SHA-256 of all before

An entry is used only if it is a regular file of bounded size whose checksum,
key and sizes all match and whose object code passes the backend's checks;
anything else is deleted and compiled again, never trusted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xlapy.codegen.launch import Device, LaunchDimensions, host_cores
from xlapy.codegen.streaming import writes_program_result
from xlapy.errors import XlapyError
from xlapy.files import read_regular_file
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.printer import print_computation
from xlapy.version import __version__

# Bumped whenever the layout of an entry changes: older entries then fail the magic check.
_MAGIC = b"xlapy-kernel-2\n"
_DIGEST_BYTES = 32
# No kernel comes near this; a larger file is not one of ours.
MAX_ENTRY_BYTES = 64 << 20
# Launch dimensions beyond these are not ones the emitter makes.
_MAX_LAUNCH = 1 << 62


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
def source_hash() -> str:
    """A hash of the source of the whole xlapy package (file names and contents), so that a changed compiler,
    IR, simplifier or shape library never reuses kernels of an older one (even between releases)."""
    return tree_hash(Path(__file__).parent.parent)  # this file is xlapy/runtime/kernel_cache.py


def tree_hash(root: Path) -> str:
    """A hash of the names and contents of the Python files under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@functools.cache
def toolchain() -> str:
    """The versions of the libraries the machine code depends on: LLVM, llvmlite and xDSL."""
    from importlib.metadata import PackageNotFoundError, version

    import llvmlite
    import llvmlite.binding as llvm

    try:
        xdsl_version = version("xdsl")
    except PackageNotFoundError:
        xdsl_version = "unknown"
    return f"llvm {'.'.join(map(str, llvm.llvm_version_info))}, llvmlite {llvmlite.__version__}, xdsl {xdsl_version}"


@functools.cache
def host_cpu() -> str:
    """The host CPU's name and features, which the code is tuned for and may use."""
    import llvmlite.binding as llvm

    return f"{llvm.get_process_triple()} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"


def key_inputs(fusion: HloInstruction, device: Device, options: str = "",
               slice_indices: Sequence[int] | None = None) -> dict[str, str]:
    """Everything a kernel's key covers, by name (see ``fingerprint``)."""
    return {
        "format": _MAGIC.decode().strip(),
        "xlapy": __version__,
        "source": source_hash(),
        "toolchain": toolchain(),
        "host": host_cpu(),
        # A scatter's operand-rows split makes a block per core (``scatter.operand_row_blocks``).
        "cores": str(host_cores()),
        "device": repr(device),
        "options": options,
        "computation": _computation_text(fusion.fused_computation),
        "result": str(fusion.shape),
        "operands": ",".join(str(op.shape) for op in fusion.operands),
        # Buffers passed as one slice are one pointer argument of the code.
        "slice_indices": "" if slice_indices is None else ",".join(map(str, slice_indices)),
        # The program's results are written with streaming stores from a smaller size on.
        "program_result": str(writes_program_result(fusion)),
    }


def _computation_text(computation) -> str:
    """The text of ``computation`` and of every computation it calls (reducers, comparators...): a callee is
    printed by name only, and the same name may stand for different code in different modules."""
    texts, seen, pending = [], set(), [computation]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        texts.append(print_computation(current))
        pending.extend(current.called_computations())
    return _without_names("\n".join(texts))


_NAME = re.compile(r"%([^\s,(){}=]+)")
_HEADER_PARAMETER = re.compile(r"[^\s(),]+: ")
_METADATA = re.compile(r", metadata=\{[^}]*\}")


def _without_names(text: str) -> str:
    """``text`` with every instruction and computation named by its order of appearance and without
    metadata: the code generated for a fusion does not depend on names (its entry function is always
    ``main``), so fusions that differ only in names share one kernel, as XLA's canonical printing lets
    identical kernels be reused."""
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        return f"%{numbers.setdefault(match.group(1), len(numbers))}"

    lines = []
    for line in _METADATA.sub("", text).split("\n"):
        if not line.startswith(" "):  # a computation's header: its parameters' names go, their shapes stay
            line = _HEADER_PARAMETER.sub("", line)
        lines.append(_NAME.sub(number, line))
    return "\n".join(lines)


def fingerprint(fusion: HloInstruction, device: Device, options: str = "",
                slice_indices: Sequence[int] | None = None) -> str:
    """The cache key of ``fusion``'s kernel for ``device`` compiled with ``options`` (a description of the
    compile options that change the code) and the ``slice_indices`` of its buffers (``pipeline.lower_fusion``)."""
    text = json.dumps(key_inputs(fusion, device, options, slice_indices), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


_memory: dict[str, CachedKernel] = {}
_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forgets the kernels compiled in this process (the disk cache stays)."""
    with _lock:
        _memory.clear()


def cached_kernel(key: str, build: Callable[[], tuple[bytes, LaunchDimensions]],
                  load: Callable[[bytes], object],
                  check: Callable[[object, LaunchDimensions], None] | None = None) -> CachedKernel:
    """The kernel under ``key``: from memory, else from disk, else ``build()``
    (object code and launch dimensions) stored on disk, then ``load``ed.
    ``check(kernel, launch)`` raises an ``XlapyError`` when a kernel does not fit
    what the caller compiles (an entry from disk is then discarded)."""
    with _lock:
        found = _memory.get(key)
    if found is not None:
        return found
    path = cache_directory() / f"{key}.kernel"
    result = None
    entry = _read(path, key)
    if entry is not None:
        try:
            result = CachedKernel(load(entry[0]), entry[1], from_disk=True)
            if check is not None:
                check(result.kernel, result.launch)
        except (XlapyError, RuntimeError):
            # Object code that the checks refuse (XlapyError), that LLVM fails to load (RuntimeError) or that
            # does not fit is as bad as a bad checksum.
            _discard(path)
            result = None
    if result is None:
        code, launch = build()
        result = CachedKernel(load(code), launch)
        if check is not None:
            check(result.kernel, result.launch)
        _write(path, key, code, launch)
    with _lock:
        _memory[key] = result
    return result


def _read(path: Path, key: str) -> tuple[bytes, LaunchDimensions] | None:
    # Not a link, FIFO or device, nor larger than any kernel.
    try:
        data = read_regular_file(path, nofollow=True, max_bytes=MAX_ENTRY_BYTES)
    except XlapyError:
        if os.path.lexists(path):
            _discard(path)
        return None
    try:
        return _parse(data, key)
    except ValueError:
        _discard(path)
        return None


def _parse(data: bytes, key: str) -> tuple[bytes, LaunchDimensions]:
    """The object code and launch dimensions of an entry for ``key``; ``ValueError`` unless it is exactly one."""
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _DIGEST_BYTES:
        raise ValueError("bad magic")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch")
    header_end = body.find(b"\n", len(_MAGIC))
    if header_end < 0:
        raise ValueError("no header")
    try:
        header = json.loads(body[len(_MAGIC):header_end].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ValueError("bad header") from None
    if not isinstance(header, dict) or set(header) != {"key", "launch", "size"}:
        raise ValueError("bad header")
    if header["key"] != key:
        raise ValueError("an entry for another key")
    code = body[header_end + 1:]
    if header["size"] != len(code):
        raise ValueError("size mismatch")
    launch = header["launch"]
    if not (isinstance(launch, list) and len(launch) == 3
            and all(type(v) is int and 1 <= v <= _MAX_LAUNCH for v in launch)):
        raise ValueError("bad launch dimensions")
    return code, LaunchDimensions(*launch)


def _write(path: Path, key: str, code: bytes, launch: LaunchDimensions) -> None:
    header = {"key": key, "launch": [launch.threads_per_block, launch.blocks, launch.vector_size], "size": len(code)}
    body = _MAGIC + json.dumps(header).encode() + b"\n" + code
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written under a temporary name and renamed: readers never see half a file.
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            temporary = f.name
            f.write(body + hashlib.sha256(body).digest())
        os.replace(temporary, path)
    except OSError:  # an unwritable cache only costs compile time
        if temporary is not None:
            _discard(Path(temporary))


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
