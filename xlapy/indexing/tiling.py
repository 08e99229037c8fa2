"""Tile propagation (XLA's docs/indexing.md): from a tile of an output (offsets,
sizes, strides) to the tiles of the operands it needs, through whole
fusions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import affine
from xlapy.indexing.hlo_indexing import output_to_input_indexing
from xlapy.indexing.indexing_map import IndexingMap


@dataclass(frozen=True)
class Tile:
    """The indices ``offsets[i] + k * strides[i]`` for ``k < sizes[i]``."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def indexing_map(self) -> IndexingMap:
        """Tile coordinates → tensor indices."""
        results = [
            affine.add(affine.mul(affine.dim(i), s), o) for i, (o, s) in enumerate(zip(self.offsets, self.strides))
        ]
        return IndexingMap.from_tensor_sizes(results, self.sizes)


@dataclass(frozen=True)
class OperandTile:
    """The tile of an operand read through one indexing map. ``exact`` is
    True when the tile is exactly the set of elements read; otherwise it is
    the smallest strided box holding them."""

    tile: Tile
    exact: bool
    indexing: IndexingMap


def propagate_tile(instr: HloInstruction, tile: Tile, output_id: int = 0) -> list[list[OperandTile]]:
    """For each operand of ``instr`` (a fusion's maps are composed through
    its computation), the tiles needed to compute ``tile`` of output
    ``output_id``: one per distinct indexing map."""
    shape = (list(instr.shape.tuple_shapes) or [instr.shape])[output_id]
    _check_tile(tile, shape.dimensions)
    tile_map = tile.indexing_map()
    result = []
    for maps in output_to_input_indexing(instr, output_id):
        tiles = []
        for indexing_map in maps:
            if indexing_map.is_undefined():
                raise XlapyError(f"{instr.name}: an operand's indexing is undefined; its tile is unknown")
            composed = tile_map.compose(indexing_map).simplify().remove_unused_symbols()
            tiles.append(operand_tile(composed))
        result.append(sorted(tiles, key=lambda t: (t.tile.offsets, t.tile.sizes, t.tile.strides)))
    return result


def operand_tile(composed: IndexingMap) -> OperandTile:
    dims, symbols = composed.domain_arrays()
    if not composed.point_count(dims, symbols) or not composed.results:
        return OperandTile(Tile((), (), ()), True, composed)
    if dims or symbols:
        indices = composed.evaluate_arrays(dims, symbols)
    else:
        indices = [np.array([v]) for v in composed.evaluate((), ())]
    offsets, sizes, strides = [], [], []
    exact = True
    for values in indices:
        unique = np.unique(values)
        step = int(unique[1] - unique[0]) if len(unique) > 1 else 1
        if len(unique) > 1 and not np.all(np.diff(unique) == step):
            exact, step = False, 1
        offsets.append(int(unique[0]))
        strides.append(step)
        sizes.append((int(unique[-1]) - int(unique[0])) // step + 1)
    if exact:
        touched = len(np.unique(np.stack(indices), axis=1).T)
        exact = touched == int(np.prod(sizes))
    return OperandTile(Tile(tuple(offsets), tuple(sizes), tuple(strides)), exact, composed)


def _check_tile(tile: Tile, dimensions: tuple[int, ...]) -> None:
    if not len(tile.offsets) == len(tile.sizes) == len(tile.strides) == len(dimensions):
        raise XlapyError(
            f"a tile of a rank-{len(dimensions)} output needs {len(dimensions)} offsets, sizes and strides"
        )
    for i, (o, n, s, d) in enumerate(zip(tile.offsets, tile.sizes, tile.strides, dimensions)):
        if n < 1 or s < 1 or o < 0 or o + (n - 1) * s >= d:
            raise XlapyError(f"tile dimension {i} (offset {o}, size {n}, stride {s}) is outside [0, {d - 1}]")
