"""Meshes print exactly as Shardy prints them (cases of Shardy's mesh_parse_print test)."""

import pytest

from xlapy.errors import ParseError, VerifyError
from xlapy.sharding.mesh import Mesh, MeshAxis, parse_mesh
from xlapy.syntax import Cursor


@pytest.mark.parametrize(("text", "printed"), [
    ("<[]>", "<[]>"),
    ("<[], device_ids=[0]>", "<[], device_ids=[0]>"),
    ("<[], device_ids=[3]>", "<[], device_ids=[3]>"),
    ('<["a"=1]>', '<["a"=1]>'),
    # An explicit identity device order is dropped.
    ('<["a"=1], device_ids=[0]>', '<["a"=1]>'),
    ('<["a"=2, "b"=2], device_ids=[0, 1, 2, 3]>', '<["a"=2, "b"=2]>'),
    ('<["a"=2], device_ids=[1, 0]>', '<["a"=2], device_ids=[1, 0]>'),
    ('<["a"=2, "b"=1], device_ids=[1, 0]>', '<["a"=2, "b"=1], device_ids=[1, 0]>'),
    ('<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>', '<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>'),
    # Any whitespace, and the attribute spelling.
    ('#sdy.mesh<["x"=2,"y"=2]>', '<["x"=2, "y"=2]>'),
    ('<\n  [ "x" = 2 ,\t"y"=4 ] ,device_ids = [ 7, 6,5,4,3,2,1,0 ] >',
     '<["x"=2, "y"=4], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>'),
])
def test_parse_print(text, printed):
    mesh = Mesh.parse(text)
    assert str(mesh) == printed
    assert Mesh.parse(printed) == mesh


def test_attribute_form_and_fields():
    mesh = Mesh.parse('<["data"=2, "model"=4]>')
    assert mesh.axes == (MeshAxis("data", 2), MeshAxis("model", 4))
    assert mesh.attr() == '#sdy.mesh<["data"=2, "model"=4]>'
    assert mesh == Mesh.of(("data", 2), ("model", 4))
    assert mesh.axis_names == ("data", "model")
    assert mesh.total_size == 8
    assert mesh.axis_size("model") == 4
    assert mesh.axis_index("model") == 1
    assert mesh.has_axis("data") and not mesh.has_axis("x")
    assert mesh.device_ids is None
    assert not mesh.is_maximal and not mesh.is_empty


def test_maximal_and_empty():
    maximal = Mesh.parse("<[], device_ids=[3]>")
    assert maximal.is_maximal and maximal.maximal_device_id == 3 and not maximal.is_empty
    assert maximal.total_size == 1
    empty = Mesh.parse("<[]>")
    assert empty.is_empty and not empty.is_maximal and empty.maximal_device_id is None


def test_unknown_axis_size_is_a_verify_error():
    with pytest.raises(VerifyError, match='unknown axis name: "z"'):
        Mesh.of(("x", 2)).axis_size("z")


def test_cursor_advances_past_mesh():
    cursor = Cursor('sdy.mesh @m = <["x"=2]> rest', pos=len("sdy.mesh @m = "))
    assert str(parse_mesh(cursor)) == '<["x"=2]>'
    assert cursor.text[cursor.pos:] == " rest"


def test_quoted_names_round_trip():
    mesh = Mesh.of(('a"b', 2), ("c\\d", 2))
    assert str(mesh) == r'<["a\"b"=2, "c\\d"=2]>'
    assert Mesh.parse(str(mesh)) == mesh


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ('<["x"=2', 1, 8, "expected ',' or ']' in the mesh axes, got end of text"),
    ('<[x=2]>', 1, 3, "expected a quoted mesh axis name, got 'x'"),
    ('<["x"=2]', 1, 9, "expected '>' to end a mesh, got end of text"),
    ('<["x"]>', 1, 6, "expected '=' after a mesh axis name, got ']'"),
    ('<["x"=2],\n  ids=[0]>', 2, 3, "expected 'device_ids' in a mesh, got 'ids'"),
    ('<["x"=two]>', 1, 7, "expected a mesh axis size, got 'two'"),
    ('["x"=2]', 1, 1, "expected '<' to start a mesh"),
    ('<["x"=2]> extra', 1, 11, "unexpected 'extra' after the mesh"),
])
def test_parse_errors(text, line, column, message):
    with pytest.raises(ParseError) as info:
        Mesh.parse(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert message in info.value.message
