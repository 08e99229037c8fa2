"""Generated bad input, bounded: every entry point either accepts an input or
rejects it with an XlapyError (the command line: exit 1 and one stderr line
``xlapy: error: ...``), never another exception, a hang, a crash or a wrong
answer. The generators and the classification are the fuzzing harness's
(``tools/fuzz``); ``tools/fuzz_entry_points.py`` runs the same for longer.

Pure-Python entry points run in this process; compiling (``xlapy.compile``
and the JAX frontend's ``jit``), the kernel cache and the command line run in
a worker process, so that a crash or a hang fails the test instead of killing
the run."""

from __future__ import annotations

import hashlib
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.fuzz.outcome import Outcome  # noqa: E402
from tools.fuzz.pool import PATIENCE, Worker  # noqa: E402
from tools.fuzz.targets import ENTRY_POINTS, run_case  # noqa: E402
from tools.fuzz.targets_text import generate_hlo  # noqa: E402

ACCEPTABLE = ("ok", "clean_error")
# Inputs that would allocate gigabytes stay out of this process (the worker caps its memory).
_LARGE_NUMBER = re.compile(r"\d{7,}")

quick = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
in_worker = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


def _explain(entry: str, case: dict, outcome: Outcome) -> str:
    return (f"{entry}: {outcome.outcome} {outcome.type} at {outcome.where} ({outcome.deepest}): {outcome.message}\n"
            f"input: {case!r:.3000}")


def _check_in_process(entry: str, rng: random.Random) -> None:
    # The verifier's timing input (tens of thousands of instructions) is for the long runs only.
    case = generate_hlo(rng) if entry == "verify" else ENTRY_POINTS[entry].generate(rng)
    if entry == "evaluate" and _LARGE_NUMBER.search(case["text"]):
        return
    outcome = run_case(entry, case)
    assert outcome.outcome in ACCEPTABLE, _explain(entry, case, outcome)


@pytest.mark.parametrize("entry", ["parse_shape", "parse_hlo", "verify", "IndexingMap.parse",
                                   "stablehlo.parse_module"])
@quick
@given(rng=st.randoms(use_true_random=False))
def test_parsers_raise_only_xlapy_errors(entry: str, rng: random.Random) -> None:
    _check_in_process(entry, rng)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False))
def test_evaluate_raises_only_xlapy_errors(rng: random.Random) -> None:
    _check_in_process("evaluate", rng)


@pytest.fixture(scope="module")
def worker():
    # A short timeout: every generated input is small and runs in well under a second.
    pool = Worker(timeout=8.0, memory_bytes=4 << 30)
    yield pool
    pool.close()


@pytest.mark.parametrize("entry", ["compile", "kernel_cache", "cli_run", "cli_indexing", "cli_layout", "cli_sdy"])
@in_worker
@given(rng=st.randoms(use_true_random=False))
def test_native_and_command_line_entry_points_fail_cleanly(worker: Worker, entry: str, rng: random.Random) -> None:
    case = ENTRY_POINTS[entry].generate(rng)
    outcome, _ = worker.run(entry, case)
    assert outcome.outcome in ACCEPTABLE, _explain(entry, case, outcome)


@pytest.fixture(scope="module")
def jit_worker():
    # Each input also imports JAX (once per worker) and compiles with XLA:CPU, the reference: more time per input.
    pool = Worker(timeout=60.0, memory_bytes=8 << 30)
    yield pool
    pool.close()


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False))
def test_jax_jit_fails_cleanly_and_agrees_with_jax(jit_worker: Worker, rng: random.Random) -> None:
    """``xlapy.frontends.jax.jit`` on generated calls (``tools/fuzz/targets_jax.py``): the result of jax.jit bit for
    bit, or an XlapyError; an XlapyError wherever jax.jit raises."""
    case = ENTRY_POINTS["jit"].generate(rng)
    outcome, _ = jit_worker.run("jit", case)
    assert outcome.outcome in ACCEPTABLE, _explain("jit", case, outcome)


def test_worker_runs_the_xlapy_under_test(worker: Worker) -> None:
    """The harness measures the checkout it is pointed at, not another copy."""
    import xlapy

    worker.run("parse_shape", {"text": "f32[2]"})
    assert Path(worker.xlapy_file).resolve() == Path(xlapy.__file__).resolve()


def _check_command_line_process(tmp_path_factory, rng: random.Random, command: str) -> None:
    """The real ``xlapy`` process on a generated file: exit 0, or exit 1 with
    exactly one stderr line; never a traceback or a signal."""
    directory = tmp_path_factory.mktemp("cli")
    entry = {"run": "cli_run", "indexing": "cli_indexing", "sdy": "cli_sdy"}[command]
    case = ENTRY_POINTS[entry].generate(rng)
    path = directory / ("m.mlir" if command == "sdy" else "m.hlo")
    path.write_bytes(case["file"])
    flags = [f for f in case["flags"] if f not in ("--bench", "--compare", "--dump-to", "dumps")]
    argv = ["sdy", "propagate", str(path)] if command == "sdy" else [command, str(path)]
    if command == "run":
        flags = ["--backend", "interpreter"]
    result = subprocess.run([sys.executable, "-m", "xlapy.cli", *argv, *flags], capture_output=True, text=True,
                            timeout=60, cwd=directory, errors="replace")
    lines = result.stderr.splitlines()
    assert result.returncode in (0, 1), result.stderr[-2000:]
    if result.returncode == 1:
        assert len(lines) == 1 and lines[0].startswith("xlapy: error: "), result.stderr[-2000:]


# A process per example (seconds each): one in the default run, more with the slow tests.
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False), command=st.sampled_from(["run", "indexing", "sdy"]))
def test_command_line_process_prints_one_error_line(tmp_path_factory, rng: random.Random, command: str) -> None:
    _check_command_line_process(tmp_path_factory, rng, command)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False), command=st.sampled_from(["run", "indexing", "sdy"]))
def test_command_line_process_prints_one_error_line_many(tmp_path_factory, rng: random.Random, command: str) -> None:
    _check_command_line_process(tmp_path_factory, rng, command)


# The seeds (the test data the generators start from) that are not valid programs for the command, or that use
# what xlapy does not implement, with why; every other seed must be handled. Validity is XLA's and Shardy's
# (through jaxlib), not xlapy's: an HLO seed is valid when XLA's parser reads it and its verifier accepts it, an
# MLIR seed when MLIR's parser (with the StableHLO and Shardy dialects) reads it and Shardy's propagation runs on it.
# Seeds are named by the first 12 hex digits of the SHA-256 of their text in tools/fuzz/seed_corpus.json.gz.
REFUSABLE_SEEDS: dict[str, dict[str, frozenset[str]]] = {
    "hlo_modules": {
        # Fragments, format templates ('%d', '{shape}'), prefixes the tests complete, scripts and deliberate
        # syntax errors of the parser tests.
        "XLA's parser refuses it": frozenset({
        "008692810b0e", "08214fea008c", "08cfaea39c35", "09a59ae8c0e2", "0f96c896d982", "14d3a3bcabfa", "1aa18079ae03",
        "1d8cf6f9a0a4", "21bf3935f5d5", "22e1bf24135c", "236a8a07b1b0", "26fbaa2ecede", "282573c3d8e8", "284de53fbc20",
        "2a47f5c29e1a", "309e7af626cf", "30dfa219314e", "347190e75480", "354e9103c71a", "3d362819c2c4", "3f04b64a0765",
        "401ee95cd150", "403ecbf86c8b", "44a7201878cd", "46a89b6b1256", "47c8c920c361", "4cac86a12454", "5058998bd818",
        "536a497f15d5", "57af1f253e75", "5a4fd846e07d", "5a5428caf949", "633c56afdacc", "65d48c1971c4", "66b8626ab2c7",
        "68789329b5fd", "6a8481262d40", "6aa8a4255cb8", "7a09022cda04", "7dd960d40b34", "7f8ca98233b4", "80d36483c8ea",
        "826aa9aca94e", "848e17cf31a9", "8d077e4db4c2", "8e3d948787c6", "8e43a4b2850a", "93252e10b273", "99935ea92e30",
        "9c78bccac7e4", "9ce4543bf956", "9f8ed0438d5d", "a15250f551b8", "a35a45b06f3a", "a3a7ab4ab251", "a675388eea20",
        "a70555deb1c4", "a99088b4140f", "ada291bcf614", "b03fad1a7c29", "b0b573898adc", "b264c89cbac1", "be5c566be087",
        "c45e185abd25", "ca7823f72f6b", "cb5361a32f5a", "cd93cdbf6b8f", "d1291a5e8dcc", "d4d73d623900", "d611108a10cf",
        "d8e0a001d5db", "d9302e8250e5", "e20af9c55132", "e2e3d71a4836", "ecf56b964dbb", "ef20ce30a52b", "ef9134bf3b53",
        "f0def495aec6", "fb4aaa96a2d7", "fb729f5d51b9", "fc580901dbc0", "fda9477569da"
        }),
        # Modules of the verifier tests that break a rule of XLA's verifier or shape inference: all-to-all,
        # convolution and reduce-scatter-start with wrong shapes or a to_apply of the wrong arity, ops declaring
        # another shape than they produce, a slice past its operand's end, a fusion whose computation's root or
        # parameters differ from the fusion's shapes, a convert from complex to real (ShapeInference's
        # "Conversion from complex to real type ... is not implemented"). XLA's parser does not check these.
        "XLA's verifier refuses it": frozenset({
        "0662469b385e", "1153e0c35c42", "2e097deaf6bf", "4c9b2eb015a1", "5f960b9c7f5a", "6c8a5744fdcb", "7c01e196ea76",
        "d9992b9c4a45", "dec388e3f07c"
        }),
    },
    "mlir_modules": {
        # Fragments, FileCheck text, undefined meshes and values, deliberate syntax errors of the parser tests.
        "MLIR's parser refuses it": frozenset({
        "02c538557341", "0391aec238ca", "084e0b7d2c32", "09c3c35c0576", "0c178e530dd4", "0d931130e213", "1c1b9962ba8c",
        "1ff81c756702", "23befc7f953e", "23e83de4136a", "25261a1be796", "31a66f67f452", "32081cedd7ce", "32cc597866fa",
        "341f2f305552", "36cee6c0833b", "36ff1dab8dab", "378fda3c08da", "3791e5dbd34b", "3914cdd2f36d", "399dae097ece",
        "4194af37484f", "455b04e929a0", "4a180112ff69", "4ed78d19978a", "52756cbadf6a", "56bca03df8f8", "571397fa3df5",
        "57f737975fb0", "5bbe9f9b955d", "6165cab247b0", "65f717086dcf", "68de522f9a21", "6b304f9215eb", "6b691f2a9186",
        "6cf0bb48c0be", "7a5a6fa1e5d7", "7af3c184dceb", "7ed24e37f4ea", "7f2954669b15", "84f6a86d3aa8", "89ea71c2bba5",
        "8f9045e933d0", "98aa2ab8b2d4", "9c84c14dca93", "9ce8481bf33a", "9db0c43d38d2", "a2298f4e670f", "ac1c3f038ef2",
        "ac572be3720c", "b472ea56e3a2", "b5fff6baea81", "b88ed06b2409", "bdc4bbaca934", "c03730d22c90", "c7305da78380",
        "c766935dc3af", "cabdfd23604d", "d11ca9b5ee36", "d9ba02146c6a", "dbef414c6b43", "e9413cfb8ebc", "f2727d773538",
        "f278d4ad3c3a", "f55bef7af371", "f68dd01b024e", "f93f04512c4e", "fcf8dbf2a4fe"
        }),
        # Valid MLIR of the codegen tests (arith, scf, tensor, vector, gpu and xla ops), but not StableHLO.
        "not a StableHLO program": frozenset({
        "0afca76d1e7b", "0c9ff773e2b1", "0e3d57ad7222", "11213839647d", "13946e549c03", "27ec0b561eb2", "2c51fa4a6f32",
        "43ebc07ef558", "471f530786d5", "495fdb6d8750", "5720a661513a", "5736129914d0", "576bcda533ae", "73ce18eabf15",
        "759e0aa2b059", "7a7288872f02", "8fb7e52df148", "98b3694b23ca", "ad9c76593e7a", "b1ae571dd6f7", "c368d56d9ebb",
        "ce0bd0f4e9e1", "dcfffd1d84dd", "e3c467e4a7f9", "e62b07588472", "f5a4432ca04c"
        }),
        # A data_flow_edge whose input is a negate: Shardy's verifier requires the result of a data-flow op (its
        # propagation crashes on these).
        "Shardy refuses it": frozenset({"6c7597585f53", "8c729da84bd8", "a50bf3566798"}),
        # Valid for Shardy, which inserts unreduced collectives for it; xlapy implements no unreduced axes.
        "unimplemented: unreduced axes": frozenset({"7c11b1e5e2f1"}),
    },
}
# Ops of dialects other than StableHLO, Shardy, CHLO and func.
_OTHER_DIALECT_OP = re.compile(r"\b(?:arith|scf|tensor|vector|gpu|xla)\.[a-z_]+")


def _seed_name(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _seeds_by_name(kind: str) -> dict[str, str]:
    from tools.fuzz import seeds

    return {_seed_name(text): text for text in getattr(seeds, kind)()}


# Every seed of a kind through its command; the MLIR seeds' propagation (seconds in all) with the slow tests.
@pytest.mark.parametrize("entry, kind", [pytest.param("cli_sdy", "mlir_modules", marks=pytest.mark.slow),
                                         ("cli_indexing", "hlo_modules")])
def test_every_valid_seed_module_runs(entry: str, kind: str) -> None:
    """The unedited seeds are real programs: the command handles each valid
    one, and may refuse (cleanly) only the ones listed as refusable."""
    by_name = _seeds_by_name(kind)
    refusable = frozenset().union(*REFUSABLE_SEEDS[kind].values())
    assert refusable <= by_name.keys(), f"listed seeds missing from the corpus: {sorted(refusable - by_name.keys())}"
    failures = []
    for name, text in by_name.items():
        outcome = run_case(entry, {"file": text.encode(), "flags": []})
        if outcome.outcome not in (ACCEPTABLE if name in refusable else ("ok",)):
            failures.append(f"seed {name}: " + _explain(entry, {"file": text[:400]}, outcome))
    assert not failures, f"{len(failures)} seeds fail, the first:\n{failures[0]}"


def test_refusable_hlo_seeds_are_refused_by_xla() -> None:
    from tests.hlo.xla import xla_reprint

    by_name = _seeds_by_name("hlo_modules")
    not_refused = []
    for name in REFUSABLE_SEEDS["hlo_modules"]["XLA's parser refuses it"]:
        try:
            xla_reprint(by_name[name])
        except Exception as error:  # XLA's parse errors come as RuntimeError or ValueError
            # A text that does not start with HloModule is also tried as a single instruction.
            if "Syntax error when trying to parse the text as a" not in str(error):
                not_refused.append(f"{name} (not a parse error: {error})")
            continue
        not_refused.append(name)
    assert not not_refused, f"XLA's parser does not refuse these seeds listed as refused: {not_refused}"


def test_refusable_mlir_seeds_are_refused_by_mlir_or_not_stablehlo() -> None:
    import jax  # noqa: F401  (loads jaxlib's MLIR with the StableHLO and Shardy dialects)
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    by_name = _seeds_by_name("mlir_modules")
    groups = REFUSABLE_SEEDS["mlir_modules"]
    assert all(_OTHER_DIALECT_OP.search(by_name[name]) for name in groups["not a StableHLO program"])
    parsed = []
    with jax_mlir.make_ir_context():
        for name in groups["MLIR's parser refuses it"]:
            try:
                ir.Module.parse(by_name[name])
            except ir.MLIRError:
                continue
            parsed.append(name)
    assert not parsed, f"MLIR's parser reads these seeds listed as refused: {parsed}"


@pytest.mark.parametrize(("second_try", "expected"), [("ok", "ok"), ("hang", "hang")])
def test_a_timed_out_input_gets_a_longer_second_try(monkeypatch, second_try: str, expected: str) -> None:
    """An input over the timeout runs again in a fresh worker with ``PATIENCE`` times as long: if it ends then,
    it is slow (with how long it took), not a hang; the timeout is the usual one afterwards."""
    pool = Worker(timeout=2.0)
    timeouts = []

    def run_once(entry: str, case: dict) -> tuple[Outcome, float]:
        timeouts.append(pool.timeout)
        return (Outcome("hang", "timeout"), 2.0) if len(timeouts) == 1 else (Outcome(second_try), 7.5)

    monkeypatch.setattr(pool, "_run_once", run_once)
    try:
        outcome, elapsed = pool.run("evaluate", {})
    finally:
        pool.close()
    assert timeouts == [2.0, 2.0 * PATIENCE] and pool.timeout == 2.0
    assert outcome.outcome == expected and elapsed == 7.5
    assert outcome.extra == ({"first_try": "hang timeout", "slow_seconds": 7.5} if expected == "ok" else {})
