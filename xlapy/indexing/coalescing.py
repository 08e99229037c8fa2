"""Read coalescing (XLA's docs/indexing.md): whether consecutive output elements read
consecutive (or the same) input elements in memory, layouts included."""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloInstruction
from xlapy.indexing.hlo_indexing import output_to_input_indexing
from xlapy.indexing.indexing_map import IndexingMap, Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import Shape
from xlapy.shapes.indexing import physical_layout

# Coalescing is a local property of affine accesses: a window of the domain
# (the start of each dimension, a longer run along the minor one) decides it.
MINOR_WINDOW = 256
OTHER_WINDOW = 4
SYMBOL_WINDOW = 8


def is_coalesced(instr: HloInstruction, output_id: int = 0) -> list[bool]:
    """For each operand: True when, for every output element and the next one
    in memory order (the output's minor-most dimension), with the same values
    of range and runtime variables, the physical offsets read differ by 0 or
    1 — what a row of GPU threads or a run of SIMD lanes needs."""
    output_shape = (list(instr.shape.tuple_shapes) or [instr.shape])[output_id]
    result = []
    for operand, maps in zip(instr.operands, output_to_input_indexing(instr, output_id)):
        result.append(all(map_is_coalesced(m, output_shape, operand.shape) for m in maps))
    return result


def map_is_coalesced(indexing_map: IndexingMap, output_shape: Shape, input_shape: Shape) -> bool:
    if indexing_map.is_undefined():
        return False
    if indexing_map.is_known_empty() or not indexing_map.results or not output_shape.dimensions:
        return True
    minor = output_shape.layout_or_default.minor_to_major[0]
    window = _window(indexing_map, minor)
    if window is None:
        return True
    dims, symbols = window.box_arrays()
    following = [d + 1 if i == minor else d for i, d in enumerate(dims)]
    inside = window.contains_arrays(dims, symbols) & indexing_map.contains_arrays(following, symbols)
    if not inside.any():
        return True
    layout = physical_layout(input_shape)
    here = layout.linear_index(indexing_map.evaluate_arrays(dims, symbols))
    there = layout.linear_index(indexing_map.evaluate_arrays(following, symbols))
    step = (there - here)[inside]
    return bool(np.all((step == 0) | (step == 1)))


def _window(indexing_map: IndexingMap, minor: int) -> IndexingMap | None:
    """The map restricted to a window whose last minor index has a successor."""
    dim_vars = []
    for i, var in enumerate(indexing_map.dim_vars):
        lower, upper = var.bounds.lower, var.bounds.upper
        if i == minor:
            upper = min(upper - 1, lower + MINOR_WINDOW - 1)
            if upper < lower:
                return None
        else:
            upper = min(upper, lower + OTHER_WINDOW - 1)
        dim_vars.append(Variable(Interval(lower, upper)))
    symbol_vars = [
        Variable(Interval(v.bounds.lower, min(v.bounds.upper, v.bounds.lower + SYMBOL_WINDOW - 1)))
        for v in indexing_map.symbol_vars
    ]
    n_range = len(indexing_map.range_vars)
    return IndexingMap.from_exprs(
        indexing_map.results, dim_vars, symbol_vars[:n_range], symbol_vars[n_range:], indexing_map.constraints
    )
