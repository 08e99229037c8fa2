"""Shape syntax: printing exactly as XLA, round-trips, and clear errors."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import ParseError, XlapyError
from xlapy.shapes import UNBOUNDED_SIZE, Layout, Shape, ShapeParser, SplitConfig, parse_shape

ROUND_TRIPS = [
    "f32[]", "pred[]", "token[]", "()", "f32[0]", "f32[3,0,2]{2,1,0}",
    "f32[3,5]", "f32[3,5]{1,0}", "f32[3,5]{0,1}", "f32[3,5]{1,0:T(2,2)}",
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}", "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "(f32[10], s32[10])", "((f32[], token[]), (), u8[1]{0})",
    "(f32[], s8[], s16[], s32[], s64[], /*index=5*/u8[], u16[], u32[], u64[], pred[], /*index=10*/f16[])",
    "s32[<=10]", "f32[<=4,?,3]{2,1,0}", "f32[?]",
    # The cases of XLA's layout_util_test HumanStringWithTiling.
    "f32[2,3,4]{0,1,2}", "f32[2,3,4]{0,1,2:T(512,1024)}", "f32[2,3,4]{0,1,2:T(512)}",
    "bf16[2,3,4]{1,2,0:T(16,256)(2,1)}", "pred[8,8,8]{0,2,1:T(8,128)}", "pred[8,8,8]{0,2,1:T(8,128)E(32)}",
    "pred[8,8,8]{0,2,1:E(32)}", "bf16[2,3,1004]{2,1,0:T(2,*,128)}", "bf16[8,2,3,1004]{3,2,1,0:T(2,*,*,128)}",
    # Every other field, in the order XLA prints them.
    "f32[2,3]{1,0:L(1024)}", "u4[16]{0:T(1024)(128)(2,1)E(4)}", "f32[8]{0:#(u32)*(u64)}",
    "f32[8,8]{1,0:T(8,128)L(2)#(u16)*(u32)E(32)S(3)SC(0:2,4)(1:6)M(16)}", "f32[]{:S(1)}",
    "f32[10]{0:D(C)P(s32[3]{0})}", "f32[4,4]{1,0:D(D,C+~)}",
    "f4e2m1fn[32]{0:E(4)}", "f8e4m3b11fnuz[2]", "c128[2,2]{0,1}",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_round_trip(text):
    shape = parse_shape(text)
    assert str(shape) == text
    assert parse_shape(str(shape)) == shape


def test_fields():
    shape = parse_shape("f32[8,8]{1,0:T(8,128)L(2)#(u16)*(u32)E(32)S(3)SC(0:2,4)(1:6)M(16)}")
    layout = shape.layout
    assert layout.tiles == ((8, 128),)
    assert layout.tail_padding_alignment_in_elements == 2
    assert layout.index_primitive_type == "u16" and layout.pointer_primitive_type == "u32"
    assert layout.element_size_in_bits == 32 and layout.memory_space == 3
    assert layout.split_configs == (SplitConfig(0, (2, 4)), SplitConfig(1, (6,)))
    assert layout.dynamic_shape_metadata_prefix_bytes == 16


def test_dynamic_and_tuple_fields():
    shape = parse_shape("(s32[<=10,3], f32[?])")
    first, second = shape.tuple_shapes
    assert shape.is_tuple and shape.element_type == "tuple" and shape.dimensions == ()
    assert first.dimensions == (10, 3) and first.dynamic_dimensions == (True, False)
    assert second.dimensions == (UNBOUNDED_SIZE,) and second.is_dynamic
    assert parse_shape("token[]").is_token and parse_shape("f32[]").is_scalar
    assert parse_shape("f32[3]").layout is None


def test_whitespace_is_accepted_and_normalised():
    assert str(parse_shape("  ( f32[ 3 , 5 ]{ 1 , 0 : T( 2 , 2 ) } ,s32[] ) ")) == "(f32[3,5]{1,0:T(2,2)}, s32[])"


def test_scalar_empty_layout_is_not_printed():
    assert str(parse_shape("f32[]{}")) == "f32[]"
    assert str(Shape.array("f32", [], [])) == "f32[]"


def test_default_layout_where_needed():
    assert parse_shape("f32[2,3,4]").with_default_layout() == parse_shape("f32[2,3,4]{2,1,0}")
    nested = parse_shape("(f32[2,3], token[])").with_default_layout()
    assert str(nested) == "(f32[2,3]{1,0}, token[])"


def test_structural_equality_and_construction():
    assert Shape.array("f32", [3, 5], [1, 0]) == parse_shape("f32[3,5]{1,0}")
    assert Shape.make_tuple([Shape.token(), Shape.array("s32", [])]) == parse_shape("(token[], s32[])")
    assert Shape("f32", (3,), Layout((0,), ((2,),))).layout.tiles == ((2,),)
    with pytest.raises(XlapyError):
        Shape("f33", (1,))


# (text, column of the problem, words of the message)
ERRORS = [
    ("f32[3,5]{1,0:T(2,", 18, "expected a tile dimension"),
    ("q32[3,5]", 1, "unknown element type 'q32'"),
    ("f32[3,5]{1,1}", 12, "not a permutation"),
    ("f32[3,5]{0,2}", 12, "not a permutation"),
    ("f32[3,5]{1,0,2}", 14, "minor_to_major has 3 elements, but the shape has rank 2"),
    ("f32[3]{0:T(2,2)}", 14, "more than the 1 of the shape"),
    ("f32[3,5]{1,0:T(2,*)}", 18, "'*' cannot be the most-minor"),
    ("f32[3,5]{1,0:T(0,2)}", 16, "must be positive"),
    ("f32[-3]", 5, "negative size -3"),
    ("f32[3,-1]", 7, "negative size -1"),
    ("f32[3,5", 8, "expected ',' or ']'"),
    ("f32[3]{0:Q(1)}", 10, "unexpected 'Q' in the layout"),
    ("f32[3]{0:S(1)T(2)}", 14, "unexpected 'T' in the layout"),
    ("f32[3]{0:L(0)}", 10, "tail padding alignment"),
    ("f32[3]{0:#(f32)}", 10, "unsigned integer type"),
    ("f32[3] junk", 8, "unexpected 'junk' after the shape"),
    ("tuple[]", 1, "tuple shape is written"),
    ("(f32[3]", 8, "expected ')' at the end of a tuple shape"),
    ("", 1, "expected a shape"),
    ("f32[3]{0:P(s32[3])}", 10, "not for a sparse array"),
    ("f32[3]{0:D(D,D)}", 10, "2 dimension level types, but the shape has rank 1"),
]


@pytest.mark.parametrize(("text", "column", "words"), ERRORS)
def test_errors_name_the_problem_and_column(text, column, words):
    with pytest.raises(ParseError) as info:
        parse_shape(text)
    error = info.value
    assert (error.line, error.column) == (1, column), str(error)
    assert words in error.message
    assert str(error).startswith(f"1:{column}: ")
    assert "\n" not in str(error)


def test_error_positions_on_later_lines():
    with pytest.raises(ParseError) as info:
        ShapeParser("x: f32[2]\n  f32[3,3]{0,0}", pos=12).parse_shape()
    assert (info.value.line, info.value.column) == (2, 14)


def test_parser_continues_after_a_shape():
    parser = ShapeParser("%p = f32[3]{0} parameter(0)", pos=5)
    assert str(parser.parse_shape()) == "f32[3]{0}"
    assert parser.text[parser.pos:] == " parameter(0)"
    # '{' that does not start with an integer, ':' or '}' is not a layout (a computation body).
    parser = ShapeParser("f32[3] {\n  ROOT", pos=0)
    assert str(parser.parse_shape()) == "f32[3]"


# -- fuzzing -------------------------------------------------------------------

ARRAY_TYPES = ["pred", "s4", "s32", "u8", "u64", "f16", "bf16", "f32", "c64", "f8e4m3fn", "f4e2m1fn"]


@st.composite
def layouts(draw, rank: int) -> Layout:
    tiles = []
    tiled_rank = rank
    for _ in range(draw(st.integers(0, 2)) if rank else 0):
        length = draw(st.integers(1, tiled_rank))
        tile = [draw(st.integers(1, 256)) for _ in range(length)]
        for i in range(length - 1):
            if draw(st.integers(0, 4)) == 0:
                tile[i] = -1
        tiles.append(tuple(tile))
        tiled_rank += length - 2 * tile.count(-1)
    return Layout(
        minor_to_major=tuple(draw(st.permutations(range(rank)))),
        tiles=tuple(tiles),
        tail_padding_alignment_in_elements=draw(st.sampled_from([1, 1, 2, 128])),
        index_primitive_type=draw(st.sampled_from([None, None, "u16", "u32"])),
        pointer_primitive_type=draw(st.sampled_from([None, None, "u64"])),
        element_size_in_bits=draw(st.sampled_from([0, 0, 4, 32])),
        memory_space=draw(st.sampled_from([0, 0, 1, 5])),
        split_configs=tuple(SplitConfig(d, (draw(st.integers(1, 9)),))
                            for d in range(draw(st.integers(0, min(rank, 1))))),
        dynamic_shape_metadata_prefix_bytes=draw(st.sampled_from([0, 0, 8])),
    )


@st.composite
def shapes(draw, depth: int = 0) -> Shape:
    kind = draw(st.sampled_from(["array"] * 4 + ["token"] + (["tuple"] if depth < 2 else [])))
    if kind == "token":
        return Shape.token()
    if kind == "tuple":
        return Shape.make_tuple(draw(st.lists(shapes(depth + 1), max_size=3)))
    rank = draw(st.integers(0, 4))
    # Sizes whose product in bytes fits in 64 bits, as a valid shape's must.
    dims = tuple(draw(st.integers(0, 10**4)) for _ in range(rank))
    dynamic = tuple(draw(st.booleans()) for _ in range(rank))
    dims = tuple(UNBOUNDED_SIZE if dyn and draw(st.integers(0, 3)) == 0 else d for d, dyn in zip(dims, dynamic))
    layout = draw(st.one_of(st.none(), layouts(rank)))
    return Shape(draw(st.sampled_from(ARRAY_TYPES)), dims, layout, dynamic_dimensions=dynamic)


# Each property on a bounded budget in the default run, and on a larger one with the slow tests.
def _check_round_trip(shape: Shape) -> None:
    text = str(shape)
    parsed = parse_shape(text)
    assert str(parsed) == text
    assert parsed == shape


@settings(max_examples=100, deadline=None)
@given(shapes())
def test_print_parse_round_trip(shape):
    _check_round_trip(shape)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(shapes())
def test_print_parse_round_trip_many(shape):
    _check_round_trip(shape)


SHAPE_ALPHABET = st.sampled_from([*list("f32s4bu8[](){},:<=?*-TLESCPMD#0123456789 "), "f32", "bf16", "token"])
GARBAGE = st.lists(SHAPE_ALPHABET, max_size=30).map("".join)


def _check_garbage(text: str) -> None:
    try:
        shape = parse_shape(text)
    except ParseError as e:
        assert 1 <= e.column <= len(text) + 1
    else:
        assert parse_shape(str(shape)) == shape


@settings(max_examples=250, deadline=None)
@given(GARBAGE)
def test_garbage_gives_parse_errors_only(text):
    _check_garbage(text)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(GARBAGE)
def test_garbage_gives_parse_errors_only_many(text):
    _check_garbage(text)


def _check_truncated(shape: Shape, data: st.DataObject) -> None:
    text = str(shape)
    cut = data.draw(st.integers(0, len(text)))
    try:
        parse_shape(text[:cut])
    except ParseError as e:
        assert 1 <= e.column <= cut + 1


@settings(max_examples=75, deadline=None)
@given(shapes(), st.data())
def test_truncated_text_gives_parse_errors_only(shape, data):
    _check_truncated(shape, data)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(shapes(), st.data())
def test_truncated_text_gives_parse_errors_only_many(shape, data):
    _check_truncated(shape, data)
