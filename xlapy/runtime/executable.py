"""``xlapy.compile``: an HLO module as native kernels plus a small plan that
runs the entry computation (parameters, constants, tuples,
get-tuple-element, bitcasts and loop fusions).

Values travel as physical buffers: 1-D arrays in the layout of their shape,
so bitcasts are free and kernels see memory exactly as XLA lays it out.
Arguments are converted into their parameter's layout and results back into
logical numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xlapy.codegen.launch import Device
from xlapy.errors import UnimplementedError, XlapyError
from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.runtime.kernel_cache import cached_kernel, fingerprint
from xlapy.runtime.thread_pool import run_blocks
from xlapy.shapes import ELEMENT_TYPES, Shape, from_physical, physical_element_count, to_physical


@dataclass
class _Buffer:
    """A value of the entry computation: its physical buffer and shape."""

    data: np.ndarray
    shape: Shape


def _is_default_layout(shape: Shape) -> bool:
    layout = shape.layout
    rank = len(shape.dimensions)
    return layout is None or (not layout.tiles and tuple(layout.minor_to_major) == tuple(range(rank - 1, -1, -1)))


def _dtype(shape: Shape) -> np.dtype:
    return np.dtype(ELEMENT_TYPES[shape.element_type].dtype)


def _to_buffer(value: np.ndarray, shape: Shape) -> _Buffer:
    array = np.asarray(value)
    if array.shape != tuple(shape.dimensions):
        raise XlapyError(f"argument of shape {array.shape} for a parameter of shape {shape}")
    array = array.astype(_dtype(shape), copy=False)
    if _is_default_layout(shape):
        return _Buffer(np.ascontiguousarray(array).reshape(-1), shape)
    return _Buffer(np.ascontiguousarray(to_physical(array, shape)), shape)


def _from_buffer(buffer: _Buffer) -> np.ndarray:
    shape = buffer.shape
    if _is_default_layout(shape):
        return buffer.data.reshape(shape.dimensions)
    return from_physical(buffer.data, shape)


@dataclass
class _FusionStep:
    instr: HloInstruction
    kernel: object
    blocks: int
    elements: int
    constants: list[np.ndarray]  # buffers of the fused array constants, passed after the operands


class Executable:
    """A compiled module; ``executable(*args)`` runs its entry computation."""

    def __init__(self, module: HloModule, steps: dict[HloInstruction, _FusionStep]):
        self.module = module
        self._steps = steps

    @property
    def kernels(self) -> dict[str, object]:
        """The native kernel of each fusion, by fusion name."""
        return {instr.name: step.kernel for instr, step in self._steps.items()}

    def __call__(self, *args) -> np.ndarray | tuple:
        entry = self.module.entry
        params = entry.parameters
        if len(args) != len(params):
            raise XlapyError(f"{self.module.name} takes {len(params)} arguments, got {len(args)}")
        values: dict[HloInstruction, object] = {}
        for instr in entry.post_order():
            values[instr] = self._run(instr, values, args)
        return _logical(values[entry.root])

    def _run(self, instr: HloInstruction, values: dict, args: tuple):
        if instr.opcode == "fusion":
            return self._run_fusion(self._steps[instr], [values[op] for op in instr.operands])
        return _ENTRY_OPS[instr.opcode](instr, [values[op] for op in instr.operands], args)

    def _run_fusion(self, step: _FusionStep, operands: list[_Buffer]):
        shapes = list(step.instr.shape.tuple_shapes) or [step.instr.shape]
        outputs = [_Buffer(np.empty(physical_element_count(s), _dtype(s)), s) for s in shapes]
        buffers = [b.data for b in operands] + step.constants + [b.data for b in outputs]
        run_blocks(lambda begin, end: step.kernel(buffers, begin, end), step.blocks, step.elements)
        return tuple(outputs) if step.instr.shape.tuple_shapes else outputs[0]


# The entry ops other than fusions, each ``(instr, operand values, arguments) -> value``.
_ENTRY_OPS = {
    "parameter": lambda instr, operands, args: _to_buffer(args[instr.parameter_number], instr.shape),
    "constant": lambda instr, operands, args: _to_buffer(np.asarray(instr.literal), instr.shape),
    "tuple": lambda instr, operands, args: tuple(operands),
    "get-tuple-element": lambda instr, operands, args: operands[0][instr.attr("index")],
    # A bitcast reads the same physical buffer under another shape.
    "bitcast": lambda instr, operands, args: _Buffer(operands[0].data.view(_dtype(instr.shape)), instr.shape),
}


def _logical(value) -> np.ndarray | tuple:
    if isinstance(value, tuple):
        return tuple(_logical(v) for v in value)
    return _from_buffer(value)


def compile(module: HloModule, backend: str = "cpu", *, dump_to: str | None = None,
            dump_pass_re: str | None = None) -> Executable:
    """Compiles every fusion of ``module``'s entry computation to native code.

    Only loop fusions, parameters, constants, tuples, get-tuple-element and
    bitcasts may appear in the entry computation; anything else is an
    ``UnimplementedError`` naming the op (there is no silent fallback)."""
    if backend != "cpu":
        raise XlapyError(f"unknown backend {backend!r}; xlapy compiles for 'cpu'")
    from xlapy.codegen.backends.cpu import CpuKernel
    from xlapy.codegen.pipeline import Dumper, lower_fusion

    dumper = Dumper.create(dump_to, dump_pass_re)
    device = Device.host()
    steps: dict[HloInstruction, _FusionStep] = {}
    for instr in module.entry.instructions:
        if instr.opcode in _ENTRY_OPS:
            continue
        if instr.opcode != "fusion":
            raise UnimplementedError(f"{instr.opcode} ({instr.name}) in the entry computation: the CPU backend "
                                     f"runs loop fusions, parameters, constants, tuples and bitcasts")
        for shape in list(instr.shape.tuple_shapes) or [instr.shape]:
            if shape.tuple_shapes:
                raise UnimplementedError(f"fusion {instr.name} returns a nested tuple")

        def build(fusion=instr) -> tuple[bytes, object]:
            lowered = lower_fusion(fusion, device, dumper)
            return CpuKernel.compile(lowered.module).object_code, lowered.launch

        if dumper is not None:  # dumps are only written by a real compilation
            code, launch = build()
            kernel, from_launch = CpuKernel.from_object(code), launch
        else:
            cached = cached_kernel(fingerprint(instr, device), build, CpuKernel.from_object)
            kernel, from_launch = cached.kernel, cached.launch
        elements = max(math.prod(s.dimensions) for s in (list(instr.shape.tuple_shapes) or [instr.shape]))
        constants = [_to_buffer(np.asarray(c.literal), c.shape).data for c in instr.fused_computation.instructions
                     if c.opcode == "constant" and c.shape.dimensions]
        steps[instr] = _FusionStep(instr, kernel, from_launch.blocks, elements, constants)
    return Executable(module, steps)
