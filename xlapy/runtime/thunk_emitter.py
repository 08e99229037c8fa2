"""From a scheduled module with its buffer assignment to the thunks that run it, as XLA:CPU's
``ThunkEmitter`` (``xla/backends/cpu/runtime/thunk_emitter.cc``): each computation that runs as a sequence
of thunks (the entry, while conditions and bodies, conditional branches, call targets) becomes a
``ThunkSequence`` in schedule order, one rule per opcode (``xlapy/runtime/thunks/``).

- parameters, constants and the ops whose value is a view of their operands' (tuple, get-tuple-element,
  bitcast...) produce no thunk: the buffer assignment gives them their operands' slices, and constants are
  allocations filled once per executable;
- a kLoop fusion, and a lone op the loop emitter can emit (as a fusion of one instruction), becomes a kernel (a
  scatter's, alone or as the root of a fusion, by the scatter emitter);
- every other op needs a rule in ``thunks/registry.THUNK_RULES``.

Every op that cannot be run is named in one ``UnimplementedError``, raised before any kernel is compiled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xlapy.buffers.liveness import FORWARDING_OPCODES, array_leaves
from xlapy.codegen.emitters.in_place_dynamic_update_slice import update_elements
from xlapy.codegen.emitters.normalization import normalization_fusion
from xlapy.codegen.emitters.reduction import reduction_fusion, reduction_output_elements
from xlapy.codegen.emitters.scatter import (
    SERIAL,
    is_scatter_fusion,
    scatter_launch,
    scatter_operand_count,
    scatter_plan,
)
from xlapy.codegen.fusion_checks import check_fusion, fusion_outputs
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.opcodes import TRANSCENDENTAL_OPCODES
from xlapy.hlo.shape_rules.helpers import same_shape
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.memory import buffer_bytes
from xlapy.runtime.kernel_cache import cached_kernel, fingerprint
from xlapy.runtime.thread_pool import runs_serially
from xlapy.runtime.thunks.all_rules import THUNK_RULES
from xlapy.runtime.thunks.base import ThunkSequence, allocate, dtype_of, to_buffer
from xlapy.runtime.thunks.copy import SliceCopies, overlaps, same_physical_layout
from xlapy.runtime.thunks.kernel import KernelThunk, fused_array_constants, lone_op_kernel, single_instruction_fusion
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    import numpy as np

    from xlapy.buffers.assignment import BufferAssignment, BufferSlice
    from xlapy.buffers.schedule import ModuleSchedule
    from xlapy.codegen.pipeline import Dumper

# Ops without a thunk: their values are slices the buffer assignment gives them (a token has no bytes: joining
# tokens orders nothing in a sequential run).
NO_THUNK_OPCODES = frozenset({"parameter", "constant", "after-all"}) | FORWARDING_OPCODES

# The compile options that change the generated code, as the kernel cache's key records them.
KERNEL_OPTIONS = "backend=cpu"
# The smallest output of a scatter on one thread whose operand a copy kernel on the pool puts in place first: the
# scatter's own copy is an element loop on one thread (f32[65536,16] with 16,384 updates, when it was a serial
# scatter: 476-489 µs with it, 405-429 µs with the copy kernel, which moves the 4 MiB in 279 µs on two threads).
SCATTER_COPY_SPLIT_BYTES = 1 << 18
# The work of one element of a transcendental op, in elements of a cheap one (what the thread pool's thresholds
# count): tanh, exp and the like take 5-10 times as long per element, so that a kernel of 4,096 elements of tanh
# already pays for a second thread (1.1x to 1.6x from 2^12 to 2^14 elements), as XLA:CPU's cost model weighs
# transcendentals when it splits a loop over threads.
TRANSCENDENTAL_WORK = 7


class ThunkEmitter:
    """Emits the thunks of one module; the rules call back into it for slices, nested computations and
    kernels."""

    def __init__(self, module: HloModule, schedule: ModuleSchedule, assignment: BufferAssignment,
                 dumper: Dumper | None = None, progress: Callable[[str], None] | None = None):
        self.module = module
        self.schedule = schedule
        self.assignment = assignment
        self.dumper = dumper
        self.progress = progress
        self.device = Device.host()
        # What cannot run, with the instruction it is about (listed in the module's order, not the schedule's).
        self.problems: list[tuple[HloInstruction, str]] = []
        # Kernels are compiled once every op is known to be runnable (see ``compile_kernels``).
        self.pending: list[KernelThunk] = []
        self.fills: list[KernelThunk] = []  # kernels that only write memory (``_is_fill``)

    # -- what rules use --------------------------------------------------------------------------------
    def slice(self, instr: HloInstruction, index: tuple[int, ...] = ()) -> BufferSlice:
        """The slice of the array at shape ``index`` of ``instr``'s value."""
        return self.assignment.slice(instr, index)

    def leaves(self, instr: HloInstruction) -> list[tuple[Shape, BufferSlice]]:
        """(shape, slice) of every array leaf of ``instr``'s value, depth first."""
        return [(shape, self.assignment.slice(instr, index)) for index, shape in array_leaves(instr.shape)]

    def emit_computation(self, computation: HloComputation) -> ThunkSequence:
        """The thunks of ``computation`` in schedule order; ops that cannot run are recorded in ``problems``."""
        sequence = ThunkSequence()
        for instr in self.schedule.sequence(computation):
            if instr.opcode in NO_THUNK_OPCODES:
                continue
            rule = THUNK_RULES.get(instr.opcode, lone_op_kernel)
            try:
                sequence.thunks.extend(rule(instr, self))
            except UnimplementedError as error:
                self.problems.append((instr, str(error)))
        return sequence

    def fusion_kernels(self, fusion: HloInstruction, slices_of: HloInstruction | None = None) -> list[KernelThunk]:
        """The kernels of kLoop ``fusion`` (writing the slices of ``slices_of``, as ``compile_kernel``): its own,
        preceded, for a scatter that would copy a large operand into its output on one thread before applying its
        updates (``split_scatter_operand``), by a copy of that operand into the output on the pool, which the
        scatter then updates in place (as XLA's copy insertion puts a copy before an in-place scatter)."""
        owner = fusion if slices_of is None else slices_of
        number = split_scatter_operand(fusion, owner, self.slice)
        if number is None:
            return [self.compile_kernel(fusion, slices_of)]
        copy = HloInstruction(f"{owner.name}.operand", "copy", fusion.shape)
        # Detached: it only describes the copy's kernel, and is no user of the operand.
        copy.operands, copy.parent = [fusion.operands[number]], owner.parent
        return [self.compile_kernel(single_instruction_fusion(copy), slices_of=owner),
                self.compile_kernel(fusion, slices_of, in_output=number)]

    def compile_kernel(self, fusion: HloInstruction, slices_of: HloInstruction | None = None,
                       in_output: int | None = None) -> KernelThunk:
        """A kernel thunk for kLoop ``fusion``, reading its operands' slices and writing those of ``slices_of``
        (default: the fusion itself; a lone op's fusion writes the op's slices); operand ``in_output``, when given,
        is read from the output's slice (a kernel before this one put it there). The code is generated by
        ``compile_kernels``, once every op of the module is known to be runnable."""
        check_fusion(fusion)
        owner = fusion if slices_of is None else slices_of
        operands = [(op.shape, op) for op in fusion.operands]
        outputs = fusion_outputs(fusion)
        thunk = KernelThunk(
            name=fusion.name, fusion=fusion,
            operands=[(self.slice(owner) if number == in_output else self.slice(op), shape)
                      for number, (shape, op) in enumerate(operands)],
            constants=[_physical_constant(c) for c in fused_array_constants(fusion)],
            outputs=[(self.slice(owner, (i,) if owner.shape.is_tuple else ()), shape)
                     for i, shape in enumerate(outputs)],
            elements=max(math.prod(s.dimensions) for s in outputs))
        # A kernel updating its operands in place iterates the updates' elements only; a scatter's kernel splits
        # its copies and updates into blocks as its emitter plans.
        updated = update_elements(fusion, thunk.slice_indices)
        if is_scatter_fusion(fusion):
            launch = scatter_launch(fusion, thunk.slice_indices)
            thunk.elements = launch.blocks * launch.elements_per_block
        elif updated is not None:
            thunk.elements = updated
        elif (normalization := normalization_fusion(fusion)) is not None:
            thunk.work = thunk.elements
            thunk.elements = normalization.shape.rows  # a thread per row
        elif (reduction := reduction_fusion(fusion)) is not None:
            if reduction.side_outputs:
                thunk.elements = reduction_output_elements(reduction)  # the side outputs are written per output
            thunk.work = math.prod(reduction.hero.operands[0].shape.dimensions)  # every input element is read
        elif _is_fill(fusion):
            # On the calling thread until ``place_fills`` knows who reads what it writes.
            thunk.work = 0
            self.fills.append(thunk)
        if thunk.work is None and (transcendentals := _transcendental_count(fusion)):
            thunk.work = thunk.elements * (1 + TRANSCENDENTAL_WORK * transcendentals)
        self.pending.append(thunk)
        return thunk

    # -- driving ---------------------------------------------------------------------------------------
    def compile_kernels(self) -> None:
        """Generates (or takes from the kernel cache) the code of every kernel thunk emitted."""
        from xlapy.codegen.backends.cpu import CpuKernel
        from xlapy.codegen.pipeline import lower_fusion

        for number, thunk in enumerate(self.pending):
            fusion = thunk.fusion
            if self.progress is not None:
                self.progress(f"kernel {number + 1}/{len(self.pending)}: {fusion.name}")
            shared = thunk.slice_indices
            sizes = kernel_buffer_sizes(fusion, shared)

            def build(fusion=fusion, shared=shared) -> tuple[bytes, LaunchDimensions]:
                lowered = lower_fusion(fusion, self.device, self.dumper, slice_indices=shared)
                return CpuKernel.compile(lowered.module).object_code, lowered.launch

            def check(kernel, launch: LaunchDimensions, fusion=fusion, sizes=sizes, elements=thunk.elements) -> None:
                check_kernel(fusion, kernel, launch, sizes, elements)

            try:
                if self.dumper is not None:  # dumps are only written by a real compilation
                    code, launch = build()
                    kernel = CpuKernel.from_object(code)
                    check(kernel, launch)
                else:
                    cached = cached_kernel(fingerprint(fusion, self.device, KERNEL_OPTIONS, shared), build,
                                           CpuKernel.from_object, check)
                    kernel, launch = cached.kernel, cached.launch
            except UnimplementedError as error:  # what the code generator finds only as it emits
                self.problems.append((fusion, str(error)))
                continue
            thunk.kernel, thunk.blocks = kernel, launch.blocks


# Opcodes of a kernel that only writes memory: values from constants, laid out.
_FILL_OPCODES = frozenset({"constant", "broadcast", "iota", "reshape", "bitcast", "tuple", "parameter"})


def split_scatter_operand(fusion: HloInstruction, owner: HloInstruction,
                          slice_of: Callable[[HloInstruction], BufferSlice]) -> int | None:
    """The number of the fusion operand that ``fusion``'s scatter would copy into its output (the slice of
    ``owner``) itself, on one thread (the ``serial`` plan), when a copy kernel before it should do that instead: a
    single output of at least ``SCATTER_COPY_SPLIT_BYTES``, in the layout of an operand that only the scatter reads
    (as its operand) and whose slice (as every other operand's) is not the output's. None otherwise."""
    if not is_scatter_fusion(fusion) or fusion.shape.is_tuple or buffer_bytes(fusion.shape) < SCATTER_COPY_SPLIT_BYTES:
        return None
    scatter = fusion.fused_computation.root
    operand = scatter.operands[0]
    if scatter_operand_count(scatter) != 1 or operand.opcode != "parameter" or operand.users != [scatter]:
        return None
    number = operand.parameter_number
    if not same_physical_layout(fusion.operands[number].shape, fusion.shape):
        return None
    output = slice_of(owner)
    if any(overlaps(slice_of(op), output) for op in fusion.operands):
        return None
    return number if scatter_plan(fusion, None).strategy == SERIAL else None


def _transcendental_count(fusion: HloInstruction) -> int:
    """The transcendental ops ``fusion`` computes per element (on arrays: a scalar one is computed once)."""
    return sum(i.opcode in TRANSCENDENTAL_OPCODES and not i.shape.is_scalar
               for i in fusion.fused_computation.instructions)


def _is_fill(fusion: HloInstruction) -> bool:
    """Whether ``fusion`` reads no operand but scalar constants and computes nothing (a broadcast constant, an
    iota)."""
    return all(op.opcode == "constant" and op.shape.is_scalar for op in fusion.operands) and \
        all(i.opcode in _FILL_OPCODES for i in fusion.fused_computation.instructions)


def emit_thunks(module: HloModule, schedule: ModuleSchedule, assignment: BufferAssignment,
                dumper: Dumper | None = None, progress: Callable[[str], None] | None = None) -> ThunkSequence:
    """The thunks of ``module``'s entry computation (with those of every computation it runs nested in its
    control-flow thunks), kernels compiled. Raises ``UnimplementedError`` naming every op that cannot run,
    before compiling any kernel (and, after compiling them, every kernel the code generator refused)."""
    emitter = ThunkEmitter(module, schedule, assignment, dumper, progress)
    sequence = emitter.emit_computation(module.entry)
    if emitter.problems:
        raise UnimplementedError(f"the CPU backend cannot run {module.name}: {_listed(module, emitter.problems)}; run "
                                 "it with the interpreter (--backend interpreter)")
    emitter.compile_kernels()
    if emitter.problems:
        raise UnimplementedError(f"the CPU backend cannot run {module.name}: {_listed(module, emitter.problems)}")
    place_fills(sequence, emitter.fills)
    return sequence


def place_fills(sequence: ThunkSequence, fills: Sequence[KernelThunk]) -> None:
    """Puts each of ``fills`` (kernels that only write memory) on the pool, unless the first thunk after it (in
    ``sequence``'s order, nested sequences included) that touches what it writes runs on the calling thread: a
    kernel too small for the pool, a copy, a library call. The lines a fill writes stay in the cache of the core
    that wrote them, and a reader on another core fetches them from there (4 MiB of zeros scattered into on the
    calling thread: 332-349 µs with the zeros written there, 360-393 µs with them written on the pool). A fill
    that nothing reads (a result of the program), or whose reader shares its blocks too, gains from both cores:
    the zeros alone 208 -> 125 µs, the benchmark's 64-step scan into them 918 -> 771 µs."""
    order = list(sequence.walk())
    position = {id(thunk): index for index, thunk in enumerate(order)}
    for fill in fills:
        written = [piece for piece, _ in fill.outputs]
        reader = None
        for thunk in order[position[id(fill)] + 1:]:
            if thunk.kind == "control-flow":
                continue  # its nested thunks follow it in ``order``
            if isinstance(thunk, KernelThunk):
                read = [piece for piece, _ in thunk.operands]
            elif isinstance(thunk, SliceCopies):
                read = [source for source, _, _ in thunk.pairs]
            else:
                reader = thunk  # a library call may read it, on the calling thread
                break
            if any(overlaps(piece, out) for piece in read for out in written):
                reader = thunk
                break
        if reader is None or (isinstance(reader, KernelThunk) and
                              not runs_serially(reader.blocks, reader.pool_work, native=True)):
            fill.work = None


def _listed(module: HloModule, problems: list[tuple[HloInstruction, str]]) -> str:
    """The problems in the order their instructions appear in the module's text (computations in order)."""
    position = {id(instr): (c, i) for c, computation in enumerate(module.computations)
                for i, instr in enumerate(computation.instructions)}
    ordered = sorted(problems, key=lambda problem: position.get(id(problem[0]), (len(position), 0)))
    return ", ".join(message for _, message in ordered)


def check_runnable_computations(module: HloModule, computations: list[HloComputation]) -> None:
    """The checks that keep thunks inside their slices, made whether or not the module was verified: each
    fusion is consistent (``check_fusion``), and every other op's shape follows from its operands (slices
    are sized by these shapes)."""
    for computation in computations:
        for instr in computation.instructions:
            if instr.opcode == "parameter":
                continue  # entry parameters are checked against the arguments, others against their caller
            if instr.opcode == "fusion":
                check_fusion(instr)
                continue
            try:
                expected = infer_shape(instr)
            except XlapyError as error:
                raise VerifyError(f"computation {computation.name}: {error}") from None
            if not same_shape(expected, instr.shape):
                raise VerifyError(f"computation {computation.name}, instruction {instr.name}: declared "
                                  f"{instr.shape}, its {instr.opcode} gives {expected}")
            if instr.opcode == "bitcast" and buffer_bytes(instr.shape) != buffer_bytes(instr.operands[0].shape):
                # Equal byte sizes in XLA's packing, but buffers here hold one element per byte.
                raise UnimplementedError(f"the CPU backend cannot run bitcast {instr.name} from "
                                         f"{instr.operands[0].shape} to {instr.shape}: packed elements (E(n) "
                                         "layouts) take a whole byte each in its buffers")


def kernel_buffer_sizes(fusion: HloInstruction, slice_indices: Sequence[int] | None = None) -> tuple[int, ...]:
    """The byte size of each buffer of the fusion's kernel: operands, array constants, outputs; with
    ``slice_indices``, of each pointer it takes (the largest of the buffers passed in one slice)."""
    shapes = [op.shape for op in fusion.operands] + [c.shape for c in fused_array_constants(fusion)] + \
        fusion_outputs(fusion)
    sizes = [buffer_bytes(s) for s in shapes]
    if slice_indices is None:
        return tuple(sizes)
    merged: dict[int, int] = {}
    for index, size in zip(slice_indices, sizes, strict=True):
        merged[index] = max(merged.get(index, 0), size)
    return tuple(merged.values())


def check_kernel(fusion: HloInstruction, kernel, launch: LaunchDimensions, sizes: tuple[int, ...],
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


def physical_constant(instr: HloInstruction) -> np.ndarray:
    """The literal of constant ``instr`` as the flat physical buffer of its shape (aligned)."""
    return _physical_constant(instr)


def _physical_constant(instr: HloInstruction) -> np.ndarray:
    import numpy as np

    from xlapy.hlo.arguments import check_argument

    shape = instr.shape
    # The rules of every runner's arguments: nothing changes beyond rounding.
    logical = check_argument(np.asarray(instr.literal), shape, f"constant {instr.name}")
    buffer = allocate(buffer_bytes(shape), f"constant {instr.name}").view(dtype_of(shape))
    to_buffer(logical, shape, buffer)
    return buffer


__all__ = ["KERNEL_OPTIONS", "NO_THUNK_OPCODES", "THUNK_RULES", "ThunkEmitter", "check_kernel",
           "check_runnable_computations", "emit_thunks", "kernel_buffer_sizes", "physical_constant", "thunk_rule"]
