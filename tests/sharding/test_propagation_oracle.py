# ruff: noqa: E501  (MLIR lines are longer than the code's limit)
"""Random programs propagated by xlapy and by Shardy itself (its passes, as
jaxlib ships them, run in this process): for every strategy the printed
modules must be the same up to SSA names.

The programs mix elementwise ops, dot_general, transpose, reshape,
broadcast_in_dim, reduce, concatenate, slice and sharding constraints over
random meshes, with random (open or closed, prioritized or not) shardings on
arguments, results and ops, sharding groups, and dead code. ``pipeline`` is
compared with Shardy's pipeline without its last step (explicit reshards),
which xlapy does not do."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys

import pytest

from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding.propagate import propagate

pytest.importorskip("jax")

PASSES = {
    "basic": "sdy-basic-propagate",
    "aggressive": "sdy-aggressive-propagate",
    "op-priority": "sdy-op-priority-propagate",
    "user-priority": "sdy-user-priority-propagate",
    "pipeline": ",".join([
        "symbol-dce", "sdy-lift-inlined-meshes", "sdy-remove-size-one-axes",
        "sdy-propagate-sharding-from-func-to-call", "sdy-constant-or-scalar-splitter", "symbol-dce",
        "sdy-manual-axes-cleanup", "sdy-add-data-flow-edges", "sdy-flatten-call-graph", "symbol-dce",
        "sdy-import-func-calls{add-data-flow-edges-on-named-computations=true}", "symbol-dce",
        "sdy-apply-sharding-constraints", "sdy-sharding-group-import", "sdy-pre-order-funcs",
        "sdy-user-priority-propagate", "sdy-export-named-computations", "sdy-propagate-to-func-results",
        "sdy-unflatten-call-graph", "symbol-dce", "sdy-insert-func-call-reshards",
        "func.func(sdy-constant-or-scalar-merger)", "func.func(sdy-sink-data-flow-edges)",
        "sdy-remove-sharding-groups", "func.func(sdy-sharding-constraint-to-reshard)",
        "sdy-update-non-divisible-input-output-shardings", "sdy-remove-sub-axes-in-input-output-shardings",
        "sdy-close-shardings", "canonicalize{enable-patterns=sdy-collective region-simplify=aggressive}"]),
}


_RUNNER = """
import json, sys
import jax
from jax._src.interpreters import mlir as jax_mlir
from jaxlib.mlir import ir, passmanager
out = []
for text, passes in json.load(sys.stdin):
    try:
        with jax_mlir.make_ir_context():
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(f"builtin.module({passes})").run(module.operation)
            out.append(str(module))
    except Exception as error:
        out.append(None)
json.dump(out, sys.stdout)
"""


def run_shardy(items: list[tuple[str, str]]) -> list[str | None]:
    """Shardy's output for each (program, strategy), None where it fails. It
    runs in child processes: Shardy aborts on some programs (e.g. a fatal
    error on shardings it cannot handle), which would end the test run."""
    if not items:
        return []
    run = subprocess.run([sys.executable, "-c", _RUNNER], capture_output=True, text=True,
                         input=json.dumps([(text, PASSES[strategy]) for text, strategy in items]))
    if run.returncode == 0:
        return json.loads(run.stdout)
    if len(items) == 1:
        return [None]
    middle = len(items) // 2
    return run_shardy(items[:middle]) + run_shardy(items[middle:])


def canonical(text: str) -> str:
    """The module as xlapy prints it, SSA values renamed in order of appearance
    within each function."""
    text = re.sub(r" \{stablehlo\.mesh = \{axes = \[[^\]]*\]\}\}", "", text)
    text = print_module(parse_module(text))
    parts = []
    for part in re.split(r"(?=func\.func )", text):
        names: dict[str, str] = {}

        def rename(match: re.Match, names: dict[str, str] = names) -> str:
            names.setdefault(match.group(1), f"%v{len(names)}")
            return names[match.group(1)] + (match.group(2) or "")

        parts.append(re.sub(r"%([A-Za-z_][\w.$]*|\d+)(#\d+)?", rename, part))
    return "".join(parts)


class Program:
    """A random main function over one mesh."""

    UNARY = ("negate", "abs", "sine", "exponential", "tanh", "cosine")
    BINARY = ("add", "multiply", "subtract", "maximum")

    def __init__(self, seed: int, dead: bool, groups: bool):
        self.r = random.Random(seed)
        names = ["a", "b", "c", "d"][:self.r.choice([2, 3, 4])]
        self.axes = {name: self.r.choice([2, 2, 4]) for name in names}
        self.dead, self.groups = dead, groups
        self.args: list[str] = []
        self.lines: list[str] = []
        self.values: list[tuple[str, tuple[int, ...]]] = []

    @staticmethod
    def type(shape: tuple[int, ...]) -> str:
        return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"

    def sharding(self, shape: tuple[int, ...], priorities: bool = True) -> str:
        r, used, dims = self.r, set(), []
        for size in shape:
            axes, product = [], 1
            for axis in r.sample(list(self.axes), len(self.axes)):
                if axis in used or r.random() < 0.6:
                    continue
                if size % (product * self.axes[axis]) == 0:
                    axes.append(f'"{axis}"')
                    used.add(axis)
                    product *= self.axes[axis]
                if r.random() < 0.5:
                    break
            is_open = r.random() < 0.4
            text = ", ".join(axes + (["?"] if is_open else []))
            priority = f"p{r.randint(0, 2)}" if priorities and (axes or is_open) and r.random() < 0.15 else ""
            dims.append("{" + text + "}" + priority)
        return "<@mesh, [" + ", ".join(dims) + "]>"

    def add(self, template: str, shape: tuple[int, ...], sharded: float = 0.15) -> None:
        name = f"%v{len(self.lines)}"
        attr = f" {{sdy.sharding = #sdy.sharding_per_value<[{self.sharding(shape)}]>}}" if self.r.random() < sharded else ""
        self.lines.append(template.replace("NAME", name, 1).replace("ATTR", attr))
        self.values.append((name, shape))

    def argument(self, shape: tuple[int, ...]) -> str:
        name = f"%arg{len(self.args)}"
        attr = f" {{sdy.sharding = #sdy.sharding{self.sharding(shape)}}}" if self.r.random() < 0.5 else ""
        self.args.append(f"{name}: {self.type(shape)}{attr}")
        self.values.append((name, shape))
        return name

    def pick(self, accept=lambda shape: True):
        found = [v for v in self.values if accept(v[1])]
        return self.r.choice(found) if found else None

    def text(self, ops: int) -> str:
        r, t = self.r, self.type
        for _ in range(r.randint(1, 3)):
            self.argument(tuple(r.choice([4, 8, 16]) for _ in range(r.choice([1, 2, 2, 3]))))
        for _ in range(ops):
            name, shape = self.pick()
            kind = r.choice(["unary", "unary", "binary", "binary", "dot", "transpose", "reshape",
                             "broadcast", "reduce", "concatenate", "slice", "constraint"])
            if kind == "unary":
                self.add(f"NAME = stablehlo.{r.choice(self.UNARY)} {name}ATTR : {t(shape)}", shape)
            elif kind == "binary":
                other = self.pick(lambda s, shape=shape: s == shape)[0] if r.random() < 0.7 else self.argument(shape)
                self.add(f"NAME = stablehlo.{r.choice(self.BINARY)} {name}, {other}ATTR : {t(shape)}", shape)
            elif kind == "dot" and len(shape) == 2:
                rhs = self.pick(lambda s, k=shape[1]: len(s) == 2 and s[0] == k)
                if rhs is None or r.random() < 0.3:
                    rhs_shape = (shape[1], r.choice([4, 8, 16]))
                    rhs = (self.argument(rhs_shape), rhs_shape)
                out = (shape[0], rhs[1][1])
                self.add(f"NAME = stablehlo.dot_general {name}, {rhs[0]}, contracting_dims = [1] x [0]ATTR : ({t(shape)}, {t(rhs[1])}) -> {t(out)}", out)
            elif kind == "transpose" and len(shape) >= 2:
                perm = list(range(len(shape)))
                r.shuffle(perm)
                out = tuple(shape[p] for p in perm)
                self.add(f"NAME = stablehlo.transpose {name}, dims = [{', '.join(map(str, perm))}]ATTR : ({t(shape)}) -> {t(out)}", out)
            elif kind == "reshape":
                options = [(math.prod(shape),)]
                if len(shape) >= 2:
                    options.append((*shape[:-2], shape[-2] * shape[-1]))
                if shape[-1] % 2 == 0 and shape[-1] > 2:
                    options.append((*shape[:-1], 2, shape[-1] // 2))
                out = r.choice(options)
                if out != shape:
                    self.add(f"NAME = stablehlo.reshape {name}ATTR : ({t(shape)}) -> {t(out)}", out)
            elif kind == "broadcast" and len(shape) <= 2:
                position = r.randint(0, len(shape))
                out = (*shape[:position], r.choice([4, 8, 16]), *shape[position:])
                dims = [i if i < position else i + 1 for i in range(len(shape))]
                self.add(f"NAME = stablehlo.broadcast_in_dim {name}, dims = [{', '.join(map(str, dims))}]ATTR : ({t(shape)}) -> {t(out)}", out)
            elif kind == "reduce" and len(shape) >= 2:
                dim = r.randrange(len(shape))
                out = tuple(s for i, s in enumerate(shape) if i != dim)
                init = f"%c{len(self.lines)}"
                self.lines.append(f"{init} = stablehlo.constant dense<0.000000e+00> : tensor<f32>")
                self.add(f"NAME = stablehlo.reduce({name} init: {init}) applies stablehlo.add across dimensions = [{dim}]ATTR : ({t(shape)}, tensor<f32>) -> {t(out)}", out)
            elif kind == "concatenate":
                other = self.pick(lambda s, shape=shape: s == shape)[0]
                dim = r.randrange(len(shape))
                out = tuple(s * 2 if i == dim else s for i, s in enumerate(shape))
                self.add(f"NAME = stablehlo.concatenate {name}, {other}, dim = {dim}ATTR : ({t(shape)}, {t(shape)}) -> {t(out)}", out)
            elif kind == "slice":
                dim = r.randrange(len(shape))
                if shape[dim] >= 4:
                    out = tuple(s // 2 if i == dim else s for i, s in enumerate(shape))
                    ranges = ", ".join(f"0:{s}" for s in out)
                    self.add(f"NAME = stablehlo.slice {name} [{ranges}]ATTR : ({t(shape)}) -> {t(out)}", out, 0.1)
            elif kind == "constraint":
                self.add(f"NAME = sdy.sharding_constraint {name} {self.sharding(shape, False)} : {t(shape)}", shape, 0)
        if self.groups:
            taken: set[str] = set()
            for group in range(r.randint(1, 2)):
                first = self.pick(lambda s: True)
                others = [v for v in self.values if v[1] == first[1] and v[0] != first[0] and v[0] not in taken]
                if first[0] in taken or not others:
                    continue
                second = r.choice(others)
                taken.update((first[0], second[0]))
                for value in (first, second):
                    self.lines.append(f"sdy.sharding_group {value[0]} group_id={group} : {t(value[1])}")
        used = set(re.findall(r"(%\w+)(?=[,) \]:])", " ".join(line.split("=", 1)[1] for line in self.lines if "=" in line)))
        outputs = [v for v in self.values if not v[0].startswith("%arg") and v[0] not in used] or [self.values[-1]]
        if self.dead:
            outputs = outputs[-1:]
        results = [t(s) + (f" {{sdy.sharding = #sdy.sharding{self.sharding(s)}}}" if r.random() < 0.3 else "")
                   for _, s in outputs]
        mesh = ", ".join(f'"{a}"={n}' for a, n in self.axes.items())
        body = "\n".join("    " + line for line in self.lines)
        return (f'module {{\n  sdy.mesh @mesh = <[{mesh}]>\n  func.func @main({", ".join(self.args)}) -> ({", ".join(results)}) {{\n'
                f"{body}\n    return {', '.join(n for n, _ in outputs)} : {', '.join(t(s) for _, s in outputs)}\n  }}\n}}\n")


SEEDS = [(seed, seed % 2 == 1, seed % 3 == 0) for seed in range(40)]
CASES = [(seed, dead, groups, strategy) for seed, dead, groups in SEEDS for strategy in PASSES]


@pytest.fixture(scope="module")
def shardy_outputs() -> dict[tuple[int, str], str | None]:
    items = [(Program(seed, dead, groups).text(12), strategy) for seed, dead, groups, strategy in CASES]
    return {(case[0], case[3]): out for case, out in zip(CASES, run_shardy(items))}


@pytest.mark.parametrize(("seed", "dead", "groups", "strategy"), CASES,
                         ids=[f"seed{c[0]}-{c[3]}" for c in CASES])
def test_random_program_propagates_as_in_shardy(seed: int, dead: bool, groups: bool, strategy: str,
                                                shardy_outputs) -> None:
    text = Program(seed, dead, groups).text(12)
    reference = shardy_outputs[(seed, strategy)]
    if reference is None:
        pytest.skip("Shardy itself fails on this program")
    assert canonical(print_module(propagate(parse_module(text), strategy))) == canonical(reference), text
