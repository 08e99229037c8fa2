"""An opcode means one thing wherever the instruction came from: no rule
asks whether an instruction was read from MLIR, nor reads the frontend's
records. The one structural fact they need, that an instruction only encodes
MLIR structure, is a field of the IR (``HloInstruction.encodes_mlir_structure``)
read through ``xlapy.hlo.mlir_structure.encodes_mlir_structure``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent.parent / "xlapy"
THE_PREDICATE = PACKAGE / "hlo" / "mlir_structure.py"

# Ways of telling instructions apart by where they came from.
ORIGIN_CHECKS = [
    re.compile(r"\bread_from_stablehlo\b"),
    re.compile(r"\bis_implicit\b"),
    re.compile(r"[\"']implicit[\"']"),
    re.compile(r"\.mlir\.implicit\b"),
    re.compile(r"\b(instr|instruction|op|value|user|root|operand|result|element|param)\.mlir is (not )?None"),
]
# Packages whose rules follow the opcode alone: they do not look at the frontend's records at all.
OPCODE_ONLY = ["hlo", "interpreter", "indexing", "codegen", "runtime", "sharding/rules"]
RECORD_ACCESS = re.compile(r"(?<=[\w)\]])(?<!llvm)\.mlir\b(?![\"'])")
# Where the IR declares its record fields.
DECLARES_RECORDS = {PACKAGE / "hlo" / "ir.py", THE_PREDICATE}


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _hits(path: Path, patterns: list[re.Pattern]) -> list[str]:
    lines = path.read_text().splitlines()
    return [f"{path.name}:{n}: {line.strip()}" for n, line in enumerate(lines, 1)
            if any(p.search(line) for p in patterns)]


def test_no_rule_tells_instructions_apart_by_origin() -> None:
    hits = [hit for path in _sources(PACKAGE) if path != THE_PREDICATE for hit in _hits(path, ORIGIN_CHECKS)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("package", OPCODE_ONLY)
def test_opcode_rules_do_not_read_frontend_records(package: str) -> None:
    hits = [hit for path in _sources(PACKAGE / package) if path not in DECLARES_RECORDS
            for hit in _hits(path, [RECORD_ACCESS])]
    assert not hits, "\n".join(hits)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    # The patterns match the checks they stand for (the test above is not vacuous).
    probe = tmp_path / "probe.py"
    probe.write_text('if instr.mlir is not None:\n    pass\nx = getattr(root.mlir, "implicit", False)\n'
                     "y = op.mlir.attributes\n")
    assert len(_hits(probe, ORIGIN_CHECKS)) == 2
    assert len(_hits(probe, [RECORD_ACCESS])) == 3
