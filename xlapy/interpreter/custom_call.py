"""``custom-call`` by target name (one entry per target), the CPU library calls JAX emits (LAPACK and
jaxlib's own, computed by ``xlapy.interpreter.lapack`` as the runtime's library thunks compute them), and
``fft``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xlapy.errors import UnimplementedError
from xlapy.hlo.shape_rules.custom_call import PASS_THROUGH_TARGETS, SHARD_SHAPE_TARGETS
from xlapy.interpreter.lapack import is_library_target, library_call
from xlapy.interpreter.registry import rule
from xlapy.interpreter.sharding_ops import is_global_side


def _pass_through(instr, operands, ev):
    return operands[0] if len(operands) == 1 else tuple(operands)


def _same_shape_pass_through(instr, operands, ev):
    # Between the global and the per-device (manual) shape: the identity only
    # when both are the same (a mesh of one device, or nothing split).
    if is_global_side(instr):
        return _pass_through(instr, operands, ev)
    results = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    if len(results) != len(operands) or any(tuple(np.shape(v)) != tuple(s.dimensions)
                                            for v, s in zip(operands, results)):
        before = ", ".join(str(o.shape) for o in instr.operands)
        raise UnimplementedError(
            f"custom-call {instr.attr('custom_call_target')!r} ({instr.name}) turns {before} into {instr.shape}: "
            "the interpreter evaluates the global program on one device and runs per-device shapes only inside a "
            "manual computation (sdy.manual_computation, or a call between xla.sdy.GlobalToLocalShape and "
            "xla.sdy.LocalToGlobalShape)")
    return _pass_through(instr, operands, ev)


# The interpreter's rule of each custom-call target (the verifier's are
# shape_rules.registry.CUSTOM_CALL_RULES; the two lists of targets come from shape_rules.custom_call).
CUSTOM_CALL_TARGETS: dict[str, Callable] = {
    **dict.fromkeys(PASS_THROUGH_TARGETS, _pass_through),
    **dict.fromkeys(SHARD_SHAPE_TARGETS, _same_shape_pass_through),
}


@rule("custom-call")
def _custom_call(instr, operands, ev):
    target = instr.attr("custom_call_target")
    handler = CUSTOM_CALL_TARGETS.get(target)
    if handler is None and is_library_target(target):
        return _library_call(instr, operands, ev)
    if handler is None:
        raise UnimplementedError(f"the interpreter does not know custom-call target {target!r} ({instr.name})")
    return handler(instr, operands, ev)


def _library_call(instr, operands, ev):
    # A family of targets (one per routine and element type) rather than entries of CUSTOM_CALL_TARGETS.
    call = library_call(instr)
    shapes = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    results = call.run([np.asarray(o) for o in operands], shapes)
    return tuple(results) if instr.shape.is_tuple else results[0]


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
