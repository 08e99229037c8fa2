"""The DOT graph of a module (``xlapy.hlo.dot_graph``), read back by a real DOT parser (pydot)."""

from __future__ import annotations

import pydot
import pytest

import xlapy
from xlapy.hlo.dot_graph import to_dot

# pydot 4 calls pyparsing's camelCase names, which pyparsing 3.3 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:'\\w+' deprecated - use:DeprecationWarning")

MODULE = """HloModule small

fused_computation {
  param_0 = f32[4]{0} parameter(0)
  param_1 = f32[4]{0} parameter(1)
  ROOT add.0 = f32[4]{0} add(param_0, param_1)
}

cond {
  c = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  b = (s32[], f32[4]{0}) parameter(0)
  j = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  k = s32[] add(j, one)
  v = f32[4]{0} get-tuple-element(b), index=1
  ROOT t = (s32[], f32[4]{0}) tuple(k, v)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  f = f32[4]{0} fusion(x, y), kind=kLoop, calls=fused_computation
  zero = s32[] constant(0)
  init = (s32[], f32[4]{0}) tuple(zero, f)
  ROOT w = (s32[], f32[4]{0}) while(init), condition=cond, body=body
}
"""


def _unquote(text: str) -> str:
    return text[1:-1].replace('\\"', '"') if text.startswith('"') else text


def _nodes(graph) -> dict[str, str]:
    """Node name -> label, for the nodes declared directly in ``graph`` (not its default ``node [...]``)."""
    return {_unquote(n.get_name()): _unquote(n.get("label")) for n in graph.get_nodes() if n.get_name() != "node"}


def _clusters(graph, parent: str = "") -> dict[str, tuple[str, str, set[str]]]:
    """Cluster name -> (enclosing cluster, label, names of its own nodes), nested clusters included."""
    found = {}
    for sub in graph.get_subgraphs():
        name = _unquote(sub.get_name())
        found[name] = (parent, _unquote(sub.get("label")), set(_nodes(sub)))
        found.update(_clusters(sub, name))
    return found


def _edges(graph) -> list[tuple[str, str, dict[str, str]]]:
    edges = [(_unquote(e.get_source()), _unquote(e.get_destination()),
              {k: _unquote(v) for k, v in e.get_attributes().items()}) for e in graph.get_edges()]
    for sub in graph.get_subgraphs():
        edges.extend(_edges(sub))
    return edges


def _parse(text: str):
    graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None and len(graphs) == 1, text
    return graphs[0]


def test_nodes_edges_and_clusters_of_a_fusion_and_a_while():
    module = xlapy.parse_hlo(MODULE)
    xlapy.verify(module)
    graph = _parse(to_dot(module))
    assert graph.get_type() == "digraph" and _unquote(graph.get_name()) == "small"
    # Every instruction is a node labelled name / opcode / shape, except the fusion, drawn as its cluster.
    assert _nodes(graph) == {
        "x": "x\\nparameter(0)\\nf32[4]{0}", "y": "y\\nparameter(1)\\nf32[4]{0}",
        "zero": "zero\\nconstant\\ns32[]", "init": "init\\ntuple\\n(s32[], f32[4]{0})",
        "w": "w\\nwhile\\n(s32[], f32[4]{0})"}
    assert _clusters(graph) == {
        "cluster_f": ("", "f (kLoop)", {"param_0", "param_1", "add.0"}),
        "cluster_cond": ("", "cond (condition of w)", {"c", "i", "n", "lt"}),
        "cluster_body": ("", "body (body of w)", {"b", "j", "one", "k", "v", "t"}),
    }
    assert _nodes(graph.get_subgraph('"cluster_f"')[0])["add.0"] == "add.0\\nadd\\nf32[4]{0}"
    assert sorted(_edges(graph)) == sorted([
        # The fusion's operands feed its parameters; its root feeds its users.
        ("x", "param_0", {}), ("y", "param_1", {}),
        ("param_0", "add.0", {"headlabel": "0"}), ("param_1", "add.0", {"headlabel": "1"}),
        ("zero", "init", {"headlabel": "0"}), ("add.0", "init", {"headlabel": "1"}),
        ("init", "w", {}),
        ("c", "i", {}), ("i", "lt", {"headlabel": "0"}), ("n", "lt", {"headlabel": "1"}),
        ("b", "j", {}), ("j", "k", {"headlabel": "0"}), ("one", "k", {"headlabel": "1"}), ("b", "v", {}),
        ("k", "t", {"headlabel": "0"}), ("v", "t", {"headlabel": "1"}),
        # The loop's computations end in the while.
        ("lt", "w", {"style": "dashed", "label": "condition", "ltail": "cluster_cond"}),
        ("t", "w", {"style": "dashed", "label": "body", "ltail": "cluster_body"}),
    ])


CONDITIONAL = """HloModule branches

add_one {
  a = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT r = f32[] add(a, one)
}

fused_negate {
  q = f32[] parameter(0)
  ROOT neg = f32[] negate(q)
}

negated {
  p = f32[] parameter(0)
  ROOT add_one = f32[] fusion(p), kind=kLoop, calls=fused_negate
}

ENTRY main {
  index = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT pick = f32[] conditional(index, x, x), branch_computations={add_one, negated}
  after = token[] after-all(), control-predecessors={pick}
}
"""


def test_conditional_branches_nested_fusions_control_edges_and_clashing_names():
    module = xlapy.parse_hlo(CONDITIONAL)
    xlapy.verify(module)
    graph = _parse(to_dot(module))
    # The fusion add_one keeps the name of its kernel dumps; the computation add_one's cluster takes a suffix
    # (DOT would merge two subgraphs of one name).
    assert _clusters(graph) == {
        "cluster_add_one.1": ("", "add_one (branch 0 of pick)", {"a", "one", "r"}),
        "cluster_negated": ("", "negated (branch 1 of pick)", {"p"}),
        "cluster_add_one": ("cluster_negated", "add_one (kLoop)", {"q", "neg"}),
    }
    assert ("r", "pick", {"style": "dashed", "label": "branch 0", "ltail": "cluster_add_one.1"}) in _edges(graph)
    assert ("neg", "pick", {"style": "dashed", "label": "branch 1", "ltail": "cluster_negated"}) in _edges(graph)
    assert ("p", "q", {}) in _edges(graph)
    assert ("pick", "after", {"style": "dotted"}) in _edges(graph)
    assert {"index", "x", "pick", "after"} == set(_nodes(graph))


def test_names_with_quotes_and_backslashes_survive_the_parser():
    module = xlapy.parse_hlo(MODULE)
    module.name = 'my.module-2 "quoted" \\ end'
    module.entry.parameters[0].name = "x.1-a"
    graph = _parse(to_dot(module))
    assert graph.get_name() == '"my.module-2 \\"quoted\\" \\\\ end"'
    assert "x.1-a" in _nodes(graph) and ("x.1-a", "param_0", {}) in _edges(graph)
