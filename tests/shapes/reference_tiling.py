"""An independent model of XLA's tiled layout, written from the
pad -> reshape -> transpose description (XLA's docs/tiled_layout.md) with numpy array
operations, to check the index arithmetic of xlapy.shapes against."""

from __future__ import annotations

import numpy as np

PAD = -1


def reference_buffer(dims, minor_to_major, tiles, tail_alignment=1) -> np.ndarray:
    """The physical buffer of an array whose element k (row-major) holds k;
    padding slots hold PAD."""
    ids = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    # Physical order: most-major dimension first.
    array = ids.transpose(list(reversed(minor_to_major)))
    for tile in tiles:
        prefix = array.ndim - len(tile)
        # '*' folds a dimension into the next more-minor one: in row-major
        # order merging two adjacent axes is a plain reshape.
        merged, sizes, group = list(array.shape[:prefix]), [], 1
        for d, t in zip(array.shape[prefix:], tile):
            group *= d
            if t != -1:
                merged.append(group)
                sizes.append(t)
                group = 1
        array = array.reshape(merged)
        # 1. pad every tiled dimension up to a multiple of its tile size.
        pad = [(0, 0)] * prefix + [(0, -d % t) for d, t in zip(array.shape[prefix:], sizes)]
        array = np.pad(array, pad, constant_values=PAD)
        # 2. split each tiled dimension d into (d / t, t).
        split = list(array.shape[:prefix])
        for d, t in zip(array.shape[prefix:], sizes):
            split += [d // t, t]
        array = array.reshape(split)
        # 3. move the within-tile dimensions to the minor end, keeping their order.
        k = len(sizes)
        order = list(range(prefix)) + [prefix + 2 * i for i in range(k)] + [prefix + 2 * i + 1 for i in range(k)]
        array = array.transpose(order)
    flat = array.reshape(-1)
    return np.concatenate([flat, np.full(-flat.size % tail_alignment, PAD, dtype=np.int64)])
