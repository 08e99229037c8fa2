"""Kernel thunks: generated code for a kLoop fusion (or a lone op the loop emitter can emit, as a fusion of
one instruction), run over the assigned slices on the thread pool, as XLA:CPU's ``KernelThunk``
(``xla/backends/cpu/runtime/kernel_thunk.cc``).

A kernel reads and writes exactly the buffers it was compiled for: before every launch the byte size of
each buffer is checked against the kernel's signature (the kernel checks again), so a wrong slice can never
make it touch memory outside its buffers.

Buffers that are the same slice (an output the buffer assignment places over the operand it replaces, an
operand passed twice) are passed once, as XLA's ``merge_pointers_to_same_slice``
(``xla/backends/gpu/codegen/kernels``): the kernel is compiled with their ``xla.slice_index`` and takes one
pointer for them, and its pointer arguments stay ``noalias``. Slices that overlap without being equal never
reach a kernel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from xlapy.codegen.fusion_checks import fusion_outputs, unsupported_fused_ops
from xlapy.errors import UnimplementedError, VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.memory import buffer_bytes
from xlapy.runtime import native_pool
from xlapy.runtime.thread_pool import block_launcher, run_blocks, runs_serially
from xlapy.runtime.thunks.base import ExecutionContext, Thunk, dtype_of
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.runtime.thunk_emitter import ThunkEmitter


@dataclass(eq=False)
class KernelThunk(Thunk):
    """Runs ``kernel`` over ``blocks`` blocks with the buffers: operand slices, the fused array constants
    (arrays made once at compile time), output slices. ``kernel`` is set once the emitter has compiled it.
    ``slice_indices`` (set from the slices when the thunk is made, and what the kernel is compiled for) numbers
    the pointers the kernel takes, one entry per buffer; None when no two buffers are the same slice."""

    name: str
    fusion: HloInstruction
    operands: list[tuple[BufferSlice, Shape]]
    constants: list[np.ndarray]
    outputs: list[tuple[BufferSlice, Shape]]
    elements: int
    kernel: object = None
    blocks: int = 0
    # What decides between the calling thread and the pool, when not ``elements`` (the elements its launch
    # covers): the elements a reduction reads, or 0 for a kernel that runs on the calling thread whatever its size.
    work: int | None = None
    kind: str = field(default="kernel", init=False)
    slice_indices: tuple[int, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.slice_indices = shared_slice_indices(self.buffer_slices(), f"fusion {self.name}")
        self.refresh()

    @property
    def pool_work(self) -> int:
        """The size ``runs_serially`` judges the kernel by."""
        return self.elements if self.work is None else self.work

    def buffer_slices(self) -> list[BufferSlice | None]:
        """The slice of each buffer, in the kernel's order (None for the fused constants, which are arrays of
        their own)."""
        return [s for s, _ in self.operands] + [None] * len(self.constants) + [s for s, _ in self.outputs]

    def refresh(self) -> None:
        """Recomputes where the buffers are (after ``operands`` or ``outputs`` change)."""
        slices = self.operands + self.outputs
        for piece, shape in slices:
            if buffer_bytes(shape) > piece.size:
                raise VerifyError(f"fusion {self.name}: a slice of {piece.size} bytes cannot hold {shape}")
        # Slices shared otherwise than the kernel was compiled for are refused at the next launch (after the
        # checks of each buffer's size).
        try:
            sharing = shared_slice_indices(self.buffer_slices(), f"fusion {self.name}")
            self._sharing_problem = None if sharing == self.slice_indices else (
                f"fusion {self.name}: its buffers share slices as {_pattern(sharing)}, its kernel was compiled for "
                f"{_pattern(self.slice_indices)}")
        except VerifyError as error:
            self._sharing_problem = str(error)
        # Per pointer the kernel takes: a constant array, or (allocation, first byte, end byte, dtype) of a slice
        # (one view covering every buffer passed in it): a run only slices and views.
        spans = [(s.allocation, s.offset, s.offset + buffer_bytes(shape), dtype_of(shape)) for s, shape in slices]
        items: list[np.ndarray | tuple] = spans[:len(self.operands)] + list(self.constants) + \
            spans[len(self.operands):]
        indices = self.slice_indices if self.slice_indices is not None else range(len(items))
        plan: dict[int, np.ndarray | tuple] = {}
        for index, item in zip(indices, items):
            first = plan.setdefault(index, item)
            if first is not item and isinstance(item, tuple):  # bytes, whatever the buffers' element types
                plan[index] = (*first[:2], max(first[2], item[2]), np.dtype(np.uint8))
        self._plan = list(plan.values())

    def buffers(self, context: ExecutionContext) -> list[np.ndarray]:
        """The kernel's buffers in ``context`` (one per pointer it takes), each checked against the size the
        kernel was compiled for."""
        allocations = context.allocations
        buffers = [item if isinstance(item, np.ndarray) else allocations[item[0]][item[1]:item[2]].view(item[3])
                   for item in self._plan]
        sizes = self.kernel.signature.buffer_sizes
        if len(buffers) != len(sizes):
            raise VerifyError(f"fusion {self.name}: {len(buffers)} buffers, its kernel was compiled for {len(sizes)}")
        for index, (buffer, size) in enumerate(zip(buffers, sizes)):
            if buffer.nbytes != size:
                raise VerifyError(f"fusion {self.name}: buffer {index} has {buffer.nbytes} bytes, its kernel was "
                                  f"compiled for {size}")
        if self._sharing_problem is not None:
            raise VerifyError(self._sharing_problem)
        return buffers

    def run(self, context: ExecutionContext) -> None:
        run_blocks(self.kernel.bind(self.buffers(context)), self.blocks, self.pool_work)

    def prepare(self, context: ExecutionContext) -> Callable[[], None]:
        """The launch over ``context``'s buffers, checked and bound to the kernel once (``CpuKernel.bind``): a
        loop iteration then only calls the kernel."""
        buffers = self.buffers(context)  # checked before the kernel is asked for anything
        work = self.pool_work
        if runs_serially(self.blocks, work, native=True) and not native_pool.supported():
            launch = self.kernel.bind_all_blocks(buffers)
            self._follow_allocations(context, launch)
            return launch
        launch = self.kernel.bind(buffers)
        self._follow_allocations(context, launch)
        return block_launcher(launch, self.blocks, work)

    def _follow_allocations(self, context: ExecutionContext, launch: Callable) -> None:
        """Lets ``launch`` follow each of its allocations to new memory by rewriting its pointers in place
        (``ExecutionContext.follow``) instead of being bound again."""
        _, pointers = launch.buffers
        signature = self.kernel.signature
        positions: dict[int, list[tuple[int, int, int, int]]] = {}
        for position, item in enumerate(self._plan):
            if not isinstance(item, np.ndarray):
                positions.setdefault(item[0], []).append((position, item[1], item[2], signature.alignment(position)))
        for allocation, spans in positions.items():
            def repoint(data: np.ndarray | None, address: int | None,
                        spans: list[tuple[int, int, int, int]] = spans,
                        needed: int = max(span[2] for span in spans)) -> bool:
                if data is not None and (data.ndim != 1 or not data.flags.c_contiguous or data.nbytes < needed
                                         or any((address + start) % alignment for _, start, _, alignment in spans)):
                    return False  # prepared afresh, where the kernel's own checks refuse what does not fit
                for position, start, _, _ in spans:
                    pointers[position] = None if address is None else address + start
                # The launch no longer keeps the memory it was prepared over alive (it may be the caller's now);
                # the fused constants it reads stay alive in the thunk's plan.
                launch.buffers = (None, pointers)
                return True

            context.follow(allocation, repoint)


def shared_slice_indices(slices: Sequence[BufferSlice | None], what: str) -> tuple[int, ...] | None:
    """For each buffer of a kernel, the number of the pointer it is passed in: equal slices share one, numbered
    in order of first appearance (``None`` entries, arrays outside every allocation, have one each). None when
    every buffer has a pointer of its own. Raises ``VerifyError`` when two slices overlap without being equal
    (``what`` names the kernel): no pointer could stand for both."""
    numbers: dict[BufferSlice, int] = {}
    indices: list[int] = []
    pointers = 0
    for piece in slices:
        if piece is None:
            indices.append(pointers)
            pointers += 1
            continue
        if piece not in numbers:
            for other in numbers:
                if other.allocation == piece.allocation and other.offset < piece.offset + piece.size and \
                        piece.offset < other.offset + other.size:
                    raise VerifyError(f"{what}: buffer slices {_span(other)} and {_span(piece)} overlap without "
                                      "being equal")
            numbers[piece] = pointers
            pointers += 1
        indices.append(numbers[piece])
    return tuple(indices) if pointers < len(indices) else None


def _span(piece: BufferSlice) -> str:
    return f"[{piece.offset}, {piece.offset + piece.size}) of allocation {piece.allocation}"


def _pattern(indices: tuple[int, ...] | None) -> str:
    return "none" if indices is None else f"slice indices {list(indices)}"


def fused_array_constants(fusion: HloInstruction) -> list[HloInstruction]:
    """The fused constants a kernel takes as buffers (scalars are folded into the code)."""
    return [c for c in fusion.fused_computation.instructions if c.opcode == "constant" and c.shape.dimensions]


def kernel_outputs(fusion: HloInstruction) -> list[Shape]:
    """The array shapes a fusion's kernel writes, in order."""
    return fusion_outputs(fusion)


def single_instruction_fusion(instr: HloInstruction) -> HloInstruction:
    """A kLoop fusion of ``instr`` alone, on ``instr``'s operands (one fused parameter per operand), named as
    ``instr`` so that its kernel is too. It is not added to any computation: it only describes the kernel."""
    computation = HloComputation(f"fused_{instr.name}")
    parameters = []
    for number, operand in enumerate(instr.operands):
        parameter = HloInstruction(f"param_{number}", "parameter", operand.shape)
        parameter.parameter_number = number
        parameters.append(computation.add_instruction(parameter))
    root = instr.clone(parameters)
    root.name = instr.name
    computation.root = computation.add_instruction(root)
    fusion = _detached_fusion(instr, instr.shape, {"kind": "kLoop"}, [computation])
    computation.fusion_instruction = fusion
    return fusion


def lone_op_problems(instr: HloInstruction) -> list[str]:
    """Why the loop emitter cannot emit ``instr`` alone (empty when it can)."""
    found = unsupported_fused_ops(single_instruction_fusion(instr))
    # Name the instruction itself, not the fusion built around it.
    return [f"{instr.opcode} ({instr.name})"] if found else []


def writes_nothing(fusion: HloInstruction) -> bool:
    """Whether every array a kernel of ``fusion`` would write has no elements: it needs no kernel at all (the
    loop emitter is never asked for a loop of no iterations around a reduction)."""
    outputs = fusion_outputs(fusion)
    return bool(outputs) and all(shape.element_count == 0 for shape in outputs)


def lone_op_kernel(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    """A kernel for an op outside any fusion, when the loop emitter can emit it."""
    problems = lone_op_problems(instr)
    if problems:
        raise UnimplementedError(", ".join(problems))
    fusion = single_instruction_fusion(instr)
    return [] if writes_nothing(fusion) else emitter.fusion_kernels(fusion, slices_of=instr)


@thunk_rule("fusion")
def _fusion(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    kind = instr.attr("kind")
    if kind == "kCustom":
        return custom_fusion_thunks(instr, emitter)
    problems = unsupported_fused_ops(instr)
    if problems:
        raise UnimplementedError(", ".join(problems))
    return [] if writes_nothing(instr) else emitter.fusion_kernels(instr)


def custom_fusion_thunks(fusion: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    """A kCustom fusion as XLA:CPU dumps them (its dot fusions: a fused computation with a dot root): the dot
    library thunk (BLAS) when it takes the fusion, else a kernel when the loop emitter can emit the fused
    computation."""
    from xlapy.runtime.thunks.dot import dot_fusion_thunk

    try:
        return dot_fusion_thunk(fusion, emitter)
    except UnimplementedError:
        loop = _as_loop_fusion(fusion)
        if unsupported_fused_ops(loop):
            raise
        return [emitter.compile_kernel(loop, slices_of=fusion)]


def _as_loop_fusion(fusion: HloInstruction) -> HloInstruction:
    """``fusion`` as a kLoop fusion of the same computation (only describes a kernel; not in any computation)."""
    attributes = dict(fusion.attributes, kind="kLoop")
    attributes.pop("backend_config", None)
    return _detached_fusion(fusion, fusion.shape, attributes, list(fusion.called_computations))


def _detached_fusion(like: HloInstruction, shape: Shape, attributes: dict, called: list[HloComputation]) \
        -> HloInstruction:
    """A fusion named as ``like``, on its operands, that its operands do not list as a user: it describes a
    kernel and never becomes part of the module."""
    fusion = HloInstruction(like.name, "fusion", shape, None, attributes, called)
    fusion.operands = list(like.operands)
    fusion.parent = like.parent
    return fusion
