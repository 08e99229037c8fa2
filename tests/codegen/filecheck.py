"""FileCheck (the Python clone installed with the dev extra) on printed IR, run in this process: the matcher its
command line runs, on the options that command line would parse, without starting an interpreter per check."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from filecheck.matcher import Matcher
from filecheck.options import parse_argv_options


def filecheck(output: str, checks: str, tmp_path: Path) -> None:
    """Runs FileCheck with ``checks`` on ``output``; fails with its message."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks, encoding="utf-8")
    input_file = tmp_path / "input.txt"
    input_file.write_text(output, encoding="utf-8")
    options = parse_argv_options(["filecheck", str(check_file), "--input-file", str(input_file)])
    messages = io.StringIO()
    with contextlib.redirect_stderr(messages), contextlib.redirect_stdout(messages):
        # The matcher takes its error stream when it is made: inside the redirection.
        exit_code = Matcher.from_opts(options).run()
    assert exit_code == 0, messages.getvalue() + "\n" + output
