"""A module as a Graphviz DOT graph, in the spirit of XLA's ``--xla_dump_hlo_as_dot``
(``xla/service/hlo_graph_dumper.cc``).

One ``digraph``: each instruction of the entry computation is a node labelled
with its name, opcode and shape; each operand an edge from the operand to its
user (``headlabel`` = the operand number when there are several). As XLA draws
them:

- a fusion is a ``subgraph cluster_<fusion name>`` (the name its kernel dumps
  carry) holding the instructions of its fused computation: the fusion's
  operands feed the fused parameters, and the fused root feeds the fusion's
  users, so the fusion itself has no node of its own;
- the computations a ``while``, ``conditional`` or ``call`` runs are clusters
  ``cluster_<computation name>`` of their own instructions, whose root is
  joined to the calling instruction by a dashed edge labelled with the role
  (``condition``, ``body``, ``branch 0``, ...);
- control dependencies are dotted edges.

Other called computations (reducers, comparators, scatter combiners) are
applied inside their instruction and not drawn.
"""

from __future__ import annotations

import re
from pathlib import Path

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, while_condition_and_body

# The ops whose called computations run as computations of their own (drawn as clusters).
_CONTROL_FLOW = ("while", "conditional", "call")


def _quote(text: str) -> str:
    """A DOT double-quoted string: every character kept, quotes and backslashes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _opcode_text(instr: HloInstruction) -> str:
    if instr.opcode == "parameter":
        return f"parameter({instr.parameter_number})"
    if instr.opcode == "fusion" and instr.attr("kind") is not None:
        return f"fusion:{instr.attr('kind')}"
    return instr.opcode


def _called_roles(instr: HloInstruction) -> list[tuple[str, HloComputation]]:
    """The computations a control-flow instruction runs, each with its role."""
    if instr.opcode == "while":
        condition, body = while_condition_and_body(instr)
        return [("condition", condition), ("body", body)]
    if instr.opcode == "conditional":
        return [(f"branch {i}", c) for i, c in enumerate(instr.called_computations)]
    return [("to_apply", c) for c in instr.called_computations]


class _Writer:
    def __init__(self, module: HloModule) -> None:
        self.lines: list[str] = []
        self.edges: list[str] = []
        self.drawn: dict[int, str] = {}  # the cluster of each computation drawn as one
        # Cluster names in use (DOT merges subgraphs of the same name). Fusions keep the name of their
        # kernel dumps; a computation that shares it takes a suffix.
        self.clusters = {f"cluster_{i.name}" for i in module.instructions if i.opcode == "fusion"}

    def computation(self, computation: HloComputation, depth: int) -> None:
        indent = "  " * depth
        for instr in computation.instructions:
            if instr.opcode == "fusion":
                self.fusion(instr, depth)
            else:
                self.lines.append(f"{indent}{_quote(instr.name)} [label={_quote(self.label(instr))}];")
            self.instruction_edges(instr)
            if instr.opcode in _CONTROL_FLOW:
                for role, called in _called_roles(instr):
                    if id(called) not in self.drawn:
                        self.drawn[id(called)] = cluster = self.computation_cluster(called.name)
                        self.cluster(cluster, f"{called.name} ({role} of {instr.name})", called, depth)
                    self.edges.append(f"{_quote(_node(called.root))} -> {_quote(_node(instr))} "
                                      f"[style=dashed, label={_quote(role)}, ltail={_quote(self.drawn[id(called)])}];")

    def computation_cluster(self, name: str) -> str:
        cluster, number = f"cluster_{name}", 0
        while cluster in self.clusters:
            number += 1
            cluster = f"cluster_{name}.{number}"
        self.clusters.add(cluster)
        return cluster

    def fusion(self, instr: HloInstruction, depth: int) -> None:
        kind = instr.attr("kind")
        label = f"{instr.name} ({kind})" if kind is not None else instr.name
        self.cluster(f"cluster_{instr.name}", label, instr.fused_computation, depth)

    def cluster(self, cluster: str, label: str, computation: HloComputation, depth: int) -> None:
        indent = "  " * depth
        self.lines.append(f"{indent}subgraph {_quote(cluster)} {{")
        self.lines.append(f"{indent}  label={_quote(label)};")
        self.computation(computation, depth + 1)
        self.lines.append(f"{indent}}}")

    @staticmethod
    def label(instr: HloInstruction) -> str:
        return f"{instr.name}\n{_opcode_text(instr)}\n{instr.shape}"

    def instruction_edges(self, instr: HloInstruction) -> None:
        if instr.opcode == "fusion":
            # The operands feed the fused parameters (the fusion is drawn as its computation).
            parameters = instr.fused_computation.parameters
            for number, operand in enumerate(instr.operands):
                if number < len(parameters):
                    self.edges.append(f"{_quote(_node(operand))} -> {_quote(parameters[number].name)};")
        else:
            several = len(instr.operands) > 1
            for number, operand in enumerate(instr.operands):
                head = f" [headlabel={_quote(str(number))}]" if several else ""
                self.edges.append(f"{_quote(_node(operand))} -> {_quote(_node(instr))}{head};")
        for successor in instr.control_successors:
            self.edges.append(f"{_quote(_node(instr))} -> {_quote(_node(successor))} [style=dotted];")


def _node(instr: HloInstruction) -> str:
    """The node that stands for ``instr``: a fusion's fused root (down nested fusions), else its own."""
    while instr.opcode == "fusion":
        instr = instr.fused_computation.root
    return instr.name


def to_dot(module: HloModule) -> str:
    """The DOT text of ``module``'s entry computation and what it runs (see the module docstring)."""
    writer = _Writer(module)
    writer.lines.append(f"digraph {_quote(module.name)} {{")
    writer.lines.append("  compound=true;")
    writer.lines.append("  node [shape=rect];")
    if module.entry is not None:
        writer.computation(module.entry, 1)
    writer.lines.extend("  " + edge for edge in writer.edges)
    writer.lines.append("}")
    return "\n".join(writer.lines) + "\n"


def dump_dot(module: HloModule, directory: str | Path, suffix: str) -> Path:
    """Writes ``to_dot(module)`` to ``directory/<module name>.<suffix>.dot`` (characters other than letters,
    digits, ``.``, ``_`` and ``-`` in the name become ``_``) and returns the path."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", module.name) or "module"
    path = Path(directory) / f"{name}.{suffix}.dot"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_dot(module), encoding="utf-8")
    except OSError as error:
        raise XlapyError(f"cannot write {path}: {error.strerror}") from None
    return path
