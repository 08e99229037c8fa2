"""Fuzz xlapy's entry points with generated inputs and count what happens.

Each input runs in a persistent worker process (restarted after a crash or a
hang), and is classified as ok, clean error (XlapyError; for the command
line: exit 1 and one line ``xlapy: error: ...``), other exception (type and
innermost xlapy frame), hang, signal, or wrong answer (a compiled result
that differs from the interpreter, bad arguments accepted, ...). The inputs
depend only on --seed, the entry point and their index, so two runs (before
and after a change, with the xlapy under test chosen by PYTHONPATH) see the
same inputs; --same-inputs-as replays another report's input counts.

    PYTHONPATH=/path/to/checkout python tools/fuzz_entry_points.py --budget-seconds 600 --report out.json
    python tools/fuzz_entry_points.py --replay compile:17 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

# Importable as ``tools.fuzz`` without putting the repository's own xlapy first on the path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.fuzz.minimize import shrink  # noqa: E402
from tools.fuzz.outcome import OUTCOMES, Outcome  # noqa: E402
from tools.fuzz.pool import PATIENCE, Worker  # noqa: E402
from tools.fuzz.targets import ENTRY_POINTS, case_for  # noqa: E402

# Relative time per entry point: the parsers saturate quickly, running modules is slow.
WEIGHTS = {"parse_shape": 0.5, "parse_hlo": 0.5, "verify": 0.5, "IndexingMap.parse": 0.5, "stablehlo.parse_module": 0.5,
           "compile": 1.5, "kernel_cache": 1.5, "cli_run": 2.0}


def _show(case: dict) -> str:
    """The case as text a reader can paste: the input text, then the rest."""
    lines = []
    for key, value in case.items():
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                value = repr(value)
        if isinstance(value, str) and "\n" in value:
            lines.append(f"--- {key}:\n{value.rstrip()}")
        else:
            lines.append(f"--- {key}: {value!r}" if not isinstance(value, str) or len(value) < 2000
                         else f"--- {key}: {value[:300]!r}... ({len(value)} characters)")
    return "\n".join(lines)


def _jsonable(case: dict) -> dict:
    return {k: (v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v) for k, v in case.items()}


def campaign(args: argparse.Namespace) -> dict:
    entries = args.entry or list(ENTRY_POINTS)
    counts_from = {}
    if args.same_inputs_as:
        table = json.loads(Path(args.same_inputs_as).read_text())["table"]
        counts_from = {entry: row["inputs"] for entry, row in table.items()}
    worker = Worker(timeout=args.timeout, memory_bytes=args.memory_mb << 20)
    table: dict[str, Counter] = {}
    failures: dict[tuple, dict] = {}
    slow: list[dict] = []  # inputs that outlasted the timeout and finished with more time
    started = time.monotonic()
    try:
        for position, entry in enumerate(entries):
            # What earlier entry points left of the budget is shared by the rest.
            left = args.budget_seconds * (1 - args.minimize_share) - (time.monotonic() - started)
            share = left * WEIGHTS.get(entry, 1.0) / sum(WEIGHTS.get(e, 1.0) for e in entries[position:])
            limit = counts_from.get(entry, args.max_inputs)
            deadline = time.monotonic() + share
            counter = table.setdefault(entry, Counter())
            index = 0
            while (limit is not None and index < limit) or (limit is None and time.monotonic() < deadline):
                case = case_for(entry, args.seed, index)
                outcome, _ = worker.run(entry, case)
                counter[outcome.outcome] += 1
                if "slow_seconds" in outcome.extra:
                    slow.append({"entry": entry, "index": index, "seconds": outcome.extra["slow_seconds"],
                                 "outcome": outcome.outcome})
                if outcome.outcome not in ("ok", "clean_error"):
                    found = failures.setdefault(outcome.signature, {
                        "outcome": outcome.outcome, "type": outcome.type, "where": outcome.where,
                        "deepest": outcome.deepest, "message": outcome.message, "entries": Counter(),
                        "first": (entry, index), "case": case, "size": len(_show(case))})
                    found["entries"][entry] += 1
                    if len(_show(case)) < found["size"]:
                        found.update(case=case, first=(entry, index), size=len(_show(case)), message=outcome.message)
                index += 1
            counter["inputs"] = index
            print(f"{entry}: {index} inputs, {dict(counter)}", file=sys.stderr, flush=True)
        # With fixed input counts the run may overrun the budget: shrinking still gets its share.
        _minimize(worker, failures, max(started + args.budget_seconds,
                                        time.monotonic() + args.budget_seconds * args.minimize_share))
    finally:
        xlapy_file = worker.xlapy_file
        restarts = worker.restarts
        worker.close()
    return {
        "seed": args.seed, "xlapy": xlapy_file, "seconds": round(time.monotonic() - started, 1),
        "worker_restarts": restarts, "timeout": args.timeout, "slow": slow,
        "table": {e: {"inputs": c["inputs"], **{o: c[o] for o in OUTCOMES}} for e, c in table.items()},
        "failures": [
            {k: (dict(v) if isinstance(v, Counter) else v) for k, v in f.items() if k not in ("case", "size")}
            | {"repro": _jsonable(f["case"]), "repro_text": _show(f["case"])}
            for f in sorted(failures.values(), key=lambda f: (OUTCOMES.index(f["outcome"]), f["type"], f["where"]))
        ],
    }


def _minimize(worker: Worker, failures: dict[tuple, dict], deadline: float) -> None:
    """Shrinks each failure's smallest input while it fails the same way (hangs are left as they are)."""
    pending = [f for f in failures.values() if f["outcome"] not in ("hang",)]
    for i, found in enumerate(pending):
        entry = found["first"][0]
        signature = (found["outcome"], found["type"], found["where"])
        share = max(0.0, (deadline - time.monotonic()) / (len(pending) - i))

        def still_fails(candidate: dict, entry=entry, signature=signature) -> bool:
            outcome, _ = worker.run(entry, candidate)
            return outcome.signature == signature

        found["case"] = shrink(found["case"], still_fails, time.monotonic() + min(share, 60.0))


def format_table(report: dict) -> str:
    columns = ["inputs", *OUTCOMES]
    width = max(len(e) for e in report["table"]) + 2
    lines = [f"xlapy under test: {report['xlapy']} (seed {report['seed']}, {report['seconds']} s, "
             f"{report['worker_restarts']} worker restarts, timeout {report['timeout']} s)", "",
             "entry point".ljust(width) + "".join(c.rjust(12) for c in columns)]
    totals = Counter()
    for entry, row in report["table"].items():
        lines.append(entry.ljust(width) + "".join(str(row[c]).rjust(12) for c in columns))
        totals.update({c: row[c] for c in columns})
    lines.append("total".ljust(width) + "".join(str(totals[c]).rjust(12) for c in columns))
    for item in report.get("slow", []):
        lines += ["", f"slow, not a hang: {item['entry']}:{item['index']} outlasted the timeout, then ended "
                      f"({item['outcome']}) in {item['seconds']} s with {PATIENCE} times as long"]
    lines += ["", f"{len(report['failures'])} distinct failures (outcome, type, innermost xlapy frame):"]
    for n, f in enumerate(report["failures"], 1):
        seen = ", ".join(f"{e} x{c}" for e, c in f["entries"].items())
        lines += ["", f"[{n}] {f['outcome']}: {f['type']} at {f['where']}"
                  + (f" (deepest frame {f['deepest']})" if f["deepest"] and f["deepest"] != f["where"] else ""),
                  f"    seen in: {seen}; first: {f['first'][0]}:{f['first'][1]} (--replay {f['first'][0]}:"
                  f"{f['first'][1]})"]
        if f["message"]:
            lines.append("    message: " + " ".join(f["message"].split())[:240])
        lines += ["    minimal repro:", *("      " + line for line in f["repro_text"].splitlines()[:40])]
    return "\n".join(lines) + "\n"


def replay(args: argparse.Namespace) -> None:
    entry, index = args.replay.rsplit(":", 1)
    case = case_for(entry, args.seed, int(index))
    print(_show(case))
    worker = Worker(timeout=args.timeout, memory_bytes=args.memory_mb << 20)
    try:
        outcome: Outcome = worker.run(entry, case)[0]
        print(f"=> {outcome.outcome} {outcome.type} {outcome.where} {outcome.message}")
        print(f"(xlapy from {worker.xlapy_file})")
    finally:
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-seconds", type=float, default=300.0, help="total time, shared by the entry points")
    parser.add_argument("--entry", action="append", choices=list(ENTRY_POINTS), help="an entry point (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-inputs", type=int, help="inputs per entry point (default: as many as the budget allows)")
    parser.add_argument("--same-inputs-as", metavar="REPORT.json", help="run as many inputs per entry as that report")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per input before it counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space cap of the worker (0: none)")
    parser.add_argument("--minimize-share", type=float, default=0.1, help="share of the budget for shrinking repros")
    parser.add_argument("--report", metavar="OUT.json", help="write the full report as JSON")
    parser.add_argument("--table", metavar="OUT.txt", help="also write the printed table to a file")
    parser.add_argument("--replay", metavar="ENTRY:INDEX", help="show and run one generated input")
    args = parser.parse_args()
    if args.replay:
        replay(args)
        return
    report = campaign(args)
    text = format_table(report)
    sys.stdout.write(text)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1, default=str))
    if args.table:
        Path(args.table).write_text(text)


if __name__ == "__main__":
    main()
