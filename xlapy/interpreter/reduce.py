"""``reduce``: variadic, with any reducer computation."""

from __future__ import annotations

import numpy as np

from xlapy.hlo import HloComputation
from xlapy.interpreter.numerics import widen
from xlapy.interpreter.registry import rule

# Reducers that are a single associative op of the two parameters, reduced
# with numpy directly instead of one computation call per element.
_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def simple_reducer(computation: HloComputation) -> np.ufunc | None:
    """The numpy ufunc ``computation`` is, if it is ``op(p0, p1)`` of a plain associative op."""
    root = computation.root
    params = computation.parameters
    if len(params) != 2 or len(computation.instructions) != 3 or root.opcode not in _UFUNCS:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    return _UFUNCS[root.opcode]


@rule("reduce")
def _reduce(instr, operands, ev):
    count = len(operands) // 2
    inputs, inits = operands[:count], operands[count:]
    axes = tuple(instr.attr("dimensions", ()))
    computation = instr.called_computations[0]
    ufunc = simple_reducer(computation)
    # An empty input goes the sequential way: numpy cannot reduce it by ops without an identity.
    if count == 1 and ufunc is not None and inputs[0].dtype.kind in "biufc" and inputs[0].size:
        values = inputs[0]
        if values.dtype == np.float16:
            values = values.astype(np.float32)
        return ufunc(widen(inits[0]), ufunc.reduce(values, axis=axes))
    return reduce_sequentially(ev, computation, inputs, inits, axes, single=count == 1)


def reduce_sequentially(ev, computation: HloComputation, inputs, inits, axes, single: bool):
    """Fold the reducer over the reduced elements in order, starting from the
    inits, vectorised over all output positions."""
    kept = [d for d in range(inputs[0].ndim) if d not in axes]
    out_shape = [inputs[0].shape[d] for d in kept]
    reduced = int(np.prod([inputs[0].shape[d] for d in axes], dtype=np.int64))
    flat = [np.transpose(x, kept + list(axes)).reshape([*out_shape, reduced]) for x in inputs]
    accumulators = [np.broadcast_to(init, out_shape) for init in inits]
    for k in range(flat[0].shape[-1]):
        result = ev.call(computation, *accumulators, *[x[..., k] for x in flat])
        accumulators = [result] if single else list(result)
    return accumulators[0] if single else tuple(accumulators)
