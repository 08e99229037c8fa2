"""The ``xlapy`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xlapy import __version__
from xlapy.errors import XlapyError


def _layout(args: argparse.Namespace) -> None:
    from xlapy.shapes import parse_shape
    from xlapy.shapes.picture import LayoutPicture

    shape = parse_shape(args.shape)
    if not shape.is_array:
        raise XlapyError(f"{shape} is not an array shape; only arrays have a physical layout")
    picture = LayoutPicture(shape, max_rows=args.max_rows, max_cols=args.max_cols, max_grids=args.max_grids)
    if args.svg:
        try:
            with open(args.svg, "w", encoding="utf-8") as f:
                f.write(picture.to_svg())
        except OSError as e:
            raise XlapyError(f"cannot write {args.svg}: {e.strerror}") from None
    sys.stdout.write(picture.to_text())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlapy", description="An XLA-style tensor compiler in Python.")
    parser.add_argument("--version", action="version", version=f"xlapy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    layout = commands.add_parser(
        "layout", help="draw the physical layout of a (tiled) shape",
        description="Draw where each element of SHAPE lives in its buffer: the logical array "
        "with each element's offset, tiles outlined, padding marked, then the buffer slot by slot.",
    )
    layout.add_argument("shape", metavar="SHAPE", help='a shape in HLO syntax, e.g. "f32[3,5]{1,0:T(2,2)}"')
    layout.add_argument("--svg", metavar="FILE", help="also write the picture as SVG to FILE")
    layout.add_argument("--max-rows", type=int, default=32, help="rows shown per grid (default 32)")
    layout.add_argument("--max-cols", type=int, default=32, help="columns shown per grid (default 32)")
    layout.add_argument("--max-grids", type=int, default=8,
                        help="2-D slices shown for arrays of rank > 2 (default 8)")
    layout.set_defaults(run=_layout)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except XlapyError as e:
        print(f"xlapy: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
