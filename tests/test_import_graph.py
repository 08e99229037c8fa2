"""The modules of ``xlapy`` import each other along the data flow, without cycles.

The graph is read from the source with ``ast``: every ``import xlapy...`` and
``from xlapy... import ...`` (relative ones resolved), at module level or inside
functions, since a function-level import is a dependency all the same (it only
runs later). Imports under ``if TYPE_CHECKING:`` are left out: they never run.
``from package import name`` depends on the submodule ``package.name`` when
there is one, else on the package itself.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "xlapy"

# The packages (and top-level modules) of xlapy from the bottom up, following
# the data flow: errors and small utilities; shapes; memory limits on shapes;
# the HLO IR; what analyses it (indexing maps, shardings); what reads text
# into it (frontends) or evaluates it (the interpreter); HLO-to-HLO passes
# (transforms, which fold constants with the interpreter); schedules and buffer
# assignment (buffers); code generation; the
# runtime that compiles and runs; the package's public API; the command line.
# A unit may import units of lower layers only: none of its own layer but
# itself, none above. Shardy's meshes and shardings are values the frontends
# read and the interpreter runs, so ``sharding`` sits below both and imports
# neither.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("registry", "syntax", "files", "version"),
    ("shapes",),
    ("memory",),
    ("hlo",),
    ("indexing", "sharding"),
    ("interpreter", "frontends"),
    ("transforms",),
    ("buffers",),
    ("codegen",),
    ("runtime",),
    ("xlapy",),  # xlapy/__init__.py
    ("cli",),
)
LAYER_OF = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}

# Modules that sit at another layer than their package, each with the reason.
# ``xlapy.frontends.jax``: its ``jit`` compiles what JAX lowers with
# ``xlapy.compile`` (runtime), so the JAX frontend sits with the public API,
# above the runtime; the rest of ``frontends`` stays below the transforms, and
# nothing below the ``xlapy`` layer imports the JAX frontend. (A separate
# top-level module holding ``jit`` would leave ``xlapy.frontends.jax.jit``, the
# name JAX users look for, reachable only through an upward import.)
MODULE_LAYERS = {"xlapy.frontends.jax": "xlapy"}


def layer_of(module: str) -> int:
    return LAYER_OF[MODULE_LAYERS.get(module, unit_of(module))]


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module it depends on
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def unit_of(module: str) -> str:
    """The package (or top-level module) of xlapy that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: dict[str, Path]):
        self.module = module
        # The package relative imports start from.
        self.package = module.split(".") if is_package else module.split(".")[:-1]
        self.known = known
        self.imports: list[Import] = []

    def _add(self, target: str, line: int) -> None:
        if target == "xlapy" or target.startswith("xlapy."):
            self.imports.append(Import(self.module, target, line))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base_parts = self.package[:len(self.package) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            self._add(submodule if submodule in self.known else base, node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("xlapy.x") with a literal name.
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
        if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            self._add(node.args[0].value, node.lineno)
        self.generic_visit(node)


@cache
def imports() -> tuple[Import, ...]:
    known = modules()
    found: list[Import] = []
    for module, path in known.items():
        collector = _ImportCollector(module, path.name == "__init__.py", known)
        collector.visit(ast.parse(path.read_text(), str(path)))
        found.extend(collector.imports)
    return tuple(found)


def graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import}."""
    edges: dict[str, dict[str, int]] = {m: {} for m in modules()}
    for imp in imports():
        edges[imp.source].setdefault(imp.target, imp.line)
    return edges


def strongly_connected_components(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; only components that hold a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in edges:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    components.append(sorted(component))
    return components


def shortest_cycle(edges: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of ``component``."""
    start = component[0]
    members = set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in edges[node]:
            if successor not in members:
                continue
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if successor not in previous:
                previous[successor] = node
                queue.append(successor)
    raise AssertionError(f"no cycle through {start}")


def describe_cycle(edges: dict[str, dict[str, int]], cycle: list[str]) -> str:
    steps = [f"{a} (line {edges[a][b]})" for a, b in itertools.pairwise(cycle)]
    return " -> ".join([*steps, cycle[-1]])


def test_the_walk_finds_every_import_target():
    # An import of a module that does not exist would make the graph below
    # incomplete (or the import fail at run time).
    known = modules()
    missing = sorted({f"{i.source}:{i.line} imports {i.target}" for i in imports() if i.target not in known})
    assert not missing, "\n".join(missing)


def test_the_walk_sees_function_level_and_relative_imports_but_not_type_checking_ones():
    # The collector on a known source, checked against what Python's own
    # import semantics make of it.
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import ir\n"
        "from ..errors import XlapyError\n"
        "if TYPE_CHECKING:\n"
        "    from xlapy.codegen import pipeline\n"
        "def f():\n"
        "    import xlapy.shapes.layout\n"
        "    from xlapy.indexing import affine, IndexingMap\n"
    )
    collector = _ImportCollector("xlapy.hlo.printer", False, modules())
    collector.visit(ast.parse(source))
    assert [(i.target, i.line) for i in collector.imports] == [
        ("xlapy.hlo.ir", 2), ("xlapy.errors", 3), ("xlapy.shapes.layout", 7), ("xlapy.indexing.affine", 8),
        ("xlapy.indexing", 8)]


def test_strongly_connected_components_find_each_cycle():
    edges = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e": 5}, "f": {"d": 6}}
    assert sorted(strongly_connected_components(edges)) == [["a", "b", "c"], ["e"]]
    cycle = shortest_cycle(edges, ["a", "b", "c"])
    assert describe_cycle(edges, cycle) == "a (line 1) -> b (line 2) -> c (line 3) -> a"


def test_no_import_cycles():
    edges = graph()
    cycles = [describe_cycle(edges, shortest_cycle(edges, c)) for c in strongly_connected_components(edges)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_every_unit_has_a_layer():
    units = {unit_of(m) for m in modules()}
    assert units <= set(LAYER_OF), f"add to LAYERS: {sorted(units - set(LAYER_OF))}"


def test_packages_import_only_lower_layers():
    violations = []
    for imp in imports():
        source, target = unit_of(imp.source), unit_of(imp.target)
        if source not in LAYER_OF or target not in LAYER_OF:
            continue
        if source == target and imp.source not in MODULE_LAYERS and imp.target not in MODULE_LAYERS:
            continue
        # Within a package, a module moved up may import its siblings, but not the other way round.
        if layer_of(imp.target) > layer_of(imp.source) or (layer_of(imp.target) == layer_of(imp.source)
                                                           and source != target):
            violations.append(f"{imp.source}:{imp.line} imports {imp.target} ({source} may not import {target})")
    assert not violations, "imports against the data flow:\n" + "\n".join(sorted(violations))


def _module_level_registries(tree: ast.Module) -> list[str]:
    """What makes a module a registry: a ``registrar(...)`` table, or a
    module-level dict that a function of the module fills with what its caller
    hands over (``TABLE[key] = argument``; a cache of computed values is not one)."""
    found = []
    dicts = {}
    for statement in tree.body:
        value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
        targets = (statement.targets if isinstance(statement, ast.Assign)
                   else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "registrar":
            found.append(f"line {statement.lineno}: a registrar(...) table")
        is_dict = isinstance(value, ast.Dict) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", None) == "dict")
        for target in targets:
            if is_dict and isinstance(target, ast.Name):
                dicts[target.id] = statement.lineno
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in arguments):
                continue
            for target in node.targets:
                table = target.value if isinstance(target, ast.Subscript) else None
                if isinstance(table, ast.Name) and table.id in dicts:
                    found.append(f"line {dicts[table.id]}: {table.id}, filled by {function.name}()")
    return sorted(set(found))


def test_the_registry_check_sees_a_table_filled_by_a_function():
    tree = ast.parse("RULES = {}\nNAMES = {'a': 1}\ndef register(k, v):\n    RULES[k] = v\n"
                     "rule = registrar(OTHER, 'x')\n_CACHE = {}\ndef cached(k):\n    _CACHE[k] = NAMES[k] + 1\n")
    assert _module_level_registries(tree) == ["line 1: RULES, filled by register()",
                                              "line 5: a registrar(...) table"]


@pytest.mark.parametrize("module", sorted(m for m, p in modules().items() if p.name == "__init__.py"))
def test_no_registry_in_a_package_init(module):
    # A package's __init__ re-exports; per-opcode tables live in named modules
    # (``registry.py``) that the rule families import.
    path = modules()[module]
    registries = _module_level_registries(ast.parse(path.read_text(), str(path)))
    assert not registries, f"{path.relative_to(PACKAGE_ROOT.parent)} defines a registry: {'; '.join(registries)}"
