"""Seeded random arguments for a module's entry computation, as XLA's
``run_hlo_module`` makes them: parameters used as indices are drawn in range,
so that dynamic slices, gathers and branch selectors see meaningful values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.hlo.mlir_structure import op_results
from xlapy.memory import check_bytes, out_of_memory_as_error
from xlapy.shapes import ELEMENT_TYPES, Shape, TypeKind

# Ops through which an index keeps its meaning.
_PASS_THROUGH = {"convert", "reshape", "bitcast", "broadcast", "copy", "slice", "concatenate",
                 "stablehlo.convert", "stablehlo.broadcast_in_dim"}
# Ops whose operand 0 picks one of their computations, an out-of-range index
# running the last one (a pred operand needs no bound).
_BRANCH_INDEXED = {"conditional", "stablehlo.case"}


def index_bound(parameter: HloInstruction) -> int | None:
    """An exclusive upper bound for the values of ``parameter`` when some use
    reads it as an index; None when no use does."""
    bounds = []
    pending, seen = [parameter], set()
    while pending:
        value = pending.pop()
        for user in value.users:
            if id(user) in seen:
                continue
            seen.add(id(user))
            bound = _bound_for(user, value)
            if bound is not None:
                bounds.append(bound)
            if user.opcode in _PASS_THROUGH:
                pending.append(user)
            elif user.opcode == "stablehlo.optimization_barrier":
                # Each operand passes through to the result at its position.
                results = op_results(user)
                pending.extend(results[i] for i, o in enumerate(user.operands) if o is value and i < len(results))
    return min(bounds) if bounds else None


def _bound_for(user: HloInstruction, value: HloInstruction) -> int | None:
    positions = [i for i, o in enumerate(user.operands) if o is value]
    dims = user.operands[0].shape.dimensions if user.operands else ()
    if user.opcode == "dynamic-slice" and positions[-1] >= 1:
        sizes = user.attr("dynamic_slice_sizes")
        return min(dims[i - 1] - sizes[i - 1] for i in positions if i >= 1) + 1
    if user.opcode == "dynamic-update-slice" and positions[-1] >= 2:
        update = user.operands[1].shape.dimensions
        return min(dims[i - 2] - update[i - 2] for i in positions if i >= 2) + 1
    if user.opcode == "gather" and 1 in positions:
        sizes = user.attr("slice_sizes")
        return min((dims[d] - sizes[d] + 1 for d in user.attr("start_index_map", ())), default=None)
    if user.opcode == "scatter" and positions == [(len(user.operands) - 1) // 2]:
        return min((dims[d] for d in user.attr("scatter_dims_to_operand_dims", ())), default=None)
    if user.opcode in _BRANCH_INDEXED and 0 in positions:
        return len(user.called_computations)
    return None


def fake_argument(shape: Shape, random: np.random.Generator, bound: int | None = None) -> Any:
    """A random value of ``shape``: normal floats, small integers, random
    bools; integers in ``[0, bound)`` when ``bound`` is given."""
    if shape.tuple_shapes:
        return tuple(fake_argument(s, random) for s in shape.tuple_shapes)
    element = ELEMENT_TYPES[shape.element_type]
    dims = shape.dimensions
    if element.kind is TypeKind.TOKEN:
        return ()
    if element.kind is TypeKind.PRED:
        return random.random(dims) < 0.5
    if element.is_integral:
        half = 1 << (element.bit_width - 1)
        if bound is not None:
            low, high = 0, max(bound, 1)
        elif element.kind is TypeKind.SIGNED:
            low, high = max(-50, -half), min(100, half)
        else:
            low, high = 0, min(100, 2 * half)
        return random.integers(low, high, dims).astype(element.dtype)
    if element.is_complex:
        return (random.standard_normal(dims) + 1j * random.standard_normal(dims)).astype(element.dtype)
    return random.standard_normal(dims).astype(element.dtype)


def working_bytes(shape: Shape) -> int:
    """Bytes ``fake_argument`` needs at its peak for ``shape``: the value and
    the f64 draws it is made from."""
    if shape.tuple_shapes:
        return sum(working_bytes(s) for s in shape.tuple_shapes)
    element = ELEMENT_TYPES[shape.element_type]
    if element.dtype is None:
        return 0
    draws = 2 if element.is_complex else 1
    return math.prod(shape.dimensions) * (element.dtype.itemsize + 8 * draws + 8)


def make_fake_arguments(module: HloModule, seed: int = 0) -> list[Any]:
    """One seeded random argument per entry parameter. Arguments that would
    not fit in memory are an ``XlapyError``, raised before allocating any."""
    params = module.entry.parameters
    check_bytes(sum(working_bytes(p.shape) for p in params),
                "random arguments for " + ", ".join(f"{p.name} ({p.shape})" for p in params[:4])
                + (", ..." if len(params) > 4 else ""))
    random = np.random.default_rng(seed)
    with out_of_memory_as_error(f"making random arguments for {module.name}"):
        return [fake_argument(p.shape, random, index_bound(p)) for p in params]
