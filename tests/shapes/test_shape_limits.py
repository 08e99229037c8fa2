"""Shapes the parser refuses with a ParseError at the offending line and
column: other scripts' digits, negative memory spaces, split configs of a
dimension the shape lacks, sizes that overflow 64 bits, integers too long to
convert, and nesting deeper than the parser follows."""

from __future__ import annotations

import pytest

from xlapy.cli import main
from xlapy.errors import ParseError
from xlapy.shapes import parse_shape
from xlapy.syntax import MAX_NESTING


@pytest.mark.parametrize(("text", "column", "message"), [
    ("f32[\u0661\u0662]", 5, "expected a dimension size"),  # Arabic-Indic 12
    ("f32[\uff13]", 5, "expected a dimension size"),  # fullwidth 3
    ("f32[2]{\u0660}", 7, "unexpected"),
    ("f32[2,3]{1,0:T(\u0662,2)}", 16, "tile dimension"),
    ("f32[2]{0:M(-1)}", 10, "M(-1) must not be negative"),
    ("f32[2]{0:S(-1)}", 10, "S(-1) must not be negative"),
    ("f32[2,3]{1,0:SC(2:1)}", 14, "split config dimension 2 is out of range for rank 2"),
    ("f32[2]{0:SC(-1:1)}", 10, "split config dimension -1 is out of range for rank 1"),
    ("f32[9223372036854775808]", 5, "integer too large"),
    ("f32[" + "9" * 5000 + "]", 5, "integer too large"),
    ("f32[2]{0:S(" + "1" * 5000 + ")}", 12, "integer too large"),
    ("f32[9223372036854775807]", 1, "size in bytes does not fit in 64 bits"),
    ("f32[4294967296,4294967296]", 1, "size in bytes does not fit in 64 bits"),
    ("(f32[], s8[3037000500,3037000500])", 9, "size in bytes does not fit in 64 bits"),
])
def test_refused_with_position(text: str, column: int, message: str) -> None:
    with pytest.raises(ParseError, match=None) as info:
        parse_shape(text)
    assert (info.value.line, info.value.column) == (1, column)
    assert message in info.value.message


def test_largest_sizes_that_fit() -> None:
    # 2**63 - 1 one-byte elements, and the memory spaces and split configs XLA uses.
    assert parse_shape("s8[9223372036854775807]").dimensions == (2**63 - 1,)
    assert parse_shape("f32[2305843009213693951]").dimensions == (2**61 - 1,)
    layout = parse_shape("f32[4,6]{1,0:S(5)SC(1:2,4)M(8)}").layout
    assert (layout.memory_space, layout.dynamic_shape_metadata_prefix_bytes) == (5, 8)
    assert layout.split_configs[0].dimension == 1


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5000])
def test_deep_tuples_are_refused(depth: int) -> None:
    text = "(" * depth + "f32[]" + ")" * depth
    with pytest.raises(ParseError, match="nested more than 100 levels") as info:
        parse_shape(text)
    assert info.value.column == MAX_NESTING + 1


def test_nesting_up_to_the_limit_reads() -> None:
    text = "(" * MAX_NESTING + "f32[]" + ")" * MAX_NESTING
    shape = parse_shape(text)
    for _ in range(MAX_NESTING):
        shape = shape.tuple_shapes[0]
    assert str(shape) == "f32[]"


@pytest.mark.parametrize("shape", ["(" * 5000 + "f32[2]" + ")" * 5000, "f32[\u0661]", "f32[2]{0:M(-1)}"])
def test_layout_command_reports_one_line(shape: str, capsys) -> None:
    assert main(["layout", shape]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xlapy: error: ") and err.count("\n") == 1
