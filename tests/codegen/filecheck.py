"""FileCheck (the Python clone installed with the dev extra) on printed IR."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def filecheck(output: str, checks: str, tmp_path: Path) -> None:
    """Runs FileCheck with ``checks`` on ``output``; fails with its message."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    tool = Path(sys.executable).parent / "filecheck"
    command = str(tool) if tool.exists() else shutil.which("filecheck")
    assert command, "the filecheck tool is not installed"
    result = subprocess.run([command, str(check_file)], input=output, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr + "\n" + output
