"""Random gathers and scatters in every form their dimension numbers allow, for
testing the passes that rewrite them and the code that emits them against the
interpreter.

``gather_texts(...)`` and ``scatter_texts(...)`` are hypothesis strategies
drawing the text of a module whose entry computation is one gather (or one
scatter) of its parameters: operands of rank 0 to 3, collapsed (inserted)
and batching dimensions anywhere, ``start_index_map`` in any order, the index
vector dimension anywhere in the indices (or implicit, after the last),
offset (window) dimensions anywhere in the result (updates), slices of size
0 and the whole operand, index vectors of no element. ``fused=True`` puts the
gather in a kLoop fusion, as the loop emitter takes it.

``index_arguments(module, seed)`` draws the arguments: floats, and indices
that often fall outside the operand (negative or past its end), so that the
clamping of gather's starts and the skipping of scatter's out-of-bounds
windows are exercised. ``assert_rewrite_preserves_values`` checks a pass on
such arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from tools.compare import assert_same
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.interpreter import evaluate
from xlapy.shapes import ELEMENT_TYPES

INDEX_TYPES = ("s32", "s64", "u32", "s8")


def _braces(values: list[int] | tuple[int, ...]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _shape(element_type: str, dims: list[int]) -> str:
    return f"{element_type}[{','.join(str(d) for d in dims)}]"


def _subset(draw: Any, values: list[int]) -> list[int]:
    return sorted(v for v in values if draw(st.booleans()))


@st.composite
def _indices_layout(draw: Any, vector: int, batching_sizes: list[int], max_dim: int
                    ) -> tuple[list[int], int, list[int]]:
    """The shape of the indices, the index vector dimension and the indices
    dimensions of the batching dimensions (one per entry of ``batching_sizes``,
    each of that size): other batch dimensions are drawn around them."""
    extra = [draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, max_dim))
             for _ in range(draw(st.integers(0, 2)))]
    batch = [(size, True, k) for k, size in enumerate(batching_sizes)] + [(size, False, -1) for size in extra]
    batch = draw(st.permutations(batch))
    implicit = vector == 1 and draw(st.booleans())
    index_vector_dim = len(batch) if implicit else draw(st.integers(0, len(batch)))
    dims = [size for size, _, _ in batch]
    if not implicit:
        dims.insert(index_vector_dim, vector)
    batching_dims = [0] * len(batching_sizes)
    position = 0
    for i in range(len(dims)):
        if i == index_vector_dim and not implicit:
            continue
        _, is_batching, k = batch[position]
        if is_batching:
            batching_dims[k] = i
        position += 1
    return dims, index_vector_dim, batching_dims


@st.composite
def gather_texts(draw: Any, *, batching: bool = True, fused: bool = False, max_rank: int = 3,
                 max_dim: int = 5, element_type: str = "f32") -> str:
    """A module whose entry gathers from parameter 0 at the indices of parameter 1."""
    rank = draw(st.integers(0, max_rank))
    operand = [draw(st.integers(1, max_dim)) for _ in range(rank)]
    dims = list(range(rank))
    operand_batching = _subset(draw, dims) if batching else []
    rest = [d for d in dims if d not in operand_batching]
    start_index_map = list(draw(st.permutations(rest)))[:draw(st.integers(0, len(rest)))]
    collapsed = _subset(draw, rest)
    sizes = []
    for d in dims:
        if d in operand_batching or d in collapsed:
            # XLA allows collapsing a slice of size 0 too, but the result then reads an element of no slice.
            sizes.append(1)
        else:
            sizes.append(draw(st.sampled_from((operand[d], 1, 0, *range(1, operand[d] + 1)))))
    indices, index_vector_dim, indices_batching = draw(_indices_layout(
        len(start_index_map), [operand[d] for d in operand_batching], max_dim))
    batch_sizes = [size for i, size in enumerate(indices) if i != index_vector_dim]
    offset_count = rank - len(collapsed) - len(operand_batching)
    out_rank = offset_count + len(batch_sizes)
    offset_dims = sorted(draw(st.permutations(range(out_rank)))[:offset_count])
    offsets = iter(sizes[d] for d in dims if d not in collapsed and d not in operand_batching)
    batches = iter(batch_sizes)
    result = [next(offsets) if i in offset_dims else next(batches) for i in range(out_rank)]
    index_type = draw(st.sampled_from(INDEX_TYPES))
    attributes = (f"offset_dims={_braces(offset_dims)}, collapsed_slice_dims={_braces(collapsed)}, "
                  f"start_index_map={_braces(start_index_map)}, ")
    if operand_batching:
        attributes += (f"operand_batching_dims={_braces(operand_batching)}, "
                       f"start_indices_batching_dims={_braces(indices_batching)}, ")
    attributes += f"index_vector_dim={index_vector_dim}, slice_sizes={_braces(sizes)}"
    operand_shape, indices_shape = _shape(element_type, operand), _shape(index_type, indices)
    result_shape = _shape(element_type, result)
    gather = f"gather = {result_shape} gather(operand, indices), {attributes}"
    parameters = f"  operand = {operand_shape} parameter(0)\n  indices = {indices_shape} parameter(1)\n"
    if not fused:
        return f"HloModule gather\n\nENTRY main {{\n{parameters}  ROOT {gather}\n}}\n"
    return (f"HloModule gather\n\nfused_gather {{\n{parameters}  ROOT {gather}\n}}\n\n"
            f"ENTRY main {{\n{parameters}  ROOT fusion = {result_shape} fusion(operand, indices), kind=kLoop, "
            f"calls=fused_gather\n}}\n")


_COMBINERS = {
    "add": "add(lhs, rhs)",
    "assign": None,  # the update replaces the operand element
    "max": "maximum(lhs, rhs)",
}


@st.composite
def scatter_texts(draw: Any, *, batching: bool = True, max_rank: int = 3, max_dim: int = 5,
                  element_type: str = "f32", max_operands: int = 2) -> str:
    """A module whose entry scatters the updates (the last parameters) into
    the operands (the first ones) at the indices (the parameter between)."""
    rank = draw(st.integers(0, max_rank))
    operand = [draw(st.integers(1, max_dim)) for _ in range(rank)]
    dims = list(range(rank))
    input_batching = _subset(draw, dims) if batching else []
    rest = [d for d in dims if d not in input_batching]
    to_operand = list(draw(st.permutations(rest)))[:draw(st.integers(0, len(rest)))]
    inserted = _subset(draw, rest)
    window = [d for d in dims if d not in inserted and d not in input_batching]
    window_sizes = [draw(st.sampled_from((operand[d], 1, 0, *range(1, operand[d] + 1)))) for d in window]
    indices, index_vector_dim, indices_batching = draw(_indices_layout(
        len(to_operand), [operand[d] for d in input_batching], max_dim))
    batch_sizes = [size for i, size in enumerate(indices) if i != index_vector_dim]
    update_rank = len(window) + len(batch_sizes)
    update_window_dims = sorted(draw(st.permutations(range(update_rank)))[:len(window)])
    windows, batches = iter(window_sizes), iter(batch_sizes)
    updates = [next(windows) if i in update_window_dims else next(batches) for i in range(update_rank)]
    count = draw(st.integers(1, max_operands))
    combiner = draw(st.sampled_from(sorted(_COMBINERS)))
    index_type = draw(st.sampled_from(INDEX_TYPES))
    attributes = (f"update_window_dims={_braces(update_window_dims)}, inserted_window_dims={_braces(inserted)}, "
                  f"scatter_dims_to_operand_dims={_braces(to_operand)}, ")
    if input_batching:
        attributes += (f"input_batching_dims={_braces(input_batching)}, "
                       f"scatter_indices_batching_dims={_braces(indices_batching)}, ")
    attributes += f"index_vector_dim={index_vector_dim}, to_apply=combine"
    scalar = f"{element_type}[]"
    lines = []
    for k in range(count):
        lines.append(f"  lhs.{k} = {scalar} parameter({k})")
    for k in range(count):
        lines.append(f"  rhs.{k} = {scalar} parameter({count + k})")
    results = []
    for k in range(count):
        expression = _COMBINERS[combiner]
        if expression is None:
            results.append(f"rhs.{k}")
        else:
            expression = expression.replace("lhs", f"lhs.{k}").replace("rhs", f"rhs.{k}")
            lines.append(f"  combined.{k} = {scalar} {expression}")
            results.append(f"combined.{k}")
    if count == 1:
        root = f"  ROOT result = {scalar} copy({results[0]})"
    else:
        root = f"  ROOT result = ({', '.join([scalar] * count)}) tuple({', '.join(results)})"
    combine = "combine {\n" + "\n".join(lines) + "\n" + root + "\n}\n"
    operand_shape, updates_shape = _shape(element_type, operand), _shape(element_type, updates)
    parameters = [f"  operand.{k} = {operand_shape} parameter({k})" for k in range(count)]
    parameters.append(f"  indices = {_shape(index_type, indices)} parameter({count})")
    parameters += [f"  updates.{k} = {updates_shape} parameter({count + 1 + k})" for k in range(count)]
    operands = [f"operand.{k}" for k in range(count)] + ["indices"] + [f"updates.{k}" for k in range(count)]
    result_shape = operand_shape if count == 1 else "(" + ", ".join([operand_shape] * count) + ")"
    scatter = f"  ROOT scatter = {result_shape} scatter({', '.join(operands)}), {attributes}"
    return f"HloModule scatter\n\n{combine}\nENTRY main {{\n" + "\n".join(parameters) + f"\n{scatter}\n}}\n"


def index_arguments(module: HloModule, seed: int) -> list[np.ndarray]:
    """Seeded arguments for the entry's parameters: small floats (integers as
    floats, so that sums are exact in any order) for float parameters,
    indices from 2 below 0 to 2 past the largest dimension of the module
    for integer ones (0 up for unsigned types)."""
    random = np.random.default_rng(seed)
    largest = max([d for i in module.instructions if not i.shape.is_tuple for d in i.shape.dimensions] or [1])
    arguments = []
    for parameter in module.entry.parameters:
        shape = parameter.shape
        dtype = ELEMENT_TYPES[shape.element_type].dtype
        if ELEMENT_TYPES[shape.element_type].is_integral:
            low = 0 if np.iinfo(dtype).min == 0 else -2
            arguments.append(random.integers(low, largest + 3, shape.dimensions).astype(dtype))
        else:
            arguments.append(random.integers(-8, 9, shape.dimensions).astype(dtype))
    return arguments


def assert_rewrite_preserves_values(hlo_pass: Any, text: str, seeds: tuple[int, ...] = (0, 1)) -> HloModule:
    """Runs ``hlo_pass`` on the module of ``text``, which must still verify and
    compute what it computed before (bit for bit) on ``index_arguments``.
    Returns the rewritten module."""
    original = parse_module(text)
    verify(original)
    rewritten = parse_module(text)
    hlo_pass.run(rewritten)
    verify(rewritten)
    for seed in seeds:
        arguments = index_arguments(original, seed)
        want = evaluate(original, *arguments, verify=False)
        got = evaluate(rewritten, *arguments, verify=False)
        assert_same(got, want, context=f"after {hlo_pass!r}, seed {seed}\n{text}\n{rewritten.to_text()}\nresult")
    return rewritten
