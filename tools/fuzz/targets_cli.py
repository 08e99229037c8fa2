"""The ``xlapy`` command: run (both backends, with --inputs files good and
bad), indexing, layout and sdy propagate, with random flags. The command runs
in the worker through ``xlapy.cli.main`` with its output captured; a clean
error is exit 1 with exactly one stderr line ``xlapy: error: ...``."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import random
import tempfile
from pathlib import Path

import numpy as np

from tools.fuzz import seeds
from tools.fuzz.grammar import random_module
from tools.fuzz.mutate import corrupt_bytes, deep_nesting
from tools.fuzz.outcome import Outcome, wrong
from tools.fuzz.targets_text import mutated

NASTY_INTS = ["0", "1", "-1", "2", "5", "1000000", "-1000000", "9223372036854775808", "3"]

INPUT_KINDS = ["by_name", "by_name_shuffled", "arg_n", "positional", "renamed", "missing", "extra", "bf16", "complex",
               "strings", "objects", "structured", "wrong_shape", "empty", "truncated", "plain_npy", "huge_header",
               "garbage", "directory", "nonexistent", "float64_for_all"]


def _file_bytes(rng: random.Random, text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return corrupt_bytes(data, rng) if rng.random() < 0.12 else data


def generate_cli_run(rng: random.Random) -> dict:
    source = rng.random()
    if source < 0.4:
        text = random_module(rng)[0]
    elif source < 0.7:
        text = rng.choice(seeds.loop_fusion_modules())
        if rng.random() < 0.5:
            text = mutated(rng, "loop_fusion_modules")
    else:
        text = mutated(rng, "hlo_modules")
    flags = ["--backend", rng.choice(["cpu", "interpreter"])]
    if rng.random() < 0.2:
        flags += ["--seed", rng.choice(NASTY_INTS)]
    inputs = rng.choice(INPUT_KINDS) if rng.random() < 0.4 else ""
    if rng.random() < 0.3:
        flags += ["--output", rng.choice(["out.npz", "out.txt", "out", "missing_dir/out.npz", "."])]
    if rng.random() < 0.1:
        flags.append("--compare")
    if rng.random() < 0.05:
        flags += ["--bench", "--repeat", rng.choice(["0", "-1", "2"])]
    if rng.random() < 0.05:
        flags += ["--dump-to", "dumps"] + (["--dump-pass-re", rng.choice(["(", "fusion", ".*"])]
                                           if rng.random() < 0.5 else [])
    return {"file": _file_bytes(rng, text), "flags": flags, "inputs": inputs, "seed": rng.randrange(2**31)}


def _parameter_shapes(text: bytes) -> list | None:
    import xlapy

    with contextlib.suppress(Exception):
        return [p for p in xlapy.parse_hlo(text.decode("utf-8")).entry.parameters]
    return None


def _write_inputs(path: Path, kind: str, params: list | None, rng: random.Random) -> tuple[dict | None, bool]:
    """Writes the --inputs file; returns the arguments a correct run binds
    (by parameter name) and whether the file must be rejected."""
    from xlapy.hlo.fake_arguments import make_fake_arguments

    if kind == "nonexistent":
        return None, True
    if kind == "directory":
        path.mkdir()
        return None, True
    if kind == "garbage":
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 100]))))
        return None, True
    if kind == "empty":
        path.write_bytes(b"")
        return None, True
    if kind == "huge_header":
        path.write_bytes(b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4', 'shape': (" + b"9" * 70000 + b",), }")
        return None, True
    params = params or []

    class _Module:  # make_fake_arguments needs only the entry's parameters
        class entry:
            parameters = params

    try:
        fake = make_fake_arguments(_Module, 0) if params else []
    except Exception:
        fake = [np.zeros(1, np.float32) for _ in params]
    names = [p.name for p in params]
    arrays: dict[str, object] = dict(zip(names, fake))
    expected = dict(arrays)
    must_reject = False
    if kind == "by_name_shuffled":
        keys = list(arrays)
        rng.shuffle(keys)
        arrays = {k: arrays[k] for k in keys}
    elif kind == "arg_n":
        arrays = {f"arg{i}": a for i, a in enumerate(fake)}
    elif kind == "positional":
        arrays = {f"arr_{i}": a for i, a in enumerate(fake)}
    elif kind == "renamed" and arrays:
        arrays = {f"{k}.1": v for k, v in arrays.items()}
        must_reject = True
    elif kind == "missing" and arrays:
        arrays.pop(rng.choice(list(arrays)))
        must_reject = True
    elif kind == "extra":
        arrays["unrelated"] = np.zeros(3)
        must_reject = True
    elif kind in ("bf16", "complex", "strings", "objects", "structured", "wrong_shape", "float64_for_all") and arrays:
        import ml_dtypes

        key = rng.choice(list(arrays))
        value = np.asarray(arrays[key]) if not isinstance(arrays[key], tuple) else np.zeros(2)
        if kind == "bf16":
            arrays[key] = value.astype(ml_dtypes.bfloat16) if value.dtype.kind in "fiub" else value
            expected = None  # rounding through bf16 changes the values; only errors are judged
        elif kind == "complex":
            arrays[key] = value.astype(np.complex64) + 1j
            must_reject = value.dtype.kind != "c"
        elif kind == "strings":
            arrays[key] = np.full(value.shape, "x")
            must_reject = True
        elif kind == "objects":
            arrays[key] = np.full(value.shape, None, dtype=object)
            must_reject = True
        elif kind == "structured":
            arrays[key] = np.zeros(value.shape, dtype=[("a", "<i4")])
            must_reject = True
        elif kind == "wrong_shape":
            arrays[key] = np.zeros((*value.shape, 3), value.dtype)
            must_reject = True
        else:
            arrays = {k: np.asarray(v, dtype=np.float64) if not isinstance(v, tuple) else v for k, v in arrays.items()}
            expected = None
    if kind == "plain_npy":
        np.save(path, next(iter(arrays.values())) if arrays else np.zeros(1), allow_pickle=False)
        os.replace(f"{path}.npy", path)
        return None, len(arrays) != 1
    with contextlib.suppress(Exception):
        np.savez(path, **{k: v for k, v in arrays.items() if not isinstance(v, tuple)})
        if path.suffix != ".npz" and Path(f"{path}.npz").exists():
            os.replace(f"{path}.npz", path)
    if kind == "truncated" and path.exists():
        data = path.read_bytes()
        path.write_bytes(data[:rng.randrange(max(1, len(data)))])
        return None, True
    if any(isinstance(v, tuple) for v in arrays.values()):
        expected = None
    return expected, must_reject


def _invoke(argv: list[str], directory: str) -> tuple[int, str, str, BaseException | None]:
    from xlapy.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as e:  # argparse rejecting the command line
        code = e.code if isinstance(e.code, int) else 2
        return code, out.getvalue(), err.getvalue(), None
    except BaseException as e:
        return -1, out.getvalue(), err.getvalue(), e
    finally:
        os.chdir(previous)
    return code, out.getvalue(), err.getvalue(), None


def _judge(code: int, stderr: str, error: BaseException | None) -> Outcome | None:
    if error is not None:
        raise error
    if code == 2 and stderr.startswith("usage:"):
        return Outcome("clean_error", "usage")
    if code == 0:
        return None
    lines = stderr.splitlines()
    if code == 1 and len(lines) == 1 and lines[0].startswith("xlapy: error: "):
        return Outcome("clean_error", "XlapyError", message=lines[0][:300])
    return Outcome("exception", f"MalformedCliError(exit {code}, {len(lines)} lines)", "cli", "", stderr[:300])


def run_cli_run(case: dict) -> Outcome | None:
    rng = random.Random(case["seed"])
    with tempfile.TemporaryDirectory(prefix="xlapy-fuzz-cli-") as directory:
        Path(directory, "m.hlo").write_bytes(case["file"])
        argv = ["run", "m.hlo", *case["flags"]]
        expected, must_reject = None, False
        if case["inputs"]:
            expected, must_reject = _write_inputs(Path(directory, "x.npz"), case["inputs"],
                                                  _parameter_shapes(case["file"]), rng)
            argv += ["--inputs", "x.npz"]
        code, stdout, stderr, error = _invoke(argv, directory)
        judged = _judge(code, stderr, error)
        if judged is not None or code != 0:
            return judged
        if must_reject:
            return wrong(f"run accepted bad --inputs ({case['inputs']})", stdout)
        flags = case["flags"]
        if "--output" in flags:
            target = Path(directory, flags[flags.index("--output") + 1])
            if not target.is_file():
                return wrong("--output wrote another file than the one named")
            if expected is not None and case["inputs"] in ("by_name", "by_name_shuffled", "arg_n", "positional"):
                return _check_output(target, case["file"], expected)
    return None


def _check_output(target: Path, text: bytes, expected_args: dict) -> Outcome | None:
    import xlapy
    from tools.compare import leaves
    from tools.fuzz.compare import difference, result_slack, uncomparable

    module = xlapy.parse_hlo(text.decode("utf-8"))
    try:
        reference = xlapy.evaluate(module, *expected_args.values())
    except xlapy.XlapyError:
        return None
    if uncomparable(module):
        return None
    with np.load(target) as saved:
        outputs = [saved[k] for k in sorted(saved.files, key=lambda k: int(k[3:]) if k[3:].isdigit() else 0)]
    slack = result_slack(text.decode("utf-8"), list(expected_args.values()))
    differs = difference(tuple(outputs), tuple(leaves(reference)), module, slack)
    return wrong("run with --inputs gave another result than the interpreter on the named arrays", differs) \
        if differs else None


def generate_cli_indexing(rng: random.Random) -> dict:
    text = mutated(rng, "hlo_modules") if rng.random() < 0.7 else rng.choice(seeds.hlo_modules())
    flags = []
    if rng.random() < 0.3:
        names = [line.split("=")[0].strip().removeprefix("ROOT ").strip() for line in text.splitlines() if "=" in line]
        flags += ["--instruction", rng.choice(names or ["x"])]
    if rng.random() < 0.3:
        flags += ["--input-to-output", "--operand", rng.choice(NASTY_INTS)]
    if rng.random() < 0.3:
        flags += ["--output-id", rng.choice(NASTY_INTS)]
    return {"file": _file_bytes(rng, text), "flags": flags}


def _negative_value(flags: list[str], names: tuple[str, ...]) -> str:
    for name, value in itertools.pairwise(flags):
        if name in names and value.startswith("-"):
            return f"{name} {value}"
    return ""


def run_cli_indexing(case: dict) -> Outcome | None:
    with tempfile.TemporaryDirectory(prefix="xlapy-fuzz-cli-") as directory:
        Path(directory, "m.hlo").write_bytes(case["file"])
        code, _, stderr, error = _invoke(["indexing", "m.hlo", *case["flags"]], directory)
    judged = _judge(code, stderr, error)
    # Only the id that is used: --operand with --input-to-output, else --output-id.
    used = "--operand" if "--input-to-output" in case["flags"] else "--output-id"
    negative = _negative_value(case["flags"], (used,))
    if judged is None and negative:
        return wrong("indexing accepted a negative id", negative)
    return judged


def generate_cli_layout(rng: random.Random) -> dict:
    shape = mutated(rng, "shapes") if rng.random() < 0.7 else rng.choice(seeds.shapes())
    if rng.random() < 0.05:
        shape = "(" + deep_nesting(rng) + ")"
    if rng.random() < 0.1:
        shape = rng.choice(["f32[50000000,2,2]", "f32[9223372036854775807,2]", "u8[100000,100000]{1,0:T(2,2)}"])
    flags = []
    for flag in ("--max-rows", "--max-cols", "--max-grids"):
        if rng.random() < 0.25:
            flags += [flag, rng.choice(NASTY_INTS)]
    if rng.random() < 0.1:
        flags += ["--svg", rng.choice(["p.svg", ".", "missing/p.svg"])]
    return {"shape": shape, "flags": flags}


def run_cli_layout(case: dict) -> Outcome | None:
    with tempfile.TemporaryDirectory(prefix="xlapy-fuzz-cli-") as directory:
        code, _, stderr, error = _invoke(["layout", case["shape"], *case["flags"]], directory)
    judged = _judge(code, stderr, error)
    negative = _negative_value(case["flags"], ("--max-rows", "--max-cols", "--max-grids"))
    if judged is None and negative:
        return wrong("layout accepted a negative limit", negative)
    return judged


def generate_cli_sdy(rng: random.Random) -> dict:
    text = mutated(rng, "mlir_modules") if rng.random() < 0.8 else rng.choice(seeds.mlir_modules())
    flags = []
    if rng.random() < 0.4:
        flags += ["--strategy", rng.choice(["basic", "aggressive", "op-priority", "user-priority", "pipeline"])]
    if rng.random() < 0.2:
        flags.append("--split-input-file")
    if rng.random() < 0.2:
        flags.append("--implicit-manual-replication")
    return {"file": _file_bytes(rng, text), "flags": flags}


def run_cli_sdy(case: dict) -> Outcome | None:
    with tempfile.TemporaryDirectory(prefix="xlapy-fuzz-cli-") as directory:
        Path(directory, "m.mlir").write_bytes(case["file"])
        code, _, stderr, error = _invoke(["sdy", "propagate", "m.mlir", *case["flags"]], directory)
    return _judge(code, stderr, error)
