"""Valid inputs to start mutating from: the repository's test data, examples
and the string constants of its tests.

They are read once into ``seed_corpus.json.gz`` (``python -m tools.fuzz.seeds
--freeze [ROOT] [--kinds KIND ...]``) and taken from there, so that the
generated inputs do not change when the tests do: runs before and after a
change see the same inputs. A seed that is not a valid program must be listed
in ``REFUSABLE_SEEDS`` of ``tests/test_fuzz_entry_points.py``."""

from __future__ import annotations

import argparse
import ast
import functools
import gzip
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).with_name("seed_corpus.json.gz")
KINDS = ("hlo_modules", "loop_fusion_modules", "mlir_modules", "shapes", "indexing_maps")


@functools.cache
def _frozen() -> dict[str, tuple[str, ...]] | None:
    if not CORPUS.exists():
        return None
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        return {kind: tuple(texts) for kind, texts in json.load(f).items()}


def _from(kind: str):
    """Decorates a reader of the repository: the frozen corpus's texts win when there is one."""
    def decorate(read):
        @functools.cache
        def texts() -> tuple[str, ...]:
            frozen = _frozen()
            return frozen[kind] if frozen is not None else read()
        texts.read = read
        return texts
    return decorate

_SHAPE = re.compile(r"\b(?:pred|[sufc]\d+|bf16|f8e\w+|token)\[[^\]]*\](?:\{[^}]*\})?")


def _test_strings() -> list[str]:
    """String constants of the test files (modules and maps written inline)."""
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        found += [node.value for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return found


def _files(*patterns: str) -> list[str]:
    texts = []
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            if path.is_file() and path.stat().st_size < 200_000:
                texts.append(path.read_text(encoding="utf-8"))
    return texts


# The programs of the emitters' tests: loop fusions, and the fusions of each hero (reductions, transposes,
# scatters, ...), which the CPU backend compiles and the compile target compares with the interpreter.
FUSION_FILES = "tests/codegen/data/*/*.hlo"


@_from("hlo_modules")
def hlo_modules() -> tuple[str, ...]:
    texts = _files("tests/hlo/data/*.hlo", "tests/hlo/data/verifier/*.hlo", FUSION_FILES, "examples/*.hlo")
    texts += [s for s in _test_strings() if "ENTRY" in s and "HloModule" in s]
    return tuple(sorted(set(texts), key=len))


@_from("loop_fusion_modules")
def loop_fusion_modules() -> tuple[str, ...]:
    """Modules the CPU backend compiles: fusions in the entry (loop fusions, and those of the hero emitters)."""
    return tuple(_files(FUSION_FILES))


@_from("mlir_modules")
def mlir_modules() -> tuple[str, ...]:
    texts = []
    for text in _files("tests/frontends/data/*.mlir", "tests/sharding/data/propagation/*.mlir",
                       "tests/interpreter/data/*.mlir", "examples/*.mlir"):
        texts += [chunk for chunk in re.split(r"^// -----\s*$", text, flags=re.M) if "func" in chunk]
    texts += [s for s in _test_strings() if "func.func" in s and "{" in s]
    return tuple(sorted(set(texts), key=len))


@_from("shapes")
def shapes() -> tuple[str, ...]:
    found = set()
    for text in hlo_modules.read():
        found.update(_SHAPE.findall(text))
    found.update(["f32[3,5]{1,0:T(2,2)}", "(f32[2], (s32[], pred[3]))", "bf16[8,128]{1,0:T(8,128)(2,1)}",
                  "f32[4,8]{0,1:T(4)E(8)S(1)}", "f32[?,<=4]", "s4[16]{0:E(4)}", "c64[2,3]{0,1}", "token[]",
                  "f32[3,5]{1,0:T(2,2)L(1)M(1)SC(0:2)}", "u8[]", "f8e4m3fn[4]"])
    return tuple(sorted(found))


@_from("indexing_maps")
def indexing_maps() -> tuple[str, ...]:
    texts = [s for s in _test_strings() if "->" in s and "domain" in s and "func" not in s and "ENTRY" not in s]
    texts += ["(d0, d1)[s0] -> (d0 + s0, d1 floordiv 4), domain: d0 in [0, 9], d1 in [0, 15], s0 in [0, 3]",
              "(d0) -> (d0 mod 4), domain: d0 in [0, 31], d0 mod 2 in [0, 0]", "UNDEFINED", "KNOWN EMPTY",
              "(d0){rt0} -> (d0 * rt0), domain: d0 in [0, 3], rt0 in [0, 7]"]
    return tuple(sorted(set(texts), key=len))


def freeze(root: Path, kinds: tuple[str, ...] = KINDS) -> None:
    """Writes the corpus read from the checkout at ``root``: ``kinds`` read afresh, the others kept as frozen."""
    global REPO
    REPO = root
    kept = _frozen() or {}
    corpus = {kind: list(globals()[kind].read()) if kind in kinds else list(kept.get(kind, ())) for kind in KINDS}
    with gzip.GzipFile(CORPUS, "wb", mtime=0) as f:
        f.write(json.dumps(corpus, sort_keys=True).encode())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Freeze the seed corpus from a checkout.")
    parser.add_argument("--freeze", metavar="ROOT", nargs="?", const=str(REPO), required=True)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="the kinds read afresh (default: all); the others stay as frozen")
    arguments = parser.parse_args()
    freeze(Path(arguments.freeze), tuple(arguments.kinds))
