"""The harness that runs Shardy in child processes (``tools/shardy.py``) and
the rule by which tests skip on Shardy's failures (``shardy_oracle.py``): a
child that cannot do its work is an error, never a program Shardy fails on,
and only listed failures, for their listed reason, are skipped. Needs jax;
only ``XLAPY_NO_JAX=1`` skips the module."""

from __future__ import annotations

import re
import sys

import pytest

from tests.sharding.shardy_oracle import require_shardy, shardy_output
from tools.shardy import Outcome, ShardyHarnessError, run_isolated

require_shardy()

_MODULE = """module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""

# A data-flow edge on a value no data-flow op owns: Shardy's propagation
# dereferences the missing owner (see test_maximal_and_empty_meshes.py).
_CRASHES_SHARDY = """module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.data_flow_edge %arg0 sharding=<@mesh, [{"a"}]> : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""

_UNKNOWN_AXIS = _MODULE.replace('[{"a"}]>}', '[{"b"}]>}')

_READY = 'import json, sys\nprint(json.dumps({"ready": True}), flush=True)\n'


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_outcomes_of_real_shardy() -> None:
    """Outputs, a refusal with Shardy's diagnostics and a crash, each for its
    own program; the child after the crash carries on."""
    outcomes = run_isolated([(_MODULE, "basic"), (_UNKNOWN_AXIS, "basic"), (_CRASHES_SHARDY, "basic"),
                             (_MODULE, "pipeline")])
    assert outcomes[0].failure is None and 'sdy.sharding_per_value<[<@mesh, [{"a", ?}]>]>' in outcomes[0].output
    assert outcomes[1].output is None and outcomes[1].failure.startswith("refused: ")
    assert 'unknown axis name: "b"' in outcomes[1].failure
    assert outcomes[2].output is None and outcomes[2].failure.startswith("crashed: SIGSEGV")
    assert outcomes[3].failure is None and outcomes[3].output.startswith("module {")


@pytest.mark.parametrize(("code", "problem"), [
    ("import sys; sys.exit(0)", "ended before it was ready"),
    ("raise ImportError('no jaxlib here')", "ImportError: no jaxlib here"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "ended before it was ready"),
    ("print('Segmentation fault (core dumped)')", "printed what is not a message"),
    ("print('[1, 2]')", "printed what is not a message"),
    (_READY + "print('{\"index\": 0, \"output\": \"module {}\"}')", "out of turn"),
    (_READY + "print('{\"start\": 0}'); print('{\"index\": 0, \"output\": 7}')", "out of turn"),
    (_READY + "sys.exit(0)", "ended with 1 program(s) left"),
    (_READY + "print('{\"start\": 0}', flush=True); sys.exit(3)", "ended with 1 program(s) left"),
    (_READY + "import os, signal; print('{\"start\": 0}', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
     "was killed by SIGKILL"),
    # a crash between programs is not Shardy's
    (_READY + "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "was killed by SIGSEGV"),
    (_READY + "import time; print('{\"start\": 0}', flush=True); time.sleep(30)", "stalled"),
], ids=["exits-at-once", "import-error", "crashes-at-start", "garbage", "not-an-object", "result-unasked",
        "result-not-text", "stops-early", "exit-status", "killed", "crash-between-programs", "stalls"])
def test_a_broken_child_is_an_error_not_a_skip(code: str, problem: str) -> None:
    with pytest.raises(ShardyHarnessError, match=re.escape(problem)) as error:
        run_isolated([(_MODULE, "basic")], command=_child("import sys\nprint('child stderr', file=sys.stderr)\n"
                                                             + code), startup_timeout=30, program_timeout=2)
    assert "child stderr" in str(error.value)


def test_a_child_that_cannot_start_is_an_error() -> None:
    with pytest.raises(ShardyHarnessError, match="cannot start"):
        run_isolated([(_MODULE, "basic")], command=["/nonexistent/python"])


def test_a_crash_on_a_program_is_its_outcome() -> None:
    """The child that dies of a crash signal while on a program gives that
    program a crash, with what it printed since starting it."""
    code = (_READY + "print('{\"start\": 0}', flush=True)\nprint('tools.shardy: program 0', file=sys.stderr)\n"
            "print('LLVM ERROR: out of luck', file=sys.stderr, flush=True)\nimport os; os.abort()")
    (outcome,) = run_isolated([(_MODULE, "basic")], command=_child(code))
    assert outcome == Outcome(failure="crashed: SIGABRT\nLLVM ERROR: out of luck")


# -- skipping only on listed failures, for the listed reason ---------------------------------

def test_an_output_is_compared() -> None:
    assert shardy_output(Outcome(output="module {}"), None) == "module {}"


def test_an_unlisted_failure_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="not listed as a known failure"):
        shardy_output(Outcome(failure="crashed: SIGSEGV"), None)


def test_a_listed_program_that_shardy_accepts_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="now accepts"):
        shardy_output(Outcome(output="module {}"), "SIGSEGV")


def test_a_listed_program_failing_otherwise_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="another reason"):
        shardy_output(Outcome(failure="refused: error: unknown axis"), "SIGSEGV")


def test_a_listed_failure_with_its_reason_skips() -> None:
    with pytest.raises(pytest.skip.Exception, match="as listed"):
        shardy_output(Outcome(failure="crashed: SIGSEGV"), "SIGSEGV")
