"""Entry points that run modules: ``evaluate`` (with bad arguments too),
``compile`` plus running the executable (checked against the interpreter),
and the kernel cache with damaged entries."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import tempfile
from pathlib import Path

import numpy as np

from tools.compare import leaves
from tools.fuzz import seeds
from tools.fuzz.compare import difference, result_slack, uncomparable
from tools.fuzz.grammar import random_module
from tools.fuzz.outcome import Outcome, wrong
from tools.fuzz.targets_text import mutated

# Larger results are not compared: the comparison's float64 copies would not fit the worker's memory cap.
_MAX_COMPARED_ELEMENTS = 20_000_000

ARGUMENT_EDITS = ["complex_for_real", "strings", "objects", "structured", "short_tuple", "long_tuple", "wrong_shape",
                  "extra_argument", "missing_argument", "scalar_for_array", "nan_for_int", "huge_int"]


def _module_text(rng: random.Random, grammar_share: float, corpus: str) -> str:
    if rng.random() < grammar_share:
        return random_module(rng)[0]
    return mutated(rng, corpus)


def generate_evaluate(rng: random.Random) -> dict:
    text = _module_text(rng, 0.5, "hlo_modules")
    edit = rng.choice(ARGUMENT_EDITS) if rng.random() < 0.2 else ""
    return {"text": text, "argument_edit": edit, "seed": rng.randrange(2**31)}


def _edit_arguments(args: list, edit: str, rng: random.Random) -> tuple[list, bool]:
    """``args`` after ``edit``; and whether a correct run must reject them."""
    if not args:
        return ([np.zeros(2)] if edit == "extra_argument" else args), edit == "extra_argument"
    i = rng.randrange(len(args))
    arg = args[i]
    array = np.asarray(arg) if not isinstance(arg, tuple) else None
    if edit == "complex_for_real" and array is not None and array.dtype.kind in "fiub":
        args[i] = array.astype(np.complex128) + 0.5j
        return args, True
    if edit == "strings" and array is not None:
        args[i] = np.full(array.shape, "x", dtype=object if rng.random() < 0.5 else "U1")
        return args, True
    if edit == "objects" and array is not None:
        args[i] = np.full(array.shape, None, dtype=object)
        return args, True
    if edit == "structured" and array is not None:
        args[i] = np.zeros(array.shape, dtype=[("a", np.int32), ("b", np.float32)])
        return args, True
    if edit == "short_tuple" and isinstance(arg, tuple) and arg:
        args[i] = arg[:-1]
        return args, True
    if edit == "long_tuple" and isinstance(arg, tuple):
        args[i] = (*arg, np.zeros(3))
        return args, True
    if edit == "wrong_shape" and array is not None:
        args[i] = np.zeros((*array.shape, 2), array.dtype)
        return args, True
    if edit == "extra_argument":
        return [*args, np.zeros(2)], True
    if edit == "missing_argument":
        return args[:-1], True
    if edit == "scalar_for_array" and array is not None and array.ndim:
        args[i] = np.float64(1.0)
        return args, True
    if edit == "nan_for_int" and array is not None and array.dtype.kind in "iu" and array.size:
        args[i] = np.full(array.shape, np.nan)
        return args, True
    if edit == "huge_int" and array is not None and array.dtype.kind in "iu" and array.size:
        args[i] = np.full(array.shape, 2**70, dtype=object)
        return args, True
    return args, False


def run_evaluate(case: dict) -> Outcome | None:
    import xlapy
    from xlapy.hlo.fake_arguments import make_fake_arguments

    module = xlapy.parse_hlo(case["text"])
    args = make_fake_arguments(module, case["seed"] % 1000)
    args, must_reject = _edit_arguments(list(args), case["argument_edit"], random.Random(case["seed"]))
    xlapy.evaluate(module, *args)
    if must_reject:
        return wrong(f"evaluate accepted bad arguments ({case['argument_edit']})")
    return None


def generate_compile(rng: random.Random) -> dict:
    edit = rng.choice(ARGUMENT_EDITS) if rng.random() < 0.15 else ""
    return {"text": _module_text(rng, 0.7, "loop_fusion_modules"), "seed": rng.randrange(1000), "argument_edit": edit}


def _verifier_rejects(module) -> bool:
    import xlapy

    try:
        xlapy.verify(module)
    except xlapy.XlapyError:
        return True
    return False


def run_compile(case: dict) -> Outcome | None:
    import xlapy
    from xlapy.hlo.fake_arguments import make_fake_arguments

    module = xlapy.parse_hlo(case["text"])
    args = make_fake_arguments(module, case["seed"])
    executable = xlapy.compile(module)
    if case.get("argument_edit"):
        edited, must_reject = _edit_arguments(list(args), case["argument_edit"], random.Random(case["seed"]))
        executable(*edited)
        return wrong(f"executable accepted bad arguments ({case['argument_edit']})") if must_reject else None
    # A call on other arguments first, its result dropped: the compared call then runs in memory an earlier
    # result was written to (executables reuse it), where an element a kernel leaves unwritten shows.
    with contextlib.suppress(xlapy.XlapyError):
        executable(*make_fake_arguments(module, case["seed"] + 1))
    actual = executable(*args)
    if _verifier_rejects(xlapy.parse_hlo(case["text"])):
        return wrong("compile ran a module the verifier rejects")
    # Known before the interpreter runs: on tens of millions of elements it alone would outlast the timeout.
    if sum(np.asarray(leaf).size for leaf in leaves(actual)) > _MAX_COMPARED_ELEMENTS:
        return Outcome("ok", "too large to compare")
    try:
        expected = xlapy.evaluate(xlapy.parse_hlo(case["text"]), *args)
    except xlapy.XlapyError:
        return None  # nothing to compare with
    if reason := uncomparable(xlapy.parse_hlo(case["text"])):
        return Outcome("ok", reason)
    differs = difference(actual, expected, xlapy.parse_hlo(case["text"]), result_slack(case["text"], args))
    return wrong("compiled result differs from the interpreter", differs) if differs else None


# --- the kernel cache ---

CACHE_DAMAGE = ["flip_code_byte", "flip_header_byte", "truncate", "append", "empty", "launch_halve_blocks",
                "launch_zero", "launch_negative", "launch_string", "launch_huge", "launch_short_list",
                "header_not_json", "garbage_code_consistent_header", "swap_entry", "fifo", "symlink_dev_zero",
                "directory", "sparse_huge"]


def generate_kernel_cache(rng: random.Random) -> dict:
    corpus = sorted(seeds.loop_fusion_modules(), key=len)[:40]
    return {"text": rng.choice(corpus), "damage": rng.choice(CACHE_DAMAGE), "seed": rng.randrange(2**31)}


def _entries(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))


def _split_header(data: bytes) -> tuple[bytes, dict, bytes] | None:
    """(prefix, JSON header, code) when some line of the entry is a JSON object."""
    start = 0
    while start < min(len(data), 4096):
        end = data.find(b"\n", start)
        if end < 0:
            return None
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            header = json.loads(data[start:end])
            if isinstance(header, dict):
                return data[:start], header, data[end + 1:]
        start = end + 1
    return None


def _reseal(prefix: bytes, header: dict, code: bytes) -> bytes:
    import hashlib

    for key, value in list(header.items()):
        if isinstance(value, int) and value == header.get("size"):
            header[key] = len(code)
        if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) and "sha" in key:
            header[key] = hashlib.sha256(code).hexdigest()
    return prefix + json.dumps(header).encode() + b"\n" + code


def _edit_launch(header: dict, damage: str) -> bool:
    for key, value in header.items():
        if "launch" in key and isinstance(value, list) and len(value) >= 2:
            edited = list(value)
            if damage == "launch_halve_blocks":
                edited[1] = max(1, edited[1] // 2) if edited[1] > 1 else 0
            elif damage == "launch_zero":
                edited = [0] * len(value)
            elif damage == "launch_negative":
                edited[1] = -edited[1] - 1
            elif damage == "launch_string":
                edited[0] = "x"
            elif damage == "launch_huge":
                edited[1] = 2**62
            else:
                edited = edited[:1]
            header[key] = edited
            return True
        if "launch" in key and isinstance(value, dict):
            field = sorted(value)[0]
            header[key][field] = {"launch_halve_blocks": 1, "launch_zero": 0, "launch_negative": -1,
                                  "launch_string": "x", "launch_huge": 2**62}.get(damage)
            return True
    return False


def _trailing_digest(data: bytes) -> int:
    """32 when the entry ends with the SHA-256 of everything before it, else 0."""
    import hashlib

    return 32 if len(data) > 32 and hashlib.sha256(data[:-32]).digest() == data[-32:] else 0


def _sealed(body: bytes, trailer: int) -> bytes:
    import hashlib

    return body + hashlib.sha256(body).digest() if trailer else body


def _damage(path: Path, damage: str, other: Path | None, rng: random.Random) -> None:
    """Damages a cache entry. The 'consistent' damages (launch edits, garbage
    code) also update every checksum the entry carries, as an attacker or a
    buggy writer could: only a check of the content itself can catch them."""
    data = path.read_bytes()
    trailer = _trailing_digest(data)
    body = data[:len(data) - trailer]
    parts = _split_header(body)
    if damage in ("fifo", "symlink_dev_zero", "directory"):
        path.unlink()
        if damage == "fifo":
            os.mkfifo(path)
        elif damage == "symlink_dev_zero":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()
        return
    if damage == "sparse_huge":
        with open(path, "r+b") as f:
            f.truncate(3 * 2**30)
        return
    if damage == "swap_entry" and other is not None:
        path.write_bytes(other.read_bytes())
        return
    if damage.startswith("launch_") and parts and _edit_launch(parts[1], damage):
        path.write_bytes(_sealed(_reseal(*parts), trailer))
        return
    if damage == "garbage_code_consistent_header" and parts:
        garbage = bytes(rng.randrange(256) for _ in range(rng.choice([0, 16, 64, len(parts[2])])))
        if rng.random() < 0.5 and len(parts[2]) > 64:  # a real object file's start, a broken rest
            garbage = parts[2][:64] + garbage
        path.write_bytes(_sealed(_reseal(parts[0], parts[1], garbage), trailer))
        return
    if damage == "header_not_json" and parts:
        path.write_bytes(parts[0] + b"{not json\n" + parts[2] + data[len(body):])
        return
    header_length = len(body) - len(parts[2]) if parts else min(len(data), 64)
    if damage == "flip_header_byte" and header_length:
        i = rng.randrange(header_length)
    elif len(data) > header_length:
        i = rng.randrange(header_length, len(data))
    else:
        i = rng.randrange(max(1, len(data)))
    if damage == "truncate":
        path.write_bytes(data[:i])
    elif damage == "append":
        path.write_bytes(data + b"\x00garbage")
    elif damage == "empty":
        path.write_bytes(b"")
    elif data:
        path.write_bytes(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:])


_SWAPS = [(" add(", " subtract("), (" subtract(", " add("), (" multiply(", " add("), (" maximum(", " minimum("),
          (" tanh(", " negate("), (" negate(", " abs(")]


def run_kernel_cache(case: dict) -> Outcome | None:
    import xlapy
    from xlapy.hlo.fake_arguments import make_fake_arguments
    from xlapy.runtime.kernel_cache import clear_memory_cache

    rng = random.Random(case["seed"])
    text = case["text"]
    with tempfile.TemporaryDirectory(prefix="xlapy-fuzz-cache-") as directory:
        old = os.environ.get("XLAPY_CACHE_DIR")
        os.environ["XLAPY_CACHE_DIR"] = directory
        try:
            clear_memory_cache()
            other = None
            if case["damage"] == "swap_entry":
                # Another fusion with the same signature (one op changed), cached first.
                for before, after in _SWAPS:
                    if before in text:
                        xlapy.compile(xlapy.parse_hlo(text.replace(before, after, 1)))
                        break
                other_entries = _entries(Path(directory))
                other = other_entries[0] if other_entries else None
                if other is not None:
                    other = other.rename(Path(directory) / "other.bin")
            xlapy.compile(xlapy.parse_hlo(text))
            entries = [p for p in _entries(Path(directory)) if p.name != "other.bin"]
            if not entries:
                return Outcome("ok", "no cache entry written")
            for path in entries:
                _damage(path, case["damage"], other, rng)
            clear_memory_cache()
            module = xlapy.parse_hlo(text)
            args = make_fake_arguments(module, 0)
            actual = xlapy.compile(module)(*args)
            reason = uncomparable(xlapy.parse_hlo(text))
            slack = None if reason else result_slack(text, args)
            if not reason and (differs := difference(actual, xlapy.evaluate(xlapy.parse_hlo(text), *args),
                                                     xlapy.parse_hlo(text), slack)):
                return wrong(f"damaged cache entry ran ({case['damage']})", differs)
            # A damaged entry is replaced, not kept: a second load must run correctly too.
            clear_memory_cache()
            again = xlapy.compile(xlapy.parse_hlo(text))(*args)
            if reason:
                return Outcome("ok", reason)
            differs = difference(again, xlapy.evaluate(xlapy.parse_hlo(text), *args), xlapy.parse_hlo(text), slack)
            return wrong(f"damaged cache entry kept ({case['damage']})", differs) if differs else None
        finally:
            clear_memory_cache()
            if old is None:
                os.environ.pop("XLAPY_CACHE_DIR", None)
            else:
                os.environ["XLAPY_CACHE_DIR"] = old
