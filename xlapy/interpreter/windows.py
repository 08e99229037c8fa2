"""Rules of ``reduce-window`` and ``select-and-scatter``: the window positions
are visited one at a time in row-major order, each time for all output
positions at once."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.hlo.attributes import WindowDimension
from xlapy.interpreter.gather_scatter import combine_in_order
from xlapy.interpreter.registry import Value, rule

if TYPE_CHECKING:
    from xlapy.hlo import HloInstruction
    from xlapy.interpreter.evaluator import Evaluator


def _window(instr: HloInstruction, rank: int) -> tuple[WindowDimension, ...]:
    window = tuple(instr.attributes.get("window", ()))
    return window if window else (WindowDimension(),) * rank


def _positions(base_size: int, out_size: int, dim: WindowDimension, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For window element ``k`` of dimension ``dim``: the base index each
    output position reads, and whether that is a real element (not padding,
    not a hole left by base dilation)."""
    c = np.arange(out_size, dtype=np.int64) * dim.stride + k * dim.window_dilation - dim.padding_low
    real = (c >= 0) & (c % dim.base_dilation == 0) & (c // dim.base_dilation < base_size)
    return np.where(real, c // dim.base_dilation, 0), real


def _window_elements(base_shape: tuple[int, ...], out_shape: tuple[int, ...], window: tuple[WindowDimension, ...]):
    """Yield, per window element in row-major order, the open-mesh index of
    the base elements read by every output position and the mask of those
    that are real; elements read by no output position are skipped."""
    for k in itertools.product(*(range(d.size) for d in window)):
        per_dim = [_positions(n, o, d, i) for n, o, d, i in zip(base_shape, out_shape, window, k)]
        if not all(real.any() for _, real in per_dim):
            continue
        mesh = np.ix_(*(index for index, _ in per_dim))
        real = np.ones(out_shape, bool)
        for axis, (_, mask) in enumerate(per_dim):
            real &= mask.reshape([-1 if a == axis else 1 for a in range(len(out_shape))])
        yield mesh, real


@rule("reduce-window")
def reduce_window(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    count = len(operands) // 2
    inputs, inits = [np.asarray(x) for x in operands[:count]], operands[count:]
    shape = instr.shape.tuple_shapes[0] if count > 1 else instr.shape
    out_shape = tuple(shape.dimensions)
    computation = instr.called_computations[0]
    accumulators = [np.broadcast_to(init, out_shape) for init in inits]
    for mesh, real in _window_elements(inputs[0].shape, out_shape, _window(instr, inputs[0].ndim)):
        result = ev.call(computation, *accumulators, *[x[mesh] for x in inputs])
        result = list(result) if count > 1 else [result]
        # Padding and dilation holes are skipped, not combined with the init.
        accumulators = [np.where(real, r, a) for r, a in zip(result, accumulators)]
    return tuple(accumulators) if count > 1 else accumulators[0]


@rule("select-and-scatter")
def select_and_scatter(instr: HloInstruction, operands: list[Any], ev: Evaluator) -> Value:
    operand, source, init = (np.asarray(x) for x in operands)
    by_name = dict(zip(("select", "scatter"), instr.called_computations))
    window = _window(instr, operand.ndim)
    strides = np.cumprod((1, *operand.shape[:0:-1]))[::-1]
    selected_value = np.zeros(source.shape, operand.dtype)
    selected_at = np.zeros(source.shape, np.int64)
    found = np.zeros(source.shape, bool)
    for mesh, real in _window_elements(operand.shape, source.shape, window):
        candidate = operand[mesh]
        # The first real element is taken; later ones replace the current
        # choice when select(current, candidate) is false.
        keep = np.asarray(ev.call(by_name["select"], selected_value, candidate), bool)
        take = real & ~(found & keep)
        selected_value = np.where(take, candidate, selected_value)
        selected_at = np.where(take, sum(i * s for i, s in zip(mesh, strides)), selected_at)
        found |= real
    result = np.array(np.broadcast_to(init, operand.shape)).reshape(-1)
    combine_in_order(ev, by_name["scatter"], [result], selected_at[found], [source[found]])
    return result.reshape(operand.shape)
