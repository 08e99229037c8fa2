"""Tensor shardings and axis refs: Shardy's text form, round trips and the axis-ref
algebra (expected values from Shardy's attribute documentation and tests)."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import ParseError, VerifyError
from xlapy.sharding.axis_ref import AxisRef, is_sorted_by_mesh, parse_axis_ref, sorted_by_mesh
from xlapy.sharding.mesh import Mesh, MeshAxis
from xlapy.sharding.tensor_sharding import (
    DimensionSharding,
    TensorSharding,
    parse_sharding_list,
    parse_sharding_per_value,
    parse_sharding_per_value_text,
    parse_tensor_sharding,
    print_sharding_list,
    print_sharding_per_value,
)
from xlapy.syntax import Cursor


def ref(text: str) -> AxisRef:
    return AxisRef.parse(text)


# -- printing (Shardy's tensor_sharding_parse_print cases) ------------------------------

@pytest.mark.parametrize("body", [
    '<@foo, [], replicated={"b"}>',
    '<@foo, [{"a"}, {}]>',
    '<@foo, [{}, {}], replicated={"a", "b"}>',
    '<mesh<["x"=2, "y"=2]>, [{"x"}, {}]>',
    '<@foo, [{"a", ?}, {?}]>',
    '<@foo, [{"a", "b", ?}, {}]>',
    '<@foo, [{"a"}, {"b":(2)2}]>',
    '<@foo, [{"a"}, {}], replicated={"b":(2)2}>',
    '<@bar, [{"a":(1)2, "b", "a":(2)2}, {}]>',
    '<@bar, [{"a":(2)2, "a":(1)2}, {}]>',
    '<@foo, [{"a"}p0, {"b"}]>',
    '<@foo, [{"a"}, {"b"}p1]>',
    '<@foo, [{"a"}p0, {"b"}p1]>',
    '<@maximal_mesh, []>',
    '<@mesh, [{}, {}], replicated={"a"}, unreduced={"b"}>',
    '<@mesh, [{}, {}], unreduced={"a", "b"}>',
    '<mesh<[], device_ids=[3]>, []>',
])
def test_print_round_trip(body):
    sharding = TensorSharding.parse(body)
    assert sharding.body() == body
    assert str(sharding) == "#sdy.sharding" + body
    assert TensorSharding.parse(str(sharding)) == sharding


def test_fields():
    sharding = TensorSharding.parse('#sdy.sharding<@mesh, [{"a", ?}, {"b":(1)2}p1], replicated={"c"}>')
    assert sharding.mesh == "mesh"
    assert sharding.dim_shardings == (
        DimensionSharding((AxisRef("a"),), is_closed=False),
        DimensionSharding((AxisRef("b", (1, 2)),), is_closed=True, priority=1),
    )
    assert sharding.replicated_axes == (AxisRef("c"),)
    assert sharding.unreduced_axes == ()
    assert sharding.rank == 2


@pytest.mark.parametrize(("text", "printed"), [
    ('<@m,[{"a","b",?},{?}]>', '<@m, [{"a", "b", ?}, {?}]>'),
    ('< @m , [ { "a" : ( 2 ) 4 } p3 , { } ] , replicated = { "c" } >', '<@m, [{"a":(2)4}p3, {}], replicated={"c"}>'),
    ('<@m, [{}],\n   unreduced={"u"},  // comment\n replicated={"r"}>',
     '<@m, [{}], replicated={"r"}, unreduced={"u"}>'),
    ('<mesh <["a"=2]>, [{"a"}]>', '<mesh<["a"=2]>, [{"a"}]>'),
    ('<@"mesh-1", [{}]>', '<@"mesh-1", [{}]>'),
])
def test_whitespace_is_free_and_printing_canonical(text, printed):
    assert TensorSharding.parse(text).body() == printed


def test_dimension_sharding_spelling():
    assert str(DimensionSharding()) == "{}"
    assert str(DimensionSharding(is_closed=False)) == "{?}"
    assert str(DimensionSharding((AxisRef("a"), AxisRef("b")))) == '{"a", "b"}'
    assert str(DimensionSharding((AxisRef("a"),), False, 0)) == '{"a", ?}p0'
    assert DimensionSharding.parse('{"x":(1)2, ?}p12') == DimensionSharding((AxisRef("x", (1, 2)),), False, 12)


def test_sharding_per_value():
    text = '#sdy.sharding_per_value<[<@mesh, [{}, {?}]>, <mesh<["a"=2]>, [{"a"}]>]>'
    shardings = parse_sharding_per_value_text(text)
    assert [s.body() for s in shardings] == ['<@mesh, [{}, {?}]>', '<mesh<["a"=2]>, [{"a"}]>']
    assert print_sharding_per_value(shardings) == text
    assert print_sharding_per_value([]) == "#sdy.sharding_per_value<[]>"
    assert parse_sharding_per_value_text("#sdy.sharding_per_value<[]>") == []


def test_parsers_advance_the_cursor():
    text = 'in_shardings=[<@m, [{"a"}]>, <@m, []>] out_shardings=[<@m, [{?}]>] manual_axes={"a"}'
    cursor = Cursor(text, pos=len("in_shardings="))
    assert print_sharding_list(parse_sharding_list(cursor)) == '[<@m, [{"a"}]>, <@m, []>]'
    assert cursor.text[cursor.pos:].startswith(" out_shardings")
    cursor = Cursor('{sdy.sharding = #sdy.sharding<@m, [{"x"}]>}', pos=len("{sdy.sharding = "))
    assert parse_tensor_sharding(cursor).body() == '<@m, [{"x"}]>'
    assert cursor.text[cursor.pos:] == "}"
    cursor = Cursor('#sdy.sharding_per_value<[<@m, []>]>, next')
    assert len(parse_sharding_per_value(cursor)) == 1
    assert cursor.text[cursor.pos:] == ", next"
    cursor = Cursor('"x":(2)4}')
    assert parse_axis_ref(cursor) == AxisRef("x", (2, 4))
    assert cursor.text[cursor.pos:] == "}"


# -- parse errors ----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "message"), [
    # Shardy's tensor_sharding_parsing_failure cases.
    ('<@foo, [{"a"}, {"b"}phigh]>', 1, 21, "expecting priority in format 'p<number>', got: phigh"),
    ('<@foo, [{"a"}, {"b"}p9999999999999999999]>', 1, 21, "expecting integer priority, got: p9999999999999999999"),
    ('<@foo, [{"a"}p01, {"b"}]>', 1, 14, "priorities with leading zeros are not allowed, got: p01"),
    ('<@foo, [{"a"}, {"b"}p]>', 1, 21, "expecting priority in format 'p<number>', got: p"),
    ('<@m, [{"a" "b"}]>', 1, 12, "expected ',' or '}' in a dimension sharding"),
    ('<@m, [{?, "a"}]>', 1, 9, "expected '}' after '?' in a dimension sharding"),
    ('<@m, [{a}]>', 1, 8, "expected a quoted axis name, got 'a'"),
    ('<@m, [{"a":2}]>', 1, 12, "expected '(' to start a sub-axis pre-size"),
    ('<@m, [{"a":(x)2}]>', 1, 13, "expected a sub-axis pre-size, got 'x'"),
    ('<m, [{}]>', 1, 2, "expected a mesh symbol '@name' or an inline 'mesh<...>'"),
    ('<@m [{}]>', 1, 5, "expected ',' after the mesh of a tensor sharding"),
    ('<@m, [{}], replicated={"a"}, replicated={"b"}>', 1, 30, "expected 'replicated={...}' or 'unreduced={...}'"),
    ('<@m, [{}], sharded={"a"}>', 1, 12, "expected 'replicated={...}' or 'unreduced={...}'"),
    ('<@m, [{}], replicated="a">', 1, 23, "expected '{' to start the replicated axes"),
    ('<@m,\n  [{}, {"a"}\n  ]', 3, 4, "expected '>' to end a tensor sharding, got end of text"),
    ('<@m, [{}]> trailing', 1, 12, "unexpected 'trailing' after the tensor sharding"),
])
def test_parse_errors(text, line, column, message):
    with pytest.raises(ParseError) as info:
        TensorSharding.parse(text)
    assert (info.value.line, info.value.column) == (line, column), info.value
    assert message in info.value.message


# -- round trip fuzzing ------------------------------------------------------------------

names = st.text(alphabet='abxy_"\\1', min_size=1, max_size=3)
axis_refs = st.builds(AxisRef, names, st.none() | st.tuples(st.integers(1, 64), st.integers(1, 64)))
dims = st.builds(DimensionSharding, st.lists(axis_refs, max_size=3).map(tuple), st.booleans(),
                 st.none() | st.integers(0, 2**63 - 1))
meshes = st.builds(Mesh, st.lists(st.builds(MeshAxis, names, st.integers(1, 16)), max_size=3).map(tuple),
                   st.none() | st.lists(st.integers(0, 9), max_size=4).map(tuple))
symbols = st.from_regex(r"[A-Za-z_][A-Za-z0-9_$.]{0,5}", fullmatch=True) | st.text(alphabet="ab -", min_size=1)
shardings = st.builds(TensorSharding, symbols | meshes, st.lists(dims, max_size=4).map(tuple),
                      st.lists(axis_refs, max_size=3).map(tuple), st.lists(axis_refs, max_size=3).map(tuple))

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|@"(?:[^"\\]|\\.)*"|#sdy\.sharding|@[\w$.]+|[A-Za-z_]\w*|-?\d+|\S')
_SPACES = ["", " ", "\n", "  \t", " /* x */ ", "\n// note\n"]


@settings(max_examples=300, deadline=None)
@given(shardings)
def test_round_trip(sharding):
    text = str(sharding)
    parsed = TensorSharding.parse(text)
    assert parsed == sharding
    assert str(parsed) == text
    assert TensorSharding.parse(sharding.body()) == sharding


@settings(max_examples=200, deadline=None)
@given(shardings, st.randoms(use_true_random=False))
def test_round_trip_with_any_whitespace(sharding, rng):
    tokens = _TOKEN.findall(str(sharding))
    spaced = "".join(token + rng.choice(_SPACES) for token in tokens)
    assert str(TensorSharding.parse(spaced)) == str(sharding)


@settings(max_examples=100, deadline=None)
@given(st.lists(shardings, max_size=3))
def test_sharding_per_value_round_trip(values):
    text = print_sharding_per_value(values)
    assert parse_sharding_per_value_text(text) == values


# -- axis-ref algebra (Shardy's documented examples) ------------------------------------

@pytest.mark.parametrize(("a", "b", "contains", "strictly"), [
    ('"a"', '"a":(2)2', True, True),
    ('"a":(1)8', '"a":(1)4', True, True),
    ('"a":(2)16', '"a":(4)2', True, True),
    ('"a"', '"a"', True, False),
    ('"a":(2)2', '"a":(2)2', True, False),
    ('"a":(1)4', '"a":(2)4', False, False),
    ('"a":(2)4', '"a":(1)2', False, False),
    ('"a"', '"b":(1)2', False, False),
])
def test_contains(a, b, contains, strictly):
    assert ref(a).contains(ref(b)) is contains
    assert ref(a).strictly_contains(ref(b)) is strictly


@pytest.mark.parametrize(("a", "b", "prefix", "strict"), [
    ('"a":(1)2', '"a"', True, True),
    ('"a":(2)2', '"a":(2)4', True, True),
    ('"a"', '"a"', True, False),
    ('"a":(2)4', '"a":(2)4', True, False),
    ('"a":(1)4', '"a":(1)2', False, False),
    ('"a":(1)4', '"a":(2)8', False, False),
    ('"a":(1)2', '"b"', False, False),
])
def test_prefix_of(a, b, prefix, strict):
    assert ref(a).prefix_of(ref(b)) is prefix
    assert ref(a).strict_prefix_of(ref(b)) is strict


@pytest.mark.parametrize(("a", "b", "suffix"), [
    ('"a":(4)2', '"a"', True),      # "a" has size 8
    ('"a":(2)4', '"a"', True),
    ('"a":(1)4', '"a"', False),
    ('"a":(4)2', '"a":(2)4', True),
    ('"a"', '"a"', True),
    ('"a":(2)2', '"a":(1)8', False),
])
def test_suffix_of(a, b, suffix):
    mesh = Mesh.of(("a", 8))
    assert ref(a).suffix_of(ref(b), mesh) is suffix
    assert ref(a).strict_suffix_of(ref(b), mesh) is (suffix and a != b)


@pytest.mark.parametrize(("a", "b", "overlaps", "prefix_without_overlap"), [
    ('"a"', '"a":(2)2', True, '"a":(1)2'),
    ('"a":(2)2', '"a":(2)2', True, None),
    ('"a":(1)4', '"a":(2)4', True, '"a":(1)2'),
    ('"a":(2)4', '"a":(1)4', True, None),
    ('"a":(1)4', '"a":(1)2', True, None),
    ('"a":(2)8', '"a":(4)2', True, '"a":(2)2'),
    ('"a":(1)4', '"a":(4)2', False, '"a":(1)4'),
    ('"a":(1)2', '"a":(4)2', False, '"a":(1)2'),
    ('"a":(1)4', '"b":(2)4', False, '"a":(1)4'),
])
def test_overlaps_and_prefix_without_overlap(a, b, overlaps, prefix_without_overlap):
    assert ref(a).overlaps(ref(b)) is overlaps
    assert ref(b).overlaps(ref(a)) is overlaps
    expected = None if prefix_without_overlap is None else ref(prefix_without_overlap)
    assert ref(a).get_prefix_without_overlap(ref(b)) == expected


@pytest.mark.parametrize(("a", "b", "suffix_without_overlap"), [
    ('"a"', '"a":(1)2', '"a":(2)4'),
    ('"a":(1)4', '"a":(1)2', '"a":(2)2'),
    ('"a":(1)4', '"a":(2)2', None),
    ('"a":(2)2', '"a":(4)2', '"a":(2)2'),
    ('"a"', '"a"', None),
])
def test_suffix_without_overlap(a, b, suffix_without_overlap):
    mesh = Mesh.of(("a", 8))
    expected = None if suffix_without_overlap is None else ref(suffix_without_overlap)
    assert ref(a).get_suffix_without_overlap(ref(b), mesh) == expected


@pytest.mark.parametrize(("a", "b", "common"), [
    ('"a"', '"a"', '"a"'),
    ('"a"', '"b"', None),
    ('"a":(1)2', '"a":(2)4', None),
    ('"a":(1)4', '"a"', '"a":(1)4'),
    ('"a"', '"a":(1)4', '"a":(1)4'),
    ('"a":(1)2', '"a":(1)4', '"a":(1)2'),
    ('"a":(2)8', '"a":(2)4', '"a":(2)4'),
])
def test_greatest_common_prefix(a, b, common):
    assert ref(a).get_greatest_common_prefix(ref(b)) == (None if common is None else ref(common))


@pytest.mark.parametrize(("a", "b", "can_merge", "merged"), [
    ('"a":(2)4', '"a":(8)2', True, '"a":(2)8'),
    ('"b":(1)2', '"b":(2)4', True, '"b"'),
    ('"c":(1)2', '"c":(4)2', False, None),
    ('"d":(2)4', '"d":(1)2', False, None),
    ('"a"', '"a":(2)2', False, None),
])
def test_merge(a, b, can_merge, merged):
    mesh = Mesh.of(("a", 32), ("b", 8), ("c", 8), ("d", 8))
    assert ref(a).can_merge(ref(b)) is can_merge
    if merged:
        assert ref(a).merge(ref(b), mesh) == ref(merged)


@pytest.mark.parametrize(("a", "b", "coexist", "overlap"), [
    ('"a":(1)2', '"a":(4)2', True, None),     # disjoint, the gap (2)2 is a whole factor
    ('"a":(1)2', '"a":(3)2', False, None),    # gap of size 3/2
    ('"a":(1)4', '"a":(2)4', True, '"a":(2)2'),
    ('"a":(1)2', '"a":(1)3', False, None),    # 2 and 3 are not factors of one factorisation
    ('"a":(1)6', '"a":(2)6', True, '"a":(2)3'),
    ('"a":(1)6', '"a":(3)4', True, '"a":(3)2'),  # factors 3, 2, 2
    ('"a":(1)4', '"a":(2)3', False, None),
    ('"a"', '"a":(2)2', True, '"a":(2)2'),
    ('"a":(2)2', '"b":(1)3', True, None),
])
def test_can_coexist_and_overlap(a, b, coexist, overlap):
    assert ref(a).can_coexist(ref(b)) is coexist
    assert ref(b).can_coexist(ref(a)) is coexist
    expected = None if overlap is None else ref(overlap)
    assert ref(a).get_overlap(ref(b)) == expected
    assert ref(b).get_overlap(ref(a)) == expected


def test_sizes():
    mesh = Mesh.of(("a", 8), ("b", 2))
    assert ref('"a"').size(mesh) == 8
    assert ref('"a":(2)2').size(mesh) == 2
    assert ref('"a":(2)2').pre_size == 2 and ref('"a"').pre_size == 1
    assert ref('"a":(2)2').next_pre_size(mesh) == 4 and ref('"a"').next_pre_size(mesh) == 8
    assert str(ref('"a":(2)2')) == '"a":(2)2' and repr(ref('"b"')) == 'AxisRef("b")'


def test_orderings():
    # Sub-axes of one axis: by pre-size then size; the full axis sits after the sub-axes
    # that start it and before the others.
    expected = ['"a":(1)2', '"a":(1)4', '"a"', '"a":(2)2', '"a":(4)2', '"a":(4)4']
    refs = [ref(t) for t in reversed(expected)]
    assert [str(r) for r in sorted(refs)] == expected
    mesh = Mesh.of(("c", 2), ("a", 32), ("b", 2))
    assert [str(r) for r in sorted_by_mesh([*refs, ref('"b"'), ref('"c"')], mesh)] == ['"c"', *expected, '"b"']
    assert [str(r) for r in sorted([*refs, ref('"b"'), ref('"c"')])] == [*expected, '"b"', '"c"']
    assert is_sorted_by_mesh([ref('"c"'), ref('"a"'), ref('"b"')], mesh)
    assert not is_sorted_by_mesh([ref('"a"'), ref('"b"'), ref('"c"')], mesh)
    assert not is_sorted_by_mesh([ref('"a":(4)2'), ref('"a":(1)2')], mesh)


# -- tensor sharding helpers ----------------------------------------------------------------

def test_fully_open_and_closed():
    assert TensorSharding.fully_open("m", 2).body() == "<@m, [{?}, {?}]>"
    assert TensorSharding.fully_closed("m", 3).body() == "<@m, [{}, {}, {}]>"
    assert TensorSharding.fully_open(Mesh.of(("x", 2)), 0).body() == '<mesh<["x"=2]>, []>'
    assert TensorSharding.closed("m", [["x", AxisRef("y", (1, 2))], []]).body() == '<@m, [{"x", "y":(1)2}, {}]>'
    s = TensorSharding.parse('<@m, [{"x", ?}p2, {}]>')
    assert s.fully_open_like().body() == "<@m, [{?}, {?}]>"
    assert s.fully_closed_like().body() == "<@m, [{}, {}]>"
    assert s.closed_like().body() == '<@m, [{"x"}p2, {}]>'


def test_views():
    s = TensorSharding.parse('<@m, [{"x", ?}, {}, {"y":(1)2}], replicated={"z"}, unreduced={"w"}>')
    assert s.rank == 3
    assert [str(r) for r in s.axis_refs()] == ['"x"', '"y":(1)2', '"z"', '"w"']
    assert [str(r) for r in s.sharding_axis_refs()] == ['"x"', '"y":(1)2']
    assert not s.is_fully_replicated and not s.is_fully_closed and not s.is_fully_open
    assert s.is_bound("y") and s.is_bound("w") and not s.is_bound("v")
    assert s.is_closed(1) and not s.is_closed(0)
    assert s.can_shard(0, "v") and not s.can_shard(1, "v") and not s.can_shard(0, "x")
    assert s.can_replicate("v") and not s.can_replicate("z")
    replicated = TensorSharding.parse('<@m, [{}, {?}], replicated={"x"}>')
    assert replicated.is_fully_replicated and not replicated.empty_axes
    assert TensorSharding.fully_open("m", 2).empty_axes
    assert s.mesh_name == "m" and TensorSharding.fully_open(Mesh(), 1).mesh_name is None


def test_derived_shardings():
    mesh = Mesh.of(("x", 2), ("y", 4), ("z", 2))
    s = TensorSharding.parse('<@m, [{"x"}p1, {?}]>')
    assert s.open_dims([0]).body() == '<@m, [{"x", ?}, {?}]>'
    assert s.close_dims([1]).body() == '<@m, [{"x"}p1, {}]>'
    assert s.sharded(1, "y").body() == '<@m, [{"x"}p1, {"y", ?}]>'
    assert s.replicated("z", mesh).replicated("y", mesh).body() == '<@m, [{"x"}p1, {?}], replicated={"y", "z"}>'
    assert s.replace_dim_sharding(0, DimensionSharding()).body() == "<@m, [{}, {?}]>"
    assert s.with_dim_shardings([DimensionSharding(is_closed=False)]).body() == "<@m, [{?}]>"
    assert s.replace_replicated_axes([AxisRef("z")]).body() == '<@m, [{"x"}p1, {?}], replicated={"z"}>'
    assert s.replace_unreduced_axes([AxisRef("z")]).body() == '<@m, [{"x"}p1, {?}], unreduced={"z"}>'
    assert s.without_priorities().body() == '<@m, [{"x"}, {?}]>'
    assert s.replace(mesh="n").body() == '<@n, [{"x"}p1, {?}]>'
    assert s.dim_axes_equal(TensorSharding.parse('<@m, [{"x", ?}, {}]>'))
    assert not s.dim_axes_equal(TensorSharding.parse('<@m, [{"y"}, {}]>'))
    dim = DimensionSharding.parse('{"x", "y", "z", ?}p3')
    assert str(dim.take_front(1)) == '{"x", ?}p3' and str(dim.drop_front(2)) == '{"z", ?}p3'
    assert dim.sharded_size(mesh) == 16 and dim.priority_or_default == 3
    assert DimensionSharding().priority_or_default == 0


def test_local_and_global_shapes():
    mesh = Mesh.of(("data", 2), ("model", 4))
    s = TensorSharding.parse('<@m, [{"data"}, {"model", ?}]>')
    assert s.local_shape((16, 32), mesh) == (8, 8)
    assert s.local_shape((15, 32), mesh) == (8, 8)
    assert s.local_shape((15, 32), mesh, allow_non_divisible=False) is None
    assert s.global_shape((8, 8), mesh) == (16, 32)


def test_mesh_of():
    meshes = {"m": Mesh.of(("x", 2))}
    assert TensorSharding.fully_open("m", 1).mesh_of(meshes) == meshes["m"]
    inline = Mesh.of(("y", 4))
    assert TensorSharding.fully_open(inline, 1).mesh_of(meshes) is inline
    with pytest.raises(VerifyError, match="unknown mesh: @other"):
        TensorSharding.fully_open("other", 1).mesh_of(meshes)
