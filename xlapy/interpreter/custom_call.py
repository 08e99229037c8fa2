"""``custom-call`` by target name (one entry per target), and ``fft``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.interpreter.registry import rule


def _pass_through(instr, operands, ev):
    return operands[0] if len(operands) == 1 else tuple(operands)


# Targets that only annotate a value (for sharding, placement or memory
# space) and pass it through unchanged.
CUSTOM_CALL_TARGETS: dict[str, Callable] = dict.fromkeys(
    ["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
     "annotate_device_placement", "LayoutConstraint", "xla_python_cpu_callback_identity"],
    _pass_through,
)


@rule("custom-call")
def _custom_call(instr, operands, ev):
    target = instr.attr("custom_call_target")
    handler = CUSTOM_CALL_TARGETS.get(target)
    if handler is None:
        raise UnimplementedError(f"the interpreter does not know custom-call target {target!r} ({instr.name})")
    return handler(instr, operands, ev)


@rule("fft")
def _fft(instr, operands, ev) -> np.ndarray:
    lengths = tuple(instr.attr("fft_length"))
    axes = tuple(range(-len(lengths), 0))
    kind = instr.attr("fft_type")
    x = operands[0]
    if kind == "FFT":
        return np.fft.fftn(x, lengths, axes)
    if kind == "IFFT":
        return np.fft.ifftn(x, lengths, axes)
    if kind == "RFFT":
        return np.fft.rfftn(x, lengths, axes)
    return np.fft.irfftn(x, lengths, axes)
