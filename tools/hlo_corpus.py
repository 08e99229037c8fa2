"""The HLO text files of the repository that parse and verify: test data
and examples, for checking that passes keep whole programs' values."""

from __future__ import annotations

from pathlib import Path

from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.hlo.fake_arguments import make_fake_arguments
from xlapy.interpreter import evaluate

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIRECTORIES = ("tests/hlo/data", "tests/codegen/data", "tests/interpreter/data", "tests/transforms/data",
                      "examples")


def corpus_paths() -> list[Path]:
    """Every ``*.hlo`` file under the corpus directories, sorted."""
    return sorted(p for d in CORPUS_DIRECTORIES for p in (ROOT / d).rglob("*.hlo"))


def interpreter_runs(module: HloModule) -> bool:
    """Whether the reference interpreter has rules for every op ``module`` runs."""
    try:
        evaluate(module, *make_fake_arguments(module, 0), verify=False)
    except UnimplementedError:
        return False
    return True


def verifying_corpus() -> list[tuple[str, str]]:
    """(path relative to the repository, text) of each corpus file that parses
    and verifies (the verifier's own test data holds invalid modules)."""
    cases = []
    for path in corpus_paths():
        text = path.read_text()
        try:
            verify(parse_module(text))
        except XlapyError:
            continue
        cases.append((str(path.relative_to(ROOT)), text))
    return cases
