"""Ops that move data without arithmetic: one rule per opcode."""

from __future__ import annotations

import numpy as np

from xlapy.errors import XlapyError
from xlapy.interpreter.numerics import dtype_of
from xlapy.interpreter.registry import rule
from xlapy.shapes import from_physical, to_physical


@rule("constant")
def _constant(instr, operands, ev):
    if isinstance(instr.literal, str):
        raise XlapyError(f"constant {instr.name} was printed elided ({instr.literal}); its value is unknown")
    return instr.literal


@rule("iota")
def _iota(instr, operands, ev) -> np.ndarray:
    dims = instr.shape.dimensions
    axis = instr.attr("iota_dimension")
    positions = np.arange(dims[axis]).reshape([-1 if d == axis else 1 for d in range(len(dims))])
    return np.broadcast_to(positions, dims).astype(dtype_of(instr.shape.element_type))


@rule("broadcast", "stablehlo.broadcast_in_dim")
def _broadcast(instr, operands, ev) -> np.ndarray:
    operand = np.asarray(operands[0])
    dims = tuple(instr.attr("dimensions", ()))
    out_dims = instr.shape.dimensions
    # Order the operand's dimensions as they appear in the output, then give
    # every other output dimension size 1. The operand keeps its own sizes, so
    # a size-1 dimension that StableHLO's broadcast_in_dim maps to a larger
    # one stretches (HLO's broadcast maps dimensions to equal sizes).
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    sizes = dict(zip(dims, operand.shape))
    placed = np.transpose(operand, order).reshape([sizes.get(d, 1) for d in range(len(out_dims))])
    return np.broadcast_to(placed, out_dims)


@rule("reshape")
def _reshape(instr, operands, ev) -> np.ndarray:
    return np.reshape(operands[0], instr.shape.dimensions)


@rule("transpose")
def _transpose(instr, operands, ev) -> np.ndarray:
    return np.transpose(operands[0], instr.attr("dimensions"))


@rule("bitcast")
def _bitcast(instr, operands, ev) -> np.ndarray:
    if not instr.operands[0].shape.dimensions and not instr.shape.dimensions:  # perhaps applied to arrays
        return np.asarray(operands[0]).view(dtype_of(instr.shape.element_type))
    # A bitcast reinterprets the physical buffer, so layouts decide the result.
    buffer = to_physical(np.asarray(operands[0]), instr.operands[0].shape.with_default_layout())
    target = instr.shape.with_default_layout()
    return from_physical(buffer.view(dtype_of(target.element_type)), target)


@rule("copy-start")
def _copy_start(instr, operands, ev) -> tuple:
    return (operands[0], operands[0], np.zeros((), np.uint32))


@rule("copy-done")
def _copy_done(instr, operands, ev) -> np.ndarray:
    return operands[0][1]


@rule("slice")
def _slice(instr, operands, ev) -> np.ndarray:
    return operands[0][tuple(slice(d.start, d.limit, d.stride) for d in instr.attr("slice"))]


def _clamped_starts(operand_dims, sizes, index_values) -> list[int]:
    """Start indices clamped so the window lies inside the operand (XLA's rule)."""
    return [min(max(int(i), 0), dim - size) for i, dim, size in zip(index_values, operand_dims, sizes)]


@rule("dynamic-slice")
def _dynamic_slice(instr, operands, ev) -> np.ndarray:
    operand, indices = operands[0], operands[1:]
    sizes = instr.attr("dynamic_slice_sizes")
    starts = _clamped_starts(operand.shape, sizes, indices)
    return operand[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


@rule("dynamic-update-slice")
def _dynamic_update_slice(instr, operands, ev) -> np.ndarray:
    operand, update, indices = operands[0], operands[1], operands[2:]
    starts = _clamped_starts(operand.shape, update.shape, indices)
    result = np.array(operand, copy=True)
    result[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return result


@rule("concatenate")
def _concatenate(instr, operands, ev) -> np.ndarray:
    return np.concatenate(operands, axis=instr.attr("dimensions")[0])


@rule("pad")
def _pad(instr, operands, ev) -> np.ndarray:
    operand, value = np.asarray(operands[0]), operands[1]
    config = instr.attr("padding")
    # Interior padding spreads the elements apart; then low/high edges are
    # added (or, when negative, cut off).
    spread = [n + max(n - 1, 0) * d.interior for n, d in zip(operand.shape, config)]
    result = np.full(spread, value, operand.dtype)
    result[tuple(slice(None, None, d.interior + 1) for d in config)] = operand
    for axis, d in enumerate(config):
        low, high = max(d.low, 0), max(d.high, 0)
        if low or high:
            widths = [(0, 0)] * result.ndim
            widths[axis] = (low, high)
            result = _pad_edges(result, widths, value)
        start, stop = max(-d.low, 0), result.shape[axis] - max(-d.high, 0)
        result = np.take(result, np.arange(start, max(stop, start)), axis=axis)
    return result


def _pad_edges(array: np.ndarray, widths, value) -> np.ndarray:
    # np.pad cannot fill ml_dtypes arrays, so place the array in a filled one.
    shape = [n + lo + hi for n, (lo, hi) in zip(array.shape, widths)]
    result = np.full(shape, value, array.dtype)
    result[tuple(slice(lo, lo + n) for n, (lo, _) in zip(array.shape, widths))] = array
    return result


@rule("reverse")
def _reverse(instr, operands, ev) -> np.ndarray:
    return np.flip(operands[0], axis=tuple(instr.attr("dimensions")))


@rule("tuple")
def _tuple(instr, operands, ev) -> tuple:
    return tuple(operands)


@rule("get-tuple-element")
def _get_tuple_element(instr, operands, ev):
    return operands[0][instr.attr("index")]


@rule("domain")
def _identity(instr, operands, ev):
    return operands[0]


@rule("opt-barrier")
def _barrier(instr, operands, ev):
    return operands[0]


@rule("stablehlo.optimization_barrier")
def _stablehlo_barrier(instr, operands, ev):
    # Each operand passes through as one result.
    return operands[0] if len(operands) == 1 else tuple(operands)


@rule("add-dependency")
def _add_dependency(instr, operands, ev):
    return operands[0]


@rule("after-all")
def _after_all(instr, operands, ev) -> tuple:
    return ()


@rule("get-dimension-size")
def _get_dimension_size(instr, operands, ev) -> np.ndarray:
    return np.int32(np.shape(operands[0])[instr.attr("dimensions")[0]])


@rule("set-dimension-size")
def _set_dimension_size(instr, operands, ev):
    return operands[0]
