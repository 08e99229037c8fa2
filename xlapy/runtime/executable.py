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

from xlapy.codegen.fusion_checks import check_fusion, fusion_outputs, unsupported_fused_ops
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.arguments import check_argument, check_arguments
from xlapy.hlo.ir import HloInstruction, HloModule
from xlapy.hlo.shape_rules.helpers import same_shape
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.memory import buffer_bytes, check_bytes
from xlapy.runtime.kernel_cache import cached_kernel, fingerprint
from xlapy.runtime.thread_pool import run_blocks
from xlapy.shapes import (
    ELEMENT_TYPES,
    Shape,
    from_physical,
    to_physical,
)


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


def _to_buffer(array: np.ndarray, shape: Shape) -> _Buffer:
    """The physical buffer of ``array``, already checked against ``shape`` (``check_argument``)."""
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
        # Every argument is checked before anything runs (see xlapy.hlo.arguments).
        checked = tuple(check_arguments(args, entry.parameters, self.module.name))
        values: dict[HloInstruction, object] = {}
        for instr in entry.post_order():
            values[instr] = self._run(instr, values, checked)
        return _logical(values[entry.root])

    def _run(self, instr: HloInstruction, values: dict, args: tuple):
        if instr.opcode == "fusion":
            return self._run_fusion(self._steps[instr], [values[op] for op in instr.operands])
        return _ENTRY_OPS[instr.opcode](instr, [values[op] for op in instr.operands], args)

    def _run_fusion(self, step: _FusionStep, operands: list[_Buffer]):
        shapes = fusion_outputs(step.instr)
        outputs = [_Buffer(_allocate(s, f"output of {step.instr.name}"), s) for s in shapes]
        buffers = [b.data for b in operands] + step.constants + [b.data for b in outputs]
        # The kernel reads and writes exactly the buffers and bytes it was compiled for (checked by the kernel too).
        sizes = step.kernel.signature.buffer_sizes
        if len(buffers) != len(sizes):
            raise VerifyError(f"fusion {step.instr.name}: {len(buffers)} buffers, its kernel was compiled for "
                              f"{len(sizes)}")
        for index, (buffer, size) in enumerate(zip(buffers, sizes)):
            if buffer.nbytes != size:
                raise VerifyError(f"fusion {step.instr.name}: buffer {index} has {buffer.nbytes} bytes, its kernel "
                                  f"was compiled for {size}")
        run_blocks(lambda begin, end: step.kernel(buffers, begin, end), step.blocks, step.elements)
        return tuple(outputs) if step.instr.shape.tuple_shapes else outputs[0]


def _allocate(shape: Shape, what: str) -> np.ndarray:
    """An uninitialised physical buffer of ``shape``; a clear error when it cannot exist."""
    nbytes = buffer_bytes(shape)
    check_bytes(nbytes, f"the {what} ({shape})")
    try:
        return np.empty(nbytes // _dtype(shape).itemsize, _dtype(shape))
    except (MemoryError, ValueError) as error:
        raise XlapyError(f"cannot allocate the {what} ({shape}, {nbytes} bytes): {error or 'out of memory'}") \
            from None


def _constant(shape: Shape, literal) -> _Buffer:
    # The rules of every runner's arguments: nothing changes beyond rounding.
    return _to_buffer(check_argument(np.asarray(literal), shape, "a constant"), shape)


def _bitcast(instr: HloInstruction, operand: _Buffer) -> _Buffer:
    """The same physical buffer under another shape, which must lay out exactly its bytes."""
    nbytes = buffer_bytes(instr.shape)
    if operand.data.nbytes != nbytes:
        raise VerifyError(f"bitcast {instr.name}: its operand's buffer has {operand.data.nbytes} bytes, "
                          f"{instr.shape} lays out {nbytes}")
    return _Buffer(operand.data.view(_dtype(instr.shape)), instr.shape)


# The entry ops other than fusions, each ``(instr, operand values, checked arguments) -> value``.
_ENTRY_OPS = {
    "parameter": lambda instr, operands, args: _to_buffer(args[instr.parameter_number], instr.shape),
    "constant": lambda instr, operands, args: _constant(instr.shape, instr.literal),
    "tuple": lambda instr, operands, args: tuple(operands),
    "get-tuple-element": lambda instr, operands, args: operands[0][instr.attr("index")],
    "bitcast": lambda instr, operands, args: _bitcast(instr, operands[0]),
}


def _logical(value) -> np.ndarray | tuple:
    if isinstance(value, tuple):
        return tuple(_logical(v) for v in value)
    return _from_buffer(value)


# The compile options that change the generated code, as the kernel cache's key records them.
_OPTIONS = "backend=cpu native_bf16=False"


def compile(module: HloModule, backend: str = "cpu", *, dump_to: str | None = None,
            dump_pass_re: str | None = None, verify: bool = True) -> Executable:
    """Compiles every fusion of ``module``'s entry computation to native code.

    The module is verified first (``verify=False`` skips that; the checks that
    keep the generated code inside its buffers run regardless). Only loop
    fusions, parameters, constants, tuples, get-tuple-element and bitcasts may
    appear in the entry computation; an ``UnimplementedError`` names every op
    that stops the module from running (there is no silent fallback)."""
    if backend != "cpu":
        raise XlapyError(f"unknown backend {backend!r}; xlapy compiles for 'cpu'")
    if verify:
        from xlapy.hlo.verifier import verify as verify_module

        verify_module(module)
    from xlapy.codegen.backends.cpu import CpuKernel
    from xlapy.codegen.pipeline import Dumper, lower_fusion

    if module.entry is None:
        raise VerifyError(f"module {module.name} has no entry computation")
    blockers = cpu_blockers(module)
    if blockers:
        raise UnimplementedError(f"the CPU backend cannot run {module.name}: {', '.join(blockers)}; run it with "
                                 "the interpreter (--backend interpreter)")
    _check_entry_ops(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    for fusion in fusions:
        check_fusion(fusion)
    dumper = Dumper.create(dump_to, dump_pass_re)
    device = Device.host()
    steps: dict[HloInstruction, _FusionStep] = {}
    for instr in fusions:
        sizes = _buffer_sizes(instr)
        elements = max(math.prod(s.dimensions) for s in fusion_outputs(instr))

        def build(fusion=instr) -> tuple[bytes, object]:
            lowered = lower_fusion(fusion, device, dumper)
            return CpuKernel.compile(lowered.module).object_code, lowered.launch

        def check(kernel, launch: LaunchDimensions, fusion=instr, sizes=sizes, elements=elements) -> None:
            _check_kernel(fusion, kernel, launch, sizes, elements)

        if dumper is not None:  # dumps are only written by a real compilation
            code, launch = build()
            kernel = CpuKernel.from_object(code)
            check(kernel, launch)
        else:
            cached = cached_kernel(fingerprint(instr, device, _OPTIONS), build, CpuKernel.from_object, check)
            kernel, launch = cached.kernel, cached.launch
        constants = [_constant(c.shape, c.literal).data for c in instr.fused_computation.instructions
                     if c.opcode == "constant" and c.shape.dimensions]
        steps[instr] = _FusionStep(instr, kernel, launch.blocks, elements, constants)
    return Executable(module, steps)


def cpu_blockers(module: HloModule) -> list[str]:
    """Every op of ``module`` that the CPU backend cannot run, as ``"opcode (name)"`` (empty when it can
    run the module)."""
    found = []
    for instr in module.entry.instructions:
        if instr.opcode == "parameter" and instr.shape.is_tuple:
            found.append(f"parameter ({instr.name}) of tuple type {instr.shape}")
        elif instr.opcode == "fusion":
            found.extend(unsupported_fused_ops(instr))
        elif instr.opcode not in _ENTRY_OPS:
            found.append(f"{instr.opcode} ({instr.name})")
    return found


def _check_entry_ops(module: HloModule) -> None:
    """The shapes of the entry's plain ops follow from their operands (buffers are passed on by these shapes),
    checked even when the module is not verified."""
    for instr in module.entry.instructions:
        if instr.opcode in ("parameter", "fusion"):
            continue  # parameters are checked against the arguments, fusions by ``check_fusion``
        try:
            expected = infer_shape(instr)
        except XlapyError as error:
            raise VerifyError(f"computation {module.entry.name}: {error}") from None
        if not same_shape(expected, instr.shape):
            raise VerifyError(f"computation {module.entry.name}, instruction {instr.name}: declared {instr.shape}, "
                              f"its {instr.opcode} gives {expected}")
        if instr.opcode == "bitcast" and buffer_bytes(instr.shape) != buffer_bytes(instr.operands[0].shape):
            # Equal byte sizes in XLA's packing, but buffers here hold one element per byte.
            raise UnimplementedError(f"the CPU backend cannot run bitcast {instr.name} from "
                                     f"{instr.operands[0].shape} to {instr.shape}: packed elements (E(n) "
                                     "layouts) take a whole byte each in its buffers")


def _buffer_sizes(fusion: HloInstruction) -> tuple[int, ...]:
    """The byte size of each buffer of the fusion's kernel: operands, array constants, outputs."""
    constants = [c.shape for c in fusion.fused_computation.instructions if c.opcode == "constant" and
                 c.shape.dimensions]
    shapes = [op.shape for op in fusion.operands] + constants + fusion_outputs(fusion)
    return tuple(buffer_bytes(s) for s in shapes)


def _check_kernel(fusion: HloInstruction, kernel, launch: LaunchDimensions, sizes: tuple[int, ...],
                  elements: int) -> None:
    """Raises ``VerifyError`` unless ``kernel`` (compiled or from the cache) is made for ``fusion``: its buffers
    are the fusion's and its launch covers every output element."""
    signature = kernel.signature
    if tuple(signature.buffer_sizes) != sizes:
        raise VerifyError(f"the kernel of fusion {fusion.name} takes buffers of {list(signature.buffer_sizes)} bytes, "
                          f"the fusion has {list(sizes)}")
    if (signature.blocks, signature.threads) != (launch.blocks, launch.threads_per_block) or \
            launch.blocks * launch.elements_per_block < elements:
        raise VerifyError(f"the kernel of fusion {fusion.name} is launched as {launch}, which does not cover its "
                          f"{elements} elements in {signature.blocks} blocks of {signature.threads} threads")
