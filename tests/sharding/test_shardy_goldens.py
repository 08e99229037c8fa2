"""The checked-in outputs of Shardy (the expected propagations of
``data/propagation`` and the expected rules of ``data/op_sharding_rules*.txt``)
are what Shardy, run now through jaxlib, gives for their inputs: the check of
``python -m tools.regenerate_shardy_goldens --check``, on every file. Needs
jax; only ``XLAPY_NO_JAX=1`` skips it (``shardy_oracle.py``)."""

from __future__ import annotations

import difflib
import pathlib

import pytest

from tests.sharding.shardy_oracle import require_shardy
from tools.regenerate_shardy_goldens import ROOT, golden_files, main, regenerate, rules_golden

require_shardy()

GOLDENS = golden_files()


def test_every_propagation_test_file_has_a_golden() -> None:
    inputs = {p.name[: -len(".mlir")] for p in (ROOT / "tests/sharding/data/propagation").glob("*.mlir")
              if not p.name.endswith(".expected.mlir")}
    assert {p.name[: -len(".expected.mlir")] for p in GOLDENS if p.suffix == ".mlir"} == inputs


@pytest.mark.parametrize("path", GOLDENS, ids=[p.name for p in GOLDENS])
def test_golden_is_what_shardy_gives(path: pathlib.Path) -> None:
    want = regenerate(path)
    have = path.read_text()
    if have != want:
        diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "checked in", "Shardy"))
        pytest.fail(f"{path.name} is not Shardy's output (python -m tools.regenerate_shardy_goldens rewrites it):\n"
                    f"{diff[:6000]}")


def test_check_mode_lists_a_changed_golden(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """--check reports an edited rule and exits 1 without writing; the default
    mode puts Shardy's rule back."""
    import tools.regenerate_shardy_goldens as tool

    original = ROOT / "tests/sharding/data/op_sharding_rules_conservative.txt"
    text = original.read_text()
    lines = text.split("\n")
    rule_line = next(i for i, line in enumerate(lines) if line.startswith("=== ")) + 1
    lines[rule_line] = "none" if lines[rule_line] != "none" else "#sdy.op_sharding_rule<([i])->([i]) {i=1}>"
    edited = tmp_path / "rules.txt"
    edited.write_text("\n".join(lines))
    monkeypatch.setitem(tool.RULE_FILES, edited.resolve(), True)
    assert main(["--check", str(edited)]) == 1
    assert capsys.readouterr().out == f"differs from Shardy's output: {edited.resolve()}\n"
    assert edited.read_text() != text
    assert main([str(edited)]) == 0
    assert edited.read_text() == text == rules_golden(text, conservative=True)
