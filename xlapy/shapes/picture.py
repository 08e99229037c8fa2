"""Pictures of a physical layout, for people: the logical array with each
element's offset in the buffer, tiles outlined, padding marked, and the buffer
itself slot by slot (the two halves of the tiled-layout figures of XLA's
documentation). As text with box-drawing characters, or as SVG."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from html import escape

import numpy as np

from xlapy.errors import XlapyError
from xlapy.shapes.indexing import physical_layout
from xlapy.shapes.layout import COMBINE_DIMENSION
from xlapy.shapes.shape import Shape

NONE, LIGHT, HEAVY = 0, 1, 2
# Cells drawn at most: every cell is a few Python operations and some bytes of
# text, so the default picture (8 grids of 32x32) is far below it.
MAX_CELLS = 1 << 18
# What a grid costs to draw beyond its cells (its index arrays, title and frame: about 40 µs, a dozen cells'
# worth), counted against MAX_CELLS so that many grids of few or no cells (a dimension of size 0) are bounded too.
GRID_CELLS = 16


def _box_characters() -> dict[tuple[int, int, int, int], str]:
    """Box-drawing characters keyed by arm weights (up, right, down, left),
    read off the Unicode names ("DOWN LIGHT AND RIGHT HEAVY", ...)."""
    arms = {"UP": (0,), "RIGHT": (1,), "DOWN": (2,), "LEFT": (3,),
            "VERTICAL": (0, 2), "HORIZONTAL": (1, 3)}
    weights = {"LIGHT": LIGHT, "HEAVY": HEAVY}
    table = {(NONE,) * 4: " "}
    for code in range(0x2500, 0x2580):
        words = unicodedata.name(chr(code)).split()[2:]
        if not set(words) <= set(arms) | set(weights) | {"AND"}:
            continue  # dashed, double, arc and diagonal lines
        result = [NONE] * 4
        pending: list[int] = []
        prefix_weight = None
        for word in words:
            if word in weights:
                if pending and prefix_weight is None:
                    for arm in pending:
                        result[arm] = weights[word]
                    pending = []
                else:
                    prefix_weight = weights[word]
            elif word in arms:
                if prefix_weight is None:
                    pending.extend(arms[word])
                else:
                    for arm in arms[word]:
                        result[arm] = prefix_weight
        table[tuple(result)] = chr(code)
    return table


_BOX = _box_characters()


@dataclass
class Grid:
    """One 2-D slice of the array: rows x cols cells of the displayed dims."""

    title: str
    row_labels: list[int]
    col_labels: list[int]
    offsets: np.ndarray  # buffer offset per cell
    padding: np.ndarray  # True where the cell lies beyond the logical array
    tile_ids: np.ndarray  # object array: id of the first-level tile of each cell
    subtile_ids: np.ndarray  # id of the second-level tile (or the tile id)
    note: str = ""


class LayoutPicture:
    """What ``xlapy layout`` draws for one array shape."""

    def __init__(self, shape: Shape, max_rows: int = 32, max_cols: int = 32, max_grids: int = 8,
                 max_buffer_rows: int = 32):
        for name, value, low in (("max_rows", max_rows, 1), ("max_cols", max_cols, 1), ("max_grids", max_grids, 0),
                                 ("max_buffer_rows", max_buffer_rows, 0)):
            if not isinstance(value, int) or value < low:
                raise XlapyError(f"{name} must be an integer of at least {low}, got {value!r}")
        self.shape = shape
        self.physical = physical_layout(shape)
        self.max_rows, self.max_cols, self.max_grids = max_rows, max_cols, max_grids
        self.max_buffer_rows = max_buffer_rows
        rank = shape.rank
        m2m = self.physical.minor_to_major
        # Show the two minor-most dimensions, in logical order (row dim < col dim).
        shown = sorted(m2m[:2])
        self.row_dim = shown[0] if rank >= 2 else None
        self.col_dim = shown[-1] if rank >= 1 else None
        self.outer_dims = [d for d in range(rank) if d not in shown]
        grids, cells = self._shown_grids_and_cells()
        if cells + GRID_CELLS * grids > MAX_CELLS:
            raise XlapyError(f"the picture of {shape} would have {cells} cells in {grids} grid{'s' * (grids != 1)}, "
                             f"more than {MAX_CELLS} cells (a grid counting as {GRID_CELLS}; show fewer rows, columns "
                             "or grids)")

    # -- model ----------------------------------------------------------------
    def _shown_grids_and_cells(self) -> tuple[int, int]:
        rows = self._padded_extent(self.row_dim) if self.row_dim is not None else 1
        cols = self._padded_extent(self.col_dim) if self.col_dim is not None else 1
        grids = min(math.prod(self.shape.dimensions[d] for d in self.outer_dims), self.max_grids)
        return grids, min(rows, self.max_rows) * min(cols, self.max_cols) * grids

    def _padded_extent(self, dim: int) -> int:
        """The extent to draw for ``dim``: up to its first-level tile boundary when
        the tile pads it on its own (not folded with another dimension)."""
        size = self.shape.dimensions[dim]
        if not self.physical.levels:
            return size
        level = self.physical.levels[0]
        k = self.physical.major_to_minor.index(dim) - level.prefix
        if k < 0:
            return size
        t = level.tile[k]
        if t == COMBINE_DIMENSION or (k > 0 and level.tile[k - 1] == COMBINE_DIMENSION):
            return size
        return -(-size // t) * t

    def _tile_ids(self, coords: list, levels: int) -> list:
        """Per cell, the tile index after the first ``levels`` tile levels
        (the coordinates that tell tiles apart, within-tile ones dropped)."""
        if not levels:
            return []
        for level in self.physical.levels[:levels]:
            coords = level.forward(coords)
        last = self.physical.levels[levels - 1]
        return coords[: last.prefix + len(last.sizes)]

    def grids(self) -> list[Grid]:
        shape = self.shape
        outer_sizes = [shape.dimensions[d] for d in self.outer_dims]
        outer_points = _first_points(outer_sizes, self.max_grids)
        rows = self._padded_extent(self.row_dim) if self.row_dim is not None else 1
        cols = self._padded_extent(self.col_dim) if self.col_dim is not None else 1
        shown_rows, shown_cols = min(rows, self.max_rows), min(cols, self.max_cols)
        r, c = np.meshgrid(np.arange(shown_rows), np.arange(shown_cols), indexing="ij")
        result = []
        for point in outer_points:
            index: list = [0] * shape.rank
            for d, i in zip(self.outer_dims, point):
                index[d] = np.full(r.shape, i)
            if self.row_dim is not None:
                index[self.row_dim] = r
            if self.col_dim is not None:
                index[self.col_dim] = c
            padding = np.zeros(r.shape, dtype=bool)
            for d, coord in ((self.row_dim, r), (self.col_dim, c)):
                if d is not None:
                    padding |= coord >= shape.dimensions[d]
            offsets = np.broadcast_to(self.physical.linear_index(index), r.shape)
            physical_coords = [index[d] for d in self.physical.major_to_minor]
            levels = len(self.physical.levels)
            tile_ids = _ids(self._tile_ids(physical_coords, min(levels, 1)), r.shape)
            subtile_ids = _ids(self._tile_ids(physical_coords, min(levels, 2)), r.shape)
            position = dict(zip(self.outer_dims, point))
            labels = ", ".join(str(position.get(d, ":")) for d in range(shape.rank))
            title = f"[{labels}]" if shape.rank > 2 else ""
            notes = []
            if shown_rows < rows:
                notes.append(f"rows 0-{shown_rows - 1} of {rows}")
            if shown_cols < cols:
                notes.append(f"columns 0-{shown_cols - 1} of {cols}")
            result.append(Grid(title, list(range(shown_rows)), list(range(shown_cols)), offsets,
                               padding, tile_ids, subtile_ids, "; ".join(notes)))
        return result

    def buffer_rows(self) -> tuple[int, list[list[tuple[int, ...] | None]]]:
        """The buffer cut into lines of one first-level tile each (at most 16 slots)."""
        count = self.physical.element_count
        if self.physical.levels:
            width = math.prod(self.physical.levels[0].sizes)
        else:
            width = self.physical.tiled_dims[-1] if self.physical.tiled_dims else 1
        width = max(1, min(width, 16))
        lines = []
        for start in range(0, min(count, width * self.max_buffer_rows), width):
            stop = min(start + width, count)
            lines.append([self.physical.logical_index(i) for i in range(start, stop)])
        return width, lines

    # -- text -----------------------------------------------------------------
    def header(self) -> str:
        phys = self.physical
        logical = self.shape.element_count
        count = phys.element_count
        lines = [
            f"{self.shape}",
            f"  logical elements: {logical}   buffer elements: {count}   padding slots: {count - logical}",
        ]
        if self.row_dim is not None:
            lines.append(f"  rows: dimension {self.row_dim}   columns: dimension {self.col_dim}"
                         "   cell: offset of the element in the buffer, '·' padding")
        elif self.col_dim is not None:
            lines.append(f"  columns: dimension {self.col_dim}   cell: offset in the buffer, '·' padding")
        if phys.levels:
            lines.append("  heavy lines: tile boundaries" + ("   light lines: second-level tiles"
                                                            if len(phys.levels) > 1 else ""))
        return "\n".join(lines)

    def to_text(self) -> str:
        parts = [self.header()]
        grids = self.grids()
        for grid in grids:
            parts.append(_grid_text(grid))
        total_grids = math.prod(self.shape.dimensions[d] for d in self.outer_dims)
        if total_grids > len(grids):
            parts.append(f"({len(grids)} of {total_grids} slices shown)")
        parts.append(self._buffer_text())
        return "\n\n".join(p for p in parts if p) + "\n"

    def _buffer_text(self) -> str:
        width, lines = self.buffer_rows()
        cells = [[_index_text(i) for i in line] for line in lines]
        cell_width = max((len(c) for line in cells for c in line), default=1)
        offset_width = len(str(self.physical.element_count))
        out = [f"buffer ({self.physical.element_count} elements, {width} per line: logical index or 'pad')"]
        for n, line in enumerate(cells):
            out.append(f"  {n * width:>{offset_width}}: " + " ".join(c.rjust(cell_width) for c in line))
        shown = min(self.physical.element_count, width * self.max_buffer_rows)
        if shown < self.physical.element_count:
            out.append(f"  ... ({self.physical.element_count - shown} more slots)")
        return "\n".join(out)

    # -- svg ------------------------------------------------------------------
    def to_svg(self) -> str:
        cell, gap = 36, 48
        grids = self.grids()
        width, buffer_lines = self.buffer_rows()
        body: list[str] = []
        colors: dict = {}  # first-level tile id -> fill, shared by the grids and the buffer
        y = 40
        body.append(f'<text x="10" y="24" font-size="16" font-weight="bold">{escape(str(self.shape))}</text>')
        grid_width = max((len(g.col_labels) for g in grids), default=1) * cell
        for grid in grids:
            if grid.title or grid.note:
                body.append(f'<text x="10" y="{y + 14}" font-size="13">'
                            f'{escape(" ".join(filter(None, [grid.title, grid.note])))}</text>')
                y += 22
            body.extend(_grid_svg(grid, 30, y + 16, cell, colors))
            y += 16 + len(grid.row_labels) * cell + gap
        # The buffer beside the grids, one line per tile: each slot names the
        # element it holds, in that element's tile colour; padding is white.
        bx = 30 + grid_width + 2 * gap
        by = 56
        slot = 2 * cell
        body.append(f'<text x="{bx}" y="{by - 8}" font-size="13">buffer (offset: logical index)</text>')
        for n, line in enumerate(buffer_lines):
            body.append(f'<text x="{bx - 6}" y="{by + n * cell + cell / 2 + 4}" font-size="10" '
                        f'text-anchor="end">{n * width}</text>')
            for k, index in enumerate(line):
                x, yy = bx + k * slot, by + n * cell
                fill = "#ffffff"
                if index is not None:
                    tile = self._tile_ids([index[d] for d in self.physical.major_to_minor],
                                          min(len(self.physical.levels), 1))
                    fill = colors.setdefault(tuple(tile), _PALETTE[len(colors) % len(_PALETTE)])
                body.append(f'<rect x="{x}" y="{yy}" width="{slot}" height="{cell}" fill="{fill}" '
                            'stroke="#888" stroke-width="1"/>')
                body.append(f'<text x="{x + slot / 2}" y="{yy + cell / 2 + 4}" font-size="10" '
                            f'text-anchor="middle">{escape(_index_text(index))}</text>')
        total_w = bx + width * slot + 20
        total_h = max(y, by + len(buffer_lines) * cell + 20)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
                f'font-family="monospace">\n' + "\n".join(body) + "\n</svg>\n")


def _first_points(sizes: list[int], count: int) -> list[tuple[int, ...]]:
    """The first ``count`` points of the grid ``sizes`` in row-major order,
    without materialising the grid (dimensions may be huge)."""
    total = math.prod(sizes)
    points = []
    for n in range(min(count, total)):
        point = []
        for size in reversed(sizes):
            n, i = divmod(n, size)
            point.append(i)
        points.append(tuple(reversed(point)))
    return points


def _ids(coords: list, shape: tuple[int, ...]) -> np.ndarray:
    ids = np.empty(shape, dtype=object)
    arrays = [np.broadcast_to(c, shape) for c in coords]
    for pos in np.ndindex(*shape):
        ids[pos] = tuple(int(a[pos]) for a in arrays)
    return ids


def _index_text(index: tuple[int, ...] | None) -> str:
    return "pad" if index is None else "(" + ",".join(map(str, index)) + ")"


def _boundary_weights(grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Weights of the horizontal lines h[r, c] (above row r) and the vertical
    lines v[r, c] (left of column c); the border is heavy."""
    rows, cols = grid.offsets.shape

    def weight(a: tuple | None, b: tuple | None) -> int:
        if a is None or b is None or grid.tile_ids[a] != grid.tile_ids[b]:
            return HEAVY
        return LIGHT if grid.subtile_ids[a] != grid.subtile_ids[b] else NONE

    h = np.zeros((rows + 1, cols), dtype=int)
    v = np.zeros((rows, cols + 1), dtype=int)
    for r in range(rows + 1):
        for c in range(cols):
            h[r, c] = weight((r - 1, c) if r > 0 else None, (r, c) if r < rows else None)
    for r in range(rows):
        for c in range(cols + 1):
            v[r, c] = weight((r, c - 1) if c > 0 else None, (r, c) if c < cols else None)
    return h, v


def _grid_text(grid: Grid) -> str:
    rows, cols = grid.offsets.shape
    h, v = _boundary_weights(grid)
    texts = [["·" if grid.padding[r, c] else str(grid.offsets[r, c]) for c in range(cols)]
             for r in range(rows)]
    width = max([len(t) for line in texts for t in line] + [len(str(cols - 1))])
    label_width = len(str(rows - 1))

    def junction(r: int, c: int) -> str:
        up = v[r - 1, c] if r > 0 else NONE
        down = v[r, c] if r < rows else NONE
        left = h[r, c - 1] if c > 0 else NONE
        right = h[r, c] if c < cols else NONE
        return _BOX[(up, right, down, left)]

    horizontal = {NONE: " ", LIGHT: "─", HEAVY: "━"}
    vertical = {NONE: " ", LIGHT: "│", HEAVY: "┃"}
    out = []
    if grid.title or grid.note:
        out.append(" ".join(filter(None, [grid.title, f"({grid.note})" if grid.note else ""])))
    out.append(" " * (label_width + 1) + "".join(" " + str(c).center(width + 2) for c in grid.col_labels))
    for r in range(rows + 1):
        line = "".join(junction(r, c) + horizontal[h[r, c]] * (width + 2) for c in range(cols))
        out.append(" " * (label_width + 1) + line + junction(r, cols))
        if r < rows:
            cells = "".join(vertical[v[r, c]] + " " + texts[r][c].rjust(width) + " " for c in range(cols))
            out.append(f"{grid.row_labels[r]:>{label_width}} " + cells + vertical[v[r, cols]])
    return "\n".join(out)


_PALETTE = ["#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc"]


def _grid_svg(grid: Grid, x0: int, y0: int, cell: int, colors: dict) -> list[str]:
    rows, cols = grid.offsets.shape
    out = []
    for r in range(rows):
        for c in range(cols):
            x, y = x0 + c * cell, y0 + r * cell
            tile = grid.tile_ids[r, c]
            fill = "#ffffff" if grid.padding[r, c] else colors.setdefault(tile, _PALETTE[len(colors) % len(_PALETTE)])
            out.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                       'stroke="#bbb" stroke-width="0.5"/>')
            label = "" if grid.padding[r, c] else str(grid.offsets[r, c])
            out.append(f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="11" '
                       f'text-anchor="middle">{label}</text>')
    h, v = _boundary_weights(grid)
    style = {LIGHT: 'stroke="#d00" stroke-width="1.5"', HEAVY: 'stroke="#000" stroke-width="2.5"'}
    for (r, c), w in np.ndenumerate(h):
        if w:
            x, y = x0 + c * cell, y0 + r * cell
            out.append(f'<line x1="{x}" y1="{y}" x2="{x + cell}" y2="{y}" {style[w]}/>')
    for (r, c), w in np.ndenumerate(v):
        if w:
            x, y = x0 + c * cell, y0 + r * cell
            out.append(f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + cell}" {style[w]}/>')
    return out
